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
    if dtype == "fp8":
        return encode_e4m3(x).to(torch.int32), 8
    if dtype == "bf16":
        return x.to(torch.bfloat16).view(torch.int16).to(torch.int32) & 0xFFFF, 16
    raise ValueError(f"dtype must be 'fp8' or 'bf16', got {dtype!r}")


def stream_toggle(x: torch.Tensor, dtype: str) -> float:
    """Mean fraction of bits that flip between consecutive values of ``x`` (flattened) in ``dtype``."""
    codes, nbits = _bits(x.flatten(), dtype)
    flips = codes[1:] ^ codes[:-1]
    count = sum(((flips >> i) & 1).sum().item() for i in range(nbits))
    return count / (nbits * flips.numel())


def gaussian_attention_toggles(dtype: str, headdim: int = 128, rows: int = 256, seed: int = 0) -> dict:
    """Toggle density of Q, K, P, V and their mean (the MFMA operand density) under the stated
    distribution (module docstring); deterministic for a seed."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(rows, headdim, generator=g)
    k = torch.randn(TILE_KEYS, headdim, generator=g)
    v = torch.randn(TILE_KEYS, headdim, generator=g)
    s = q @ k.T / headdim ** 0.5
    p = torch.exp(s - s.max(dim=1, keepdim=True).values)
    out = {name: stream_toggle(t, dtype) for name, t in (("q", q), ("k", k), ("p", p), ("v", v))}
    out["mfma"] = sum(out[n] for n in "qkpv") / 4
    return out
