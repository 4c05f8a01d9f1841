"""Triton kernels compiled ahead of time for gfx950: the emulator's validation set.

Code that a mature compiler produced is the test of the emulator's value semantics: each kernel
here is compiled on the CPU box with ``triton.compile(ASTSource(...), target=GPUTarget("hip",
"gfx950", 64))``, run in :mod:`zyfa.trace.emu`, and compared with torch. The attention kernel
follows Triton's tutorial 06 (``python/tutorials/06-fused-attention.py``): an inner-loop function
and a two-stage causal split (off-band blocks unmasked, the diagonal block masked).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

TARGET = GPUTarget("hip", "gfx950", 64)


@triton.jit
def vector_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@triton.jit
def softmax_rows(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    # one row per program: max and sum are cross-lane reductions (DPP / permutes)
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=-float("inf"))
    p = tl.math.exp2((x - tl.max(x, 0)) * 1.44269504)  # 1/log(2)
    tl.store(out_ptr + row * n_cols + offs, p / tl.sum(p, 0), mask=mask)


@triton.jit
def gemm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # C[M, N] = A[M, K] @ B[K, N], fp32 accumulate, row-major operands
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc)


@triton.jit
def gemm_scaled(a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, c_ptr, M, N, K,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, FORMAT: tl.constexpr,
                PACK: tl.constexpr):
    # C = (A * 2^(sa-127)) @ (B * 2^(sb-127)), MX scales per 32 elements of K; PACK elements
    # per byte along K (2 for e2m1, low nibble first)
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK // PACK)
    rs = tl.arange(0, BK // 32)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * (K // PACK) + (k // PACK + rk)[None, :])
        b = tl.load(b_ptr + (k // PACK + rk)[:, None] * N + rn[None, :])
        sa = tl.load(a_scale_ptr + rm[:, None] * (K // 32) + (k // 32 + rs)[None, :])
        sb = tl.load(b_scale_ptr + rn[:, None] * (K // 32) + (k // 32 + rs)[None, :])
        acc = tl.dot_scaled(a, sa, FORMAT, b, sb, FORMAT, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def _attn_fwd_inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, start_m, qk_scale,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr,
                    offs_m: tl.constexpr, offs_n: tl.constexpr, N_CTX: tl.constexpr):
    # range of values handled by this stage
    if STAGE == 1:  # causal, off-band blocks
        lo, hi = 0, start_m * BLOCK_M
    elif STAGE == 2:  # causal, the diagonal block
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
    else:  # non-causal: every key
        lo, hi = 0, N_CTX
    k_ptrs += lo * stride_kn
    v_ptrs += lo * stride_vn
    for start_n in range(lo, hi, BLOCK_N):
        # -- compute qk ----
        k = tl.load(k_ptrs)
        qk = tl.dot(q, k)
        if STAGE == 2:
            mask = offs_m[:, None] >= (start_n + offs_n[None, :])
            qk = qk * qk_scale + tl.where(mask, 0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        l_ij = tl.sum(p, 1)
        # -- update m_i and l_i
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + l_ij
        acc = acc * alpha[:, None]
        # -- update output accumulator --
        v = tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
        k_ptrs += BLOCK_N * stride_kn
        v_ptrs += BLOCK_N * stride_vn
    return acc, l_i, m_i


@triton.jit
def attn_fwd(Q, K, V, sm_scale, M, Out, stride_qh, stride_qm, stride_kh, stride_kn,
             stride_vh, stride_vn, stride_oh, stride_om,
             N_CTX: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr, STAGE: tl.constexpr):
    # Q, K, V, Out: (batch*heads, N_CTX, HEAD_DIM), unit stride along HEAD_DIM; M: lse in log2
    tl.static_assert(BLOCK_N <= HEAD_DIM)
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = Q + off_hz * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :]
    k_ptrs = K + off_hz * stride_kh + offs_n[None, :] * stride_kn + offs_d[:, None]
    v_ptrs = V + off_hz * stride_vh + offs_n[:, None] * stride_vn + offs_d[None, :]
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # 1/log(2)
    q = tl.load(q_ptrs)
    # stage 1: off-band blocks; stage 2: the diagonal block, masked
    if STAGE & 1:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn,
                                        start_m, qk_scale, BLOCK_M, BLOCK_N, 4 - STAGE,
                                        offs_m, offs_n, N_CTX)
    if STAGE & 2:
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn,
                                        start_m, qk_scale, BLOCK_M, BLOCK_N, 2,
                                        offs_m, offs_n, N_CTX)
    # epilogue
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(M + off_hz * N_CTX + offs_m, m_i)
    o_ptrs = Out + off_hz * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :]
    tl.store(o_ptrs, acc.to(Out.type.element_ty))


@dataclass(frozen=True)
class TritonBuild:
    """One AOT build: llvm-mc assembly text plus the compiler's launch metadata."""

    name: str
    asm: str
    num_warps: int
    shared: int


def _signature(fn, types: dict, constexprs: dict) -> dict:
    sig = dict(types)
    for name in constexprs:
        sig[name] = "constexpr"
    return {name: sig[name] for name in fn.arg_names}


@functools.lru_cache(maxsize=None)
def _compile(fn_name: str, types: tuple, constexprs: tuple, num_warps: int) -> TritonBuild:
    fn = globals()[fn_name]
    cx = dict(constexprs)
    src = ASTSource(fn, _signature(fn, dict(types), cx), constexprs=cx)
    kernel = triton.compile(src, target=TARGET, options={"num_warps": num_warps})
    return TritonBuild(fn_name, kernel.asm["amdgcn"], kernel.metadata.num_warps,
                       kernel.metadata.shared)


def build(fn_name: str, types: dict, constexprs: dict, num_warps: int = 4) -> TritonBuild:
    """Compile ``fn_name`` for gfx950 (cached per process)."""
    return _compile(fn_name, tuple(sorted(types.items())), tuple(sorted(constexprs.items())),
                    num_warps)


# -- the validation set: builds with their argument types ----
def vector_add_build(block: int = 256) -> TritonBuild:
    return build("vector_add", {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                                "n": "i32"}, {"BLOCK": block})


def softmax_build(block: int = 256, num_warps: int = 1) -> TritonBuild:
    return build("softmax_rows", {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_cols": "i32"},
                 {"BLOCK": block}, num_warps)


def gemm_build(dtype: str, bm: int = 32, bn: int = 32, bk: int = 64) -> TritonBuild:
    """``dtype``: ``bf16`` or ``fp8e4nv`` (OCP e4m3)."""
    if dtype not in ("bf16", "fp8e4nv"):
        raise ValueError(f"dtype must be 'bf16' or 'fp8e4nv', got {dtype!r}")
    return build("gemm", {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": "*fp32",
                          "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32",
                          "stride_bk": "i32", "stride_cm": "i32"},
                 {"BM": bm, "BN": bn, "BK": bk})


def gemm_scaled_build(fmt: str, bm: int = 32, bn: int = 32, bk: int = 128) -> TritonBuild:
    """``fmt``: ``e4m3`` (mxfp8) or ``e2m1`` (mxfp4, two values per byte)."""
    if fmt not in ("e4m3", "e2m1"):
        raise ValueError(f"fmt must be 'e4m3' or 'e2m1', got {fmt!r}")
    elem = "*u8" if fmt == "e2m1" else "*fp8e4nv"
    return build("gemm_scaled", {"a_ptr": elem, "a_scale_ptr": "*u8", "b_ptr": elem,
                                 "b_scale_ptr": "*u8", "c_ptr": "*fp32", "M": "i32", "N": "i32",
                                 "K": "i32"},
                 {"BM": bm, "BN": bn, "BK": bk, "FORMAT": fmt, "PACK": 2 if fmt == "e2m1" else 1})


def attn_build(n_ctx: int, head_dim: int, block_m: int = 64, block_n: int = 32,
               causal: bool = True) -> TritonBuild:
    strides = {name: "i32" for name in ("stride_qh", "stride_qm", "stride_kh", "stride_kn",
                                        "stride_vh", "stride_vn", "stride_oh", "stride_om")}
    return build("attn_fwd", {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "sm_scale": "fp32",
                              "M": "*fp32", "Out": "*bf16", **strides},
                 {"N_CTX": n_ctx, "HEAD_DIM": head_dim, "BLOCK_M": block_m, "BLOCK_N": block_n,
                  "STAGE": 3 if causal else 1})
