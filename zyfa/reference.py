"""Dense PyTorch attention: the ``reference`` backend (fp32) and the fp64 ``oracle`` used by tests.

Both run on any device. Inputs are upcast (FP8 inputs are first multiplied by their descales),
scores and softmax are computed in the working dtype, and queries are processed in chunks so
that long sequences do not materialise a full seqlen_q x seqlen_k matrix.
"""

from __future__ import annotations

import math

import torch

from zyfa.backends import AttentionArgs, Backend, register_backend

LOG2E = 1.4426950408889634  # 1 / ln(2)

# Queries per chunk: bounds the score matrix to chunk x seqlen_k per (batch, head).
_QUERY_CHUNK = 1024


def key_window(seqlen_q: int, seqlen_k: int, causal: bool, window_size: tuple[int, int], device):
    """Allowed-key mask (seqlen_q, seqlen_k), bottom-right aligned as in FlashAttention >= 2.1.

    Query i sits at key position ``i + seqlen_k - seqlen_q``. Causal allows keys up to that
    position; a window (left, right) allows [pos - left, pos + right], -1 meaning unbounded.
    """
    left, right = window_size
    if causal:
        right = 0
    pos = torch.arange(seqlen_q, device=device)[:, None] + (seqlen_k - seqlen_q)
    key = torch.arange(seqlen_k, device=device)[None, :]
    allowed = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    if right >= 0:
        allowed &= key <= pos + right
    if left >= 0:
        allowed &= key >= pos - left
    return allowed


def masked_pv(p: torch.Tensor, allowed: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``p @ v`` summed over the allowed keys only.

    ``p`` (..., rows, keys) is 0 at disallowed keys, but ``0 * NaN`` and ``0 * inf`` are NaN, so
    a plain product leaks a non-finite value of ``v`` (..., keys, dim) into rows that never read
    its key. Here a disallowed key contributes exactly nothing; an allowed key's non-finite value
    keeps its IEEE meaning (``p * inf = inf`` for p > 0, ``0 * inf = NaN``, NaN stays NaN,
    ``inf - inf = NaN``). ``allowed``: bool, broadcastable to ``p``. Finite ``v``: one matmul.
    """
    if v.device.type == "meta" or bool(torch.isfinite(v).all()):
        return torch.matmul(p, v)
    finite = torch.isfinite(v)
    out = torch.matmul(p, torch.where(finite, v, 0.0))
    allowed = allowed.expand(p.shape)
    read = allowed.to(p.dtype)
    positive = (allowed & (p != 0)).to(p.dtype)

    def hits(rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        return torch.matmul(rows, cols.to(p.dtype)) > 0

    nan = hits(read, torch.isnan(v)) | hits(read - positive, torch.isinf(v))
    pos_inf, neg_inf = hits(positive, v == math.inf), hits(positive, v == -math.inf)
    special = torch.where(pos_inf, math.inf, -math.inf)
    special = torch.where(nan | (pos_inf & neg_inf), math.nan, special)
    return torch.where(nan | pos_inf | neg_inf, out + special.to(out.dtype), out)


def _dequantised(x: torch.Tensor, descale, dtype) -> torch.Tensor:
    """``x`` (b, s, h, d) in ``dtype``; FP8 multiplied by its (b, h_k) descale, which Q's heads
    share in groups of h // h_k (FlashAttention-3 convention)."""
    x = x.to(dtype)
    if descale is not None:
        descale = descale.to(dtype).repeat_interleave(x.shape[2] // descale.shape[1], dim=1)
        x = x * descale[:, None, :, None]
    return x


def attention_dense(args: AttentionArgs, dtype: torch.dtype = torch.float32):
    """Softmax attention computed densely in ``dtype``; returns (out in ``dtype``, lse float32).

    Rows with no allowed key (possible with bottom-right causal masks when seqlen_q > seqlen_k)
    return out = 0 and lse = +inf, as FlashAttention does.
    """
    q = _dequantised(args.q, args.q_descale, dtype)
    k = _dequantised(args.k, args.k_descale, dtype)
    v = _dequantised(args.v, args.v_descale, dtype)
    b, sq, h, _ = q.shape
    sk, hk = k.shape[1], k.shape[2]
    group = h // hk
    # (b, h, s, d) with K/V heads repeated for GQA/MQA.
    q = q.transpose(1, 2)
    k = k.transpose(1, 2).repeat_interleave(group, dim=1)
    v = v.transpose(1, 2).repeat_interleave(group, dim=1)

    out = torch.empty(b, h, sq, v.shape[-1], dtype=dtype, device=q.device)
    lse = torch.empty(b, h, sq, dtype=torch.float32, device=q.device)
    allowed_all = key_window(sq, sk, args.causal, args.window_size, q.device)
    if args.alibi_slopes is not None:
        slopes = args.alibi_slopes.to(dtype)
        slopes = slopes if slopes.dim() == 2 else slopes[None].expand(b, h)
        pos = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
        distance = (pos - torch.arange(sk, device=q.device)[None, :]).abs().to(dtype)

    for start in range(0, sq, _QUERY_CHUNK):
        stop = min(start + _QUERY_CHUNK, sq)
        scores = torch.matmul(q[:, :, start:stop], k.transpose(-1, -2)) * args.softmax_scale
        if args.softcap > 0:
            scores = torch.tanh(scores / args.softcap) * args.softcap
        if args.alibi_slopes is not None:
            scores = scores - slopes[:, :, None, None] * distance[start:stop]
        allowed = allowed_all[start:stop]
        scores = scores.masked_fill(~allowed, -math.inf)
        row_lse = torch.logsumexp(scores, dim=-1)
        empty = ~allowed.any(dim=-1)
        probs = torch.exp(scores - row_lse.masked_fill(empty, 0.0)[..., None])
        probs = probs.masked_fill(~allowed, 0.0)
        out[:, :, start:stop] = masked_pv(probs, allowed, v)
        lse[:, :, start:stop] = row_lse.float().masked_fill(empty, math.inf)
    return out.transpose(1, 2), lse


def _reference_forward(args: AttentionArgs):
    out, lse = attention_dense(args, torch.float32)
    out_dtype = torch.bfloat16 if args.is_fp8 else args.q.dtype
    return out.to(out_dtype), lse


def _oracle_forward(args: AttentionArgs):
    out, lse = attention_dense(args, torch.float64)
    return out, lse


def _float64(dtype: torch.dtype) -> torch.dtype:
    return torch.float64


def _always_supported(args: AttentionArgs):
    return None


def _oracle_unsupported(args: AttentionArgs):
    if args.q.device.type == "mps":
        return "fp64 is not available on MPS"
    return None


register_backend(
    Backend(
        name="reference",
        forward=_reference_forward,
        unsupported=_always_supported,
        priority=0,
        description="dense PyTorch, fp32 accumulate, any device (slow; correctness baseline)",
        differentiable=True,
        recipes=None,
    )
)
register_backend(
    Backend(
        name="oracle",
        forward=_oracle_forward,
        unsupported=_oracle_unsupported,
        priority=-1,
        description="dense PyTorch in fp64, returns fp64 output (tests and accuracy studies)",
        differentiable=True,
        out_dtype=_float64,
        recipes=None,
    )
)
