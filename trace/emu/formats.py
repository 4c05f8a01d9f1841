"""Bit-exact number formats the gfx950 instructions read and write (numpy, vectorised).

Every function takes and returns numpy arrays. Rounding is IEEE round-to-nearest-even unless the
name says otherwise. Sources: OCP 8-bit floating point spec (E4M3 "fn": no infinities, one NaN
code per sign, max 448; E5M2 IEEE-like, max 57344), OCP MX spec v1.0 (E2M1, E8M0 scales), AMD
CDNA4 ISA guide (V_CVT_PK_FP8_F32, V_CVT_PK_BF16_F32, V_FMA_F32).
"""

from __future__ import annotations

import numpy as np

F32_MAX = np.float32(3.4028235e38)


def f32(bits: np.ndarray) -> np.ndarray:
    """View uint32 bits as float32."""
    return np.ascontiguousarray(bits, dtype=np.uint32).view(np.float32)


def u32(values: np.ndarray) -> np.ndarray:
    """View float32 values as uint32 bits."""
    return np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)


# -- fp32 fused multiply-add with a single rounding ----
def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """fp32 ``a * b + c`` rounded once (what V_FMA_F32 computes).

    The float64 product of two fp32 values is exact (48 <= 53 significand bits). The float64 sum
    is then made *round-to-odd* (TwoSum gives the exact error; when it is non-zero and the sum's
    last bit is even, step one float64 ulp towards the exact value). Rounding a round-to-odd
    value with p >= 2q + 2 bits (53 >= 2*24 + 2) to q bits is a correct single rounding, so the
    final cast to float32 equals the infinitely precise result rounded once.
    """
    a64 = np.asarray(a, dtype=np.float32).astype(np.float64)
    b64 = np.asarray(b, dtype=np.float32).astype(np.float64)
    c64 = np.asarray(c, dtype=np.float32).astype(np.float64)
    p = a64 * b64
    with np.errstate(invalid="ignore", over="ignore"):
        s = p + c64
        bb = s - p
        err = (p - (s - bb)) + (c64 - bb)
        fix = np.isfinite(s) & (err != 0) & ((s.view(np.uint64) & 1) == 0)
        if np.any(fix):
            toward = np.where(err > 0, np.inf, -np.inf)
            s = np.where(fix, np.nextafter(s, toward), s)
        return s.astype(np.float32)


# -- bf16 ----
def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round fp32 to bf16 (RNE, NaN stays NaN); returns uint16 bit patterns."""
    bits = u32(np.asarray(x, dtype=np.float32))
    rounded = (bits.astype(np.uint64) + 0x7FFF + ((bits >> 16) & 1)) >> 16
    out = rounded.astype(np.uint32) & 0xFFFF
    nan = np.isnan(f32(bits))
    return np.where(nan, (bits >> 16) | 0x40, out).astype(np.uint16)


def bf16_bits_to_f32(h: np.ndarray) -> np.ndarray:
    return f32(np.asarray(h, dtype=np.uint32) << 16)


# -- 8-bit, 6-bit and 4-bit minifloats ----
def _minifloat_table(ebits: int, mbits: int, bias: int, finite_only: bool) -> np.ndarray:
    n = 1 << (1 + ebits + mbits)
    codes = np.arange(n)
    sign = np.where(codes >> (ebits + mbits) & 1, -1.0, 1.0)
    exp = (codes >> mbits) & ((1 << ebits) - 1)
    man = codes & ((1 << mbits) - 1)
    normal = exp > 0
    val = np.where(normal, (1 + man / (1 << mbits)) * 2.0 ** (exp - bias),
                   man / (1 << mbits) * 2.0 ** (1 - bias))
    val = sign * val
    if ebits == 4 and mbits == 3 and finite_only:  # e4m3fn: S.1111.111 is NaN
        val[(codes & 0x7F) == 0x7F] = np.nan
    elif ebits == 5 and mbits == 2:  # e5m2: IEEE-like inf/NaN
        top = exp == 31
        val[top & (man == 0)] = sign[top & (man == 0)] * np.inf
        val[top & (man != 0)] = np.nan
    return val.astype(np.float32)


E4M3 = _minifloat_table(4, 3, 7, True)
E5M2 = _minifloat_table(5, 2, 15, False)
E2M3 = _minifloat_table(2, 3, 1, True)
E3M2 = _minifloat_table(3, 2, 3, True)
E2M1 = _minifloat_table(2, 1, 1, True)

# MFMA f8f6f4 format codes (CBSZ for A, BLGP for B): table, bits per element
F8F6F4_FORMATS = {0: (E4M3, 8), 1: (E5M2, 8), 2: (E2M3, 6), 3: (E3M2, 6), 4: (E2M1, 4)}


def decode(table: np.ndarray, codes: np.ndarray) -> np.ndarray:
    return table[np.asarray(codes, dtype=np.int64)]


def e8m0_to_f32(codes: np.ndarray) -> np.ndarray:
    """E8M0 scale 2^(code - 127); code 255 is NaN."""
    codes = np.asarray(codes, dtype=np.int64)
    val = np.ldexp(np.float64(1.0), codes - 127)
    return np.where(codes == 255, np.nan, val)


def f32_to_fp8(x: np.ndarray, table: np.ndarray, max_finite: float, saturate: bool) -> np.ndarray:
    """Round fp32 to an 8-bit float code (RNE, ties to even code).

    Out-of-range values become the largest finite code when ``saturate`` (the instruction's
    clamp bit), else NaN (E4M3) / infinity (E5M2), as V_CVT_PK_FP8_F32 / V_CVT_PK_BF8_F32 do.
    """
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    pos = table[:128].astype(np.float64)
    finite = np.isfinite(pos)
    grid = pos[finite]  # ascending magnitudes of codes 0..k
    mag = np.abs(x)
    idx = np.searchsorted(grid, mag, side="left").clip(1, len(grid) - 1)
    lo, hi = grid[idx - 1], grid[idx]
    pick_hi = (mag - lo > hi - mag) | ((mag - lo == hi - mag) & (idx % 2 == 0))
    code = np.where(mag <= grid[0], 0, np.where(pick_hi, idx, idx - 1))
    top = len(grid) - 1
    half_step = (grid[top] - grid[top - 1]) / 2
    over = mag >= max_finite + half_step
    if saturate:
        code = np.where(over | (mag > max_finite), top, code)
    else:
        overflow_code = 0x7F if table is E4M3 else 0x7C
        code = np.where(over, overflow_code, code)
    code = np.where(np.isnan(x), 0x7F, code)
    sign = np.signbit(x) & ~np.isnan(x)
    return (code | np.where(sign, 0x80, 0)).astype(np.uint8)
