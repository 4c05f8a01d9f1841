"""Fused (RoPE +) Walsh-Hadamard rotation + FP8 (e4m3) quantisation of Q or K, in Triton.

Computes exactly what the torch path computes, ``zyfa.numerics.quantize_fp8(zyfa.numerics.hadamard(x),
granularity, nheads_k)``, in one kernel (per token) or two (per (batch, kv head)); with RoPE tables
(``cos=``, ``sin=``) ``quantize_fp8(hadamard(rope(x, cos, sin)))``, so that the RoPE pass a model
runs anyway also rotates and quantises (:func:`rope_rows` is that RoPE pass alone, the baseline):

* RoPE (optional): half-split pairing (channel f with f + D/2), ``(a cos - b sin, b cos + a sin)`` in
  fp32, each product and sum rounded on its own (kernels launched with ``enable_fp_fusion=False``;
  tests/kernels/triton/test_hadamard_layout.py checks the PTX has no FMA there);
* rotation: the same radix-2 butterflies in the same order, in fp32 (``a + b``, ``a - b`` per stage),
  then one multiply by ``fp32(1 / sqrt(d))``;
* ``granularity="token"``: one program holds whole rows, so the row's amax, ``descale = amax / 448``
  (1 for an all-zero row) and the quantisation happen in the same pass: x is read once, the FP8
  codes written once;
* ``granularity="head"``: pass 1 rotates and reduces the amax of each (batch, kv head) into a
  buffer (``atomic_max``; max is order-independent, so the result is deterministic); pass 2 rotates
  again, computes the descale and quantises. x is read twice (recomputing beats writing and
  re-reading the rotated fp32 tensor).

Layout: a row is loaded as D/8 chunks of 8 channels, tensor ``[D/8, rows, 8]``, so that with
``rows = 32 * num_warps`` each thread holds whole rows: the three stages inside a chunk and the
log2(D/8) stages across chunks are register-only adds (no lane shuffles), and the row amax is a
per-thread max. (Loaded as ``[rows, D]``, Triton spread a row over 8-128 lanes: 41-57 instructions
per element, half of them shuffles and layout conversions; this layout: ~21, compiled for sm_90
on the CPU box.) H200 run 15 (b1 s16k h32 d128 bf16, Q + K): per head 0.58 ms with 128 rows x 4
warps (one row per thread; 0.61 ms with 64 x 4), per token 0.47 ms with 64 rows x 4 warps (two
threads per row; 0.60 ms with 128 x 4: a warp reading 32 whole rows touches 32 rows' 16-byte
pieces per load), 2.4x / 1.9x run 10's kernel in the same process; the defaults follow. Both
are still 3.5-4.3x a bf16 -> fp8 cast of the same tensors (0.134 ms, 3.0 TB/s), not at the
bandwidth floor. H200 run 27, the same launches against ``rotate=False`` (the quantisation alone)
in one process: per head 0.295 -> 0.482 ms, per token 0.367 -> 0.522 ms, i.e. the butterflies add
0.19 / 0.16 ms, 4.1 % / 3.4 % of that run's Triton FP8 attention (4.53 ms at b1 h32 s16K d128
causal). That marginal cost is what a "<= 0.5 % of the attention" goal can refer to (no separate
pass can: the cast alone is 2.95 %); it is not met.

H200 run 16 (``benchmarks/fused_rope_quant.py``, one process, Q + K, b1 s16K h32 d128 bf16, RoPE
fused): runs 15-27 timed the op with its host check of the descales (``bool(isfinite(...).all())``,
a synchronisation the RoPE pass and the cast do not pay); without it (``check_finite=False``, the
same kernel) per head 0.590 -> 0.388 ms, per token 0.739 -> 0.380 ms, i.e. +0.210 / +0.201 ms over
the Triton RoPE pass (0.178 ms) = 4.7 % / 4.5 % of that run's Triton FP8 attention (4.495 ms, v1):
still 9x the 0.5 % goal. ncu on the per-token kernel (Q alone, 64 rows x 4 warps): 188 us against
the RoPE pass's 82 us; 176 registers allow 2 programs (8 warps) per SM, 12.5 % occupancy, so each
warp issues every 4.2 cycles and the issue slots are 45 % busy, DRAM 23 % (the RoPE pass: 80
registers, 37.5 %, DRAM 70 %); it executes ~42 instructions per element (IPC x active cycles x
132 SMs / elements), the RoPE pass ~12, so even at the full 4 instructions per cycle per SM the
instructions alone would take ~84 us, the RoPE pass's whole time. Occupancy (registers) and the
instruction count bind, not bandwidth. The ``tables_x`` variants (below) were slower: per token
0.429 ms (64 rows) and 0.73 ms (128 rows, 255 registers), per head 0.62 / 4.3 ms; dropping the
clamp saved 0.011 ms.

Variant ``"rows"`` (timed in H200 run 32, ``benchmarks/results/h200_run32/``: per token at 64 rows x
2 warps 0.2132 ms, Q + K, no host check, +1.06 % of v1's attention over the fastest RoPE pass; the
default with RoPE since, see ``DEFAULT_ROPE_LAUNCH``): one row per thread, held as D/4 pieces of 4 channels, so that every op
is elementwise on tensors of one layout in Triton 3.6 (the H200's) and 3.9 alike; details at
``_hadamard_fp8_token_rows`` (per token) and ``_hadamard_amax_head_rows`` (per head, two passes). ``tools/hadamard_sass.py`` (sm_90a, compiled on the CPU box, static SASS
per element, d128, RoPE): 20.0 per element with 168 registers, no spill, no shuffle, no shared-memory
conversion, under both versions, where run25's kernel counts 60.5 with 180 registers under 3.6
(its static count holds the per-element div_rn copy for tiny descales; ncu measured ~42 executed);
per head, both passes together, 32.7 against 73.4 (3.9).
The floor for this arithmetic bit for bit is 16.5 per element (RoPE 3, butterflies 7 and the scale
1, amax 1, Markstein 3, widening 1, convert 0.5). The rotation stays butterflies: one MMA with a +-1
matrix (H_128 = H_8 (x) H_16) would not be bit-identical, as the butterflies round between stages
(tests/zyfa/test_numerics.py shows a bf16 row where they differ from the exact sum), and after RoPE
the operands are fp32, which no tensor-core input type holds.

Non-finite input is found without a pass of its own: the maxima propagate NaN, so a NaN or inf
makes its row's (group's) descale non-finite, and the wrapper checks the small descale tensor.
Divisions are IEEE, as ``quantize_fp8`` divides on every device: the descale by ``div_rn``; the
quotient ``x / descale`` of every element by Markstein's correction (``r = RN(1/descale)``,
``q = RN(x r)``, ``q' = RN(q + RN(x - q descale) r)`` with two FMAs), which is the correctly
rounded quotient for normal operands (Markstein's theorem; tests/kernels/triton/test_markstein.py
checks it in exact rational arithmetic) and costs 3 instructions instead of ``div_rn``'s ~14.
Where it is not exact (a subnormal x, quotients below 2^-100) the e4m3 code is 0 either way; a
block whose descale is below 2^-100 (its reciprocal could overflow) divides with ``div_rn``.
The fp32 -> e4m3 convert is the hardware's round-to-nearest-even (``clamp(q, -448, 448)`` first,
so saturation never decides). Headdim: a power of two (16 to 256); other widths (MLA's 192 =
3 x 64 blocks) go through the torch path. The Triton attention kernels take the result unchanged
(FP8 codes + FA3 descales); the per-token Q descale (batch, seqlen, nheads) is accepted by the
emulator only so far.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from zyfa.kernels.triton._common import interpreting

E4M3_MAX = 448.0
GRANULARITIES = ("head", "token")
# default launch (H200 run 15, see above): 4 warps; rows per program by granularity
NUM_WARPS = 4
BLOCK_S = {"head": 128, "token": 64}
# with RoPE (cos= / sin=): 128 rows per 4 warps (one row per thread) needs 255 registers and spills
# per head (ptxas for sm_90a, CPU box: 44 / 28 bytes spill stores in the amax / quantise kernels;
# 64 rows: 138 / 140 registers, no spills; per token 64 rows: 165, no spills). H200 run 25 timed the
# 128-row launch per head; this default was chosen from those counts, and H200 run 16 timed it
# faster (Q + K, no host check: per head 0.388 vs 0.482 ms, per token 0.380 vs 0.421 ms)
BLOCK_S_ROPE = {"head": 64, "token": 64}
CHUNK = 8  # channels per chunk: one 16-byte bf16 load per thread
# kernel variants (tests/kernels/triton/triton_interp_cases.py checks each against the torch path; on
# the H200, run 16, all matched bit for bit on 16K random Q and K, and the GPU test's zero token
# failed both tables_x ones, see _rope_chunks; "run25", the default, is the fastest there):
# constexpr flags. TABLES_X: the RoPE tables are read as x's [D/8, rows, 8] tensor (chunk c and
# c + D/16 read the same table chunk, the second load an L1 hit) so that they get x's register
# layout; "run25" reads them as [D/16, rows, 8] fp32, which Triton lays out unlike x's bf16 and
# converts through shared memory (ptxas for sm_90a, CPU box, per token 128 rows x 4 warps: 65
# barriers and 96 bytes of spill stores; TABLES_X: 1 barrier, no spill). CLAMP: clamp to +-448
# before the fp32 -> e4m3 convert; without it the convert's own saturation (cvt.rn.satfinite)
# gives the same codes (finite input: the wrapper rejects the rest), two instructions fewer per
# element. The interpreter path always clamps (its host cast has no saturation). SIGN_BITS: the
# quotient's sign copied from y's sign bit (one LOP3) instead of ``where(y == 0, y, ...)`` (a
# compare and a select) to keep -0's code 0x80. "lean" (prepared after run 16, timed in run 32: per
# head under maxnreg 128 the fastest, 0.3756 ms Q + K):
# run 25's layout, no clamp, SIGN_BITS: two to three instructions fewer per element of the ~42 the
# per-token kernel executes (ncu, run 16).
# "rows" (built after run 16; H200 run 32: bit-identical, the fastest per token): its own kernels, one
# row per thread, see _hadamard_fp8_token_rows and _hadamard_amax_head_rows.
# "pairs" (built after run 32, counted for sm_90a, not timed): "rows" with each row in two threads,
# see _hadamard_fp8_token_pairs; ROWS is set (the same wrapper path, RoPE pass and flags), PAIRS picks
# its kernels.
VARIANTS = {"run25": dict(TABLES_X=False, CLAMP=True, SIGN_BITS=False, ROWS=False, PAIRS=False),
            "tables_x": dict(TABLES_X=True, CLAMP=True, SIGN_BITS=False, ROWS=False, PAIRS=False),
            "tables_x_noclamp": dict(TABLES_X=True, CLAMP=False, SIGN_BITS=False, ROWS=False, PAIRS=False),
            "lean": dict(TABLES_X=False, CLAMP=False, SIGN_BITS=True, ROWS=False, PAIRS=False),
            "rows": dict(TABLES_X=False, CLAMP=False, SIGN_BITS=False, ROWS=True, PAIRS=False),
            "pairs": dict(TABLES_X=False, CLAMP=False, SIGN_BITS=False, ROWS=True, PAIRS=True)}
DEFAULT_VARIANT = "run25"  # H200 run 16: per token 0.380 ms vs tables_x 0.429 ms (64 rows, Q + K)
# The default launch with RoPE tables at headdim <= 128 (``variant=None``): (variant, rows per program,
# warps, maxnreg) by granularity, the fastest bit-identical launches of H200 run 32
# (benchmarks/results/h200_run32/, Q + K at b1 h32 s16K d128 bf16, no host check): per token "rows",
# 64 rows x 2 warps, 0.2132 ms (run25 at 64 x 4, the default before: 0.3787 ms); per head "lean", 64
# rows x 4 warps under a cap of 128 registers, 0.3756 ms (run25 64 x 4: 0.3847 ms). Without RoPE, and
# at headdim 256 (where "rows" spills: 255 registers, 1100 bytes, sm_90a on the CPU box), DEFAULT_VARIANT
# with BLOCK_S / BLOCK_S_ROPE at NUM_WARPS as before: rows and lean were not timed there.
DEFAULT_ROPE_LAUNCH = {"token": ("rows", 64, 2, None), "head": ("lean", 64, 4, 128)}
TINY_DESCALE: tl.constexpr = tl.constexpr(2.0 ** -100)  # below it the block divides with div_rn (1 / descale could overflow)
TINY_SCALE: tl.constexpr = tl.constexpr(2.0 ** 64)  # "rows": such a row divides hn 2^64 by descale 2^64 instead
_INTERPRET = interpreting()


@triton.jit
def _max_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _butterfly_in_chunk(x, C: tl.constexpr, BLOCK_S: tl.constexpr, J: tl.constexpr, HALF: tl.constexpr):
    """One radix-2 stage on channels (i, i + HALF) inside each chunk of J: (a + b, a - b)."""
    y = tl.reshape(x, [C, BLOCK_S, J // (2 * HALF), 2, HALF])
    a, b = tl.split(tl.permute(y, (0, 1, 2, 4, 3)))
    return tl.reshape(tl.permute(tl.join(a + b, a - b), (0, 1, 2, 4, 3)), [C, BLOCK_S, J])


@triton.jit
def _butterfly_across_chunks(x, C: tl.constexpr, BLOCK_S: tl.constexpr, J: tl.constexpr, HALF: tl.constexpr):
    """One radix-2 stage on chunks (c, c + HALF), i.e. channels (i, i + HALF * J): (a + b, a - b)."""
    y = tl.reshape(x, [C // (2 * HALF), 2, HALF, BLOCK_S, J])
    a, b = tl.split(tl.permute(y, (0, 2, 3, 4, 1)))
    return tl.reshape(tl.permute(tl.join(a + b, a - b), (0, 4, 1, 2, 3)), [C, BLOCK_S, J])


@triton.jit
def _rotate(x, C: tl.constexpr, BLOCK_S: tl.constexpr, J: tl.constexpr, INV_SQRT_D: tl.constexpr):
    """Orthonormal Walsh-Hadamard transform of each row of x [C, BLOCK_S, J] (channel c * J + j,
    fp32), Sylvester order, stage by stage as zyfa.numerics.hadamard: half = 1, 2, 4 inside the
    chunks, then J, 2J, ... across them."""
    x = _butterfly_in_chunk(x, C, BLOCK_S, J, 1)
    x = _butterfly_in_chunk(x, C, BLOCK_S, J, 2)
    x = _butterfly_in_chunk(x, C, BLOCK_S, J, 4)
    x = _butterfly_across_chunks(x, C, BLOCK_S, J, 1)
    if C > 2:
        x = _butterfly_across_chunks(x, C, BLOCK_S, J, 2)
    if C > 4:
        x = _butterfly_across_chunks(x, C, BLOCK_S, J, 4)
    if C > 8:
        x = _butterfly_across_chunks(x, C, BLOCK_S, J, 8)
    if C > 16:
        x = _butterfly_across_chunks(x, C, BLOCK_S, J, 16)
    return x * INV_SQRT_D


@triton.jit
def _offsets(off_b, off_h, offs_s, stride_b, stride_s, stride_h, D: tl.constexpr, J: tl.constexpr):
    """Element offsets [D / J, BLOCK_S, J] of rows offs_s of (batch off_b, head off_h)."""
    col = tl.arange(0, D // J)[:, None, None] * J + tl.arange(0, J)[None, None, :]
    return off_b * stride_b + off_h * stride_h + offs_s[None, :, None] * stride_s + col


@triton.jit
def _rope_chunks(x, COS, SIN, offs_s, stride_cs, S, C: tl.constexpr, BLOCK_S: tl.constexpr, J: tl.constexpr,
                 TABLES_X: tl.constexpr):
    """RoPE of each row of x [C, BLOCK_S, J] (fp32), half-split pairing: channel f with f + D/2, i.e.
    chunk c with chunk c + C/2 at the same lane j (no data leaves its thread). ``COS``, ``SIN``:
    fp32 (S, D/2) tables, row = position. ``(a cos - b sin, b cos + a sin)``, products and sums
    rounded on their own (the launch turns FP contraction off), as zyfa.numerics.rope.
    ``TABLES_X``: the tables read as [C, BLOCK_S, J] (both halves of a row read table chunk c mod
    C/2, so they take x's layout), and ``x cos - x' sin`` with the partner x' = (b, -a): the first
    half is ``a cos - b sin``, the second ``b cos - (-a) sin``, which is ``b cos + a sin`` bit for
    bit (negation is exact and ``u - (-v)`` is ``u + v`` in IEEE arithmetic)."""
    if TABLES_X:
        col = (tl.arange(0, C)[:, None, None] % (C // 2)) * J + tl.arange(0, J)[None, None, :]
    else:
        col = tl.arange(0, C // 2)[:, None, None] * J + tl.arange(0, J)[None, None, :]
    ptrs = offs_s[None, :, None] * stride_cs + col
    cos = tl.load(COS + ptrs, mask=offs_s[None, :, None] < S, other=0.0)
    sin = tl.load(SIN + ptrs, mask=offs_s[None, :, None] < S, other=0.0)
    a, b = tl.split(tl.permute(tl.reshape(x, [2, C // 2, BLOCK_S, J]), (1, 2, 3, 0)))
    if TABLES_X:
        # a * -1.0, not -a: Triton 3.6 (the H200's) lowers a float's unary minus to 0 - a, which turns
        # +0 into +0, not -0 (3.9, this box's, emits fneg). That is why H200 run 16's GPU test failed
        # both tables_x variants while 16K random data matched: on that test's data, 0 - a changes 32
        # codes of its zero token (torch on the CPU box), and the interpreter case with a zero token
        # at position 1007 fails with 0 - a, passes with this; not re-run on the GPU since
        partner = tl.reshape(tl.permute(tl.join(b, a * -1.0), (3, 0, 1, 2)), [C, BLOCK_S, J])
        return x * cos - partner * sin
    else:
        y = tl.join(a * cos - b * sin, b * cos + a * sin)
        return tl.reshape(tl.permute(y, (3, 0, 1, 2)), [C, BLOCK_S, J])


@triton.jit
def _program_rows(X, COS, SIN, stride_b, stride_s, stride_h, stride_cs, H, S, D: tl.constexpr, BLOCK_S: tl.constexpr,
                  INV_SQRT_D: tl.constexpr, ROTATE: tl.constexpr, ROPE: tl.constexpr, TABLES_X: tl.constexpr):
    """The prologue of the [D/8, rows, 8] kernels: this program's (batch, head) = program_id(1) and
    positions offs_s [BLOCK_S] (block program_id(0)), and its rows of X as fp32 [D/8, BLOCK_S, 8]
    (zero past S), RoPE'd if ROPE and rotated (times INV_SQRT_D) if ROTATE: (off_b, off_h, offs_s, x)."""
    off_b = tl.program_id(1) // H
    off_h = tl.program_id(1) % H
    offs_s = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    x = tl.load(X + _offsets(off_b, off_h, offs_s, stride_b, stride_s, stride_h, D, 8),
                mask=offs_s[None, :, None] < S, other=0.0).to(tl.float32)
    if ROPE:
        x = _rope_chunks(x, COS, SIN, offs_s, stride_cs, S, D // 8, BLOCK_S, 8, TABLES_X)
    if ROTATE:
        x = _rotate(x, D // 8, BLOCK_S, 8, INV_SQRT_D)
    return off_b, off_h, offs_s, x


@triton.jit
def _row_amax(y):
    """max |y| of each row [1, BLOCK_S, 1], NaN if the row holds a NaN (so a non-finite input shows)."""
    return tl.reduce(tl.reduce(tl.abs(y), 2, _max_nan, keep_dims=True), 0, _max_nan, keep_dims=True)


@triton.jit
def _quotient(y, descale, SIGN_BITS: tl.constexpr = False):
    """y / descale, IEEE round-to-nearest (see the module docstring): Markstein's correction, or
    div_rn when any descale of the block is below TINY_DESCALE."""
    if tl.min(descale) < TINY_DESCALE:
        q = tl.div_rn(y, descale)
    else:
        r = tl.div_rn(1.0, descale)
        q = y * r
        # y = -0: the correction's +0 + -0 rounds to +0, but -0 / descale is -0 (its code 0x80):
        # zeros are their own quotient (RoPE makes -0 from +0 inputs: 0 * cos - 0 * -sin)
        if SIGN_BITS:  # descale > 0, so the quotient's sign is y's for every y: take y's sign bit
            q = tl.fma(tl.fma(-q, descale, y), r, q).to(tl.uint32, bitcast=True) & 0x7FFFFFFF
            q = (q | ((y.to(tl.uint32, bitcast=True) >> 31) << 31)).to(tl.float32, bitcast=True)
        else:
            q = tl.where(y == 0.0, y, tl.fma(tl.fma(-q, descale, y), r, q))
    return q


@triton.jit
def _store_codes(Y, q, off_b, off_h, offs_s, stride_b, stride_s, stride_h, S, D: tl.constexpr,
                 OUT_F32: tl.constexpr, CLAMP: tl.constexpr):
    ptrs = Y + _offsets(off_b, off_h, offs_s, stride_b, stride_s, stride_h, D, 8)
    if CLAMP or OUT_F32:  # else the convert's saturation (cvt.rn.satfinite) clamps: the same codes
        q = tl.minimum(tl.maximum(q, -448.0), 448.0)
    if OUT_F32:  # interpreter: its fp32 -> fp8 cast is not RNE, the wrapper casts on the host
        tl.store(ptrs, q, mask=offs_s[None, :, None] < S)
    else:
        tl.store(ptrs, q.to(tl.float8e4nv), mask=offs_s[None, :, None] < S)


@triton.jit
def _hadamard_fp8_token(X, Y, DS, COS, SIN, stride_xb, stride_xs, stride_xh, stride_yb, stride_ys, stride_yh,
                        stride_db, stride_ds, stride_cs, H, S, D: tl.constexpr, BLOCK_S: tl.constexpr,
                        INV_SQRT_D: tl.constexpr, OUT_F32: tl.constexpr, ROTATE: tl.constexpr, ROPE: tl.constexpr,
                        TABLES_X: tl.constexpr = False, CLAMP: tl.constexpr = True,
                        SIGN_BITS: tl.constexpr = False):
    off_b, off_h, offs_s, y = _program_rows(X, COS, SIN, stride_xb, stride_xs, stride_xh, stride_cs, H, S, D,
                                            BLOCK_S, INV_SQRT_D, ROTATE, ROPE, TABLES_X)
    # -- per-token descale = amax / 448 (1 for an all-zero row); codes = RNE(x / descale) ----
    descale = tl.div_rn(_row_amax(y), 448.0)  # NaN / inf stay: the wrapper checks the descales
    descale = tl.where(descale == 0.0, 1.0, descale)
    tl.store(DS + off_b * stride_db + offs_s[None, :, None] * stride_ds + off_h, descale,
             mask=offs_s[None, :, None] < S)
    _store_codes(Y, _quotient(y, descale, SIGN_BITS), off_b, off_h, offs_s, stride_yb, stride_ys, stride_yh, S, D, OUT_F32, CLAMP)


@triton.jit
def _hadamard_amax_head(X, AMAX, COS, SIN, stride_xb, stride_xs, stride_xh, stride_cs, H, GROUP, S, D: tl.constexpr,
                        BLOCK_S: tl.constexpr, INV_SQRT_D: tl.constexpr, ROTATE: tl.constexpr, ROPE: tl.constexpr,
                        TABLES_X: tl.constexpr = False):
    off_b, off_h, offs_s, y = _program_rows(X, COS, SIN, stride_xb, stride_xs, stride_xh, stride_cs, H, S, D,
                                            BLOCK_S, INV_SQRT_D, ROTATE, ROPE, TABLES_X)
    amax = tl.reduce(tl.reshape(_row_amax(y), [BLOCK_S]), 0, _max_nan)
    # NaN -> inf before the atomic (its float max is an integer max on the bits): the wrapper
    # rejects a non-finite amax
    tl.atomic_max(AMAX + off_b * (H // GROUP) + off_h // GROUP, tl.where(amax == amax, amax, float("inf")))


@triton.jit
def _hadamard_fp8_head(X, Y, AMAX, DS, COS, SIN, stride_xb, stride_xs, stride_xh, stride_yb, stride_ys, stride_yh,
                       stride_cs, H, GROUP, S, D: tl.constexpr, BLOCK_S: tl.constexpr, INV_SQRT_D: tl.constexpr,
                       OUT_F32: tl.constexpr, ROTATE: tl.constexpr, ROPE: tl.constexpr,
                       TABLES_X: tl.constexpr = False, CLAMP: tl.constexpr = True,
                       SIGN_BITS: tl.constexpr = False):
    off_b, off_h, offs_s, y = _program_rows(X, COS, SIN, stride_xb, stride_xs, stride_xh, stride_cs, H, S, D,
                                            BLOCK_S, INV_SQRT_D, ROTATE, ROPE, TABLES_X)
    group = off_b * (H // GROUP) + off_h // GROUP
    descale = tl.div_rn(tl.load(AMAX + group), 448.0)
    descale = tl.where(descale == 0.0, 1.0, descale)
    if (tl.program_id(0) == 0) & (off_h % GROUP == 0):  # one program per (batch, kv head) writes it
        tl.store(DS + group, descale)
    _store_codes(Y, _quotient(y, tl.full([1, 1, 1], descale, tl.float32), SIGN_BITS), off_b, off_h, offs_s,
                 stride_yb, stride_ys, stride_yh, S, D, OUT_F32, CLAMP)


@triton.jit
def _rope_kernel(X, Y, COS, SIN, stride_xb, stride_xs, stride_xh, stride_yb, stride_ys, stride_yh, stride_cs,
                 H, S, D: tl.constexpr, BLOCK_S: tl.constexpr, OUT_F32: tl.constexpr, TABLES_X: tl.constexpr = False):
    """RoPE alone, x's dtype out: the pass a model makes anyway (the fused kernel's baseline)."""
    off_b, off_h, offs_s, y = _program_rows(X, COS, SIN, stride_xb, stride_xs, stride_xh, stride_cs, H, S, D,
                                            BLOCK_S, 1.0, False, True, TABLES_X)
    ptrs = Y + _offsets(off_b, off_h, offs_s, stride_yb, stride_ys, stride_yh, D, 8)
    if OUT_F32:  # interpreter: its fp32 -> bf16 / fp16 cast is not RNE, the wrapper casts on the host
        tl.store(ptrs, y, mask=offs_s[None, :, None] < S)
    else:
        tl.store(ptrs, y.to(Y.dtype.element_ty), mask=offs_s[None, :, None] < S)


# -- variant "rows": one (position, head) row per thread, rows position-major ------------------
# Built after H200 run 16's ncu (176 registers, ~42 instructions per element) from SASS counts for
# sm_90a on the CPU box (tools/hadamard_sass.py); timed in H200 run 32 (see the module docstring). A row is a tuple of
# D/4 pieces, each a [rows, 4] fp32 tensor (channels 4p .. 4p + 3), so that:
# * every piece has the same layout in Triton 3.6 and 3.9 (a [rows, 4] or [rows, 8] load can only put
#   its rows on the lanes): RoPE pairs piece p with p + D/8, the butterflies across pieces are adds
#   of whole tensors, the two inside a piece are register renames; no lane shuffle, no shared memory.
#   (The [D/8, rows, 8] form of the other variants gets one row per thread from 3.9 but its chunks
#   spread over the lanes from 3.6, the H200's: 45 instructions per element, 255 registers, spills.)
# * per token, consecutive lanes hold consecutive heads of one position (the row index is
#   position-major), so a warp's RoPE table loads touch 1-2 table rows instead of 32 (per head the
#   rows are positions of one head: the group's max is then one block reduction and one atomic);
# * loads are not masked: the last program's extra rows re-read the last row (a masked load zeroes
#   its registers first); only the stores are masked;
# * bf16 rows are read as uint32 words: the widening is one shift or one AND per channel, where
#   Triton's bf16 -> fp32 extracts each half first (two);
# * the rotation is computed negated (times -1/sqrt(d), exact) and so is the reciprocal, so that
#   Markstein's correction keeps the sign of zero without a compare and a select: with hn = -h,
#   nr = RN(-1 / descale), q0 = RN(hn nr) = RN(h r), q' = fma(fma(q0, descale, hn), nr, q0) is
#   RN(q0 + RN(h - q0 descale) r) as before, and for h = -0 the inner FMA gives +0 and the outer
#   +0 * nr + -0 = -0 (for h = +0: +0): three instructions per element;
# * the codes are packed by inline PTX, two cvt.rn.satfinite.e4m3x2.f32 and a mov.b32 per 4 channels
#   (Triton's own convert unpacks each byte and packs them again, ~2 instructions per element) and
#   stored 16 bytes at a time. Saturation clamps as quantize_fp8's clamp to +-448 does (finite
#   input; the wrapper rejects the rest). The interpreter stores the fp32 quotients instead.
ROWS_PER_WARP = 32


@triton.jit
def _max_nan_rows(x):
    """max |x| of each row of a piece [rows, 4], NaN if the row holds one."""
    return tl.reduce(tl.abs(x), 1, _max_nan)


@triton.jit
def _bf16_words_f32(w):
    """uint32 words of bf16 pairs [rows, n] -> fp32 [rows, 2n] (element 2i is word i's low half): exact,
    one shift or one AND per element."""
    lo = (w << 16).to(tl.float32, bitcast=True)
    hi = (w & 0xFFFF0000).to(tl.float32, bitcast=True)
    return tl.reshape(tl.join(lo, hi), [w.shape[0], 2 * w.shape[1]])


@triton.jit
def _halves(x):
    """[rows, 8] -> (channels 0..3, channels 4..7), each [rows, 4] (in-thread)."""
    return tl.split(tl.permute(tl.reshape(x, [x.shape[0], 2, 4]), (0, 2, 1)))


@triton.jit
def _load_row_pieces(X, xrow, D: tl.constexpr, WORDS: tl.constexpr, GAP: tl.constexpr = 0):
    """The rows at element offsets xrow [rows, 1] as D/4 fp32 pieces [rows, 4], 16 bytes per load (bf16).
    ``GAP``: the second D/2 channels start GAP channels further ("pairs": a thread's two blocks)."""
    pieces = ()
    for c in tl.static_range(D // 8):
        if WORDS:
            x = _bf16_words_f32(tl.load(X.to(tl.pointer_type(tl.uint32), bitcast=True) + (xrow >> 1) + 4 * c
                                        + GAP * (16 * c // D) // 2 + tl.arange(0, 4)[None, :]))
        else:
            x = tl.load(X + xrow + 8 * c + GAP * (16 * c // D) + tl.arange(0, 8)[None, :]).to(tl.float32)
        lo, hi = _halves(x)
        pieces = pieces + (lo, hi)
    return pieces


@triton.jit
def _rope_pieces(pieces, COS, SIN, trow, D: tl.constexpr):
    """RoPE of the pieces (half-split pairing: piece p with p + D/8), ``(a cos - b sin, b cos + a sin)``
    each product and sum rounded on its own (no FP contraction at launch); tables fp32, row trow."""
    first = ()
    second = ()
    for p in tl.static_range(D // 8):
        cos = tl.load(COS + trow + 4 * p + tl.arange(0, 4)[None, :])
        sin = tl.load(SIN + trow + 4 * p + tl.arange(0, 4)[None, :])
        a = pieces[p]
        b = pieces[p + D // 8]
        first = first + (a * cos - b * sin,)
        second = second + (b * cos + a * sin,)
    return first + second


@triton.jit
def _butterfly_in_piece(x, HALF: tl.constexpr):
    """One radix-2 stage on channels (i, i + HALF) of each piece [rows, 4]: (a + b, a - b)."""
    y = tl.reshape(x, [x.shape[0], 4 // (2 * HALF), 2, HALF])
    a, b = tl.split(tl.permute(y, (0, 1, 3, 2)))
    return tl.reshape(tl.permute(tl.join(a + b, a - b), (0, 1, 3, 2)), [x.shape[0], 4])


@triton.jit
def _rotate_pieces(pieces, P: tl.constexpr, ROTATE: tl.constexpr, SCALE: tl.constexpr, PAIR: tl.constexpr = False):
    """Walsh-Hadamard transform of rows held as P pieces (if ROTATE), Sylvester order, stage by stage as
    zyfa.numerics.hadamard (half = 1, 2 inside the pieces, then 4, 8, ... across them), times SCALE.
    ``PAIR`` ("pairs": a row in two threads, each holding P pieces, two blocks of P/2): the stage across
    the pair (_pair_butterfly) comes before the one across the blocks."""
    out = pieces
    if ROTATE:
        out = ()
        for p in tl.static_range(P):
            out = out + (_butterfly_in_piece(_butterfly_in_piece(pieces[p], 1), 2),)
        for k in tl.static_range(6):  # half = 2^k pieces, while below P: log2(P) stages
            if PAIR and (1 << k) == P // 2:
                prev = out
                out = ()
                for p in tl.static_range(P):
                    out = out + (_pair_butterfly(prev[p]),)
            if (1 << k) < P:
                prev = out
                out = ()
                for p in tl.static_range(P):
                    if p & (1 << k):
                        out = out + (prev[p - (1 << k)] - prev[p],)
                    else:
                        out = out + (prev[p] + prev[p + (1 << k)],)
    scaled = ()
    for p in tl.static_range(P):
        scaled = scaled + (out[p] * SCALE,)
    return scaled


@triton.jit
def _e4m3_word(x):
    """A piece [rows, 4] fp32 -> [rows] uint32: the e4m3 codes (RNE, saturating) of its 4 channels, the
    first in the lowest byte. cvt.rn.satfinite.e4m3x2.f32 d, a, b stores a's code in the upper 8 bits
    of d and b's in the lower (PTX ISA, cvt; the operand order Triton's own fp32 -> fp8 lowering
    uses); mov.b32 d, {lo, hi} puts lo in the low half. Checked on a GPU only by h200_run32.sh."""
    even, odd = tl.split(tl.reshape(x, [x.shape[0], 2, 2]))  # channel 2i + k: even k = 0, odd k = 1
    c0, c2 = tl.split(even)
    c1, c3 = tl.split(odd)
    return tl.inline_asm_elementwise(
        "{ .reg .b16 lo, hi; cvt.rn.satfinite.e4m3x2.f32 lo, $2, $1; cvt.rn.satfinite.e4m3x2.f32 hi, $4, $3; "
        "mov.b32 $0, {lo, hi}; }", "=r,r,r,r,r", [c0, c1, c2, c3], dtype=tl.uint32, is_pure=True, pack=1)


@triton.jit
def _row_origin(S, H, BLOCK_S: tl.constexpr, THREADS: tl.constexpr = 1):
    """(position, head) [rows, 1] of this program's rows (row r of a batch: position r // H, head r % H;
    the last program's extra rows repeat the last row) and the mask of the real rows; with THREADS = 2
    ("pairs") each row twice, [2 rows, 1], for the two threads that hold it."""
    rows = tl.program_id(0) * BLOCK_S + tl.arange(0, THREADS * BLOCK_S) // THREADS
    last = tl.minimum(rows, S * H - 1)
    return (last // H)[:, None], (last % H)[:, None], rows[:, None] < S * H


@triton.jit
def _rows_amax(z, P: tl.constexpr):
    """max |z| over each row of the P pieces z, [rows] (NaN if the row holds one)."""
    amax = _max_nan_rows(z[0])
    for p in tl.static_range(1, P):
        amax = _max_nan(amax, _max_nan_rows(z[p]))
    return amax


@triton.jit
def _store_codes_rows(Y, yrow, hn, descale, keep, D: tl.constexpr, BLOCK_S: tl.constexpr, OUT_F32: tl.constexpr,
                      GAP: tl.constexpr = 0):
    """Codes RNE(h / descale) of the pieces hn = -h (rows at element offsets yrow [rows, 1]); descale
    [rows, 1] or one value. A descale below TINY_DESCALE divides hn 2^64 by descale 2^64 (both exact,
    the same quotient, in the range where Markstein's residual is exact: test_markstein.py): one
    multiply per element in a branch normal data never takes, instead of a div_rn copy. ``GAP``: as
    _load_row_pieces'."""
    scale = tl.where(descale < TINY_DESCALE, TINY_SCALE, 1.0)
    if tl.min(descale) < TINY_DESCALE:
        scaled = ()
        for p in tl.static_range(D // 4):
            scaled = scaled + (hn[p] * scale,)
        hn = scaled
    descale = descale * scale
    nr = tl.div_rn(-1.0, descale)
    for c in tl.static_range(D // 16):  # 16 channels (4 pieces) at a time: one 16-byte store
        words = ()
        for p in tl.static_range(4 * c, 4 * c + 4):
            q0 = hn[p] * nr
            q = tl.fma(tl.fma(q0, descale, hn[p]), nr, q0)  # Markstein on the negated operands: -0 stays -0
            if OUT_F32:  # interpreter: its fp32 -> fp8 cast is not RNE, the wrapper casts on the host
                tl.store(Y + yrow + 4 * p + GAP * (8 * p // D) + tl.arange(0, 4)[None, :],
                         tl.minimum(tl.maximum(q, -448.0), 448.0), mask=keep)
            else:
                words = words + (_e4m3_word(q),)
        if not OUT_F32:
            w = tl.reshape(tl.join(tl.join(words[0], words[2]), tl.join(words[1], words[3])), [BLOCK_S, 4])
            tl.store(Y.to(tl.pointer_type(tl.uint32), bitcast=True) + (yrow >> 2) + 4 * c + GAP * (32 * c // D) // 4
                     + tl.arange(0, 4)[None, :], w, mask=keep)


@triton.jit
def _hadamard_fp8_token_rows(X, Y, DS, COS, SIN, stride_xb, stride_xs, stride_xh, stride_yb, stride_ys, stride_yh,
                             stride_db, stride_ds, stride_cs, H, S, D: tl.constexpr, BLOCK_S: tl.constexpr,
                             NEG_INV_SQRT_D: tl.constexpr, OUT_F32: tl.constexpr, ROTATE: tl.constexpr,
                             ROPE: tl.constexpr, WORDS: tl.constexpr):
    """Per-token codes and descales of BLOCK_S rows of batch program_id(1), one row per thread."""
    off_b = tl.program_id(1)
    pos, head, keep = _row_origin(S, H, BLOCK_S)
    x = _load_row_pieces(X, off_b * stride_xb + pos * stride_xs + head * stride_xh, D, WORDS)
    if ROPE:
        x = _rope_pieces(x, COS, SIN, pos * stride_cs, D)
    hn = _rotate_pieces(x, D // 4, ROTATE, NEG_INV_SQRT_D if ROTATE else -1.0)  # -hadamard(x), or -x
    # -- per-token descale = amax / 448 (1 for an all-zero row); codes = RNE(h / descale) ------
    descale = tl.div_rn(_rows_amax(hn, D // 4), 448.0)[:, None]  # NaN / inf stay: the wrapper checks the descales
    descale = tl.where(descale == 0.0, 1.0, descale)
    tl.store(DS + off_b * stride_db + pos * stride_ds + head, descale, mask=keep)
    _store_codes_rows(Y, off_b * stride_yb + pos * stride_ys + head * stride_yh, hn, descale, keep, D, BLOCK_S,
                      OUT_F32)


@triton.jit
def _hadamard_amax_head_rows(X, AMAX, COS, SIN, stride_xb, stride_xs, stride_xh, stride_cs, H, GROUP, S,
                             D: tl.constexpr, BLOCK_S: tl.constexpr, INV_SQRT_D: tl.constexpr,
                             ROTATE: tl.constexpr, ROPE: tl.constexpr, WORDS: tl.constexpr):
    """Per-head pass 1 in the "rows" form: rows = BLOCK_S positions of (batch, head) program_id(1), one
    per thread (the last program's extra rows repeat the last position: same max). The amax is taken
    of the butterflies before the scale and scaled once: max |RN(z c)| = RN(max |z| c), RN being
    monotone and odd (a NaN stays NaN), so pass 1 skips the per-element multiply."""
    off_b = tl.program_id(1) // H
    off_h = tl.program_id(1) % H
    pos = tl.minimum(tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S), S - 1)[:, None]
    x = _load_row_pieces(X, off_b * stride_xb + off_h * stride_xh + pos * stride_xs, D, WORDS)
    if ROPE:
        x = _rope_pieces(x, COS, SIN, pos * stride_cs, D)
    amax = tl.reduce(_rows_amax(_rotate_pieces(x, D // 4, ROTATE, 1.0), D // 4), 0, _max_nan) * INV_SQRT_D
    # NaN -> inf before the atomic (its float max is an integer max on the bits): the wrapper
    # rejects a non-finite amax
    tl.atomic_max(AMAX + off_b * (H // GROUP) + off_h // GROUP, tl.where(amax == amax, amax, float("inf")))


@triton.jit
def _hadamard_fp8_head_rows(X, Y, AMAX, DS, COS, SIN, stride_xb, stride_xs, stride_xh, stride_yb, stride_ys,
                            stride_yh, stride_cs, H, GROUP, S, D: tl.constexpr, BLOCK_S: tl.constexpr,
                            NEG_INV_SQRT_D: tl.constexpr, OUT_F32: tl.constexpr, ROTATE: tl.constexpr,
                            ROPE: tl.constexpr, WORDS: tl.constexpr):
    """Per-head pass 2 in the "rows" form: the same rows, codes with the (batch, kv head) descale."""
    off_b = tl.program_id(1) // H
    off_h = tl.program_id(1) % H
    offs_s = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    pos = tl.minimum(offs_s, S - 1)[:, None]
    x = _load_row_pieces(X, off_b * stride_xb + off_h * stride_xh + pos * stride_xs, D, WORDS)
    if ROPE:
        x = _rope_pieces(x, COS, SIN, pos * stride_cs, D)
    hn = _rotate_pieces(x, D // 4, ROTATE, NEG_INV_SQRT_D if ROTATE else -1.0)
    _store_codes_rows(Y, off_b * stride_yb + off_h * stride_yh + pos * stride_ys, hn,
                      _group_descale(AMAX, DS, off_b, off_h, H, GROUP), offs_s[:, None] < S, D, BLOCK_S, OUT_F32)


@triton.jit
def _group_descale(AMAX, DS, off_b, off_h, H, GROUP):
    """Per-head pass 2 ("rows", "pairs"): the (batch, kv head) descale from pass 1's amax (1 for an
    all-zero group) as a [1, 1] block; one program per group (the first of its first head) stores it."""
    group = off_b * (H // GROUP) + off_h // GROUP
    descale = tl.div_rn(tl.load(AMAX + group), 448.0)
    descale = tl.where(descale == 0.0, 1.0, descale)
    if (tl.program_id(0) == 0) & (off_h % GROUP == 0):  # one program per (batch, kv head) writes it
        tl.store(DS + group, descale)
    return tl.full([1, 1], descale, tl.float32)



# -- variant "pairs": each row in two threads, half of "rows"' registers -----------------------
# H200 run 32: "rows" (one row per thread, 168 registers at d128) fits 3 programs of 4 warps per SM
# and is latency-bound (theoretical occupancy 18.75 %, DRAM 37 %, issue slots 35 %). Here the two
# threads of a pair (lanes 2i, 2i + 1) hold one row: thread h (0, 1) channels [h D/4, (h + 1) D/4) and
# D/2 + those, as D/8 pieces [2 rows, 4] ("rows"' helpers with GAP = D/4: the thread's second block
# starts D/4 channels after its first ends). The tensors stay 2-D with the thread's row on the
# lanes, as in "rows" (a 3-D [rows, 2, 4] form got the pair axis on the warps from Triton 3.6's
# coalescing: its flip went through shared memory, 264 shared-memory instructions, 53 barriers).
# RoPE's partner (channel f + D/2) is in the same thread; the butterflies with half < D/4 and the one
# with half = D/2 are in-thread adds as in "rows"; only half = D/4 crosses the pair (_pair_butterfly:
# one lane shuffle and one FMA per element). The row's amax is a max over the pair (one more
# shuffle per row); both threads compute the descale, the lower one stores it. Headdim 64 to 256 (a
# 16-byte store needs 16 channels per block).
PAIR_ROWS_PER_WARP = 16


@triton.jit
def _pair_butterfly(x):
    """The radix-2 stage across the threads of each pair, x [2 rows, 4] (thread 2i: channels a, thread
    2i + 1: their partners b): a + b in the lower thread, a - b in the upper. tl.flip along the pair
    axis hands each thread its partner's value (xor-based: bit-exact, one lane shuffle on the GPU);
    fma(s, own, partner) with s = +1 / -1 has an exact product, so it is RN(b + a) = RN(a + b) or
    RN(a - b), signed zeros included (a - b is a + (-b) in IEEE arithmetic)."""
    y = tl.reshape(x, [x.shape[0] // 2, 2, 4])
    sign = tl.where(tl.arange(0, 2)[None, :, None] == 0, 1.0, -1.0)
    return tl.reshape(tl.fma(sign, y, tl.flip(y, 1)), [x.shape[0], 4])


@triton.jit
def _pair_max(m):
    """[2 rows]: the max over each pair (NaN if either is), in both threads."""
    y = tl.reshape(m, [m.shape[0] // 2, 2])
    return tl.reshape(_max_nan(y, tl.flip(y, 1)), [m.shape[0]])


@triton.jit
def _pair_half(BLOCK_S: tl.constexpr):
    """[2 rows, 1]: which half of its row each thread holds (0 lower, 1 upper)."""
    return (tl.arange(0, 2 * BLOCK_S) % 2)[:, None]


@triton.jit
def _pair_rotated(X, COS, SIN, xrow, trow, D: tl.constexpr, ROTATE: tl.constexpr, ROPE: tl.constexpr,
                  WORDS: tl.constexpr, SCALE: tl.constexpr):
    """A pair's pieces of the rows at xrow [2 rows, 1] (the thread's half already added), RoPE'd with
    table rows trow (half added) if ROPE, rotated if ROTATE, times SCALE."""
    x = _load_row_pieces(X, xrow, D // 2, WORDS, D // 4)
    if ROPE:
        x = _rope_pieces(x, COS, SIN, trow, D // 2)
    return _rotate_pieces(x, D // 8, ROTATE, SCALE, True)


@triton.jit
def _hadamard_fp8_token_pairs(X, Y, DS, COS, SIN, stride_xb, stride_xs, stride_xh, stride_yb, stride_ys, stride_yh,
                              stride_db, stride_ds, stride_cs, H, S, D: tl.constexpr, BLOCK_S: tl.constexpr,
                              NEG_INV_SQRT_D: tl.constexpr, OUT_F32: tl.constexpr, ROTATE: tl.constexpr,
                              ROPE: tl.constexpr, WORDS: tl.constexpr):
    """Per-token codes and descales of BLOCK_S rows of batch program_id(1), one row per pair of threads."""
    off_b = tl.program_id(1)
    pos, head, keep = _row_origin(S, H, BLOCK_S, 2)
    half = _pair_half(BLOCK_S) * (D // 4)
    hn = _pair_rotated(X, COS, SIN, off_b * stride_xb + pos * stride_xs + head * stride_xh + half,
                       pos * stride_cs + half, D, ROTATE, ROPE, WORDS, NEG_INV_SQRT_D if ROTATE else -1.0)
    descale = tl.div_rn(_pair_max(_rows_amax(hn, D // 8)), 448.0)[:, None]  # NaN / inf stay: the wrapper checks
    descale = tl.where(descale == 0.0, 1.0, descale)
    tl.store(DS + off_b * stride_db + pos * stride_ds + head, descale, mask=keep & (half == 0))
    _store_codes_rows(Y, off_b * stride_yb + pos * stride_ys + head * stride_yh + half, hn, descale, keep, D // 2,
                      2 * BLOCK_S, OUT_F32, D // 4)


@triton.jit
def _hadamard_amax_head_pairs(X, AMAX, COS, SIN, stride_xb, stride_xs, stride_xh, stride_cs, H, GROUP, S,
                              D: tl.constexpr, BLOCK_S: tl.constexpr, INV_SQRT_D: tl.constexpr,
                              ROTATE: tl.constexpr, ROPE: tl.constexpr, WORDS: tl.constexpr):
    """Per-head pass 1 in the "pairs" form: as _hadamard_amax_head_rows, a row per pair of threads."""
    off_b = tl.program_id(1) // H
    off_h = tl.program_id(1) % H
    pos = tl.minimum(tl.program_id(0) * BLOCK_S + tl.arange(0, 2 * BLOCK_S) // 2, S - 1)[:, None]
    half = _pair_half(BLOCK_S) * (D // 4)
    z = _pair_rotated(X, COS, SIN, off_b * stride_xb + off_h * stride_xh + pos * stride_xs + half,
                      pos * stride_cs + half, D, ROTATE, ROPE, WORDS, 1.0)
    amax = tl.reduce(_rows_amax(z, D // 8), 0, _max_nan) * INV_SQRT_D
    tl.atomic_max(AMAX + off_b * (H // GROUP) + off_h // GROUP, tl.where(amax == amax, amax, float("inf")))


@triton.jit
def _hadamard_fp8_head_pairs(X, Y, AMAX, DS, COS, SIN, stride_xb, stride_xs, stride_xh, stride_yb, stride_ys,
                             stride_yh, stride_cs, H, GROUP, S, D: tl.constexpr, BLOCK_S: tl.constexpr,
                             NEG_INV_SQRT_D: tl.constexpr, OUT_F32: tl.constexpr, ROTATE: tl.constexpr,
                             ROPE: tl.constexpr, WORDS: tl.constexpr):
    """Per-head pass 2 in the "pairs" form: the same rows, codes with the (batch, kv head) descale."""
    off_b = tl.program_id(1) // H
    off_h = tl.program_id(1) % H
    offs_s = tl.program_id(0) * BLOCK_S + tl.arange(0, 2 * BLOCK_S) // 2
    pos = tl.minimum(offs_s, S - 1)[:, None]
    half = _pair_half(BLOCK_S) * (D // 4)
    hn = _pair_rotated(X, COS, SIN, off_b * stride_xb + off_h * stride_xh + pos * stride_xs + half,
                       pos * stride_cs + half, D, ROTATE, ROPE, WORDS, NEG_INV_SQRT_D if ROTATE else -1.0)
    _store_codes_rows(Y, off_b * stride_yb + off_h * stride_yh + pos * stride_ys + half, hn,
                      _group_descale(AMAX, DS, off_b, off_h, H, GROUP), offs_s[:, None] < S, D // 2, 2 * BLOCK_S,
                      OUT_F32, D // 4)


@triton.jit
def _rope_rows_kernel(X, Y, COS, SIN, stride_xb, stride_xs, stride_xh, stride_yb, stride_ys, stride_yh, stride_cs,
                      H, S, D: tl.constexpr, BLOCK_S: tl.constexpr, OUT_F32: tl.constexpr, WORDS: tl.constexpr):
    """RoPE alone in the "rows" form (the same loads, tables and row order), x's dtype out: the RoPE
    pass to set the "rows" fused kernel against."""
    off_b = tl.program_id(1)
    pos, head, keep = _row_origin(S, H, BLOCK_S)
    y = _rope_pieces(_load_row_pieces(X, off_b * stride_xb + pos * stride_xs + head * stride_xh, D, WORDS), COS, SIN,
                     pos * stride_cs, D)
    yrow = Y + off_b * stride_yb + pos * stride_ys + head * stride_yh
    for c in tl.static_range(D // 8):
        chunk = tl.reshape(tl.permute(tl.join(y[2 * c], y[2 * c + 1]), (0, 2, 1)), [BLOCK_S, 8])
        if OUT_F32:
            tl.store(yrow + 8 * c + tl.arange(0, 8)[None, :], chunk, mask=keep)
        else:
            tl.store(yrow + 8 * c + tl.arange(0, 8)[None, :], chunk.to(Y.dtype.element_ty), mask=keep)


def _check_rows(x) -> tuple[int, int, int, int]:
    """(b, s, h, d) of a valid input of the kernels in this module; ValueError / TypeError otherwise."""
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError(f"x must be a 4-d tensor (batch, seqlen, nheads, headdim), got {getattr(x, 'shape', type(x))}")
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"x must be float32, bfloat16 or float16, got {x.dtype}")
    b, s, h, d = x.shape
    if d < 16 or d > 256 or d & (d - 1):
        raise ValueError(f"headdim must be a power of two in [16, 256] (the torch path covers others), got {d}")
    if x.stride(-1) != 1:
        raise ValueError("x needs a unit stride along headdim; call x.contiguous()")
    if x.numel() == 0:
        raise ValueError(f"x must not be empty, got shape {tuple(x.shape)}")
    return b, s, h, d


def _check_tables(cos, sin, x: torch.Tensor) -> None:
    """RoPE tables for x: float32 (seqlen, headdim // 2), unit stride along the columns, on x's device."""
    _, s, _, d = x.shape
    for name, t in (("cos", cos), ("sin", sin)):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float32 or tuple(t.shape) != (s, d // 2):
            raise ValueError(f"{name} must be a float32 tensor of shape (seqlen, headdim // 2) = ({s}, {d // 2}), "
                             f"got {getattr(t, 'dtype', type(t).__name__)} {tuple(getattr(t, 'shape', ()))}")
        if t.device != x.device or t.stride(1) != 1 or t.stride(0) != cos.stride(0):
            raise ValueError(f"{name} must be on x's device with unit column stride and cos's row stride")


def _variant(variant: str | None) -> dict[str, bool]:
    """The constexpr flags of a ``VARIANTS`` name (None: ``DEFAULT_VARIANT``)."""
    name = DEFAULT_VARIANT if variant is None else variant
    if name not in VARIANTS:
        raise ValueError(f"variant must be one of {tuple(VARIANTS)}, got {variant!r}")
    return VARIANTS[name]


def _words(x: torch.Tensor) -> bool:
    """Whether the "rows" kernels may read x as uint32 words: bf16, 4-byte aligned start, even strides."""
    return x.dtype == torch.bfloat16 and x.data_ptr() % 4 == 0 and all(st % 2 == 0 for st in x.stride()[:3])


def _launch(block_s: int | None, num_warps: int | None, default_rows: int,
            default_warps: int = NUM_WARPS) -> tuple[int, int]:
    """(rows per program, warps): the caller's, else ``default_rows`` at ``default_warps``, scaled with
    the caller's warps (16 rows in the interpreter)."""
    num_warps = num_warps or default_warps
    block_s = block_s or (16 if _INTERPRET else default_rows * num_warps // default_warps)
    if block_s & (block_s - 1) or num_warps & (num_warps - 1):
        raise ValueError(f"block_s and num_warps must be powers of two, got {block_s} and {num_warps}")
    return block_s, num_warps


def rope_rows(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, block_s: int | None = None,
              num_warps: int | None = None, variant: str | None = None) -> torch.Tensor:
    """RoPE of ``x`` (batch, seqlen, nheads, headdim) in one Triton pass, x's dtype out.

    Bit-identical to ``zyfa.numerics.rope(x, cos, sin).to(x.dtype)`` (fp32 arithmetic, one RNE
    rounding to x's dtype). ``cos``, ``sin``: float32 (seqlen, headdim // 2)
    (``zyfa.numerics.rope_tables``). The baseline of the fused RoPE + Hadamard + quantise pass:
    the RoPE pass a model runs anyway, written as the fused kernel reads and rotates (``variant``:
    its table layout, as :func:`hadamard_quantize_fp8`'s; ``"pairs"`` runs ``"rows"``' pass: RoPE
    alone needs no second thread).
    """
    b, s, h, d = _check_rows(x)
    _check_tables(cos, sin, x)
    flags = _variant(variant)
    y = torch.empty(x.shape, dtype=torch.float32 if _INTERPRET else x.dtype, device=x.device)
    if flags["ROWS"]:
        block_s, num_warps = _launch(block_s, num_warps, ROWS_PER_WARP * NUM_WARPS)
        _rope_rows_kernel[(triton.cdiv(s * h, block_s), b)](
            x, y, cos, sin, x.stride(0), x.stride(1), x.stride(2), y.stride(0), y.stride(1), y.stride(2),
            cos.stride(0), h, s, D=d, BLOCK_S=block_s, OUT_F32=_INTERPRET, WORDS=_words(x), num_warps=num_warps,
            enable_fp_fusion=False)
        return y.to(x.dtype) if _INTERPRET else y
    tables_x = flags["TABLES_X"]
    block_s, num_warps = _launch(block_s, num_warps, BLOCK_S["token"])
    _rope_kernel[(triton.cdiv(s, block_s), b * h)](
        x, y, cos, sin, x.stride(0), x.stride(1), x.stride(2), y.stride(0), y.stride(1), y.stride(2), cos.stride(0),
        h, s, D=d, BLOCK_S=block_s, OUT_F32=_INTERPRET, TABLES_X=tables_x, num_warps=num_warps,
        enable_fp_fusion=False)
    return y.to(x.dtype) if _INTERPRET else y


def hadamard_quantize_fp8(x: torch.Tensor, granularity: str = "head", nheads_k: int | None = None,
                          block_s: int | None = None, num_warps: int | None = None,
                          rotate: bool = True, cos: torch.Tensor | None = None,
                          sin: torch.Tensor | None = None, variant: str | None = None,
                          check_finite: bool = True, maxnreg: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Hadamard-rotates ``x`` (batch, seqlen, nheads, headdim) along headdim and quantises it to e4m3.

    Bit-identical to ``quantize_fp8(hadamard(x), granularity, nheads_k)`` of :mod:`zyfa.numerics`.
    ``granularity="head"``: descale float32 (batch, nheads_k), one per (batch, kv head) (pass
    ``nheads_k`` for Q under GQA); ``"token"``: descale (batch, seqlen, nheads). ``x``: fp32, bf16
    or fp16 on a CUDA/ROCm GPU (or the Triton interpreter), unit stride along headdim, headdim a
    power of two in [16, 256]. Returns ``(x8 float8_e4m3fn of x's shape, descale)``.
    ``block_s`` (rows per program) and ``num_warps`` choose the launch; any choice gives the same bits.
    Defaults: with RoPE tables at headdim <= 128 and no ``variant``, ``DEFAULT_ROPE_LAUNCH`` (H200
    run 32's fastest: per token variant "rows", 64 rows x 2 warps; per head "lean", 64 rows x 4 warps,
    ``maxnreg`` 128), else 128 rows per head, 64 per token at 4 warps, 64 for both with RoPE
    (``BLOCK_S_ROPE``); rows scale with a ``num_warps`` you pass.
    ``rotate=False``: the same kernel without the butterflies, i.e. the FP8 quantisation alone,
    bit-identical to ``quantize_fp8(x, granularity, nheads_k)``: the pass an FP8 API makes from
    bf16 inputs anyway, so the rotation's marginal cost is the time difference of the two calls.
    ``cos``, ``sin`` (float32 (seqlen, headdim // 2), ``zyfa.numerics.rope_tables``): RoPE first, in
    the same pass, i.e. ``quantize_fp8(hadamard(rope(x, cos, sin)), granularity, nheads_k)``
    bit for bit (``rope(x, cos, sin)`` without the rotation); the kernel is launched without FP
    contraction so that RoPE's products and sums round as the torch path's. Pass un-rotated
    (pre-RoPE) Q and K: the RoPE pass a model makes anyway becomes this one.
    ``variant``: a name in ``VARIANTS`` (default: see above), the kernel's code shape; all give the
    same bits. ``"rows"`` puts one row per thread (``block_s`` defaults to 32 per warp; at headdim 256
    a row does not fit the registers and spills), timed in H200 run 32; ``"pairs"`` one row per two
    threads (16 per warp; headdim >= 64): counted, not timed, see _pair_butterfly's section. A
    ``variant`` you name launches with its own defaults (``BLOCK_S`` / ``BLOCK_S_ROPE`` or its rows per
    warp, ``NUM_WARPS``, no register cap).
    ``check_finite=False`` skips the check of the descales for NaN / inf (a
    host synchronisation: the caller checks, a non-finite row or group has a non-finite descale).
    ``maxnreg``: a register cap per thread for the GPU compiler (ptxas spills above it), e.g. 128 lets
    4 programs of 4 warps share an SM (H200 run 32: per head "lean" 0.3756 ms under it vs 0.3917 ms
    without); None: no cap, or the default launch's.
    """
    for name, flag in (("rotate", rotate), ("check_finite", check_finite)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, got {type(flag).__name__}")
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    b, s, h, d = _check_rows(x)
    hk = h if nheads_k is None else nheads_k
    if not isinstance(hk, int) or hk <= 0 or h % hk:
        raise ValueError(f"nheads_k must be a positive divisor of nheads ({h}), got {nheads_k!r}")
    if (cos is None) != (sin is None):
        raise ValueError("pass both cos and sin (RoPE) or neither")
    use_rope = cos is not None
    if use_rope:
        _check_tables(cos, sin, x)
    else:
        cos = sin = x  # never read (ROPE=False)
    if variant is None and use_rope and d <= 128:
        variant, rows_default, warps_default, cap = DEFAULT_ROPE_LAUNCH[granularity]
        maxnreg = cap if maxnreg is None else maxnreg
    else:
        rows_default, warps_default = None, NUM_WARPS
    flags = _variant(variant)
    if flags["PAIRS"] and d < 64:
        raise ValueError(f"variant 'pairs' needs headdim >= 64 (16 channels per thread and block), got {d}")
    if rows_default is None:
        rows_default = ((PAIR_ROWS_PER_WARP if flags["PAIRS"] else ROWS_PER_WARP) * NUM_WARPS if flags["ROWS"]
                        else (BLOCK_S_ROPE if use_rope else BLOCK_S)[granularity])
    block_s, num_warps = _launch(block_s, num_warps, rows_default, warps_default)
    inv_sqrt_d = float(torch.tensor(1.0 / math.sqrt(d), dtype=torch.float32))  # what torch's x * (1/sqrt(d)) uses
    y = torch.empty(x.shape, dtype=torch.float32 if _INTERPRET else torch.float8_e4m3fn, device=x.device)
    grid = (triton.cdiv(s, block_s), b * h)
    xs, ys = (x.stride(0), x.stride(1), x.stride(2)), (y.stride(0), y.stride(1), y.stride(2))
    if maxnreg is not None and (not isinstance(maxnreg, int) or not 24 <= maxnreg <= 255):
        raise ValueError(f"maxnreg must be an int in [24, 255] or None, got {maxnreg!r}")
    launch = dict(num_warps=num_warps, enable_fp_fusion=False, **({} if maxnreg is None else {"maxnreg": maxnreg}))
    opts = dict(D=d, BLOCK_S=block_s, INV_SQRT_D=inv_sqrt_d, ROTATE=rotate, ROPE=use_rope, TABLES_X=flags["TABLES_X"],
                **launch)
    cs = cos.stride(0) if use_rope else 0
    rows = dict(D=d, BLOCK_S=block_s, ROTATE=rotate, ROPE=use_rope, WORDS=_words(x), **launch)
    token_kernel, amax_kernel, head_kernel = ((_hadamard_fp8_token_pairs, _hadamard_amax_head_pairs,
                                               _hadamard_fp8_head_pairs) if flags["PAIRS"] else
                                              (_hadamard_fp8_token_rows, _hadamard_amax_head_rows,
                                               _hadamard_fp8_head_rows))
    if flags["ROWS"] and granularity == "token":
        descale = torch.empty(b, s, h, dtype=torch.float32, device=x.device)
        token_kernel[(triton.cdiv(s * h, block_s), b)](
            x, y, descale, cos, sin, *xs, *ys, descale.stride(0), descale.stride(1), cs, h, s,
            NEG_INV_SQRT_D=-inv_sqrt_d, OUT_F32=_INTERPRET, **rows)
    elif flags["ROWS"]:
        amax = torch.zeros(b, hk, dtype=torch.float32, device=x.device)
        descale = torch.empty(b, hk, dtype=torch.float32, device=x.device)
        amax_kernel[grid](x, amax, cos, sin, *xs, cs, h, h // hk, s, INV_SQRT_D=inv_sqrt_d if rotate else 1.0, **rows)
        head_kernel[grid](x, y, amax, descale, cos, sin, *xs, *ys, cs, h, h // hk, s, NEG_INV_SQRT_D=-inv_sqrt_d,
                          OUT_F32=_INTERPRET, **rows)
    elif granularity == "token":
        descale = torch.empty(b, s, h, dtype=torch.float32, device=x.device)
        _hadamard_fp8_token[grid](x, y, descale, cos, sin, *xs, *ys, descale.stride(0), descale.stride(1), cs, h, s,
                                  OUT_F32=_INTERPRET, CLAMP=flags["CLAMP"], SIGN_BITS=flags["SIGN_BITS"], **opts)
    else:
        amax = torch.zeros(b, hk, dtype=torch.float32, device=x.device)
        descale = torch.empty(b, hk, dtype=torch.float32, device=x.device)
        _hadamard_amax_head[grid](x, amax, cos, sin, *xs, cs, h, h // hk, s, **opts)
        _hadamard_fp8_head[grid](x, y, amax, descale, cos, sin, *xs, *ys, cs, h, h // hk, s, OUT_F32=_INTERPRET,
                                 CLAMP=flags["CLAMP"], SIGN_BITS=flags["SIGN_BITS"], **opts)
    # a NaN or inf in x makes its row's (group's) amax, hence descale, non-finite: checked here on
    # the small descale tensor instead of a pass over x (which cost as much as the kernel's reads)
    if check_finite and not bool(torch.isfinite(descale).all()):
        raise ValueError("x contains non-finite values (NaN or inf); they have no FP8 encoding")
    if _INTERPRET:
        y = y.to(torch.float8_e4m3fn)  # RNE on the host (already clamped to +-448)
    return y, descale
