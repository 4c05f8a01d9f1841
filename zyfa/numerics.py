"""ZYFA FP8 forward numerics: a bit-exact torch emulator of ``docs/numerics.md``.

The Triton kernels, the gfx950 assembly and the functional emulator of gfx950 code compute what
this module computes. Contents, in the order of the spec:

- e4m3 format helpers: :func:`encode_e4m3` (saturating round-to-nearest-even, the hardware
  convert), :func:`decode_e4m3` (exact value of every bit pattern), :func:`fma_f32` (fp32 fused
  multiply-add with one rounding).
- Input preparation: :func:`quantize_fp8` (FlashAttention-3 descales), :func:`hadamard`,
  :func:`rotate_qk`, and :func:`rope` / :func:`rope_tables` (the RoPE pass a fused RoPE + Hadamard
  + quantise kernel absorbs).
- Lean P: :func:`lean_p_code` (the gfx950 ``v_fma_f32`` + ``v_cvt_u32_f32`` pair, element for
  element; ``rounding="magic"`` is the Hopper variant). Measured over x = t*s - bm in [-7, 0]
  (2^18 + 1 points, ``test_lean_p_error_vs_exp2``), the decoded value vs 2^(x+8) has relative
  error max 10.76%, mean +4.04% (both roundings), where the correctly rounded e4m3 of 2^(x+8)
  has max 5.88%, mean -0.07%: Lean P is biased up by ~4%, which normalising by the sum of the
  rounded probabilities cancels, and its spread is about twice that of RNE.
- :func:`zyfa_fp8_attention`: the forward pass and its ablations (``naive``, ``blockscale``,
  ``roundedsum``, ``leanp``/``zyfa``), :func:`bf16_attention`, and :func:`attention_row_kl`
  (KL divergence of the attention rows against fp64).
- The ``emulator`` backend of :func:`zyfa.flash_attn_func` for FP8 inputs.

Exactness. Products of two e4m3 values have at most 8 significant bits and are multiples of
2^-18 below 2^18, so a float64 sum of up to 256 of them is exact in any order; QK^T and P @ V are
computed that way and rounded to fp32 once (the correctly rounded fp32 dot product, which a
hardware fp32 accumulation approximates; the spec leaves that order to the implementation). Sums
of rounded probabilities (multiples of 2^-9 below 2^14) are exact in fp32. Every other reduction
uses a fixed pairwise order, so results are bitwise identical across runs and thread counts
(exp2 and log2 are evaluated in float64 and rounded once to fp32, so that results do not hang
on a device's own fp32 transcendental functions).

Choices the spec leaves open: an all-zero quantisation group gets descale 1.0 (amax / 448 would
be 0); fp32 subnormals are kept (IEEE), not flushed; the "+block scaling" ablation evaluates
``p = exp2(fp32(fp32(t * s) - (bm - 8)))``.
"""

from __future__ import annotations

import math
from typing import Iterator, Optional

import torch

from zyfa.backends import AttentionArgs, Backend, register_backend
from zyfa.reference import masked_pv

# -- constants (docs/numerics.md) ----------------------------------------------------------------
E4M3_MAX = 448.0                  # largest finite float8_e4m3fn (bit pattern 0x7e)
E4M3_MAX_CODE = 0x7E              # Lean P clamp: min(trunc(y), 126)
E4M3_NAN_CODE = 0x7F              # e4m3fn has no inf; 0x7f / 0xff are NaN
LOG2E_F32 = float(torch.tensor(1.4426950408889634, dtype=torch.float32))  # 1/ln(2), fp32
LN2_F32 = float(torch.tensor(math.log(2.0), dtype=torch.float32))
KEY_BLOCK = 64                    # keys per block, aligned to key 0
LEANP_BIAS = 120.5                # v1: code of 2^8 (120) + 0.5: trunc(y) rounds half up
MAGIC = 1.5 * 2.0**23             # fp32 ulp is 1 in [2^23, 2^24): low mantissa bits = integer
E8M0_MIN_EXP = -127               # smallest E8M0 scale exponent; below it a block is dropped
BM_LIMIT = 2.0**18                # |bm| bound: 120.5 - 8*bm (and the magic constant) exact in fp32
# zyfa-folded (docs/numerics.md, "Folded Lean P"): the Lean P FMA folded into the QK MFMA
FOLD_TILE = 128                   # keys per overflow check (the kernel's tile)
FOLD_CHUNK = 64                   # head-dim elements per QK MFMA: y is rounded to fp32 after each
FOLD_REF0 = -3.0 * 2.0**12        # initial reference exponent: the first tile's y (~2^16.6) lands above 127: a fix-up
FOLD_MID, FOLD_HALF = 127.0 - 2.0**15, 2.0**15  # accepted: |fp32(M - MID)| < HALF, M in [127 - 2^16, 127)
FOLD_LIMIT = 2.0**13              # |t * s| and |ref| bound of zyfa-folded (FOLD_REF0 must stay out of reach)
FOLD_FLOOR = -FOLD_HALF           # the check's M is max(y, FLOOR): a fully masked lane or row is accepted
# the fix-up's target: after it a row's largest y is in (FOLD_FIX_BIAS - 8, FOLD_FIX_BIAS], so a later
# tile may rise FOLD_HEADROOM doublings more before a code would pass 126. Measured (b1 h2 causal, 2-core
# box, benchmarks/v2_rescale_rate.py --fold-headroom 0 1 2 3): fix-ups at 32K 17.6 -> 8.4 % of the branch's
# executions on Gaussian inputs, 7.8 -> 5.3 % on the sink input, for FOLD_HEADROOM doublings of P's range
# at the bottom: sink input at 4K rel. L2 0.0531 -> 0.0539, flushed mass 0.51 -> 0.94 %; 2 would give
# 2.4 / 3.9 % for 0.0562 and 1.62 % (docs/numerics.md, Folded Lean P)
FOLD_HEADROOM = 1
FOLD_FIX_BIAS = LEANP_BIAS - 8.0 * FOLD_HEADROOM  # 112.5: the largest code after a fix-up is in [104, 112]

VARIANTS = ("zyfa", "zyfa-v1", "zyfa-v2", "zyfa-folded", "zyfa-runmax", "zyfa-grouped", "leanp", "roundedsum", "blockscale", "naive",
            "fa3", "p448")
RUNMAX_BLOCK = 128                # zyfa-runmax: the Hopper kernel's scaling block (its S tile); any block works
PV_SCALE_MIN_EXP = -126           # zyfa-runmax: O's rescale factor 2^d is 0 for d below this (normal fp32 only)
# zyfa-grouped: runmax inside groups of ``group`` blocks (aligned to key 0), each group merged into O like a
# v1 block; the group sizes docs/numerics.md measures (the Hopper kernel's flush interval, in 128-key tiles)
GROUP_SIZES = (1, 4, 8)
# naive-softmax variants (running fp32 max, exact exp2, l from the unrounded p) and the factor P is
# multiplied by before its e4m3 rounding: AITER v3 (none), FlashAttention-3 (2^8, its Max_offset),
# CK-style (448, e4m3's largest value)
P_PRESCALE = {"naive": 1.0, "bf16": 1.0, "fa3": 256.0, "p448": 448.0}
RECIPES = ("zyfa-v1", "zyfa-v2", "zyfa-folded")  # the public ``recipe=`` choices; "zyfa" / "leanp" are zyfa-v1
# the recipes the Triton kernels implement ("zyfa-folded" is gfx950 only: its Lean P argument comes
# out of the QK MFMA itself); here so that the Triton backend and kernel share it without importing
# each other
TRITON_RECIPES = ("zyfa-v1", "zyfa-v2")
ROUNDINGS = ("trunc", "magic")
GRANULARITIES = ("head", "tensor", "token")


# -- exact fp32 / e4m3 arithmetic ----------------------------------------------------------------

def _pow2(e: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """2.0**e exactly (e integer tensor within the normal range of ``dtype``), built from bits."""
    if dtype == torch.float64:
        return ((e.to(torch.int64) + 1023) << 52).view(torch.float64)
    return ((e.to(torch.int32) + 127) << 23).view(torch.float32)


def _ldexp_f32(x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """fp32 ``x * 2**e`` with one rounding (exact unless the result is fp32-subnormal).

    ``e`` (integer-valued) may be -inf (a row with no history): the result is then 0; beyond
    +-1000 it is clamped (the fp32 result is 0 or inf either way).
    When every 2**e is an fp32 normal the fp32 product is that single rounding (IEEE); otherwise
    the product is formed in float64, where it is exact, and rounded once to fp32.
    """
    e = e.to(torch.float32)
    if bool((((e >= -126) & (e <= 127)) | (e == -math.inf)).all()):
        return x * torch.where(e == -math.inf, 0.0, _pow2(e.clamp(min=-126), torch.float32))
    e = torch.nan_to_num(e.to(torch.float64), neginf=-1000.0).clamp(-1000.0, 1000.0)
    return (x.to(torch.float64) * _pow2(e, torch.float64)).to(torch.float32)


def fma_f32(a, b, c) -> torch.Tensor:
    """fp32 fused multiply-add ``a * b + c`` with a single round-to-nearest-even, elementwise.

    torch has no fma, so it is emulated exactly. ``a * b`` of two fp32 values is exact in float64
    (24 + 24 significand bits); ``hi = float64(a*b + c)`` then has one rounding. Rounding ``hi``
    to fp32 equals rounding the exact sum unless ``hi`` sits exactly on an fp32 midpoint (float64
    rounding is monotonic and every fp32 midpoint is a float64 number) or is fp32-subnormal. Only
    there the sum is redone: TwoSum gives ``hi + lo`` exactly, ``hi`` is rounded to odd (moved one
    float64 ulp towards ``lo`` when inexact and its last bit is even), and rounding a round-to-odd
    value with 53 >= 24 + 2 bits to fp32 equals rounding the exact value once (Boldo & Melquiond,
    "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to odd", IEEE
    TC 2008). Plain float64 ``a*b + c`` then a cast rounds twice and differs there (see the tests).
    """
    # python scalars join the tensors' device (a CPU scalar tensor broadcasts, but cannot be indexed
    # by a GPU tensor's hazard positions below)
    device = next((x.device for x in (a, b, c) if isinstance(x, torch.Tensor)), None)
    a, b, c = (torch.as_tensor(x, dtype=torch.float32, device=device) for x in (a, b, c))
    if not torch.broadcast_shapes(a.shape, b.shape, c.shape):
        return fma_f32(a.reshape(1), b.reshape(1), c.reshape(1)).reshape(())
    p = a.to(torch.float64) * b.to(torch.float64)
    hi = p + c.to(torch.float64)
    y = hi.to(torch.float32)
    hazard = ((hi.view(torch.int64) & 0x1FFFFFFF) == 0x10000000) | (hi.abs() < 2.0**-125)
    if not bool(hazard.any()):
        return y
    at = hazard.nonzero(as_tuple=True)
    p, hi = p.expand(y.shape)[at], hi[at]
    c64 = c.to(torch.float64).expand(y.shape)[at]
    bv = hi - p
    lo = (p - (hi - bv)) + (c64 - bv)
    even = (hi.view(torch.int64) & 1) == 0
    towards = torch.where(lo > 0, math.inf, -math.inf).to(torch.float64)
    y[at] = torch.where((lo != 0) & even, torch.nextafter(hi, towards), hi).to(torch.float32)
    return y


def _decode_e4m3_formula(codes: torch.Tensor) -> torch.Tensor:
    c = codes.to(torch.int32)
    exp = (c >> 3) & 0xF
    man = c & 0x7
    significand = torch.where(exp == 0, man, man + 8).to(torch.float32)
    value = significand * _pow2(exp.clamp(min=1) - 10, torch.float32)
    value = torch.where((c & 0x7F) == E4M3_NAN_CODE, math.nan, value)
    return torch.where((c & 0x80) != 0, -value, value)


_E4M3_VALUES = _decode_e4m3_formula(torch.arange(256, dtype=torch.int32))  # index = bit pattern


def decode_e4m3(codes: torch.Tensor) -> torch.Tensor:
    """Exact float32 value of e4m3fn bit patterns (uint8), subnormals included.

    Layout s.eeee.mmm, bias 7: exponent field 0 is subnormal ``m * 2**-9``, otherwise
    ``(8 + m) * 2**(e - 10)``; 0x7f and 0xff are NaN (no infinities). A 256-entry table
    built from that formula.
    """
    if not isinstance(codes, torch.Tensor) or codes.dtype != torch.uint8:
        raise TypeError(f"codes must be a uint8 torch.Tensor, got {getattr(codes, 'dtype', type(codes).__name__)}")
    return _E4M3_VALUES.to(codes.device)[codes.long()]


def encode_e4m3(x: torch.Tensor) -> torch.Tensor:
    """e4m3fn bit patterns (uint8) of ``x``: round-to-nearest-even, saturating at +-448, NaN -> 0x7f.

    Implemented from the format (not by torch's cast): the quantum of |x| is 2**(floor(log2|x|) - 3)
    for |x| >= 2**-6 and 2**-9 below; |x| / quantum is rounded half-to-even.
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point torch.Tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    x = x.to(torch.float32)
    a = x.abs().clamp(max=E4M3_MAX)
    _, e = torch.frexp(a)                      # a = f * 2**e, f in [0.5, 1)
    qexp = (e - 4).clamp(min=-9)               # quantum exponent: floor(log2 a) - 3
    n = torch.round(a * _pow2(-qexp, torch.float32))
    v = (n * _pow2(qexp, torch.float32)).clamp(max=E4M3_MAX)  # rounding may carry to the next binade
    _, ev = torch.frexp(v)
    normal = v >= 2.0**-6
    vexp = (ev - 4).clamp(min=-9)
    man = (v * _pow2(-vexp, torch.float32)).to(torch.int32)  # 8..15 for normals, 0..7 subnormal
    code = torch.where(normal, ((ev - 1 + 7) << 3) + man - 8, man)
    code = code | (torch.signbit(x).to(torch.int32) << 7)
    code = torch.where(torch.isnan(x), E4M3_NAN_CODE, code)
    return code.to(torch.uint8)


def round_e4m3(x: torch.Tensor) -> torch.Tensor:
    """``x`` rounded to the nearest e4m3 value (RNE, saturating at +-448), as float32.

    Uses torch's float8_e4m3fn cast after clamping (fast); the tests check it bit for bit
    against :func:`encode_e4m3`, which is derived from the format, ties and subnormals included.
    """
    return x.to(torch.float32).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).to(torch.float32)


# -- input preparation: quantisation and Hadamard -------------------------------------------------

def _check_bshd(name: str, x) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 4:
        raise ValueError(f"{name} must have 4 dimensions (batch, seqlen, nheads, headdim), got shape {tuple(x.shape)}")


def quantize_fp8(x: torch.Tensor, granularity: str = "head", nheads_k: Optional[int] = None):
    """Quantises ``x`` (batch, seqlen, nheads, headdim) to float8_e4m3fn with FA3 descales.

    ``granularity="head"``: one scale per (batch, kv head); the ``nheads // nheads_k`` query heads
    of one kv head share it (pass ``nheads_k`` for Q under GQA; default ``nheads``).
    ``granularity="tensor"``: one scale for the whole tensor, repeated to (batch, nheads_k).
    ``granularity="token"``: one scale per (batch, token, head), descale (batch, seqlen, nheads)
    (a per-token Q scale, which the kernels fold into their per-row constants).
    ``descale = amax / 448`` (fp32; 1.0 for an all-zero group), stored = RNE of
    ``clamp(x / descale, -448, 448)``; never NaN. Input is first converted to float32.

    Returns ``(x8, descale)``: float8_e4m3fn of ``x``'s shape and float32 (batch, nheads_k), with
    real value = ``descale[b, h // (nheads // nheads_k)] * x8[b, :, h]`` (``descale[b, s, h]`` per token).
    """
    _check_bshd("x", x)
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got {x.dtype}")
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    b, s, h, d = x.shape
    hk = h if nheads_k is None else nheads_k
    if not isinstance(hk, int) or hk <= 0 or h % hk != 0:
        raise ValueError(f"nheads_k must be a positive divisor of nheads ({h}), got {nheads_k!r}")
    if x.numel() == 0:
        raise ValueError(f"x must not be empty, got shape {tuple(x.shape)}")
    xf = x.to(torch.float32)
    # a value check cannot run inside a torch.compile graph (it would break the graph there)
    if not torch.compiler.is_compiling() and not bool(torch.isfinite(xf).all()):
        raise ValueError("x contains non-finite values (NaN or inf); they have no FP8 encoding")
    g = h // hk
    if granularity == "head":
        amax = xf.abs().reshape(b, s, hk, g * d).amax(dim=(1, 3))
    elif granularity == "token":
        amax = xf.abs().amax(dim=3)
    else:
        amax = xf.abs().amax().expand(b, hk)
    # IEEE division on every device: on CUDA, torch computes ``tensor / python_scalar`` as
    # ``tensor * fp32(1 / scalar)`` (ATen's div_true_kernel_cuda, "may lose one bit"), and 1/448 is
    # not exact in fp32, so a scalar divisor gave GPU descales one ulp off the CPU's (and the fused
    # Triton kernel's div_rn) for some amax values. A tensor divisor takes the a / b path everywhere.
    descale = amax / torch.full_like(amax, E4M3_MAX)
    descale = torch.where(descale > 0, descale, torch.ones_like(descale)).contiguous()
    if granularity == "token":
        scaled = xf / descale[..., None]
    else:
        scaled = xf / descale.repeat_interleave(g, dim=1)[:, None, :, None]
    codes = encode_e4m3(scaled.clamp(-E4M3_MAX, E4M3_MAX))
    return codes.view(torch.float8_e4m3fn), descale


def hadamard_block(d: int) -> int:
    """Walsh-Hadamard block size for headdim ``d``: the largest power of two dividing ``d``.

    Power-of-two ``d`` (64, 128, 256) is one H_d. Otherwise the rotation is block-diagonal:
    d = 192 (MLA) is three H_64 blocks. Still orthonormal, so QK^T is unchanged; an outlier
    channel is spread over its block only.
    """
    if not isinstance(d, int) or d <= 0:
        raise ValueError(f"headdim must be a positive int, got {d!r}")
    return d & -d


def hadamard(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Orthonormal Walsh-Hadamard transform of ``x`` along ``dim``, O(d log d) butterflies.

    Blocks of :func:`hadamard_block` size along ``dim``, each multiplied by H / sqrt(block)
    (Sylvester order). Computed in float32 (float64 inputs stay float64); returns that dtype.
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point torch.Tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    if x.dim() == 0:
        raise ValueError("x must have at least one dimension")
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    y = x.to(dtype).movedim(dim, -1)
    shape = y.shape
    block = hadamard_block(shape[-1])
    y = y.reshape(-1, shape[-1] // block, block)
    half = 1
    while half < block:
        pairs = y.reshape(y.shape[0], y.shape[1], block // (2 * half), 2, half)
        a, b = pairs[..., 0, :], pairs[..., 1, :]
        y = torch.stack((a + b, a - b), dim=-2).reshape(y.shape)
        half *= 2
    y = y * (1.0 / math.sqrt(block))
    return y.reshape(shape).movedim(-1, dim)


def rope_tables(seqlen: int, headdim: int, base: float = 10000.0, dtype: torch.dtype = torch.float32,
                offset: int = 0):
    """(cos, sin) tables of rotary position embedding, each (seqlen, headdim // 2) of ``dtype``.

    Row ``i`` is position ``offset + i``, column ``f`` the angle ``pos * base^(-f / (headdim / 2))``,
    computed in float64 and rounded once to ``dtype``.
    """
    for name, value in (("seqlen", seqlen), ("headdim", headdim)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if headdim % 2:
        raise ValueError(f"headdim must be even, got {headdim}")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ValueError(f"offset must be a non-negative int, got {offset!r}")
    d2 = headdim // 2
    inv = base ** (-torch.arange(0, d2, dtype=torch.float64) / d2)
    ang = torch.arange(offset, offset + seqlen, dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().to(dtype), ang.sin().to(dtype)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of ``x`` (batch, seqlen, nheads, headdim), half-split pairing.

    Channel ``f`` pairs with ``f + headdim / 2`` (LLaMA / Hugging Face ``rotate_half``):
    ``(x1 * cos - x2 * sin, x2 * cos + x1 * sin)`` with ``cos``, ``sin`` of shape
    (seqlen, headdim // 2) (:func:`rope_tables`). Computed in float32, every product and sum rounded
    on its own (no FMA: the fused Triton kernel is launched without FP contraction to match), float64
    inputs stay float64. The torch path of ``hadamard_quantize_fp8(x, cos=, sin=)`` is
    ``quantize_fp8(hadamard(rope(x, cos, sin)))``.
    """
    _check_bshd("x", x)
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got {x.dtype}")
    _, s, _, d = x.shape
    for name, t in (("cos", cos), ("sin", sin)):
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != (s, d // 2) or d % 2:
            raise ValueError(f"{name} must be a tensor of shape (seqlen, headdim // 2) = ({s}, {d // 2}) "
                             f"for an even headdim, got {getattr(t, 'shape', type(t).__name__)}")
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf = x.to(dtype)
    c, sn = cos.to(dtype)[None, :, None, :], sin.to(dtype)[None, :, None, :]
    x1, x2 = xf[..., : d // 2], xf[..., d // 2:]
    return torch.cat((x1 * c - x2 * sn, x2 * c + x1 * sn), dim=-1)


def rotate_qk(q: torch.Tensor, k: torch.Tensor):
    """Hadamard-rotates Q and K (b, s, h, d) along headdim; Q K^T is unchanged (orthonormal)."""
    _check_bshd("q", q)
    _check_bshd("k", k)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same headdim, got q={q.shape[-1]}, k={k.shape[-1]}")
    return hadamard(q), hadamard(k)


# -- Lean P ---------------------------------------------------------------------------------------

def unbiased_leanp_offset() -> float:
    """The offset ``delta`` (FMA constant ``120 + delta``) that makes truncating Lean P unbiased.

    ``code = floor(z + delta)`` with ``z = 8 log2(p) + 56`` (the continuous e4m3 code of p). Write
    ``z = 8a + w``, ``w`` in [0, 8): the decoded value is ``2^(a-7) (1 + floor(w + delta)/8)``, the
    true one ``2^(a-7) 2^(w/8)``, so with ``w`` uniform (a row's scores are not aligned to the
    e4m3 grid) the mean ratio decoded/true is
    ``E[R] = (1/ln 2) (1/2 + (e^(delta ln2/8) S - 4) / 8)``, ``S = sum_{k=1..8} 2^(-k/8)``.
    ``E[R] = 1`` gives ``delta = (8 / ln 2) ln(8 ln 2 / S) = 0.043345``. The LSE bias is
    ``ln E[R]``: +0.0396 nats at v1's delta = 0.5 (the issue's +0.04), 0 at delta*.
    """
    s = sum(2.0 ** (-k / 8.0) for k in range(1, 9))
    return 8.0 / math.log(2.0) * math.log(8.0 * math.log(2.0) / s)


def leanp_mean_ratio(delta: float) -> float:
    """``E[R]`` of :func:`unbiased_leanp_offset` (mean decoded / true probability) at ``delta``."""
    s = sum(2.0 ** (-k / 8.0) for k in range(1, 9))
    return (0.5 + (math.exp(delta * math.log(2.0) / 8.0) * s - 4.0) / 8.0) / math.log(2.0)


# v2 FMA constant: 120 + delta*, rounded to fp32 (120.04335021972656)
LEANP_BIAS_V2 = float(torch.tensor(120.0 + unbiased_leanp_offset(), dtype=torch.float32))


# v2 rescale factor alpha = 2^d, d = fp32(M_old - M_new) <= 0: a fixed sequence of fp32 operations that
# every backend executes identically (docs/numerics.md, spec v2 step 5). Horner coefficients c_0..c_6 of
# 2^f on [0, 1) (c_0 = 1: 2^0 is exact), fitted in float64 for least maximum relative error (Lawson's
# iteration on 4000 Chebyshev nodes) and rounded to fp32: the fp32 evaluation is within 1.07 ulp of
# 2^f for every f = k 2^-24 and correctly rounded for 90% of them (test_alpha_v2_accuracy)
ALPHA_POLY = (1.0, 0.6931470632553101, 0.2402293086051941, 0.055485282093286514, 0.009675451554358006,
              0.0012467845808714628, 0.00021612914861179888)
ALPHA_MIN_EXP = -126.0   # alpha = 0 below 2^-126 (d < -126): no subnormal alpha on any device
V2_TILE = 128            # spec v2: the running max M is updated once per 128-key tile (two 64-key blocks)
V2_QK_CHUNK = 64         # spec v2: scores summed over head-dim chunks of 64 in order, one rounding each


def alpha_v2(d: torch.Tensor) -> torch.Tensor:
    """Spec v2's ``alpha = 2^d`` (``d`` fp32, <= 0; docs/numerics.md step 5), bit for bit as the kernels:

    ``dc = max(d, -126)``, ``i = floor(dc)``, ``f = dc - i`` (exact, in [0, 1)),
    ``p = fma(...fma(fma(c6, f, c5), f, c4)..., f, c0)`` (six fp32 FMAs), ``alpha = p * 2^i`` (exact: p in
    [1, 2], i >= -126), and ``alpha = 0`` where ``d < -126`` (also ``d = -inf``, the first tile).
    """
    d = torch.as_tensor(d, dtype=torch.float32)
    dc = torch.clamp(d, min=ALPHA_MIN_EXP)
    i = torch.floor(dc)
    f = dc - i
    p = torch.full_like(f, ALPHA_POLY[-1])
    for coefficient in reversed(ALPHA_POLY[:-1]):
        p = fma_f32(p, f, coefficient)
    i = torch.nan_to_num(i, nan=0.0)
    return torch.where(d >= ALPHA_MIN_EXP, p * _pow2(i, torch.float32), torch.where(torch.isnan(d), d, 0.0))


def lean_p_code(s: torch.Tensor, T8, bm, rounding: str = "trunc") -> torch.Tensor:
    """Lean P: e4m3 bit pattern of ~2^(t*s - bm + 8) from one fp32 FMA and one convert.

    ``s``: fp32 scores (QK^T of the stored FP8 values); ``T8 = 8 * t``; ``bm``: the block's
    integer max exponent, broadcastable to ``s``.

    - ``"trunc"`` (gfx950 ``v_fma_f32`` + ``v_cvt_u32_f32``): ``y = fma(s, T8, 120.5 - 8*bm)``,
      ``code = 0 if not (y >= 0) else min(trunc(y), 126)``.
    - ``"magic"`` (Hopper): ``f = fma(s, T8, (120 - 8*bm) + 1.5*2^23)``, ``code`` = low byte of the
      bits of ``max(f, 1.5*2^23)`` (round-half-even of the same quantity).

    Returns uint8 codes of ``s``'s broadcast shape.
    """
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    s = torch.as_tensor(s, dtype=torch.float32)
    bm = torch.as_tensor(bm, dtype=torch.float32, device=s.device)
    T8 = torch.as_tensor(T8, dtype=torch.float32, device=s.device)
    if rounding == "trunc":
        y = fma_f32(s, T8, LEANP_BIAS - 8.0 * bm)
        code = torch.where(y >= 0, torch.trunc(y).clamp(max=E4M3_MAX_CODE), 0.0)
        return code.to(torch.uint8)
    f = fma_f32(s, T8, (120.0 - 8.0 * bm) + MAGIC)
    f = torch.maximum(f, torch.tensor(MAGIC, dtype=torch.float32, device=s.device))
    return (f.view(torch.int32) & 0xFF).to(torch.uint8)


# -- forward pass ---------------------------------------------------------------------------------

def _tree_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum over the last dim (a power of two) in a fixed pairwise order: deterministic bits."""
    while x.shape[-1] > 1:
        half = x.shape[-1] // 2
        x = x[..., :half] + x[..., half:]
    return x[..., 0]


def _exp2_f32(x: torch.Tensor) -> torch.Tensor:
    """exp2 of fp32 arguments, evaluated in float64 and rounded once to fp32."""
    return torch.exp2(x.to(torch.float64)).to(torch.float32)


class _Operands:
    """Upcast operands in (batch, nheads_k, group, seqlen, dim) layout, keys padded to a block."""

    def __init__(self, q, k, v, t, v_scale, causal: bool, block: int, group: int = 1):
        b, sq, h, d = q.shape
        sk, hk = k.shape[1], k.shape[2]
        self.sq, self.sk, self.causal, self.block, self.group = sq, sk, causal, block, group
        self.shape = (b, hk, h // hk)
        pad = -sk % block
        self.q = q.to(torch.float64).permute(0, 2, 1, 3).reshape(b, hk, h // hk, sq, d)
        self.k = torch.nn.functional.pad(k.to(torch.float64), (0, 0, 0, 0, 0, pad)).permute(0, 2, 1, 3)[:, :, None]
        self.v = torch.nn.functional.pad(v.to(torch.float64), (0, 0, 0, 0, 0, pad)).permute(0, 2, 1, 3)[:, :, None]
        # log2-domain score scale t, fp32, one per row (per (batch, kv head) unless Q has per-token scales)
        t = t if t.dim() == 5 else t.reshape(b, hk, 1, 1, 1)
        self.t = t.expand(b, hk, h // hk, sq, 1)
        self.v_scale = v_scale.reshape(b, hk, 1, 1, 1)

    def first_row(self, k0: int) -> int:
        """First query row with an allowed key in the block starting at key ``k0``."""
        return max(0, k0 - (self.sk - self.sq)) if self.causal else 0

    def scores(self, r0: int, k0: int, chunk: Optional[int] = None):
        """fp32 scores (b, hk, g, rows, block) of rows r0: and keys k0:k0+block, and the mask.

        ``chunk``: None = the correctly rounded dot product; else the head dim in chunks of that
        many elements, in order, each chunk's exact dot product added to the fp32 running sum with
        one rounding (spec v2: the MFMA chain, K = 64 per MFMA)."""
        kb = self.k[..., k0:k0 + self.block, :].transpose(-1, -2)
        if chunk is None:
            return torch.matmul(self.q[..., r0:, :], kb).to(torch.float32), self.allowed(r0, k0)
        s = None
        for c0 in range(0, self.q.shape[-1], chunk):
            part = torch.matmul(self.q[..., r0:, c0:c0 + chunk], kb[..., c0:c0 + chunk, :])  # exact
            s = (part if s is None else s.to(torch.float64) + part).to(torch.float32)
        return s, self.allowed(r0, k0)

    def allowed(self, r0: int, k0: int) -> torch.Tensor:
        """Allowed-key mask (rows r0:, keys k0:k0+block): inside seqlen_k and bottom-right causal."""
        key = torch.arange(k0, k0 + self.block, device=self.q.device)
        allowed = (key < self.sk)[None, :].expand(self.sq - r0, self.block)
        if self.causal:
            pos = torch.arange(r0, self.sq, device=self.q.device) + (self.sk - self.sq)
            allowed = allowed & (key[None, :] <= pos[:, None])
        return allowed


class _Mask:
    """Allowed keys of one block. Rows are ordered so that only a leading strip (the causal
    diagonal, or every row of a block past seqlen_k) has disallowed keys; masking touches that
    strip only."""

    def __init__(self, allowed: torch.Tensor):
        partial = ~allowed.all(dim=-1)
        self.rows = int(partial.nonzero().max()) + 1 if bool(partial.any()) else 0
        self.blocked = ~allowed[:self.rows]

    def fill_(self, x: torch.Tensor, value) -> torch.Tensor:
        """Sets the disallowed entries of ``x`` (..., rows, block) to ``value`` in place."""
        if self.rows:
            x[..., :self.rows, :] = x[..., :self.rows, :].masked_fill(self.blocked, value)
        return x

    def amax(self, s: torch.Tensor) -> torch.Tensor:
        """Max of ``s`` over the allowed keys of each row (keepdim)."""
        mx = s.amax(dim=-1, keepdim=True)
        if self.rows:
            mx[..., :self.rows, :] = s[..., :self.rows, :].masked_fill(self.blocked, -math.inf).amax(-1, keepdim=True)
        return mx


def _blocks(ops: _Operands, variant: str, rounding: str, p_round) -> Iterator[tuple]:
    """Per key block: (first row r0, key start k0, P used in P @ V, the sum added to l, scale,
    allowed-key mask (rows r0:, block keys), rows whose allowed scores contain a NaN).

    ``scale`` (fp32, per row) is the log2 of the factor the block's P carries: ``bm - 8`` for the
    block-scaled variants, the running max ``m`` for naive/BF16 (exact softmax). zyfa-v2 yields
    the pair ``(e, M)``: the block's E8M0 exponent and the row's running max after the block; its
    P carries ``2^(e + M)``.
    """
    if variant == "zyfa-v2":
        yield from _blocks_v2(ops)
        return
    m = torch.full((*ops.shape, ops.sq), -math.inf, dtype=torch.float32, device=ops.q.device)
    for k0 in range(0, ops.sk, ops.block):
        r0 = ops.first_row(k0)
        if r0 >= ops.sq:
            break
        s, allowed = ops.scores(r0, k0)
        mask = _Mask(allowed)
        t = ops.t[..., r0:, :]
        if variant in P_PRESCALE:
            # -- exact softmax with a running fp32 max; P (times its prescale) rounded after exp2 -
            x = mask.fill_(t * s, -math.inf)
            nan_rows = torch.isnan(x).any(dim=-1)
            m_new = torch.maximum(m[..., r0:], x.amax(dim=-1))
            m[..., r0:] = m_new
            p = _exp2_f32(x - m_new[..., None])
            c = P_PRESCALE[variant]
            P = p_round(p) if c == 1.0 else p_round(p * c).to(torch.float64) / c  # float64: PV input
            yield r0, k0, P, _tree_sum(p), m_new, allowed, nan_rows
            continue
        # -- per-block power-of-two scaling: bm = ceil(fp32(t * max s)) --------------------------
        mx = mask.amax(s)
        nan_rows = torch.isnan(mx[..., 0])
        bm = torch.ceil(t * mx)
        _check_bm_range(bm)
        if variant in ("zyfa-runmax", "zyfa-grouped"):
            # -- codes against the row's running max m (integer): P carries 2^(m - 8) -------------
            if variant == "zyfa-grouped" and k0 % (ops.block * ops.group) == 0:
                m.fill_(-math.inf)  # zyfa-grouped: the running max of the group that starts here
            m_new = torch.maximum(m[..., r0:], bm[..., 0])  # NaN-propagating
            m[..., r0:] = m_new
            code = mask.fill_(lean_p_code(s, 8.0 * t, m_new[..., None], rounding), 0)
            P = code.view(torch.float8_e4m3fn).to(torch.float64)
            yield r0, k0, P, _tree_sum(P).to(torch.float32), m_new - 8.0, allowed, nan_rows
            continue
        if variant in ("leanp", "zyfa", "zyfa-v1"):
            code = mask.fill_(lean_p_code(s, 8.0 * t, bm, rounding), 0)
            P = code.view(torch.float8_e4m3fn).to(torch.float64)  # exact: equals decode_e4m3 (tested)
            yield r0, k0, P, _tree_sum(P).to(torch.float32), (bm - 8.0)[..., 0], allowed, nan_rows
            continue
        x = mask.fill_(t * s, -math.inf)
        p = _exp2_f32(x - (bm - 8.0))
        P = round_e4m3(p)
        yield r0, k0, P, _tree_sum(P if variant == "roundedsum" else p), (bm - 8.0)[..., 0], allowed, nan_rows


def _blocks_v2(ops: _Operands) -> Iterator[tuple]:
    """Spec v2 steps 1-4 (docs/numerics.md): :func:`_blocks`' tuples for each 64-key block, the
    running max ``M`` updated once per 128-key tile (aligned to key 0) from both blocks' ``x_b``.
    Both blocks of a tile yield the tile's ``M``, so the caller's alpha applies at the first."""
    if ops.block != KEY_BLOCK:
        raise ValueError(f"variant 'zyfa-v2' is specified with block={KEY_BLOCK} only, got {ops.block}")
    m = torch.full((*ops.shape, ops.sq), -math.inf, dtype=torch.float32, device=ops.q.device)
    for k0 in range(0, ops.sk, V2_TILE):
        r0 = ops.first_row(k0)
        if r0 >= ops.sq:
            break
        t = ops.t[..., r0:, :]
        blocks = []
        for b0 in range(k0, min(k0 + V2_TILE, ops.sk), KEY_BLOCK):
            if ops.first_row(b0) >= ops.sq:
                break
            s, allowed = ops.scores(r0, b0, chunk=V2_QK_CHUNK)
            mask = _Mask(allowed)
            blocks.append((b0, s, allowed, mask, (t * mask.amax(s))[..., 0]))  # x_b = fp32(t * block max)
        m_new = m[..., r0:]
        for *_, x_b in blocks:
            m_new = torch.maximum(m_new, x_b)  # NaN-propagating
        m[..., r0:] = m_new
        whole = torch.floor(m_new)
        phi = m_new - whole                           # exact
        for b0, s, allowed, mask, x_b in blocks:
            n = torch.ceil(x_b - phi)
            _check_bm_range(n)
            const = (LEANP_BIAS_V2 - 8.0 * phi) - 8.0 * n  # = c - 8 bm', two fp32 roundings
            y = fma_f32(s, 8.0 * t, const[..., None])
            code = mask.fill_(torch.where(y >= 0, torch.trunc(y).clamp(max=E4M3_MAX_CODE), 0.0), 0.0)
            P = code.to(torch.uint8).view(torch.float8_e4m3fn).to(torch.float64)
            rb = ops.first_row(b0) - r0  # the block's own first row (its earlier rows allow none of its keys)
            yield (r0 + rb, b0, P[..., rb:, :], _tree_sum(P[..., rb:, :]).to(torch.float32),
                   ((n - 8.0 - whole)[..., rb:], m_new[..., rb:]), allowed[rb:], torch.isnan(x_b)[..., rb:])


def _check_bm_range(bm: torch.Tensor) -> None:
    """The spec's fp32 Lean P constants are exact only for |bm| <= 2^18 (docs/numerics.md, "Range"):
    beyond, the codes would be garbage, so the emulator refuses instead of returning them."""
    big = torch.isfinite(bm) & (bm.abs() > BM_LIMIT)
    if bool(big.any()):
        worst = float(bm[big].abs().max())
        raise ValueError(
            f"log2-domain score t * max(q.k) = {worst:.3g} is outside the ZYFA FP8 range |t * s| <= 2^18 "
            f"(t = softmax_scale * log2(e) * q_descale * k_descale; docs/numerics.md, Range): the "
            "spec's fp32 constants are not exact there. Use backend='reference' for such logits")


def _forward(ops: _Operands, variant: str, rounding: str, p_round):
    """Online softmax over key blocks; returns (out fp32 (b, hk, g, sq, dv), lse, m, l).

    NaN (docs/numerics.md, "Non-finite inputs"): a row with a NaN among its allowed scores gets
    out = lse = NaN; a NaN in v at an allowed key makes that output column NaN; a disallowed key
    contributes nothing (no 0 * NaN)."""
    shape = (*ops.shape, ops.sq)
    m = torch.full(shape, -math.inf, dtype=torch.float32, device=ops.q.device)
    l = torch.zeros(shape, dtype=torch.float32, device=ops.q.device)
    acc = torch.zeros(*shape, ops.v.shape[-1], dtype=torch.float32, device=ops.q.device)
    nan_rows = torch.zeros(shape, dtype=torch.bool, device=ops.q.device)
    exact = variant in P_PRESCALE
    if variant == "zyfa-grouped":  # the open group's O, l and running max (units as zyfa-runmax's)
        g_acc, g_l, g_m, g_r0 = torch.zeros_like(acc), torch.zeros_like(l), torch.full_like(m, -math.inf), 0
    for r0, k0, P, psum, scale, allowed, bad in _blocks(ops, variant, rounding, p_round):
        nan_rows[..., r0:] |= bad
        pv = masked_pv(P.to(torch.float64), allowed, ops.v[..., k0:k0 + ops.block, :]).to(torch.float32)
        m_old = m[..., r0:]
        if variant == "zyfa-v2":
            # -- E8M0 block scale 2^e; FA-style alpha = 2^(M_old - M) only where M grew ----------
            e, m_new = scale
            keep = e >= E8M0_MIN_EXP
            pv = torch.where(keep[..., None] | torch.isnan(pv), _ldexp_f32(pv, e[..., None]), 0.0)
            psum = torch.where(keep, _ldexp_f32(psum, e), 0.0)
            grew = m_new != m_old
            if bool(grew.any()):  # acc = fp32(acc * alpha), l = fp32(l * alpha), alpha = 2^(M_old - M_new)
                alpha = torch.where(grew, alpha_v2(m_old - m_new), 1.0)
                acc[..., r0:, :] = acc[..., r0:, :] * alpha[..., None]
                l[..., r0:] = l[..., r0:] * alpha
            acc[..., r0:, :] += pv
            l[..., r0:] += psum
            m[..., r0:] = m_new
            continue
        if variant == "zyfa-runmax":
            _runmax_add(acc, l, m, r0, scale, pv, psum)
            continue
        if variant == "zyfa-grouped":
            # -- runmax into the group's O; at each group's start the finished group merges into O -
            if k0 % (ops.block * ops.group) == 0:
                if k0:
                    _merge_block(acc, l, m, g_r0, g_m[..., g_r0:] + 8.0, g_acc[..., g_r0:, :], g_l[..., g_r0:])
                    g_acc.zero_(), g_l.zero_(), g_m.fill_(-math.inf)
                g_r0 = r0
            _runmax_add(g_acc, g_l, g_m, r0, scale, pv, psum)
            continue
        if exact:
            alpha = _exp2_f32(m_old - scale)
            acc[..., r0:, :] = acc[..., r0:, :] * alpha[..., None] + pv
            l[..., r0:] = l[..., r0:] * alpha + psum
            m[..., r0:] = scale
            continue
        _merge_block(acc, l, m, r0, scale + 8.0, pv, psum)
    if variant == "zyfa-grouped":  # the last group
        _merge_block(acc, l, m, g_r0, g_m[..., g_r0:] + 8.0, g_acc[..., g_r0:, :], g_l[..., g_r0:])
    return _epilogue(ops, acc, l, m, nan_rows)


def _merge_block(acc, l, m, r0: int, bm, pv, psum) -> None:
    """Spec v1 steps 4-5 in place on rows ``r0:``: a block's ``pv`` (rows r0:) and ``psum`` carrying
    ``2^(bm - 8)`` merged into ``acc``, ``l`` (units ``2^m``): E8M0 block scale ``e = bm - 8 - m_new``,
    ``m_new = max(m, bm)``, exact pow2 rescaling, the block dropped where ``e < -127``. A row with
    ``bm = -inf`` (zyfa-grouped: no allowed key in the group) adds nothing."""
    m_old = m[..., r0:]
    m_new = torch.maximum(m_old, bm)
    e = bm - 8.0 - m_new
    keep = e >= E8M0_MIN_EXP
    shift = torch.where(m_new == m_old, 0.0, m_old - m_new)  # 0, not NaN, where both are -inf
    if bool((shift != 0).any()):  # exact no-op otherwise
        acc[..., r0:, :] = _ldexp_f32(acc[..., r0:, :], shift[..., None])
        l[..., r0:] = _ldexp_f32(l[..., r0:], shift)
    # a dropped block (e < -127) still passes on a NaN it read
    acc[..., r0:, :] += torch.where(keep[..., None] | torch.isnan(pv), _ldexp_f32(pv, e[..., None]), 0.0)
    l[..., r0:] += torch.where(keep, _ldexp_f32(psum, e), 0.0)
    m[..., r0:] = m_new


def _runmax_add(acc, l, m, r0: int, scale, pv, psum) -> None:
    """zyfa-runmax's per-block step in place on rows ``r0:``: ``acc``, ``l`` are in units of
    ``2^m`` (``m = running max - 8``); where the block's ``scale`` (the new running max - 8) grew,
    both are first scaled by ``2^(m_old - scale)`` (exact; 0 below ``2^PV_SCALE_MIN_EXP``)."""
    m_old = m[..., r0:]
    d = m_old - scale
    grew = scale > m_old
    if bool(grew.any()):
        e = torch.nan_to_num(d, nan=0.0).clamp(PV_SCALE_MIN_EXP, 0.0)
        f = torch.where(grew & (d >= PV_SCALE_MIN_EXP), _pow2(e, torch.float32), 0.0)
        f = torch.where(grew, f, 1.0)  # exact powers of two; fp32 products round only if subnormal
        acc[..., r0:, :] = acc[..., r0:, :] * f[..., None]
        l[..., r0:] = l[..., r0:] * f
    acc[..., r0:, :] += pv
    l[..., r0:] += psum
    m[..., r0:] = scale


def _epilogue(ops: _Operands, acc, l, m, nan_rows):
    """``out = fp32(acc / l) * dv``, ``lse = (m + log2 l) ln 2``; empty rows 0 / +inf, NaN rows NaN."""
    empty = (l == 0) & ~nan_rows
    out = (acc / torch.where(empty, 1.0, l)[..., None]) * ops.v_scale
    out = out.masked_fill(empty[..., None], 0.0).masked_fill(nan_rows[..., None], math.nan)
    log2_l = torch.log2(l.to(torch.float64)).to(torch.float32)  # rounded once: same bits on every device
    lse = ((m + log2_l) * LN2_F32).masked_fill(empty, math.inf).masked_fill(nan_rows, math.nan)
    return out, lse, m, l


def fold_q(q: torch.Tensor, T8: torch.Tensor):
    """zyfa-folded step 0: Q re-quantised with the non-power-of-two part of ``T8 = 8 t`` folded in.

    ``a = ceil(log2 T8)`` (an integer: ``T8 = 2^a g``, ``g`` in (0.5, 1], exact), ``q' =
    e4m3_rne(fp32(q * g))`` (the kernel: ``v_cvt_pk_f32_fp8``, ``v_mul_f32``, ``v_cvt_pk_fp8_f32``),
    and ``2^a`` becomes the E8M0 scale of Q in the scaled QK MFMA, so ``2^a q' . k ~ 8 t q . k``.
    ``q``: float64 e4m3 values (..., d); ``T8``: fp32, broadcastable (..., 1). Returns (q', 2^a)
    as float64."""
    T8 = T8.to(torch.float32)
    if not bool((T8 >= 2.0**-126).all() & torch.isfinite(T8).all()):
        raise ValueError("zyfa-folded needs 8 t = 8 softmax_scale log2(e) q_descale k_descale to be a normal "
                         "fp32 number (its power of two is an E8M0 scale)")
    mant, exp = torch.frexp(T8)  # T8 = mant 2^exp, mant in [0.5, 1)
    a = torch.where(mant == 0.5, exp - 1, exp)
    g = torch.ldexp(T8, -a.to(torch.float32))  # exact, in (0.5, 1]
    q_folded = round_e4m3(q.to(torch.float32) * g).to(torch.float64)
    return q_folded, torch.ldexp(torch.ones_like(T8, dtype=torch.float64), a.to(torch.float64))


def _forward_folded(ops: _Operands, headroom: int = FOLD_HEADROOM, on_codes=None):
    """zyfa-folded (docs/numerics.md, "Folded Lean P"): per 128-key tile the QK MFMAs start from
    ``off = 120.5 - 8 ref`` and produce the Lean P argument ``y`` directly; one check per tile on
    the row max of ``y`` sends rows whose ``y`` would overflow the e4m3 code (or that still sit at
    the initial reference) to a fix-up that moves ``ref`` by a whole number ``d`` of doublings
    (``FOLD_HEADROOM`` above the tile's maximum), subtracts ``8 d`` from ``y`` and rescales O and
    l by ``2^-d``. O and l accumulate P unscaled
    (``m = ref - 8`` in the epilogue). ``headroom`` (doublings, an int >= 0) is the fix-up's target
    below the overflow: the recipe is ``FOLD_HEADROOM``, other values are what-ifs for the headroom
    study (benchmarks/v2_rescale_rate.py ``--fold-headroom``). ``on_codes(r0, k0, code, allowed)``,
    if given, sees each tile's e4m3 codes. Returns (out, lse, ref - 8, l)."""
    shape = (*ops.shape, ops.sq)
    dev = ops.q.device
    ref = torch.full(shape, FOLD_REF0, dtype=torch.float32, device=dev)
    l = torch.zeros(shape, dtype=torch.float32, device=dev)
    acc = torch.zeros(*shape, ops.v.shape[-1], dtype=torch.float32, device=dev)
    nan_rows = torch.zeros(shape, dtype=torch.bool, device=dev)
    q_folded, scale = fold_q(ops.q, 8.0 * ops.t)
    d_model = ops.q.shape[-1]
    for k0 in range(0, ops.sk, FOLD_TILE):
        r0 = ops.first_row(k0)
        if r0 >= ops.sq:
            break
        kt = ops.k[..., k0:k0 + FOLD_TILE, :]
        keys = kt.shape[-2]
        off = (LEANP_BIAS - 8.0 * ref[..., r0:]).to(torch.float32)  # exact while |ref| <= 2^14
        y = off[..., None].expand(*off.shape, keys)
        for c0 in range(0, d_model, FOLD_CHUNK):  # one fp32 rounding per QK MFMA, in head-dim order
            part = torch.matmul(q_folded[..., r0:, c0:c0 + FOLD_CHUNK], kt[..., c0:c0 + FOLD_CHUNK].transpose(-1, -2))
            y = (y.to(torch.float64) + part * scale[..., r0:, :]).to(torch.float32)
        allowed = torch.cat([ops.allowed(r0, k) for k in range(k0, k0 + keys, ops.block)], dim=-1)
        mask = _Mask(allowed)
        y = mask.fill_(y.clone(), -math.inf)
        live = y.amax(dim=-1)  # NaN-propagating, as v_maximum3_f32
        M = torch.maximum(live, torch.tensor(FOLD_FLOOR, dtype=torch.float32))  # the kernel's chain holds -HALF
        nan_rows[..., r0:] |= torch.isnan(M)
        accepted = (M - FOLD_MID).abs() < FOLD_HALF  # fp32 subtraction, as the kernel's check
        fix = ~accepted  # NaN rows too (M is never -inf: the floor): d = NaN makes their codes 0
        if bool(fix.any()):
            d = torch.where(fix, torch.ceil((M - (LEANP_BIAS - 8.0 * headroom)) * 0.125), 0.0)
            ref_new = ref[..., r0:] + d
            unreached = fix & (ref_new.abs() > FOLD_LIMIT)
            if bool(unreached.any()):
                raise ValueError(f"log2-domain scores reach {float((ref_new[unreached]).abs().max()):.3g}: outside the "
                                 "zyfa-folded range |t * s| <= 2^13 (docs/numerics.md, Folded Lean P)")
            ref[..., r0:] = ref_new
            y = fma_f32(d[..., None], torch.tensor(-8.0), y)
            e = torch.where(torch.isnan(d), 0.0, d)  # the kernel's v_cvt_i32_f32(NaN) = 0
            acc[..., r0:, :] = _ldexp_f32(acc[..., r0:, :], -e[..., None])
            l[..., r0:] = _ldexp_f32(l[..., r0:], -e)
        stuck = torch.isfinite(live) & (ref[..., r0:] == FOLD_REF0)
        if bool(stuck.any()):
            raise ValueError("a row's tile max is too large for zyfa-folded's initial reference (|t * s| >= 2^13; "
                             "docs/numerics.md, Folded Lean P)")
        code = torch.where(y >= 0, torch.trunc(y).clamp(max=E4M3_MAX_CODE), 0.0).to(torch.uint8)
        if on_codes is not None:
            on_codes(r0, k0, code, allowed)
        P = code.view(torch.float8_e4m3fn).to(torch.float64)
        for b0 in range(0, keys, KEY_BLOCK):
            sl = slice(b0, b0 + KEY_BLOCK)
            pv = masked_pv(P[..., sl], allowed[..., sl], ops.v[..., k0 + b0:k0 + b0 + KEY_BLOCK, :]).to(torch.float32)
            acc[..., r0:, :] += pv  # P unscaled: P ~ 2^(t s - ref + 8), so m = ref - 8 below
            l[..., r0:] += _tree_sum(P[..., sl]).to(torch.float32)
    return _epilogue(ops, acc, l, ref - 8.0, nan_rows)


def _to_bshd(x: torch.Tensor) -> torch.Tensor:
    b, hk, g, s = x.shape[:4]
    return x.reshape(b, hk * g, s, *x.shape[4:]).transpose(1, 2)


def _check_fp8_inputs(q8, k8, v8, q_descale, k_descale, v_descale, softmax_scale, variant, rounding, block,
                      group=1):
    for name, x in (("q8", q8), ("k8", k8), ("v8", v8)):
        _check_bshd(name, x)
        if x.dtype != torch.float8_e4m3fn:
            raise TypeError(f"{name} must be float8_e4m3fn, got {x.dtype}")
    b, _, h, d = q8.shape
    if k8.shape[0] != b or v8.shape[0] != b or k8.shape[1] != v8.shape[1] or k8.shape[2] != v8.shape[2]:
        raise ValueError(f"incompatible shapes q8={tuple(q8.shape)}, k8={tuple(k8.shape)}, v8={tuple(v8.shape)}")
    if k8.shape[3] != d:
        raise ValueError(f"q8 and k8 must have the same headdim, got {d} and {k8.shape[3]}")
    hk = k8.shape[2]
    if hk == 0 or h % hk != 0:
        raise ValueError(f"nheads of q8 ({h}) must be a multiple of nheads of k8/v8 ({hk})")
    descales = []
    for name, ds in (("q_descale", q_descale), ("k_descale", k_descale), ("v_descale", v_descale)):
        if ds is None:
            ds = torch.ones(b, hk, dtype=torch.float32, device=q8.device)
        shapes = ((b, hk), (b, q8.shape[1], h)) if name == "q_descale" else ((b, hk),)
        if not isinstance(ds, torch.Tensor) or ds.dtype != torch.float32 or tuple(ds.shape) not in shapes:
            allowed = " or (batch, seqlen_q, nheads) per token" if name == "q_descale" else ""
            raise ValueError(f"{name} must be a float32 tensor of shape (batch, nheads_k) = {(b, hk)}{allowed}, "
                             f"got {getattr(ds, 'dtype', type(ds).__name__)} {tuple(getattr(ds, 'shape', ()))}")
        if not bool((torch.isfinite(ds) & (ds > 0)).all()):
            raise ValueError(f"{name} must be positive and finite")
        descales.append(ds)
    if softmax_scale is None:
        softmax_scale = d ** -0.5
    if not (isinstance(softmax_scale, (int, float)) and math.isfinite(softmax_scale) and softmax_scale > 0):
        raise ValueError(f"softmax_scale must be a positive finite number, got {softmax_scale!r}")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    if variant == "zyfa-folded" and (rounding != "trunc" or block != KEY_BLOCK):
        raise ValueError("variant 'zyfa-folded' is specified with rounding='trunc' and block=64 only")
    if variant == "zyfa-v2" and rounding != "trunc":
        raise ValueError("variant 'zyfa-v2' is specified with rounding='trunc' only (its FMA constant is "
                         "fractional, so the magic-number rounding does not apply)")
    if not isinstance(block, int) or block <= 0 or block & (block - 1):
        raise ValueError(f"block must be a positive power of two (the spec uses 64), got {block!r}")
    if not isinstance(group, int) or isinstance(group, bool) or group <= 0:
        raise ValueError(f"group must be a positive int (blocks per group), got {group!r}")
    if group != 1 and variant != "zyfa-grouped":
        raise ValueError(f"group={group} applies to variant 'zyfa-grouped' only, got variant {variant!r}")
    return descales, float(softmax_scale)


def _score_scale(softmax_scale: float, dq: torch.Tensor, dk: torch.Tensor) -> torch.Tensor:
    """t = fp32(fp32(softmax_scale * LOG2E) * fp32(dq * dk)), per (batch, kv head): (b, hk).

    A per-token ``dq`` (b, sq, h) gives one t per query row, (b, hk, group, sq, 1): the per-token Q
    scale folds into the per-row constants (t, 8t) at no per-element cost.
    """
    c = torch.tensor(softmax_scale, dtype=torch.float32) * torch.tensor(LOG2E_F32, dtype=torch.float32)
    if dq.dim() == 3:
        b, sq, h = dq.shape
        hk = dk.shape[1]
        dq = dq.permute(0, 2, 1).reshape(b, hk, h // hk, sq, 1)
        dk = dk.reshape(b, hk, 1, 1, 1)
    return c.to(dq.device) * (dq * dk)


def _fp8_operands(q8, k8, v8, q_descale, k_descale, v_descale, causal, softmax_scale, variant, rounding, block,
                  group=1):
    (dq, dk, dv), scale = _check_fp8_inputs(q8, k8, v8, q_descale, k_descale, v_descale,
                                            softmax_scale, variant, rounding, block, group)
    return _Operands(q8, k8, v8, _score_scale(scale, dq, dk), dv, bool(causal), block, group)


def zyfa_fp8_attention(q8, k8, v8, q_descale=None, k_descale=None, v_descale=None, causal=True,
                       softmax_scale=None, variant="zyfa", rounding="trunc", block=KEY_BLOCK,
                       out_dtype=torch.bfloat16, group=1):
    """FP8 attention forward with the ZYFA numerics (docs/numerics.md), bit-exact.

    Arguments:
        q8: (batch, seqlen_q, nheads, headdim) float8_e4m3fn; k8: (batch, seqlen_k, nheads_k,
            headdim); v8: (batch, seqlen_k, nheads_k, headdim_v). GQA when nheads_k < nheads.
        q_descale, k_descale, v_descale: float32 (batch, nheads_k) (FA3 convention); None = 1.
            ``q_descale`` may also be per token, (batch, seqlen_q, nheads).
        causal: bottom-right aligned causal mask (query i sits at key i + seqlen_k - seqlen_q).
        softmax_scale: default headdim ** -0.5.
        variant: "zyfa-v2" (spec v2: hybrid phi offset, unbiased FMA constant), "zyfa" /
            "zyfa-v1" / "leanp" (spec v1 steps 1-5; identical numerics: the Hadamard of full ZYFA
            happens at quantisation), "zyfa-folded" (Lean P folded into the QK MFMA: the recipe
            of the gfx950 kernel zyfa-fp8), "zyfa-runmax" (v1's codes against the row's running
            max per block; with ``block=128`` the recipe of the Hopper kernel's ``runmax``
            variant), "zyfa-grouped" (zyfa-runmax inside groups of ``group`` blocks, each group
            merged like a v1 block; ``group=1`` is v1; with ``block=128`` the recipe of the Hopper
            kernel's ``grouped`` variant), "roundedsum", "blockscale", "naive" (the spec's ablations).
            The default stays "zyfa" (v1), which the gfx950 kernels and their functional
            emulation implement; ``flash_attn_func`` picks by its ``recipe`` argument.
        rounding: Lean P convert, "trunc" (gfx950) or "magic" (Hopper); zyfa-v2: "trunc" only.
        block: keys per block (64 in the spec).
        out_dtype: torch.bfloat16 (the spec) or torch.float32 (``fp32(acc / l) * dv`` before
            the bf16 rounding, for kernel conformance tests).
        group: zyfa-grouped only: blocks per group (groups aligned to key 0); 1 elsewhere.

    Returns:
        out: (batch, seqlen_q, nheads, headdim_v) ``out_dtype``; softmax_lse: (batch, nheads,
        seqlen_q) float32, natural log. Rows with no allowed key: out 0, lse +inf.
    """
    if out_dtype not in (torch.bfloat16, torch.float32):
        raise ValueError(f"out_dtype must be torch.bfloat16 or torch.float32, got {out_dtype}")
    ops = _fp8_operands(q8, k8, v8, q_descale, k_descale, v_descale, causal, softmax_scale,
                        variant, rounding, block, group)
    if variant == "zyfa-folded":
        out, lse, _, _ = _forward_folded(ops)
    else:
        out, lse, _, _ = _forward(ops, variant, rounding, round_e4m3)
    return _to_bshd(out).to(out_dtype), lse.reshape(lse.shape[0], lse.shape[1] * lse.shape[2], ops.sq)


def bf16_attention(q, k, v, causal=True, softmax_scale=None, block=KEY_BLOCK):
    """BF16 flash-attention numerics: inputs rounded to bf16, fp32 scores and online softmax
    (exp2, running max), P rounded to bf16 for P @ V, fp32 accumulate, bfloat16 output.

    Shapes as :func:`zyfa_fp8_attention`; returns (out bfloat16, lse float32).
    """
    q, k, v = (x.to(torch.bfloat16) for x in (q, k, v))
    ops = _bf16_operands(q, k, v, causal, softmax_scale, block)
    out, lse, _, _ = _forward(ops, "bf16", "trunc", _round_bf16)
    return _to_bshd(out).to(torch.bfloat16), lse.reshape(lse.shape[0], lse.shape[1] * lse.shape[2], ops.sq)


def _round_bf16(p: torch.Tensor) -> torch.Tensor:
    return p.to(torch.bfloat16).to(torch.float32)


def _bf16_operands(q, k, v, causal, softmax_scale, block):
    for name, x in (("q", q), ("k", k), ("v", v)):
        _check_bshd(name, x)
    b, hk = k.shape[0], k.shape[2]
    if q.shape[2] % hk or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"incompatible shapes q={tuple(q.shape)}, k={tuple(k.shape)}")
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else float(softmax_scale)
    ones = torch.ones(b, hk, dtype=torch.float32, device=q.device)
    return _Operands(q, k, v, _score_scale(scale, ones, ones), ones, bool(causal), block)


# -- attention-row KL divergence against fp64 -----------------------------------------------------

def _reference_log2_probs(q64, k64, ops: _Operands, softmax_scale: float):
    """Blockwise fp64 log2-probabilities of the unquantised inputs, per key block (two passes)."""
    def blocks():
        for k0 in range(0, ops.sk, ops.block):
            r0 = ops.first_row(k0)
            if r0 >= ops.sq:
                break
            allowed = ops.allowed(r0, k0)
            kb = k64[..., k0:k0 + ops.block, :]
            x = torch.matmul(q64[..., r0:, :], kb.transpose(-1, -2)) * (softmax_scale / math.log(2.0))
            yield r0, x.masked_fill(~allowed, -math.inf)

    m = torch.full((*ops.shape, ops.sq), -math.inf, dtype=torch.float64, device=q64.device)
    l = torch.zeros_like(m)
    for r0, x in blocks():
        m_new = torch.maximum(m[..., r0:], x.amax(dim=-1))
        l[..., r0:] = l[..., r0:] * torch.exp2(m[..., r0:] - m_new) + torch.exp2(x - m_new[..., None]).sum(-1)
        m[..., r0:] = m_new
    lse2 = m + torch.log2(l)
    for r0, x in blocks():
        yield x - lse2[..., r0:, None]


def attention_row_kl(q, k, v, q8, k8, v8, q_descale=None, k_descale=None, v_descale=None,
                     causal=True, softmax_scale=None, variant="zyfa", rounding="trunc",
                     block=KEY_BLOCK, group=1) -> float:
    """Mean over rows of the generalised KL divergence D(P_emu || P_ref) of attention rows
    (the ``kl`` of :func:`attention_row_stats`, which documents the arguments)."""
    return attention_row_stats(q, k, v, q8, k8, v8, q_descale, k_descale, v_descale, causal,
                               softmax_scale, variant, rounding, block, group)["kl"]


def attention_row_stats(q, k, v, q8, k8, v8, q_descale=None, k_descale=None, v_descale=None,
                        causal=True, softmax_scale=None, variant="zyfa", rounding="trunc",
                        block=KEY_BLOCK, group=1) -> dict:
    """One run of ``variant`` and its attention rows compared with fp64 ones: a dict with

    - ``out`` (bfloat16, as :func:`zyfa_fp8_attention` / :func:`bf16_attention` return it),
      ``lse`` (float32 (b, h, sq));
    - ``kl``: mean over rows of the generalised KL divergence D(P_emu || P_ref) (below);
    - ``flushed``: mean over rows of the reference attention mass on allowed keys whose P the
      variant rounded to 0 (flushed to zero by the e4m3 rounding or the Lean P clamp).

    ``P_ref``: fp64 softmax of the unquantised ``q, k`` (b, s, h, d); ``P_emu``: the effective
    weights of the variant run on ``q8, k8, v8`` (or on bf16-rounded ``q, k, v`` when
    ``variant="bf16"``): the rounded block probabilities times their block scale, divided by the
    row's final ``l``. Per row ``D = sum_j p log(p / r) - p + r`` (``p`` emu, ``r`` ref; 0 log 0 = 0),
    which is the KL divergence when ``p`` sums to 1 and stays >= 0 when it does not (naive FP8
    normalises by the unrounded sum). Finite even where FP8 flushes probabilities to zero. Rows
    with no allowed key are skipped. Two passes over the keys (the weights need the final l).
    """
    if variant == "bf16":
        qb, kb, vb = (x.to(torch.bfloat16) for x in (q, k, v))
        ops = _bf16_operands(qb, kb, vb, causal, softmax_scale, block)
        p_round = _round_bf16
    else:
        ops = _fp8_operands(q8, k8, v8, q_descale, k_descale, v_descale, causal, softmax_scale,
                            variant, rounding, block, group)
        p_round = round_e4m3
    _check_bshd("q", q)
    _check_bshd("k", k)
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else float(softmax_scale)
    b, hk, g = ops.shape
    q64 = q.to(torch.float64).permute(0, 2, 1, 3).reshape(b, hk, g, ops.sq, -1)
    pad = -ops.sk % block
    k64 = torch.nn.functional.pad(k.to(torch.float64), (0, 0, 0, 0, 0, pad)).permute(0, 2, 1, 3)[:, :, None]
    out, lse, m, l = _forward(ops, variant, rounding, p_round)
    kl = torch.zeros(*ops.shape, ops.sq, dtype=torch.float64, device=q64.device)
    flushed = torch.zeros_like(kl)
    for (r0, _, P, _, scale_exp, allowed, _), ref in zip(_blocks(ops, variant, rounding, p_round),
                                                   _reference_log2_probs(q64, k64, ops, scale)):
        if isinstance(scale_exp, tuple):  # zyfa-v2: (e, M) -> the block's P carries 2^(e + M) (float64: exact)
            scale_exp = scale_exp[0].to(torch.float64) + scale_exp[1].to(torch.float64)
        log2_w = (scale_exp.to(torch.float64) - m[..., r0:].to(torch.float64)) - torch.log2(l[..., r0:].to(torch.float64))
        p = P.to(torch.float64) * torch.exp2(log2_w)[..., None]
        r = torch.exp2(ref)
        term = torch.where(p > 0, p * (torch.log(p) - ref * math.log(2.0)), 0.0) - p + r
        kl[..., r0:] += term.sum(-1)
        flushed[..., r0:] += torch.where((P == 0) & allowed, r, 0.0).sum(-1)
    rows = l > 0
    any_rows = bool(rows.any())
    return {"out": _to_bshd(out).to(torch.bfloat16), "lse": lse.reshape(lse.shape[0], -1, ops.sq),
            "kl": float(kl[rows].mean()) if any_rows else 0.0,
            "flushed": float(flushed[rows].mean()) if any_rows else 0.0}


# -- the "emulator" backend -------------------------------------------------------------------------

def _emulator_unsupported(args: AttentionArgs) -> Optional[str]:
    if not args.is_fp8:
        return f"runs float8_e4m3fn inputs only (the ZYFA FP8 numerics), got {args.q.dtype}"
    if args.is_local:
        return "sliding-window attention is not part of the ZYFA numerics spec"
    if args.softcap > 0:
        return "softcap is not part of the ZYFA numerics spec"
    if args.alibi_slopes is not None:
        return "ALiBi is not part of the ZYFA numerics spec"
    if args.q.device.type == "mps":
        return "needs float64 (exact dot products), which MPS lacks"
    return None


def _emulator_forward(args: AttentionArgs):
    if args.q.device.type == "meta":  # no data: shapes and dtypes only (torch.compile / shape inference)
        out = torch.empty(*args.q.shape[:3], args.headdim_v, dtype=torch.bfloat16, device="meta")
        return out, torch.empty(args.batch, args.nheads, args.seqlen_q, dtype=torch.float32, device="meta")
    return zyfa_fp8_attention(args.q, args.k, args.v, args.q_descale, args.k_descale, args.v_descale,
                              causal=args.causal, softmax_scale=args.softmax_scale, variant=args.recipe)


register_backend(
    Backend(
        name="emulator",
        forward=_emulator_forward,
        unsupported=_emulator_unsupported,
        priority=5,
        description="bit-exact torch emulator of the ZYFA FP8 numerics (docs/numerics.md), any device",
        recipes=RECIPES,
    )
)
