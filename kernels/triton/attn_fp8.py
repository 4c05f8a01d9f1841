"""FP8 (e4m3) flash-attention forward with the ZYFA numerics, in Triton.

Follows the fused-attention tutorial of Triton (Tillet et al.), after FlashAttention-2 (Dao, 2023)
and FlashAttention-3 (Shah et al., 2024); the softmax is the ZYFA one of ``docs/numerics.md``:

* keys in blocks of 64; per block and query row an integer ``bm = ceil(t * max_j s_j)``;
* Lean P, Hopper "magic" variant: one FMA ``f = fma(s, 8t, (120 - 8 bm) + 1.5*2^23)`` whose low
  byte after ``max(f, 1.5*2^23)`` is the e4m3 code of ``2^(t s - bm + 8)`` (no exp, no fp8 convert);
* the block enters the accumulator scaled by ``2^(bm - 8 - m)`` (exact power of two), ``m`` the
  running integer max; the row sum adds the *rounded* probabilities;
* epilogue ``out = (acc / l) * dv`` in bf16 and ``lse = (m + log2 l) ln 2``.

``RECIPE_V2`` (``recipe="zyfa-v2"``, spec v2 of ``docs/numerics.md``): the hybrid block offset
``bm' = ceil(x_b - phi) + phi`` (``phi`` the fractional part of the row's running max ``M`` of
``t * max s``), the unbiased constant ``c = 120.04335``, truncating convert (gfx950 pair), E8M0
exponent ``n - 8 - floor(M)``; ``M`` grows once per tile of two 64-key blocks and
``alpha = 2^(M_old - M)`` is the spec's fixed fp32 FMA sequence (``_alpha_v2``), applied as a rounded
product (``mul.rn`` on CUDA, never contracted with the following add) before the blocks' P V are added. (The per-token Q scale of spec v2 is emulator-only so far: here
``t`` is one value per (batch, kv head).)

Causal masking is bottom-right aligned; the key loop runs in two stages as in the tutorial: blocks
every row of the tile may see (no mask), then the diagonal / ragged-tail blocks (masked).
"""

from __future__ import annotations

import struct

import torch
import triton
import triton.language as tl
import triton.profiler.language as pl

from zyfa.kernels.triton._common import (
    block_scores, load_kv_block,
    AUTOTUNE_CONFIGS, LOG2E, BucketedAutotune, TileConfig, autotune_configs, device_arch, fixed_config,
    fixed_config_mode, interpreting, key_ranges, padded_headdim, prune_for_headdim,
)
from zyfa.numerics import ALPHA_MIN_EXP as _ALPHA_MIN_EXP, ALPHA_POLY, LEANP_BIAS_V2, TRITON_RECIPES

_INTERPRET = interpreting()
# "no NaN key": above any key index (the kernel compares it with the keys a row reads)
NO_NAN_KEY = tl.constexpr(2**30)
# spec v2's alpha polynomial (zyfa.numerics.ALPHA_POLY, fp32 values) and its lower limit
A0, A1, A2, A3, A4, A5, A6 = (tl.constexpr(c) for c in ALPHA_POLY)
ALPHA_MIN_EXP = tl.constexpr(_ALPHA_MIN_EXP)


@triton.jit
def _pow2(e):
    """2^e from the bits (exact) for integer-valued fp32 ``e`` in [-127, 127]; -127 is the subnormal 2^-127."""
    ei = e.to(tl.int32)
    return tl.where(ei >= -126, (ei + 127) << 23, 1 << 22).to(tl.float32, bitcast=True)


@triton.jit
def _alpha_v2(d):
    """Spec v2's alpha = 2^d (d <= 0), the fixed fp32 sequence of zyfa.numerics.alpha_v2: floor, six
    FMAs (ALPHA_POLY), an exact power of two; 0 below 2^-126."""
    dc = tl.maximum(d, ALPHA_MIN_EXP)
    i = tl.math.floor(dc)
    f = dc - i                                            # exact, in [0, 1)
    p = tl.fma(f, A6, A5)
    p = tl.fma(p, f, A4)
    p = tl.fma(p, f, A3)
    p = tl.fma(p, f, A2)
    p = tl.fma(p, f, A1)
    p = tl.fma(p, f, A0)
    return tl.where(d >= ALPHA_MIN_EXP, p * _pow2(i), 0.0)


@triton.jit
def _mul_rn(x, y, MUL_RN_ASM: tl.constexpr):
    """fp32 ``x * y`` rounded on its own: the spec's ``fp32(acc * alpha)`` must not be contracted with
    the following add into one FMA (ptxas fuses mul.f32 + add.f32 by default; mul.rn.f32 it never does).
    The interpreter (numpy) does not fuse; on ROCm the plain product is left to the compiler."""
    if MUL_RN_ASM:
        x, y = tl.broadcast(x, y)
        return tl.inline_asm_elementwise("mul.rn.f32 $0, $1, $2;", "=r,r,r", [x, y], dtype=tl.float32,
                                         is_pure=True, pack=1)
    else:
        return x * y


@triton.jit
def _lean_p_v2(s, x_b, valid, t, T8, whole, phi, C2: tl.constexpr):
    """Spec v2 steps 3-4 for one 64-key block of a tile: (P as e4m3, its block scale 2^e, 0 if dropped)."""
    n = tl.math.ceil(x_b - phi)
    cst = tl.where(valid, (C2 - 8.0 * phi) - 8.0 * n, 0.0)  # c - 8 bm'
    y = tl.fma(s, T8, cst[:, None])
    code = tl.minimum(tl.where(y >= 0.0, y, 0.0).to(tl.int32), 126)  # truncating convert, clamp 126
    p = code.to(tl.uint8).to(tl.float8e4nv, bitcast=True)
    e = tl.where(valid, n - 8.0 - whole, -1000.0)
    return p, tl.where(e >= -127.0, _pow2(tl.maximum(e, -127.0)), 0.0)


@triton.jit
def _zero_v_nan(v):
    """V with its NaN codes (0x7f / 0xff) zeroed: P is 0 at masked keys, but 0 * NaN is NaN."""
    bits = v.to(tl.uint8, bitcast=True)
    return tl.where((bits & 0x7F) == 0x7F, 0, bits).to(tl.uint8).to(tl.float8e4nv, bitcast=True)


@triton.jit
def _attn_fwd_fp8_inner_v2(acc, l_i, m_i, q, k_base, v_base, t, T8,
                           stride_ks, stride_vs, stride_vd, offs_m, offs_d, offs_dv,
                           lo, hi, offset, SEQ_K,
                           HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
                           BLOCK_N: tl.constexpr, MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr,
                           WARP_SPEC: tl.constexpr, INTERPRET: tl.constexpr, PROTON: tl.constexpr,
                           IMPRECISE_ACC: tl.constexpr, C2: tl.constexpr, NAN_CHECKS: tl.constexpr,
                           MUL_RN_ASM: tl.constexpr):
    """Spec v2 (docs/numerics.md): tiles of two 64-key blocks; the running max M grows once per tile
    (from both blocks' x_b = t * block max), then each block's P has its own E8M0 scale 2^e; acc and
    l are rescaled by alpha = 2^(M_old - M) (the FMA sequence of _alpha_v2), rounded, then each
    block's P @ V * 2^e is added."""
    offs_n0 = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, 2 * BLOCK_N, warp_specialize=WARP_SPEC):
        offs_a = start_n + offs_n0
        offs_b = offs_a + BLOCK_N
        kta, va = load_kv_block(k_base, v_base, offs_a, offs_d, offs_dv, stride_ks, stride_vs, stride_vd, SEQ_K,
                                HEAD_DIM, HEAD_DIM_V, MASKED)
        ktb, vb = load_kv_block(k_base, v_base, offs_b, offs_d, offs_dv, stride_ks, stride_vs, stride_vd, SEQ_K,
                                HEAD_DIM, HEAD_DIM_V, MASKED)
        if PROTON:
            pl.enter_scope("qk")
        sa = block_scores(q, kta, offs_a, offs_m, offset, SEQ_K, MASKED, IS_CAUSAL, INTERPRET, IMPRECISE_ACC)
        sb = block_scores(q, ktb, offs_b, offs_m, offset, SEQ_K, MASKED, IS_CAUSAL, INTERPRET, IMPRECISE_ACC)
        if PROTON:
            pl.exit_scope("qk")
            pl.enter_scope("softmax")
        if NAN_CHECKS and MASKED:  # as the v1 loop
            va = _zero_v_nan(va)
            vb = _zero_v_nan(vb)
        # -- running max once per tile, phi = frac(M); alpha = 2^(M_old - M) where M grew ----
        mxa = tl.max(sa, 1)
        mxb = tl.max(sb, 1)
        valid_a = mxa > float("-inf")
        valid_b = mxb > float("-inf")
        x_a = tl.where(valid_a, t * mxa, float("-inf"))
        x_b = tl.where(valid_b, t * mxb, float("-inf"))
        m_new = tl.maximum(m_i, tl.maximum(x_a, x_b))
        whole = tl.math.floor(m_new)
        phi = m_new - whole                                   # exact
        pa, sca = _lean_p_v2(sa, x_a, valid_a, t, T8, whole, phi, C2)
        pb, scb = _lean_p_v2(sb, x_b, valid_b, t, T8, whole, phi, C2)
        alpha = tl.where(m_new > m_i, _alpha_v2(m_i - m_new), 1.0)
        if PROTON:
            pl.exit_scope("softmax")
            pl.enter_scope("pv")
        if INTERPRET:
            pva = tl.dot(pa.to(tl.float32), va.to(tl.float32), input_precision="ieee")
            pvb = tl.dot(pb.to(tl.float32), vb.to(tl.float32), input_precision="ieee")
        else:
            pva = tl.dot(pa, va, max_num_imprecise_acc=IMPRECISE_ACC)
            pvb = tl.dot(pb, vb, max_num_imprecise_acc=IMPRECISE_ACC)
        # spec v2 step 5: acc = fp32(acc * alpha), then + ldexp(P V, e) per block (2^e exact)
        acc = _mul_rn(acc, alpha[:, None], MUL_RN_ASM)
        acc = acc + pva * sca[:, None]
        acc = acc + pvb * scb[:, None]
        l_i = _mul_rn(l_i, alpha, MUL_RN_ASM)
        l_i = l_i + tl.sum(pa.to(tl.float32), 1) * sca
        l_i = l_i + tl.sum(pb.to(tl.float32), 1) * scb
        m_i = m_new
        if PROTON:
            pl.exit_scope("pv")
    return acc, l_i, m_i


@triton.jit
def _attn_fwd_fp8_inner(acc, l_i, m_i, q, k_base, v_base, t, T8,
                        stride_ks, stride_vs, stride_vd, offs_m, offs_d, offs_dv,
                        lo, hi, offset, SEQ_K,
                        HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
                        BLOCK_N: tl.constexpr, MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr,
                        WARP_SPEC: tl.constexpr, ROWSUM_MMA: tl.constexpr, ACC_IN_DOT: tl.constexpr,
                        SCALED_PV: tl.constexpr, INTERPRET: tl.constexpr, PROTON: tl.constexpr,
                        IMPRECISE_ACC: tl.constexpr, NAN_CHECKS: tl.constexpr):
    offs_n0 = tl.arange(0, BLOCK_N)
    magic: tl.constexpr = 12582912.0  # 1.5 * 2**23
    if ROWSUM_MMA:  # P @ ones gives the rounded-P row sum on the tensor cores (gfx950: one extra MFMA)
        ones = tl.full([BLOCK_N, 16], 56, tl.uint8).to(tl.float8e4nv, bitcast=True)  # e4m3 code 56 = 1.0
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPEC):
        offs_n = start_n + offs_n0
        kt, v = load_kv_block(k_base, v_base, offs_n, offs_d, offs_dv, stride_ks, stride_vs, stride_vd, SEQ_K,
                              HEAD_DIM, HEAD_DIM_V, MASKED)
        # -- s = q k^T (fp32 accumulate) ----
        if PROTON:
            pl.enter_scope("qk")
        s = block_scores(q, kt, offs_n, offs_m, offset, SEQ_K, MASKED, IS_CAUSAL, INTERPRET, IMPRECISE_ACC)
        if PROTON:
            pl.exit_scope("qk")
            pl.enter_scope("softmax")
        # -- NaN (docs/numerics.md, "Non-finite inputs"): the host found the first NaN key of K and of
        # each V column (first_nan_keys) and the epilogue marks the rows that read them, so the unmasked
        # blocks do no NaN work at all (run 19: per-block checks made the kernel 3.1x slower). Only
        # here: P is 0 at masked keys, but 0 * NaN is NaN, so V's NaN codes (0x7f / 0xff) are zeroed
        if NAN_CHECKS and MASKED:
            v = _zero_v_nan(v)
        # -- per-64-key power-of-two scale: bm = ceil(t * max s) ----
        mx = tl.max(s, 1)
        valid = mx > float("-inf")
        bm = tl.where(valid, tl.math.ceil(t * mx), 0.0)
        m_new = tl.maximum(m_i, tl.where(valid, bm, float("-inf")))
        # -- Lean P (magic rounding): e4m3 code = low byte of max(fma(s, 8t, C), 1.5*2^23) ----
        c = (120.0 - 8.0 * bm) + magic
        f = tl.fma(s, T8, c[:, None])
        code = (tl.maximum(f, magic).to(tl.int32, bitcast=True) & 0xFF).to(tl.uint8)
        p = code.to(tl.float8e4nv, bitcast=True)
        # -- rescale and accumulate: acc = acc * 2^(m - m_new) + (P V) * 2^(bm - 8 - m_new) ----
        e = bm - 8.0 - m_new
        alpha = tl.where(m_new > float("-inf"), tl.math.exp2(m_i - m_new), 1.0)
        if ACC_IN_DOT:
            # acc = dot(P, V, acc * alpha / c) * c with c = 2^max(e, -100): both factors are powers
            # of two (exact); the clamp keeps alpha / c finite (blocks below 2^-100 are invisible in fp32).
            e_c = tl.maximum(e, -100.0)
            pre = tl.where(valid, tl.math.exp2(m_i - m_new - e_c), 1.0)
            post = tl.where(valid, tl.math.exp2(e_c), 1.0)
        else:
            blk_scale = tl.where(valid & (e >= -127.0), tl.math.exp2(e), 0.0)
        if PROTON:
            pl.exit_scope("softmax")
            pl.enter_scope("pv")
        if INTERPRET:
            p_op = p.to(tl.float32)
            v_op = v.to(tl.float32)
        else:
            p_op = p
            v_op = v
        if SCALED_PV:
            # gfx950: v_mfma_scale_f32_*_f8f6f4 applies 2^e to P for free (E8M0 code e + 127, one per
            # 32 keys; e < -127 clamps to 2^-127 instead of dropping the block, invisible in fp32)
            e8m0 = (tl.maximum(e, -127.0) + 127.0).to(tl.uint8)
            p_scale = tl.broadcast_to(e8m0[:, None], [s.shape[0], BLOCK_N // 32])
            acc = tl.dot_scaled(p, p_scale, "e4m3", v, None, "e4m3", acc=acc * alpha[:, None])
        elif ACC_IN_DOT:
            acc = tl.dot(p_op, v_op, acc * pre[:, None], input_precision="ieee" if INTERPRET else None,
                         max_num_imprecise_acc=IMPRECISE_ACC) * post[:, None]
        else:
            pv = tl.dot(p_op, v_op, input_precision="ieee" if INTERPRET else None,
                        max_num_imprecise_acc=IMPRECISE_ACC)
            acc = acc * alpha[:, None] + pv * blk_scale[:, None]
        if ROWSUM_MMA:
            if INTERPRET:
                ones_op = ones.to(tl.float32)
            else:
                ones_op = ones
            if ACC_IN_DOT:
                l_i = tl.dot(p_op, ones_op, l_i * pre[:, None],
                             input_precision="ieee" if INTERPRET else None) * post[:, None]
            else:
                rowsum = tl.dot(p_op, ones_op, input_precision="ieee" if INTERPRET else None)
                l_i = l_i * alpha[:, None] + rowsum * blk_scale[:, None]
        else:
            if ACC_IN_DOT:
                l_i = l_i * alpha + tl.sum(p.to(tl.float32), 1) * tl.where(valid, tl.math.exp2(e_c), 0.0)
            else:
                l_i = l_i * alpha + tl.sum(p.to(tl.float32), 1) * blk_scale
        m_i = m_new
        if PROTON:
            pl.exit_scope("pv")
    return acc, l_i, m_i


@triton.autotune(configs=autotune_configs(fp8=True), prune_configs_by={"early_config_prune": prune_for_headdim(fp8=True)},
                 key=["SEQ_Q", "SEQ_K", "HEAD_DIM", "HEAD_DIM_V", "IS_CAUSAL", "NAN_CHECKS",
                      "RECIPE_V2"],  # v1 and v2 are different kernels: one winner each
                 cache_results=not _INTERPRET)
@triton.jit
def _attn_fwd_fp8(Q, K, V, Out, Lse, T, DV, NanK, NanV,
                  stride_qb, stride_qs, stride_qh,
                  stride_kb, stride_ks, stride_kh,
                  stride_vb, stride_vs, stride_vh, stride_vd,
                  stride_ob, stride_os, stride_oh,
                  stride_lb, stride_lh, stride_tb,
                  H, GROUP, SEQ_Q, SEQ_K,
                  HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
                  HEAD_DIM_PAD: tl.constexpr, HEAD_DIM_V_PAD: tl.constexpr,
                  IS_CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  WARP_SPEC: tl.constexpr, ROWSUM_MMA: tl.constexpr, ACC_IN_DOT: tl.constexpr,
                  INTERPRET: tl.constexpr, SCALED_PV: tl.constexpr = False, PROTON: tl.constexpr = False,
                  IMPRECISE_ACC: tl.constexpr = None, RECIPE_V2: tl.constexpr = False,
                  C2: tl.constexpr = LEANP_BIAS_V2, NAN_CHECKS: tl.constexpr = True,
                  MUL_RN_ASM: tl.constexpr = False):
    tl.static_assert(BLOCK_N == 64, "ZYFA scales P per 64-key block")
    # grid (query tiles, batch * heads): consecutive programs share one head's K and V in L2
    # (heads-fastest with heaviest tiles first measured 2-7% slower on the H200, run 3)
    start_m = tl.program_id(0) * BLOCK_M
    off_bh = tl.program_id(1)
    off_b = off_bh // H
    off_h = off_bh % H
    off_hk = off_h // GROUP  # GQA: query head h reads KV head h // GROUP
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    offs_dv = tl.arange(0, HEAD_DIM_V_PAD)
    # -- per-(batch, kv-head) constants: t = fp32(scale*LOG2E) * fp32(dq*dk), T8 = 8t, dv ----
    t = tl.load(T + off_b * stride_tb + off_hk)
    T8 = 8.0 * t
    dv = tl.load(DV + off_b * stride_tb + off_hk)
    # -- Q tile, stays in registers ----
    q_ptrs = Q + off_b * stride_qb + off_h * stride_qh + offs_m[:, None] * stride_qs + offs_d[None, :]
    q = tl.load(q_ptrs, mask=(offs_m[:, None] < SEQ_Q) & (offs_d[None, :] < HEAD_DIM), other=0.0)
    k_base = K + off_b * stride_kb + off_hk * stride_kh
    v_base = V + off_b * stride_vb + off_hk * stride_vh
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    if ROWSUM_MMA:
        l_i = tl.zeros([BLOCK_M, 16], dtype=tl.float32)  # 16 equal columns of P @ ones
    else:
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_V_PAD], dtype=tl.float32)
    # -- key ranges: [0, full_hi) unmasked for every row of the tile, [full_hi, hi) masked; spec v2 steps
    # by tiles of two 64-key blocks aligned to key 0 ----
    if RECIPE_V2:
        full_hi, hi, offset = key_ranges(start_m, SEQ_Q, SEQ_K, BLOCK_M, 2 * BLOCK_N, IS_CAUSAL)
        acc, l_i, m_i = _attn_fwd_fp8_inner_v2(acc, l_i, m_i, q, k_base, v_base, t, T8,
                                               stride_ks, stride_vs, stride_vd, offs_m, offs_d, offs_dv,
                                               0, full_hi, offset, SEQ_K, HEAD_DIM, HEAD_DIM_V, BLOCK_N,
                                               False, IS_CAUSAL, WARP_SPEC, INTERPRET, PROTON, IMPRECISE_ACC,
                                               C2, NAN_CHECKS, MUL_RN_ASM)
        acc, l_i, m_i = _attn_fwd_fp8_inner_v2(acc, l_i, m_i, q, k_base, v_base, t, T8,
                                               stride_ks, stride_vs, stride_vd, offs_m, offs_d, offs_dv,
                                               full_hi, hi, offset, SEQ_K, HEAD_DIM, HEAD_DIM_V, BLOCK_N,
                                               True, IS_CAUSAL, WARP_SPEC, INTERPRET, PROTON, IMPRECISE_ACC,
                                               C2, NAN_CHECKS, MUL_RN_ASM)
    else:
        full_hi, hi, offset = key_ranges(start_m, SEQ_Q, SEQ_K, BLOCK_M, BLOCK_N, IS_CAUSAL)
        acc, l_i, m_i = _attn_fwd_fp8_inner(acc, l_i, m_i, q, k_base, v_base, t, T8,
                                            stride_ks, stride_vs, stride_vd, offs_m, offs_d, offs_dv,
                                            0, full_hi, offset, SEQ_K, HEAD_DIM, HEAD_DIM_V, BLOCK_N,
                                            False, IS_CAUSAL, WARP_SPEC, ROWSUM_MMA, ACC_IN_DOT,
                                            SCALED_PV, INTERPRET, PROTON, IMPRECISE_ACC, NAN_CHECKS)
        acc, l_i, m_i = _attn_fwd_fp8_inner(acc, l_i, m_i, q, k_base, v_base, t, T8,
                                            stride_ks, stride_vs, stride_vd, offs_m, offs_d, offs_dv,
                                            full_hi, hi, offset, SEQ_K, HEAD_DIM, HEAD_DIM_V, BLOCK_N,
                                            True, IS_CAUSAL, WARP_SPEC, ROWSUM_MMA, ACC_IN_DOT,
                                            SCALED_PV, INTERPRET, PROTON, IMPRECISE_ACC, NAN_CHECKS)
    # -- epilogue: out = fp32(acc / l) * dv -> bf16; lse = (m + log2 l) ln2; empty rows -> 0, +inf ----
    if ROWSUM_MMA:
        l_i = tl.max(l_i, 1)
    has_keys = l_i > 0.0
    l_safe = tl.where(has_keys, l_i, 1.0)
    out = tl.div_rn(acc, l_safe[:, None]) * dv
    out = tl.where(has_keys[:, None], out, 0.0)
    lse = tl.where(has_keys, (m_i + tl.log2(l_safe)) * 0.6931471805599453, float("inf"))  # ln 2
    # -- NaN: row i reads the keys <= i + offset (causal) or all of them. A NaN in its q row or in a key
    # of K it reads makes out and lse NaN; a NaN in V column c at a key it reads makes out[i, c] NaN
    # (a row with no allowed key reads nothing). NanK / NanV: first NaN key per (batch, kv head) of K
    # and per V column, NO_NAN_KEY where none (first_nan_keys) ----
    if NAN_CHECKS:
        if IS_CAUSAL:
            last = offs_m + offset
        else:
            last = offs_m * 0 + (NO_NAN_KEY - 1)
        first_k = tl.load(NanK + off_b * stride_tb + off_hk)
        first_v = tl.load(NanV + (off_b * stride_tb + off_hk) * HEAD_DIM_V + offs_dv, mask=offs_dv < HEAD_DIM_V,
                          other=NO_NAN_KEY)
        out = tl.where(first_v[None, :] <= last[:, None], float("nan"), out)
        nan_q = tl.max(tl.where((q.to(tl.uint8, bitcast=True) & 0x7F) == 0x7F, 1, 0), 1) > 0  # q rows holding a NaN
        nan_i = (nan_q | (first_k <= last)) & (SEQ_K > 0) & ((offs_m + offset >= 0) | (not IS_CAUSAL))
        out = tl.where(nan_i[:, None], float("nan"), out)
        lse = tl.where(nan_i, float("nan"), lse)
    o_ptrs = Out + off_b * stride_ob + off_h * stride_oh + offs_m[:, None] * stride_os + offs_dv[None, :]
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=(offs_m[:, None] < SEQ_Q) & (offs_dv[None, :] < HEAD_DIM_V))
    tl.store(Lse + off_b * stride_lb + off_h * stride_lh + offs_m, lse, mask=offs_m < SEQ_Q)


# what attention_fp8 launches by default: autotuned once per power-of-two bucket of the lengths
_attn_fwd_fp8_bucketed = BucketedAutotune(_attn_fwd_fp8)

# The fixed-config mode's twin (``ZYFA_TRITON_FIXED_CONFIG=1``, _common): the same kernel with the
# arguments that change with the sequence lengths not specialised (V transposed: stride_vd = seqlen_k,
# stride_vh = headdim_v * seqlen_k), so one compile serves every length
_attn_fwd_fp8_any_len = triton.jit(_attn_fwd_fp8.fn.fn, do_not_specialize=[
    "SEQ_Q", "SEQ_K", "stride_lb", "stride_lh", "stride_vh", "stride_vd"])


@triton.jit
def _first_nan_keys_kernel(K, V, NanK, NanV, SEQ_K, H_K,
                           stride_kb, stride_ks, stride_kh, stride_kd,
                           stride_vb, stride_vs, stride_vh, stride_vd,
                           HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
                           HEAD_DIM_V_PAD: tl.constexpr, BLOCK_S: tl.constexpr):
    # grid (key blocks, batch * kv heads): each program reads BLOCK_S keys of K and of V once (bytes:
    # e4m3 NaN is code 0x7f / 0xff) and lowers the first-NaN words by atomic min, which is
    # order-independent, so the result does not depend on the programs' order
    off_bh = tl.program_id(1)
    off_b = off_bh // H_K
    off_hk = off_bh % H_K
    offs_s = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    offs_dv = tl.arange(0, HEAD_DIM_V_PAD)
    in_s = offs_s < SEQ_K
    k = tl.load(K + off_b * stride_kb + off_hk * stride_kh + offs_s[:, None] * stride_ks + offs_d[None, :] * stride_kd,
                mask=in_s[:, None] & (offs_d[None, :] < HEAD_DIM), other=0)
    first_k = tl.min(tl.min(tl.where((k & 0x7F) == 0x7F, offs_s[:, None], NO_NAN_KEY), 1), 0)
    tl.atomic_min(NanK + off_b * H_K + off_hk, first_k, mask=first_k < NO_NAN_KEY)
    v = tl.load(V + off_b * stride_vb + off_hk * stride_vh + offs_s[:, None] * stride_vs + offs_dv[None, :] * stride_vd,
                mask=in_s[:, None] & (offs_dv[None, :] < HEAD_DIM_V), other=0)
    first_v = tl.min(tl.where((v & 0x7F) == 0x7F, offs_s[:, None], NO_NAN_KEY), 0)
    tl.atomic_min(NanV + off_bh * HEAD_DIM_V + offs_dv, first_v, mask=(offs_dv < HEAD_DIM_V) & (first_v < NO_NAN_KEY))


def first_nan_keys(k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """First NaN key (e4m3 code 0x7f / 0xff) of K per (batch, kv head), ``(b, h_k)``, and of each V
    column, ``(b, h_k, d_v)``, int32, ``NO_NAN_KEY`` (2^30) where there is none: the kernel's NaN rule
    from them (a row reads a prefix of the keys). Two fills and one kernel that reads K and V once
    (the torch form, eight elementwise passes, cost the FP8 call 1.36x at 8K on the H200: run 13);
    no host sync."""
    b, s, h_k, d_v = v.shape
    nan_k = torch.full((b, h_k), NO_NAN_KEY.value, dtype=torch.int32, device=k.device)
    nan_v = torch.full((b, h_k, d_v), NO_NAN_KEY.value, dtype=torch.int32, device=v.device)
    if s == 0 or b * h_k == 0:
        return nan_k, nan_v
    k8, v8 = k.view(torch.uint8), v.view(torch.uint8)
    block_s = 64
    _first_nan_keys_kernel[(triton.cdiv(s, block_s), b * h_k)](
        k8, v8, nan_k, nan_v, s, h_k, *k8.stride(), *v8.stride(),
        HEAD_DIM=k.shape[3], HEAD_DIM_V=d_v, HEAD_DIM_PAD=triton.next_power_of_2(k.shape[3]),
        HEAD_DIM_V_PAD=triton.next_power_of_2(d_v), BLOCK_S=block_s, num_warps=4)
    return nan_k, nan_v


def fp8_constants(softmax_scale: float, q_descale: torch.Tensor, k_descale: torch.Tensor) -> torch.Tensor:
    """``t = fp32(fp32(softmax_scale * LOG2E) * fp32(dq * dk))`` per (batch, kv-head), float32.

    The scalar is rounded to fp32 on the host (``struct``) and multiplies the fp32 tensor as a
    Python number, which torch applies in fp32: no host-to-device copy, so no stream sync.
    """
    scale_log2 = struct.unpack("<f", struct.pack("<f", softmax_scale * LOG2E))[0]
    return ((q_descale.float() * k_descale.float()) * scale_log2).contiguous()


def fp8_launch_constants(softmax_scale: float, v: torch.Tensor, q_descale, k_descale, v_descale):
    """``(t, dv)`` float32 ``(b, h_k)`` for an FP8 launch: descales default to 1 (None)."""
    b, _, h_k, _ = v.shape
    ones = torch.ones(b, h_k, dtype=torch.float32, device=v.device)
    dq = ones if q_descale is None else q_descale
    dk = ones if k_descale is None else k_descale
    dv = (ones if v_descale is None else v_descale).float().contiguous()
    return fp8_constants(softmax_scale, dq, dk), dv


def attention_fp8(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float, causal: bool,
                  q_descale: torch.Tensor | None = None, k_descale: torch.Tensor | None = None,
                  v_descale: torch.Tensor | None = None, transpose_v: bool | None = None,
                  out_dtype: torch.dtype = torch.bfloat16, config: TileConfig | None = None,
                  proton_scopes: bool = False, recipe: str = "zyfa-v1",
                  nan_checks: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """ZYFA FP8 forward. q, k, v: float8_e4m3fn ``(b, s, h, d)``; descales float32 ``(b, h_k)``.

    Returns ``out`` bfloat16 ``(b, s_q, h, d_v)`` and ``softmax_lse`` float32 ``(b, h, s_q)``.
    ``transpose_v`` (default: on CUDA GPUs) first copies V to a key-contiguous layout, which the
    Hopper fp8 tensor-core instruction needs for its B operand; the copy is part of the call.
    ``out_dtype=torch.float32`` keeps the fp32 ``(acc / l) * dv`` unrounded (tests). ``config``
    bypasses the autotuner, as does the test-only ``ZYFA_TRITON_FIXED_CONFIG=1`` (_common); ``proton_scopes`` (needs ``config``) compiles Proton scopes ``qk``,
    ``softmax``, ``pv`` around the three phases of the key loop (see :mod:`zyfa.trace.proton`).
    ``recipe``: ``"zyfa-v1"`` (magic rounding, the kernel benchmarked so far) or ``"zyfa-v2"``
    (docs/numerics.md spec v2; plain PV path only). ``nan_checks=False`` compiles the kernel
    without the non-finite rules of docs/numerics.md (a NaN input then gives wrong rows): only to
    measure what they cost (benchmarks/bench_nan_checks.py); same bits on finite input.
    """
    if not isinstance(nan_checks, bool):
        raise TypeError(f"nan_checks must be a bool, got {type(nan_checks).__name__}")
    if recipe not in TRITON_RECIPES:
        raise ValueError(f"recipe must be one of {TRITON_RECIPES} (the Triton kernels; \"zyfa-folded\" is gfx950 only), got {recipe!r}")
    b, s_q, h, d = q.shape
    _, s_k, h_k, d_v = v.shape
    kernel = _attn_fwd_fp8_bucketed
    if config is None and fixed_config_mode():
        config = fixed_config(True, padded_headdim(d, fp8=True), padded_headdim(d_v, fp8=True))
        kernel = _attn_fwd_fp8_any_len
    if recipe == "zyfa-v2":
        candidates = [config] if config is not None else [None]
        if config is None and not _INTERPRET:
            table = AUTOTUNE_CONFIGS.get((device_arch(), "fp8"), AUTOTUNE_CONFIGS[("default", "fp8")])
            candidates = [c for tier in table.values() for c in tier]
        if any(c is not None and (c.rowsum_mma or c.acc_in_dot or c.scaled_pv) for c in candidates):
            raise ValueError("recipe 'zyfa-v2' runs the plain PV / row-sum path only: pass a config without "
                             "rowsum_mma, acc_in_dot and scaled_pv (the gfx950 autotune list uses scaled_pv)")
    if proton_scopes and config is None:
        raise ValueError("proton_scopes=True needs an explicit config (the autotuner would time instrumented code)")
    if out_dtype not in (torch.bfloat16, torch.float32):
        raise ValueError(f"out_dtype must be torch.bfloat16 or torch.float32, got {out_dtype}")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dtype != torch.float8_e4m3fn:
            raise TypeError(f"{name} must be float8_e4m3fn, got {x.dtype}")
    t, dv = fp8_launch_constants(softmax_scale, v, q_descale, k_descale, v_descale)
    if transpose_v is None:
        transpose_v = q.is_cuda and torch.version.hip is None and not _INTERPRET
    if transpose_v:
        v_t = v.permute(0, 2, 3, 1).contiguous()  # (b, h_k, d_v, s_k): keys contiguous
        v_strides = (v_t.stride(0), v_t.stride(3), v_t.stride(1), v_t.stride(2))
        v_arg = v_t
    else:
        v_strides = (v.stride(0), v.stride(1), v.stride(2), v.stride(3))
        v_arg = v
    out = torch.empty(b, s_q, h, d_v, dtype=out_dtype, device=q.device)
    lse = torch.empty(b, h, s_q, dtype=torch.float32, device=q.device)
    grid = lambda meta: (triton.cdiv(s_q, meta["BLOCK_M"]), b * h)  # noqa: E731
    launch = dict(IS_CAUSAL=causal, INTERPRET=_INTERPRET, RECIPE_V2=recipe == "zyfa-v2", NAN_CHECKS=nan_checks,
                  MUL_RN_ASM=recipe == "zyfa-v2" and q.is_cuda and torch.version.hip is None and not _INTERPRET)
    if config is not None:
        kernel = _attn_fwd_fp8.fn if kernel is _attn_fwd_fp8_bucketed else kernel
        launch.update(config.meta(fp8=True), PROTON=proton_scopes, num_warps=config.num_warps,
                      num_stages=config.num_stages)
    # NaN rule inputs; without the checks the kernel reads neither, any int32 tensor does
    nan_k, nan_v = first_nan_keys(k, v) if nan_checks else (t.view(torch.int32), t.view(torch.int32))
    kernel[grid](
        q, k, v_arg, out, lse, t, dv, nan_k, nan_v,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        *v_strides,
        out.stride(0), out.stride(1), out.stride(2),
        lse.stride(0), lse.stride(1), t.stride(0),
        h, h // h_k, s_q, s_k,
        HEAD_DIM=d, HEAD_DIM_V=d_v, HEAD_DIM_PAD=padded_headdim(d, fp8=True), HEAD_DIM_V_PAD=padded_headdim(d_v, fp8=True),
        **launch,
    )
    return out, lse
