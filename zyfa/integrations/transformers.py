"""zyfa as a Hugging Face transformers attention implementation (``pip install zyfa[hf]``).

Importing this module registers two names with transformers' ``AttentionInterface``::

    import zyfa.integrations.transformers  # noqa: F401
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="zyfa-fp8")

- ``"zyfa"``: :func:`zyfa.flash_attn_func` on the model's own dtype (bf16/fp16/fp32).
- ``"zyfa-fp8"``: Q and K Hadamard-rotated along the head dim (:func:`zyfa.numerics.hadamard`;
  orthonormal, so QK^T is unchanged while outlier channels are spread), then Q, K, V quantised
  to float8_e4m3fn with one descale per (batch, kv head) (:func:`zyfa.numerics.quantize_fp8`),
  on the fly in every layer, and the FP8 forward with the ZYFA numerics (the default recipe).
  On a GPU the rotation and quantisation of Q and K run as the fused Triton kernel
  (:mod:`zyfa.kernels.triton.hadamard_fp8`, bit-identical) when the head dim is a power of two and
  the call is not being compiled. Output in the model dtype.

Conventions transformers passes, and what is done with them: ``query``/``key``/``value`` are
(batch, heads, seqlen, head_dim) and become FlashAttention's (batch, seqlen, heads, head_dim)
views; fewer key/value heads (GQA/MQA) go to zyfa as they are (no repeat); ``is_causal`` (or
the module's ``is_causal``) selects the bottom-right aligned causal mask, which is also right for
decoding with a KV cache (one query row sees every cached key); ``scaling`` is the softmax scale;
``sliding_window`` becomes ``window_size=(sliding_window - 1, sliding_window - 1)`` (keys
``q - sliding_window < k``, transformers' sliding mask); ``softcap`` is passed through.

Refused with a one-line error: an ``attention_mask`` (transformers builds one for these names only
when the batch has padding tokens, via its FlashAttention mask function, or for a static cache;
zyfa runs unpadded prefill), ``dropout`` > 0 (a module in training mode with attention dropout),
``output_attentions`` (probabilities are never materialised), attention sinks (``s_aux``).
"""

from __future__ import annotations

import numbers
from typing import Callable, Optional

import torch
from transformers import AttentionInterface, AutoModelForCausalLM, LlamaConfig
from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

from zyfa.interface import flash_attn_func
from zyfa.numerics import hadamard, quantize_fp8

try:  # the fused Triton Hadamard + FP8 quantiser (bit-identical to the torch path); needs triton
    from zyfa.kernels.triton.hadamard_fp8 import hadamard_quantize_fp8
except ImportError:
    hadamard_quantize_fp8 = None

NAMES = ("zyfa", "zyfa-fp8")


def _refuse_unsupported(attention_mask, dropout: float, kwargs: dict) -> None:
    if attention_mask is not None:
        raise ValueError(
            "zyfa attention: got an attention_mask (padding tokens, a custom mask or a static cache); zyfa "
            "runs unpadded prefill with causal/sliding masks only: pass unpadded sequences and a dynamic cache")
    if dropout:
        raise ValueError(f"zyfa attention: dropout={dropout} (training-mode attention dropout); zyfa is "
                         "inference only: call model.eval() or set the config's attention_dropout to 0")
    if kwargs.get("output_attentions"):
        raise ValueError("zyfa attention: output_attentions=True; zyfa never materialises attention probabilities")
    if kwargs.get("s_aux") is not None:
        raise ValueError("zyfa attention: attention sinks (s_aux) are not supported")


def _bshd(x: torch.Tensor) -> torch.Tensor:
    """(batch, heads, seqlen, d) -> the (batch, seqlen, heads, d) view (copied only if d is strided)."""
    x = x.transpose(1, 2)
    return x if x.stride(-1) == 1 else x.contiguous()


def _mask_args(module: torch.nn.Module, is_causal: Optional[bool], kwargs: dict) -> dict:
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    window = kwargs.get("sliding_window")
    if window is not None and (isinstance(window, bool) or not isinstance(window, numbers.Integral) or window < 1):
        # 0 would become window_size (-1, -1): unbounded, the opposite of transformers' empty window
        raise ValueError(f"zyfa attention: sliding_window must be a positive int (keys q - w < k <= q), got {window!r}")
    return dict(causal=bool(causal),
                window_size=(-1, -1) if window is None else (int(window) - 1, int(window) - 1),
                softcap=float(kwargs.get("softcap") or 0.0))


def _rotate_quantise(x: torch.Tensor, nheads_k: int):
    """quantize_fp8(hadamard(x), "head", nheads_k): on a GPU, eager, power-of-two head dims, the fused
    Triton kernel (one read of x per pass instead of a rotated fp32 copy); else the torch path, which
    torch.compile traces (a Triton launch wrapper would break the graph)."""
    d = x.shape[-1]
    if (hadamard_quantize_fp8 is not None and x.is_cuda and not torch.compiler.is_compiling()
            and 16 <= d <= 256 and d & (d - 1) == 0):
        return hadamard_quantize_fp8(x, "head", nheads_k)
    return quantize_fp8(hadamard(x), nheads_k=nheads_k)


def attention_function(forward: Callable = flash_attn_func, fp8: bool = False) -> Callable:
    """A transformers attention function around a FlashAttention-style ``forward(q, k, v, softmax_scale=,
    causal=, window_size=, softcap=[, q_descale=, k_descale=, v_descale=])`` on (batch, seqlen, heads,
    d) tensors: ``zyfa.flash_attn_func`` here; ``benchmarks/hf_prefill.py`` wraps FlashAttention-3
    the same way. ``fp8``: Q and K Hadamard-rotated, Q/K/V quantised per (batch, kv head) first.
    The function returns (output (batch, seqlen, heads, head_dim_v) in the model dtype, None)."""

    def attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  attention_mask: Optional[torch.Tensor], dropout: float = 0.0, scaling: Optional[float] = None,
                  is_causal: Optional[bool] = None, **kwargs) -> tuple[torch.Tensor, None]:
        _refuse_unsupported(attention_mask, dropout, kwargs)
        q, k, v = _bshd(query), _bshd(key), _bshd(value)
        extra = _mask_args(module, is_causal, kwargs)
        if fp8:
            hk = k.shape[2]
            (q, dq), (k, dk), (v, dv) = _rotate_quantise(q, hk), _rotate_quantise(k, hk), quantize_fp8(v)
            extra.update(q_descale=dq, k_descale=dk, v_descale=dv)
        out = forward(q, k, v, softmax_scale=scaling if scaling is not None else query.shape[-1] ** -0.5, **extra)
        out = out[0] if isinstance(out, tuple) else out  # FlashAttention-3 may return (out, lse)
        return out.to(query.dtype), None

    return attention


zyfa_attention = attention_function()
zyfa_attention.__doc__ = '``attn_implementation="zyfa"``: zyfa.flash_attn_func on the model dtype.'
zyfa_fp8_attention = attention_function(fp8=True)
zyfa_fp8_attention.__doc__ = '``attn_implementation="zyfa-fp8"``: Hadamard on Q, K, FP8 per (batch, kv head), FP8 forward.'


def random_llama(seed: int = 0, dtype: torch.dtype = torch.float32, device="cpu", **overrides) -> torch.nn.Module:
    """A randomly initialised Llama causal LM (transformers' own model code, no weights downloaded).

    Default size: 4 layers, hidden 512, 8 query heads and 2 key/value heads (GQA) of head dim 64,
    vocabulary 2048; ``overrides`` go to ``LlamaConfig``. Random weights: the comparison is of the
    attention implementations on one model, not of a trained model's quality.
    """
    config = dict(vocab_size=2048, hidden_size=512, intermediate_size=1024, num_hidden_layers=4,
                  num_attention_heads=8, num_key_value_heads=2, head_dim=64, max_position_embeddings=32768)
    config.update(overrides)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(LlamaConfig(**config), dtype=dtype)
    return model.to(device).eval()


def compare_logits(logits: torch.Tensor, reference: torch.Tensor) -> dict:
    """``logits`` vs ``reference`` (..., vocab): relative L2 error, top-1 agreement (fraction of
    tokens whose argmax matches) and the mean per-token KL(reference || logits) in nats."""
    x, ref = logits.double(), reference.double()
    log_p, log_q = ref.log_softmax(-1), x.log_softmax(-1)
    kl = (log_p.exp() * (log_p - log_q)).sum(-1)
    return dict(rel_l2=float((x - ref).norm() / ref.norm()),
                top1=float((x.argmax(-1) == ref.argmax(-1)).double().mean()),
                kl_per_token=float(kl.mean()))


def register() -> None:
    """Registers "zyfa" and "zyfa-fp8" (attention functions, and FlashAttention's mask function, which
    gives them None without padding). Runs on import; calling it again is harmless."""
    for name, fn in zip(NAMES, (zyfa_attention, zyfa_fp8_attention)):
        AttentionInterface.register(name, fn)
        AttentionMaskInterface.register(name, flash_attention_mask)


register()
