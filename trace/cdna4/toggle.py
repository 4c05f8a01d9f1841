"""Operand bit-toggle density of attention's matrix operands under a stated input distribution.

The clock/power model (:mod:`zyfa.trace.cdna4.power`) weights MFMA energy by how many operand
bits flip from one value to the next on the same datapath lanes: the mean of
``popcount(a XOR b) / bits`` over consecutive operands ``a``, ``b``. Independent uniformly random
bits give 0.5; zeros give 0.

Stated distribution (what the calibration set's benchmarks feed): Q, K, V ~ N(0, 1) i.i.d.,
scores ``S = Q K^T / sqrt(d)``, probabilities ``P = exp(S - rowmax)`` over a 128-key tile (the
un-normalised P of flash attention, 1 at the row max), rounded to the kernel's input format (FP8
e4m3 via :func:`zyfa.numerics.encode_e4m3`, BF16 by truncation-free round to nearest even). The
MFMA toggle density is the mean over its four operand streams: Q and K (QK^T), P and V (PV).

Separate from ``power`` because it imports torch (2.7 s on the 2-core box): the power model uses
the densities stored in its table (``power.TOGGLE``) and a test recomputes them here.
"""

from __future__ import annotations

import torch

from zyfa.numerics import encode_e4m3

TILE_KEYS = 128


def _bits(x: torch.Tensor, dtype: str) -> tuple[torch.Tensor, int]:
    """Bit patterns of ``x`` in ``dtype``: FP8/BF16 tensors as stored, other floats rounded."""
    if x.dtype == torch.float8_e4m3fn:
        return x.view(torch.uint8).to(torch.int32), 8
    if x.dtype == torch.bfloat16:
        return x.view(torch.int16).to(torch.int32) & 0xFFFF, 16
    if dtype == "fp8":
        return encode_e4m3(x).to(torch.int32), 8
    if dtype == "bf16":
        return x.to(torch.bfloat16).view(torch.int16).to(torch.int32) & 0xFFFF, 16
    raise ValueError(f"dtype must be 'fp8' or 'bf16', got {dtype!r}")


def stream_toggle(x: torch.Tensor, dtype: str) -> float:
    """Mean fraction of bits that flip between consecutive values of ``x`` (flattened) in ``dtype``."""
    if x.numel() < 2:  # no consecutive pair: no density to measure (was a ZeroDivisionError)
        raise ValueError(f"the toggle density needs at least 2 values, got {x.numel()}")
    codes, nbits = _bits(x.flatten(), dtype)
    flips = codes[1:] ^ codes[:-1]
    count = sum(((flips >> i) & 1).sum().item() for i in range(nbits))
    return count / (nbits * flips.numel())


def attention_toggles(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dtype: str, rows: int = 256,
                      q_descale: float = 1.0, k_descale: float = 1.0) -> dict:
    """Toggle density of the MFMA operands of one (batch 0, head 0) tile of actual inputs: Q, K, V
    as the kernel reads them (FP8/BF16 tensors: their stored bits; BSHD ``(b, s, h, d)``) and
    ``P = exp(S - rowmax)`` over the first 128 keys rounded to ``dtype`` (S from the dequantised
    Q and K: ``*_descale`` of that head); ``mfma`` is their mean."""
    q0, k0, v0 = q[0, :rows, 0], k[0, :TILE_KEYS, 0], v[0, :TILE_KEYS, 0]
    s = (q0.float() * q_descale) @ (k0.float() * k_descale).T / q0.shape[-1] ** 0.5
    p = torch.exp(s - s.max(dim=1, keepdim=True).values)
    if p.numel() < 2:
        raise ValueError(f"operand toggle densities need a P tile of at least 2 values; this shape gives "
                         f"{p.numel()} (seqlen_q x seqlen_k = {q.shape[1]} x {k.shape[1]})")
    out = {name: stream_toggle(t, dtype) for name, t in (("q", q0), ("k", k0), ("p", p), ("v", v0))}
    out["mfma"] = sum(out[n] for n in "qkpv") / 4
    return out


def stated_attention_toggles(dtype: str, inputs: str = "gaussian", headdim: int = 128, rows: int = 256,
                             seed: int = 0) -> dict:
    """Toggle density of Q, K, P, V and their mean (the MFMA operand density) under a stated input
    distribution, deterministic for a seed: ``gaussian`` (module docstring) or ``uniform01`` (Q, K,
    V uniform in [0, 1): AITER's C++ harness default, power.INPUTS)."""
    draw = {"gaussian": torch.randn, "uniform01": torch.rand}
    if inputs not in draw:
        raise ValueError(f"unknown input distribution {inputs!r}; known: {', '.join(draw)}")
    g = torch.Generator().manual_seed(seed)
    q = draw[inputs](1, rows, 1, headdim, generator=g)
    k = draw[inputs](1, TILE_KEYS, 1, headdim, generator=g)
    v = draw[inputs](1, TILE_KEYS, 1, headdim, generator=g)
    return attention_toggles(q, k, v, dtype, rows)


def gaussian_attention_toggles(dtype: str, headdim: int = 128, rows: int = 256, seed: int = 0) -> dict:
    """:func:`stated_attention_toggles` under the Gaussian distribution (module docstring)."""
    return stated_attention_toggles(dtype, "gaussian", headdim, rows, seed)
