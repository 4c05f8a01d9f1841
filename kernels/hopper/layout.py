"""Host-side layout of V for the Hopper FP8 kernel (torch only: importable without the CuTe DSL).

The wgmma fp32 accumulator of S = Q K^T gives thread ``q = lane % 4`` of each quad the columns
``8g + 2q + c`` (c = 0, 1; g = n8 group) of its two rows; the fp8 A operand of the PV GEMM wants,
per 32-key slice, bytes ``k = 16kk + 4q + b`` in register ``kk`` (b = byte). The kernel packs each
thread's own codes (c, g) into byte ``b = 2 (g % 2) + c`` of register ``kk = g // 2`` (no
cross-thread shuffle), which puts key ``16kk + 8 (b >> 1) + 2q + (b & 1)`` at k-position
``16kk + 4q + b``. V' lists V's keys in that order, so ``P' V' = P V``.
"""

from __future__ import annotations

import torch

BLOCK_N = 64    # keys per block: the ZYFA scaling block (docs/numerics.md)
ONES_ROWS = 8   # rows of 1.0 appended to V^T: column d_v of O is then the row sum of the rounded P
E4M3_ONE = 0x38


def v_key_permutation(n: int) -> torch.Tensor:
    """Source key of every V' position (``n`` a multiple of 32): position ``32c + p`` holds key
    ``32c + real(p)``, ``real(p) = 16 kk + 8 (b >> 1) + 2 q + (b & 1)`` for ``p = 16 kk + 4 q + b``."""
    if n % 32:
        raise ValueError(f"n must be a multiple of 32, got {n}")
    p = torch.arange(32)
    kk, q, b = p // 16, (p % 16) // 4, p % 4
    real = 16 * kk + 8 * (b >> 1) + 2 * q + (b & 1)
    return (torch.arange(0, n, 32)[:, None] + real[None, :]).reshape(-1)


def prepare_v(v: torch.Tensor, block: int = BLOCK_N) -> torch.Tensor:
    """V ``(b, s_k, h_k, d_v)`` e4m3 -> V' ``(b, h_k, d_v + 8, s_pad)`` e4m3: keys contiguous (the
    K-major B operand fp8 wgmma needs) in :func:`v_key_permutation` order, zero keys up to a multiple
    of ``block``, and 8 rows of 1.0 so the PV GEMM also returns the row sum of the rounded P."""
    if v.dim() != 4:
        raise ValueError(f"v must be (batch, seqlen_k, nheads_k, headdim_v), got shape {tuple(v.shape)}")
    b, s_k, h_k, d_v = v.shape
    s_pad = -(-s_k // block) * block
    src = v.view(torch.uint8)
    if s_pad != s_k:
        src = torch.cat([src, src.new_zeros(b, s_pad - s_k, h_k, d_v)], dim=1)
    perm = v_key_permutation(s_pad).to(v.device)
    out = torch.empty(b, h_k, d_v + ONES_ROWS, s_pad, dtype=torch.uint8, device=v.device)
    out[:, :, :d_v] = src.index_select(1, perm).permute(0, 2, 3, 1)
    out[:, :, d_v:] = E4M3_ONE
    return out.view(torch.float8_e4m3fn)
