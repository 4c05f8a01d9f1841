"""BF16 / FP16 flash-attention forward in Triton (fp32 online softmax).

Follows the fused-attention tutorial of Triton (Tillet et al.), after FlashAttention-2 (Dao, 2023):
running row max ``m`` and sum ``l`` in fp32, ``p = exp2(t s - m)`` with ``t = softmax_scale *
log2(e)``, P cast to the input dtype for the PV product. Causal masking is bottom-right aligned;
the key loop runs in two stages (unmasked blocks, then diagonal / ragged-tail blocks).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from zyfa.kernels.triton._common import (
    block_scores, load_kv_block,
    LOG2E, BucketedAutotune, TileConfig, autotune_configs, fixed_config, fixed_config_mode, interpreting, key_ranges,
    padded_headdim, prune_for_headdim,
)

_INTERPRET = interpreting()


@triton.jit
def _attn_fwd_bf16_inner(acc, l_i, m_i, q, k_base, v_base, t,
                         stride_ks, stride_vs, offs_m, offs_d, offs_dv,
                         lo, hi, offset, SEQ_K,
                         HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
                         BLOCK_N: tl.constexpr, MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr,
                         WARP_SPEC: tl.constexpr, INTERPRET: tl.constexpr, NAN_CHECKS: tl.constexpr):
    offs_n0 = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPEC):
        offs_n = start_n + offs_n0
        kt, v = load_kv_block(k_base, v_base, offs_n, offs_d, offs_dv, stride_ks, stride_vs, 1, SEQ_K,
                              HEAD_DIM, HEAD_DIM_V, MASKED)
        s = block_scores(q, kt, offs_n, offs_m, offset, SEQ_K, MASKED, IS_CAUSAL, INTERPRET, None)
        # -- online softmax in base 2 ----
        m_new = tl.maximum(m_i, tl.max(s, 1) * t)
        m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)
        p = tl.math.exp2(s * t - m_safe[:, None])
        alpha = tl.math.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        if MASKED and NAN_CHECKS:  # NAN_CHECKS False only to measure their cost
            # P is 0 at masked keys, but 0 * NaN (or inf) is NaN: V's non-finite values are zeroed for
            # the product, and the output columns of the rows that allow such a key become NaN. Row i
            # allows key j iff j <= i + offset (causal; keys past SEQ_K were loaded as 0), so the first
            # non-finite key of each V column is enough: no extra product.
            vf = v.to(tl.float32)  # compared in fp32: the interpreter compares bf16 by its bits
            v_bad = (vf != vf) | (tl.abs(vf) == float("inf"))
            v = tl.where(v_bad, 0.0, v).to(q.dtype)
            first_bad = tl.min(tl.where(v_bad, offs_n[:, None], 2**30), 0)
            if IS_CAUSAL:
                bad_cols = first_bad[None, :] <= (offs_m + offset)[:, None]
            else:
                bad_cols = first_bad[None, :] < 2**30
        if INTERPRET:
            pv = tl.dot(p.to(q.dtype).to(tl.float32), v.to(tl.float32), input_precision="ieee")
            acc = acc * alpha[:, None] + pv
        else:
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        if MASKED and NAN_CHECKS:
            acc = tl.where(bad_cols, float("nan"), acc)
        m_i = m_new
    return acc, l_i, m_i


@triton.autotune(configs=autotune_configs(fp8=False), prune_configs_by={"early_config_prune": prune_for_headdim(fp8=False)},
                 key=["SEQ_Q", "SEQ_K", "HEAD_DIM", "HEAD_DIM_V", "IS_CAUSAL", "NAN_CHECKS"],
                 cache_results=not _INTERPRET)
@triton.jit
def _attn_fwd_bf16(Q, K, V, Out, Lse, t,
                   stride_qb, stride_qs, stride_qh,
                   stride_kb, stride_ks, stride_kh,
                   stride_vb, stride_vs, stride_vh,
                   stride_ob, stride_os, stride_oh,
                   stride_lb, stride_lh,
                   H, GROUP, SEQ_Q, SEQ_K,
                   HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
                   HEAD_DIM_PAD: tl.constexpr, HEAD_DIM_V_PAD: tl.constexpr,
                   IS_CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   WARP_SPEC: tl.constexpr, INTERPRET: tl.constexpr, NAN_CHECKS: tl.constexpr = True):
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
    q_ptrs = Q + off_b * stride_qb + off_h * stride_qh + offs_m[:, None] * stride_qs + offs_d[None, :]
    q = tl.load(q_ptrs, mask=(offs_m[:, None] < SEQ_Q) & (offs_d[None, :] < HEAD_DIM), other=0.0)
    k_base = K + off_b * stride_kb + off_hk * stride_kh
    v_base = V + off_b * stride_vb + off_hk * stride_vh
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_V_PAD], dtype=tl.float32)
    # -- key ranges: [0, full_hi) unmasked for every row of the tile, [full_hi, hi) masked ----
    full_hi, hi, offset = key_ranges(start_m, SEQ_Q, SEQ_K, BLOCK_M, BLOCK_N, IS_CAUSAL)
    acc, l_i, m_i = _attn_fwd_bf16_inner(acc, l_i, m_i, q, k_base, v_base, t,
                                         stride_ks, stride_vs, offs_m, offs_d, offs_dv,
                                         0, full_hi, offset, SEQ_K, HEAD_DIM, HEAD_DIM_V, BLOCK_N,
                                         False, IS_CAUSAL, WARP_SPEC, INTERPRET, NAN_CHECKS)
    acc, l_i, m_i = _attn_fwd_bf16_inner(acc, l_i, m_i, q, k_base, v_base, t,
                                         stride_ks, stride_vs, offs_m, offs_d, offs_dv,
                                         full_hi, hi, offset, SEQ_K, HEAD_DIM, HEAD_DIM_V, BLOCK_N,
                                         True, IS_CAUSAL, WARP_SPEC, INTERPRET, NAN_CHECKS)
    # -- epilogue: out = acc / l; lse = (m + log2 l) ln2; rows without keys -> 0, +inf ----
    has_keys = l_i != 0.0  # l >= 0, or NaN when the row read a NaN or inf score: NaN out, NaN lse
    l_safe = tl.where(has_keys, l_i, 1.0)
    out = tl.where(has_keys[:, None], acc / l_safe[:, None], 0.0)
    lse = tl.where(has_keys, (m_i + tl.log2(l_safe)) * 0.6931471805599453, float("inf"))  # ln 2
    o_ptrs = Out + off_b * stride_ob + off_h * stride_oh + offs_m[:, None] * stride_os + offs_dv[None, :]
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=(offs_m[:, None] < SEQ_Q) & (offs_dv[None, :] < HEAD_DIM_V))
    tl.store(Lse + off_b * stride_lb + off_h * stride_lh + offs_m, lse, mask=offs_m < SEQ_Q)


# what attention_bf16 launches by default: autotuned once per power-of-two bucket of the lengths
_attn_fwd_bf16_bucketed = BucketedAutotune(_attn_fwd_bf16)

# The fixed-config mode's twin (``ZYFA_TRITON_FIXED_CONFIG=1``, _common): the same kernel with the
# arguments that change with the sequence lengths not specialised, so one compile serves every length
_attn_fwd_bf16_any_len = triton.jit(_attn_fwd_bf16.fn.fn,
                                    do_not_specialize=["SEQ_Q", "SEQ_K", "stride_lb", "stride_lh"])


def attention_bf16(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float, causal: bool,
                   config: TileConfig | None = None, nan_checks: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """BF16/FP16 forward. q, k, v ``(b, s, h, d)`` with unit stride along d (GQA: fewer KV heads).

    Returns ``out`` (input dtype, ``(b, s_q, h, d_v)``) and ``softmax_lse`` float32 ``(b, h, s_q)``.
    ``config`` bypasses the autotuner, as does the test-only ``ZYFA_TRITON_FIXED_CONFIG=1`` (_common).
    ``nan_checks=False`` compiles the kernel without the masked-tile V rule of docs/numerics.md (a
    NaN or inf in V then reaches masked rows): only to measure what it costs
    (benchmarks/bench_nan_checks.py); same bits on finite input.
    """
    if not isinstance(nan_checks, bool):
        raise TypeError(f"nan_checks must be a bool, got {type(nan_checks).__name__}")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dtype not in (torch.bfloat16, torch.float16):
            raise TypeError(f"{name} must be bfloat16 or float16, got {x.dtype}")
    b, s_q, h, d = q.shape
    _, s_k, h_k, d_v = v.shape
    out = torch.empty(b, s_q, h, d_v, dtype=q.dtype, device=q.device)
    lse = torch.empty(b, h, s_q, dtype=torch.float32, device=q.device)
    grid = lambda meta: (triton.cdiv(s_q, meta["BLOCK_M"]), b * h)  # noqa: E731
    launch = dict(IS_CAUSAL=causal, INTERPRET=_INTERPRET, NAN_CHECKS=nan_checks)
    kernel = _attn_fwd_bf16_bucketed
    if config is None and fixed_config_mode():
        config = fixed_config(False, padded_headdim(d), padded_headdim(d_v))
        kernel = _attn_fwd_bf16_any_len
    if config is not None:
        kernel = _attn_fwd_bf16.fn if kernel is _attn_fwd_bf16_bucketed else kernel
        launch.update(config.meta(fp8=False), num_warps=config.num_warps, num_stages=config.num_stages)
    kernel[grid](
        q, k, v, out, lse, softmax_scale * LOG2E,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        lse.stride(0), lse.stride(1),
        h, h // h_k, s_q, s_k,
        HEAD_DIM=d, HEAD_DIM_V=d_v, HEAD_DIM_PAD=padded_headdim(d), HEAD_DIM_V_PAD=padded_headdim(d_v),
        **launch,
    )
    return out, lse
