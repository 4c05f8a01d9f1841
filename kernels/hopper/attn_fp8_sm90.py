"""FP8 (e4m3) causal flash-attention forward for Hopper (sm_90a) in CuTe DSL, with Lean P.

Schedule (after FlashAttention-3, Shah et al. 2024; written for this repository, not copied):

* one CTA = 128 query rows = two consumer warpgroups of 64 rows each, plus one producer warpgroup
  of which one warp issues every TMA load (Q once, then K and V tiles of 64 keys through two
  mbarrier rings); the producer gives registers back (``setmaxnreg`` 24), the consumers take them
  (``setmaxnreg`` 240);
* S = Q K^T and O += P V on the tensor cores (``wgmma`` fp8, fp32 accumulate), Q/K/V from shared
  memory, P from registers;
* named-barrier ping-pong between the two consumer warpgroups: each issues its GEMMs
  (QK^T of block j and PV of block j-1) only in its turn, so one warpgroup's softmax runs while the
  other's GEMMs keep the tensor cores busy; inside a warpgroup the softmax of block j overlaps the
  PV GEMM of block j-1 (intra-warpgroup overlap).

Numerics: ``docs/numerics.md`` recipe ``zyfa-v1``, Hopper "magic" rounding, per 64-key block:

* ``bm = ceil(t * max_j s_j)``; the e4m3 code of ``2^(t s - bm + 8)`` is the low byte of
  ``max(fma(s, 8t, (120 - 8 bm) + 1.5*2^23), 1.5*2^23)``: one FFMA, one FMNMX and a byte select
  (PRMT packs four codes into one A-operand register), no exp, no fp8 convert, no ``.ftz``;
* every block's PV GEMM starts from zero (so the tensor core's reduced-precision fp8 accumulation
  spans 64 keys only) and is merged into the fp32 accumulator with one FFMA,
  ``acc = acc * 2^(bm_prev - bm_j) + P_j V_j``: the accumulator stays in units of the last block's
  scale ``2^(bm_last - 8)``, the power of two is built from its exponent bits (exact), and the
  running max cancels out of the arithmetic;
* the row sum of the *rounded* P comes from the tensor cores: V is padded with 8 rows of ones
  (``d_v + 8`` columns of O), so column ``d_v`` of the accumulator is ``sum_j P_j`` scaled exactly
  like O;
* epilogue ``out = fp32(acc / l) * dv`` (bf16, round to nearest even) and
  ``lse = (bm_last - 8 + log2 l) ln 2``.

The fp32 accumulator layout of ``wgmma`` and its fp8 A-operand register layout differ; instead of
shuffling registers between threads (FA3's ``permute_Aregs_fp8``) this kernel keeps each thread's
own values and permutes V's keys in the host-side transpose instead (:func:`zyfa.kernels.hopper.layout.v_key_permutation`):
``P' V' = P V`` for any permutation applied to both.

Deviation from the spec (pathological inputs only): a block whose ``bm`` lies more than 64 below the
current reference ``bm_prev`` of its row is dropped (the spec drops blocks ``2^127`` below the
running max); this bounds ``2^(bm_prev - bm_j)`` so the accumulator cannot overflow.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import Float32, Int32, Int64, Uint32, const_expr
from cutlass._mlir.dialects import llvm
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.cute.runtime import from_dlpack
from cutlass.cutlass_dsl import T, dsl_user_op

from zyfa.kernels.hopper.layout import BLOCK_N, ONES_ROWS
from zyfa.kernels.hopper.vprep import prepare_v_triton
from zyfa.kernels.triton.attn_fp8 import fp8_launch_constants

BLOCK_M = 64          # query rows per consumer warpgroup
NUM_MMA_WG = 2        # consumer warpgroups per CTA
FREE_BARRIER = 4      # named barriers 4, 5: arrive-only, to order wgmma waits (arrive_after); 0: CTA, 2-3: ping-pong
MAX_DROP = 64.0       # blocks with bm < bm_prev - MAX_DROP are dropped (see module docstring)
LN2 = math.log(2.0)


# -- PTX helpers (inline asm: exact rounding modes, no .ftz) ----
@dsl_user_op
def lean_p_pack4(s0: Float32, s1: Float32, s2: Float32, s3: Float32, t8: Float32, c: Float32,
                 *, loc=None, ip=None) -> Uint32:
    """Four Lean P codes ``lowbyte(max(fma(s, t8, c), 1.5*2^23))`` packed little-endian into a u32."""
    return Uint32(llvm.inline_asm(
        T.i32(),
        [Float32(x).ir_value(loc=loc, ip=ip) for x in (s0, s1, s2, s3, t8, c)],
        "{\n"
        ".reg .f32 f0, f1, f2, f3;\n"
        ".reg .b32 lo, hi;\n"
        "fma.rn.f32 f0, $1, $5, $6;\n"
        "fma.rn.f32 f1, $2, $5, $6;\n"
        "fma.rn.f32 f2, $3, $5, $6;\n"
        "fma.rn.f32 f3, $4, $5, $6;\n"
        "max.f32 f0, f0, 0f4B400000;\n"
        "max.f32 f1, f1, 0f4B400000;\n"
        "max.f32 f2, f2, 0f4B400000;\n"
        "max.f32 f3, f3, 0f4B400000;\n"
        "mov.b32 lo, f0;\n"
        "mov.b32 hi, f1;\n"
        "prmt.b32 lo, lo, hi, 0x0040;\n"
        "mov.b32 hi, f2;\n"
        "mov.b32 $0, f3;\n"
        "prmt.b32 hi, hi, $0, 0x0040;\n"
        "prmt.b32 $0, lo, hi, 0x5410;\n"
        "}\n",
        "=&r,f,f,f,f,f,f",
        has_side_effects=False, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT,
    ))


def _ptx_f32(ptx: str, *args, loc=None, ip=None) -> Float32:
    """One fp32 result of inline PTX over fp32 operands ``$1..$n`` (exact instruction choice: no
    fast-math rewrites, no ``.ftz``)."""
    return Float32(llvm.inline_asm(
        T.f32(), [Float32(x).ir_value(loc=loc, ip=ip) for x in args], ptx,
        ",".join(["=f"] + ["f"] * len(args)),
        has_side_effects=False, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT,
    ))


@dsl_user_op
def pow2_of(d: Float32, *, loc=None, ip=None) -> Float32:
    """``2^d`` for an integral fp32 ``d`` <= 127, built from exponent bits (exact); 0 for d < -126."""
    return _ptx_f32("{\n.reg .s32 i;\ncvt.rni.sat.s32.f32 i, $1;\nmax.s32 i, i, -127;\nadd.s32 i, i, 127;\n"
                    "shl.b32 i, i, 23;\nmov.b32 $0, i;\n}\n", d, loc=loc, ip=ip)


@dsl_user_op
def after_word(x: Float32, word: Uint32, *, loc=None, ip=None) -> Float32:
    """``x`` unchanged, but computed from ``word`` (a packed P register: every code <= 120, so bit 31
    is 0): orders the ops that use the result after the P codes, so ptxas cannot hoist them (and
    the wgmma wait in front of them) above the softmax."""
    return Float32(llvm.inline_asm(
        T.f32(), [Float32(x).ir_value(loc=loc, ip=ip), Uint32(word).ir_value(loc=loc, ip=ip)],
        "{\n.reg .b32 t, s;\nshr.u32 t, $2, 31;\nmov.b32 s, $1;\nor.b32 s, s, t;\nmov.b32 $0, s;\n}\n",
        "=f,f,r", has_side_effects=False, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT,
    ))


@dsl_user_op
def fma_rn(a: Float32, b: Float32, c: Float32, *, loc=None, ip=None) -> Float32:
    """``fma.rn.f32`` (single rounding)."""
    return _ptx_f32("fma.rn.f32 $0, $1, $2, $3;", a, b, c, loc=loc, ip=ip)


@dsl_user_op
def mul_rn(a: Float32, b: Float32, *, loc=None, ip=None) -> Float32:
    """``mul.rn.f32`` (IEEE, no flush to zero)."""
    return _ptx_f32("mul.rn.f32 $0, $1, $2;", a, b, loc=loc, ip=ip)


@dsl_user_op
def add_rn(a: Float32, b: Float32, *, loc=None, ip=None) -> Float32:
    """``add.rn.f32`` (IEEE, no flush to zero)."""
    return _ptx_f32("add.rn.f32 $0, $1, $2;", a, b, loc=loc, ip=ip)


@dsl_user_op
def ceil_mul(t: Float32, x: Float32, *, loc=None, ip=None) -> Float32:
    """``ceil(fp32(t * x))`` (round-to-nearest product, then round towards +inf)."""
    return _ptx_f32("{\n.reg .f32 p;\nmul.rn.f32 p, $1, $2;\ncvt.rpi.f32.f32 $0, p;\n}\n", t, x, loc=loc, ip=ip)


@dsl_user_op
def div_rn(a: Float32, b: Float32, *, loc=None, ip=None) -> Float32:
    """IEEE ``a / b`` (``div.rn.f32``)."""
    return _ptx_f32("div.rn.f32 $0, $1, $2;", a, b, loc=loc, ip=ip)


@dsl_user_op
def log2_approx(a: Float32, *, loc=None, ip=None) -> Float32:
    """``lg2.approx.f32`` (no flush to zero), as Triton's ``tl.log2`` on NVIDIA."""
    return _ptx_f32("lg2.approx.f32 $0, $1;", a, loc=loc, ip=ip)


def row_max(acc_s: cute.Tensor, h: int, g0: int) -> Float32:
    """Max of row half ``h`` over the 64 keys of n8 groups ``g0 .. g0 + 7`` of an S accumulator (16
    values per thread, then across the quad's 4 threads). One chain per call: the callers interleave
    two (64-key blocks) or four (n128) independent chains, and a tree would hold more registers."""
    mx = acc_s[2 * h + 4 * g0]
    for g in range(g0, g0 + BLOCK_N // 8):
        for c in range(2):
            if g > g0 or c > 0:
                mx = cute.arch.fmax(mx, acc_s[c + 2 * h + 4 * g])
    mx = cute.arch.fmax(mx, cute.arch.shuffle_sync_bfly(mx, offset=1))
    return cute.arch.fmax(mx, cute.arch.shuffle_sync_bfly(mx, offset=2))


@dsl_user_op
def after_max(x: Float32, m0: Float32, m1: Float32, *, loc=None, ip=None) -> Float32:
    """``x`` (>= 0: bit 31 clear) unchanged, but computed from ``m0`` and ``m1``: orders the ops that
    use the result after those row maxima. Without it ptxas scheduled the merge (and the wgmma wait in
    front of it) above the row max, whose temporaries then took the registers of the P operand of the
    next PV GEMM, so that GEMM had to finish before the softmax went on."""
    return Float32(llvm.inline_asm(
        T.f32(), [Float32(v).ir_value(loc=loc, ip=ip) for v in (x, m0, m1)],
        "{\n.reg .b32 a, b, c;\nmov.b32 a, $2;\nmov.b32 b, $3;\nor.b32 a, a, b;\nmov.b32 c, $1;\n"
        "and.b32 a, a, c;\nshr.u32 a, a, 31;\nor.b32 c, c, a;\nmov.b32 $0, c;\n}\n",
        "=f,f,f,f", has_side_effects=False, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT,
    ))


@dsl_user_op
def arrive_after(bar_id: Int32, x0: Float32, x1: Float32, *, loc=None, ip=None):
    """``bar.arrive bar_id, 128`` (a barrier no thread waits on; one warpgroup's arrivals complete it),
    computed from ``x0`` and ``x1`` (both >= 0, so the id is unchanged). ptxas hoists a
    ``wgmma.wait_group`` to just after the GEMMs it waits for, ahead of independent softmax work (seen
    in the n128 SASS); it keeps a wait after a barrier, and the barrier after the work that computes
    its operand, so this pins the next wait after the ops that produced ``x0`` and ``x1``."""
    llvm.inline_asm(
        None, [Int32(bar_id).ir_value(loc=loc, ip=ip)] + [Float32(v).ir_value(loc=loc, ip=ip) for v in (x0, x1)],
        "{\n.reg .b32 a, b;\nmov.b32 a, $1;\nmov.b32 b, $2;\nor.b32 a, a, b;\nshr.u32 a, a, 31;\n"
        "add.u32 a, a, $0;\nbar.arrive a, 128;\n}\n",
        "r,f,f", has_side_effects=True, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT,
        loc=loc, ip=ip)


def stage(j, stages: int, producer: bool) -> pipeline.PipelineState:
    """Pipeline state of the j-th use of a ring of ``stages`` buffers (built fresh: no in-place advance
    across staged control flow)."""
    phase = (j // stages) % 2
    if const_expr(producer):
        phase = phase ^ 1
    return pipeline.PipelineState(stages, Int32(j), Int32(j % stages), Int32(phase))


class ConsumerFragments(NamedTuple):
    """One consumer warpgroup's MMA operands and accumulators (:meth:`LeanPAttentionSm90.fragments`)."""
    wg_tidx: Int32          # this thread's index in its warpgroup
    tSrQ: cute.Tensor       # Q, S GEMM A operand (shared memory descriptors)
    tSrK: cute.Tensor       # K, S GEMM B operand
    tOrV: cute.Tensor       # V^T, PV GEMM B operand
    acc_s: list[cute.Tensor]  # the S accumulators (64 x keys each)
    acc_o: cute.Tensor      # O
    acc_t: cute.Tensor | None  # PV of one block or tile, merged into O; None where the recipe has none
    p: list[cute.Tensor]    # P codes as the PV A operand (fp8, 64 x 64 each)
    p32: list[cute.Tensor]  # the same registers as Uint32 words (empty unless asked for)
    row0: Int32             # this warpgroup's first query row
    tScS: cute.Tensor       # (row, key) of every S element, in the tile's coordinates
    tOcO: cute.Tensor       # (row, column) of every O element


class LeanPAttentionSm90:
    """Compile-time configuration of the kernel; ``__call__`` is the host-side ``@cute.jit`` entry."""

    def __init__(self, head_dim: int, head_dim_v: int, causal: bool, pingpong: bool = True,
                 kv_stages: int = 4, timeline: bool = False, n128: bool = False, lpt: bool = True,
                 exact: bool = False, runmax: bool = False, t128: bool = False, grouped: int = 0):
        if head_dim % 32 or head_dim > 256:
            raise ValueError(f"head_dim must be a multiple of 32 up to 256, got {head_dim}")
        if head_dim_v % 8 or head_dim_v + ONES_ROWS > 256:
            raise ValueError(f"head_dim_v must be a multiple of 8 up to {256 - ONES_ROWS}, got {head_dim_v}")
        self.head_dim = head_dim
        self.head_dim_v = head_dim_v
        self.vrows = head_dim_v + ONES_ROWS
        self.causal = causal
        self.pingpong = pingpong
        self.timeline = timeline  # clock64 stamps per warpgroup and key block into mTL (see stamp())
        # n128: S = Q K^T over 128-key tiles, one softmax pass over its two 64-key scaling blocks (the
        # per-block fixed cost -- waits, turn, loop -- paid once per 128 keys; the two halves' row max
        # chains interleave); PV and the merge stay per 64-key block (each block's own scale)
        self.n128 = n128
        # runmax (n128 only; recipe zyfa-runmax, docs/numerics.md): P's codes against the row's running
        # max, one scaling block per 128-key tile, so PV accumulates straight into O (no per-block PV
        # accumulator, no merge); O is rescaled by an exact power of two only when a row's max grows
        self.runmax = runmax
        if runmax and not n128:
            raise ValueError("runmax needs n128")
        # t128 (n128 only; recipe zyfa-v1 with block=128): one bm per 128-key tile, so one PV GEMM (from
        # zero, both halves) and one merge per tile instead of two
        self.t128 = t128
        if t128 and (not n128 or runmax):
            raise ValueError("t128 needs n128 and excludes runmax")
        # grouped = G > 0 (n128 only; recipe zyfa-grouped, docs/numerics.md): codes against the running max
        # of a group of G tiles, PV accumulated in the tensor core's accumulator over the group, each group
        # added into an fp32 O in shared memory; S_{j+1} issued before tile j's softmax (FA3's overlap)
        if not isinstance(grouped, int) or isinstance(grouped, bool) or grouped < 0:
            raise ValueError(f"grouped must be an int >= 0 (tiles per group; 0 = off), got {grouped!r}")
        self.grouped = grouped
        if grouped and (not n128 or runmax or t128):
            raise ValueError("grouped needs n128 and excludes runmax and t128")
        self.tile_n = 2 * BLOCK_N if n128 else BLOCK_N  # keys per K/V pipeline stage
        if n128 and kv_stages == 4:
            # the same shared-memory bytes as four 64-key stages; grouped: three, since K_{j+1} is held
            # from tile j's turn (S_{j+1} in flight) and the producer loads K and V in turn
            kv_stages = 3 if grouped else 2
        self.kv_stages = kv_stages
        self.lpt = lpt  # causal: the longest query tiles (most key blocks) first, so the tail is short
        # exact: every wgmma k-step (32 channels of QK^T, 32 keys of PV) from zero, the partial products
        # summed in IEEE fp32 (as Triton's max_num_imprecise_acc=0): no running sum in the tensor core's
        # reduced-precision adder. Waits after every k-step: a conformance mode, not a fast one.
        self.exact = exact
        self.threads = 128 * (NUM_MMA_WG + 1)
        self.o_words = BLOCK_M * self.vrows // 128  # fp32 O values per consumer thread (68 for d_v 128)
        self.producer_regs = 24
        self.mma_regs = 240

    @cute.jit
    def __call__(self, mQ: cute.Tensor, mK: cute.Tensor, mVt: cute.Tensor, mO: cute.Tensor,
                 mLse: cute.Tensor, mT: cute.Tensor, mDv: cute.Tensor, mTL: cute.Tensor, seqlen_q: Int32,
                 seqlen_k: Int32, stream: cuda.CUstream):
        """mQ (s_q, d, h, b), mK (s_k, d, h_k, b), mVt (d_v+8, s_k_pad, h_k, b), mO (s_q, d_v, h, b) bf16,
        mLse (s_q, h, b) f32, mT / mDv (h_k, b) f32 (``t`` and the V descale per kv head), mTL int64
        (4, n_blocks + 2, 2, ctas) timeline stamps (written only when ``timeline``)."""
        fp8 = mQ.element_type
        qk_tiler = (BLOCK_M, self.tile_n, self.head_dim)
        pv_tiler = (BLOCK_M, self.vrows, self.tile_n)
        tiled_mma_qk = self.make_tiled_mma(pv=False)
        tiled_mma_pv = self.make_tiled_mma(pv=True)
        layout_kmaj = utils.LayoutEnum.ROW_MAJOR  # (rows, reduction) with the reduction contiguous
        sQ_layout = sm90_utils.make_smem_layout_a(layout_kmaj, qk_tiler, fp8, NUM_MMA_WG)
        sK_layout = sm90_utils.make_smem_layout_b(layout_kmaj, qk_tiler, fp8, self.kv_stages)
        sV_layout = sm90_utils.make_smem_layout_b(layout_kmaj, pv_tiler, fp8, self.kv_stages)
        g2s = cpasync.CopyBulkTensorTileG2SOp()
        tma_q, mQ_tma = cpasync.make_tiled_tma_atom(
            g2s, mQ, cute.slice_(sQ_layout, (None, None, 0)), (BLOCK_M, self.head_dim))
        tma_k, mK_tma = cpasync.make_tiled_tma_atom(
            g2s, mK, cute.slice_(sK_layout, (None, None, 0)), (self.tile_n, self.head_dim))
        tma_v, mV_tma = cpasync.make_tiled_tma_atom(
            g2s, mVt, cute.slice_(sV_layout, (None, None, 0)), (self.vrows, self.tile_n))
        self.q_bytes = cute.size_in_bytes(fp8, cute.slice_(sQ_layout, (None, None, 0))) * NUM_MMA_WG
        self.k_bytes = cute.size_in_bytes(fp8, cute.slice_(sK_layout, (None, None, 0)))
        self.v_bytes = cute.size_in_bytes(fp8, cute.slice_(sV_layout, (None, None, 0)))

        @cute.struct
        class SharedStorage:
            mbar_q: cute.struct.MemRange[cutlass.Int64, 2]
            mbar_k: cute.struct.MemRange[cutlass.Int64, 2 * self.kv_stages]
            mbar_v: cute.struct.MemRange[cutlass.Int64, 2 * self.kv_stages]
            sQ: cute.struct.Align[cute.struct.MemRange[fp8, cute.cosize(sQ_layout)], 1024]
            sK: cute.struct.Align[cute.struct.MemRange[fp8, cute.cosize(sK_layout)], 1024]
            sV: cute.struct.Align[cute.struct.MemRange[fp8, cute.cosize(sV_layout)], 1024]

        self.shared_storage = SharedStorage
        if const_expr(self.grouped):
            @cute.struct
            class SharedStorageO:  # SharedStorage and the consumers' fp32 O, each thread's own slots
                mbar_q: cute.struct.MemRange[cutlass.Int64, 2]
                mbar_k: cute.struct.MemRange[cutlass.Int64, 2 * self.kv_stages]
                mbar_v: cute.struct.MemRange[cutlass.Int64, 2 * self.kv_stages]
                sQ: cute.struct.Align[cute.struct.MemRange[fp8, cute.cosize(sQ_layout)], 1024]
                sK: cute.struct.Align[cute.struct.MemRange[fp8, cute.cosize(sK_layout)], 1024]
                sV: cute.struct.Align[cute.struct.MemRange[fp8, cute.cosize(sV_layout)], 1024]
                sO: cute.struct.Align[cute.struct.MemRange[Float32, self.o_words * 128 * NUM_MMA_WG], 16]

            self.shared_storage = SharedStorageO
        m_blocks = cute.ceil_div(seqlen_q, BLOCK_M * NUM_MMA_WG)
        self.kernel(tiled_mma_qk, tiled_mma_pv, tma_q, mQ_tma, tma_k, mK_tma, tma_v, mV_tma,
                    mO, mLse, mT, mDv, mTL, sQ_layout, sK_layout, sV_layout, seqlen_q, seqlen_k).launch(
            grid=[m_blocks, cute.size(mQ.shape[2]), cute.size(mQ.shape[3])],
            block=[self.threads, 1, 1], stream=stream, min_blocks_per_mp=1)

    @cute.kernel
    def kernel(self, tiled_mma_qk: cute.TiledMma, tiled_mma_pv: cute.TiledMma,
               tma_q: cute.CopyAtom, mQ: cute.Tensor, tma_k: cute.CopyAtom, mK: cute.Tensor,
               tma_v: cute.CopyAtom, mVt: cute.Tensor, mO: cute.Tensor, mLse: cute.Tensor,
               mT: cute.Tensor, mDv: cute.Tensor, mTL: cute.Tensor, sQ_layout: cute.ComposedLayout,
               sK_layout: cute.ComposedLayout, sV_layout: cute.ComposedLayout,
               seqlen_q: Int32, seqlen_k: Int32):
        tidx, _, _ = cute.arch.thread_idx()
        m_block, head, batch = cute.arch.block_idx()
        if const_expr(self.causal and self.lpt):
            grid_m0, _, _ = cute.arch.grid_dim()
            m_block = grid_m0 - 1 - m_block  # blocks launch in index order: the heaviest query tiles first
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        wg_idx = warp_idx // 4
        group = cute.size(mQ.shape[2]) // cute.size(mK.shape[2])
        head_k = head // group

        smem = utils.SmemAllocator()
        storage = smem.allocate(self.shared_storage)
        sQ = storage.sQ.get_tensor(sQ_layout.outer, swizzle=sQ_layout.inner)
        sK = storage.sK.get_tensor(sK_layout.outer, swizzle=sK_layout.inner)
        sV = storage.sV.get_tensor(sV_layout.outer, swizzle=sV_layout.inner)

        producer = pipeline.CooperativeGroup(pipeline.Agent.Thread, 1)
        consumers = pipeline.CooperativeGroup(pipeline.Agent.Thread, NUM_MMA_WG * 4)  # one arrive per warp
        pipe_q = pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.mbar_q.data_ptr(), num_stages=1, producer_group=producer,
            consumer_group=consumers, tx_count=self.q_bytes, defer_sync=True)
        pipe_k = pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.mbar_k.data_ptr(), num_stages=self.kv_stages, producer_group=producer,
            consumer_group=consumers, tx_count=self.k_bytes, defer_sync=True)
        pipe_v = pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.mbar_v.data_ptr(), num_stages=self.kv_stages, producer_group=producer,
            consumer_group=consumers, tx_count=self.v_bytes, defer_sync=True)
        cute.arch.mbarrier_init_fence()
        cute.arch.sync_threads()

        # -- key blocks this CTA visits: [0, n_blocks); causal is bottom-right aligned ----
        offset = seqlen_k - seqlen_q
        n_blocks = cute.ceil_div(seqlen_k, self.tile_n)  # K/V pipeline stages (64 or 128 keys)
        if const_expr(self.causal):
            last_key = (m_block + 1) * (BLOCK_M * NUM_MMA_WG) + offset  # exclusive bound of the tile's keys
            n_blocks = cutlass.min(n_blocks, cute.ceil_div(cutlass.max(last_key, 0), self.tile_n))

        if wg_idx == 0:
            cute.arch.setmaxregister_decrease(self.producer_regs)
            if warp_idx == 0:
                cpasync.prefetch_descriptor(tma_q)
                cpasync.prefetch_descriptor(tma_k)
                cpasync.prefetch_descriptor(tma_v)
                gQ = cute.local_tile(mQ[None, None, head, batch], (BLOCK_M, self.head_dim), (None, 0))
                gK = cute.local_tile(mK[None, None, head_k, batch], (self.tile_n, self.head_dim), (None, 0))
                gV = cute.local_tile(mVt[None, None, head_k, batch], (self.vrows, self.tile_n), (0, None))
                tQsQ, tQgQ = cpasync.tma_partition(tma_q, 0, cute.make_layout(1),
                                                   cute.group_modes(sQ, 0, 2), cute.group_modes(gQ, 0, 2))
                tKsK, tKgK = cpasync.tma_partition(tma_k, 0, cute.make_layout(1),
                                                   cute.group_modes(sK, 0, 2), cute.group_modes(gK, 0, 2))
                tVsV, tVgV = cpasync.tma_partition(tma_v, 0, cute.make_layout(1),
                                                   cute.group_modes(sV, 0, 2), cute.group_modes(gV, 0, 2))
                state_q = stage(0, 1, True)
                pipe_q.producer_acquire(state_q)
                for w in cutlass.range_constexpr(NUM_MMA_WG):
                    cute.copy(tma_q, tQgQ[None, m_block * NUM_MMA_WG + w], tQsQ[None, w],
                              tma_bar_ptr=pipe_q.producer_get_barrier(state_q))
                for j in cutlass.range(n_blocks, unroll=1):
                    self.load(pipe_k, tma_k, tKgK, tKsK, j)
                    self.load(pipe_v, tma_v, tVgV, tVsV, j)
        else:
            cute.arch.setmaxregister_increase(self.mma_regs)
            grid_m, grid_h, _ = cute.arch.grid_dim()
            cta = m_block + grid_m * (head + grid_h * batch)
            consumer = self.consumer_n128 if const_expr(self.n128) else self.consumer
            if const_expr(self.runmax):
                consumer = self.consumer_runmax
            if const_expr(self.t128):
                consumer = self.consumer_t128
            if const_expr(self.grouped):
                # thread i of consumer warpgroup w owns words (k, i, w): a warp's 32 threads hit 32 banks
                sO = storage.sO.get_tensor(cute.make_layout((self.o_words, 128, NUM_MMA_WG),
                                                            stride=(128, 1, 128 * self.o_words)))
                self.consumer_grouped(tiled_mma_qk, tiled_mma_pv, sQ, sK, sV, pipe_q, pipe_k, pipe_v, mO, mLse,
                                      mT[head_k, batch], mDv[head_k, batch], mTL, cta, m_block, head, batch,
                                      wg_idx - 1, n_blocks, offset, seqlen_q, seqlen_k, sO)
            else:
                consumer(tiled_mma_qk, tiled_mma_pv, sQ, sK, sV, pipe_q, pipe_k, pipe_v, mO, mLse,
                         mT[head_k, batch], mDv[head_k, batch], mTL, cta, m_block, head, batch, wg_idx - 1,
                         n_blocks, offset, seqlen_q, seqlen_k)

    @cute.jit
    def load(self, pipe, tma: cute.CopyAtom, gsrc: cute.Tensor, sdst: cute.Tensor, j: Int32):
        """Producer: K or V tile j into its pipeline stage (TMA, completes on the stage's mbarrier)."""
        state = stage(j, self.kv_stages, True)
        pipe.producer_acquire(state)
        cute.copy(tma, gsrc[None, j], sdst[None, state.index], tma_bar_ptr=pipe.producer_get_barrier(state))

    @cute.jit
    def consumer(self, tiled_mma_qk: cute.TiledMma, tiled_mma_pv: cute.TiledMma, sQ: cute.Tensor,
                 sK: cute.Tensor, sV: cute.Tensor, pipe_q, pipe_k, pipe_v, mO: cute.Tensor,
                 mLse: cute.Tensor, t: Float32, dv: Float32, mTL: cute.Tensor, cta: Int32, m_block: Int32,
                 head: Int32, batch: Int32, wg: Int32, n_blocks: Int32, offset: Int32, seqlen_q: Int32,
                 seqlen_k: Int32):
        _, tSrQ, tSrK, tOrV, (acc_s,), acc_o, acc_t, (tOrP,), (tOrP32,), row0, tScS, tOcO = self.fragments(
            tiled_mma_qk, tiled_mma_pv, sQ, sK, sV, m_block, wg, BLOCK_N, n_p=1, p32=True)

        t8 = t * 8.0
        bref = cute.make_rmem_tensor(cute.make_layout(2), Float32)  # per row half: bm of the reference block
        scale = cute.make_rmem_tensor(cute.make_layout(2), Float32)  # acc *= scale before the next PV
        tl = self.consumer_begin(mTL, wg, cta, bref, scale, acc_o)
        n_tl = cute.size(mTL.shape[1]) - 2

        pipe_q.consumer_wait(stage(0, 1, False))
        q_slice = tSrQ[None, None, None, wg]

        if n_blocks > 0:  # first block: S only (no PV yet)
            self.first_qk(acc_s, q_slice, tSrK, pipe_k, wg, tl)
            self.softmax_block(acc_s, tScS, tOrP32, acc_o, acc_t, bref, scale, t, t8, row0, 0, offset,
                               seqlen_k, self.block_needs_mask(0, row0, offset, seqlen_k), tl, merge=False)
            self.stamp(tl, 3, 0)
        # blocks [1, n_full) need no mask: that loop has no branch while its wgmmas are in flight
        # (ptxas answers such a branch with an early wait, which serialises softmax and PV)
        n_full = self.first_masked_block(row0, offset, seqlen_k, n_blocks)
        args = (tSrK, tOrV, q_slice, acc_s, acc_o, acc_t, tScS, bref, scale, pipe_k, pipe_v, t, t8, row0,
                offset, seqlen_k, wg, tl)
        for j in cutlass.range(1, n_full, unroll=1):
            self.key_block(j, tOrP32, tOrP, *args, masked=False)
        for j in cutlass.range(cutlass.max(n_full, 1), n_blocks, unroll=1):
            self.key_block(j, tOrP32, tOrP, *args, masked=True)
        if n_blocks > 0:
            state_v = stage(n_blocks - 1, self.kv_stages, False)
            pipe_v.consumer_wait(state_v)
            self.turn_begin(wg)
            self.stamp(tl, 0, n_tl)
            self.gemm(True, acc_t, tOrP, tOrV[None, None, None, state_v.index], zero_init=True)
            warpgroup.commit_group()
            self.turn_end(wg)
            warpgroup.wait_group(0)
            self.stamp(tl, 2, n_tl)
            pipe_v.consumer_release(state_v)
            self.merge(acc_o, acc_t, scale)
        self.consumer_end(acc_o, tOcO, bref, dv, mO, mLse, row0, head, batch, seqlen_q, wg)

    def fragments(self, tiled_mma_qk: cute.TiledMma, tiled_mma_pv: cute.TiledMma, sQ: cute.Tensor,
                  sK: cute.Tensor, sV: cute.Tensor, m_block: Int32, wg: Int32, keys: int, n_s: int = 1,
                  acc_t: bool = True, n_p: int = 2, p32: bool = False) -> ConsumerFragments:
        """The consumers' common set-up: ``n_s`` S accumulators over ``keys`` keys (64 or 128), O, the
        per-block PV accumulator if ``acc_t``, ``n_p`` P buffers (and their Uint32 views if ``p32``).
        A plain Python helper called where the set-up was inline, emitting the same DSL operations in the
        same order: keep that order (a reordered form changed n128's and t128's SASS bytes); check any
        change with ``tools/hopper_sass.py OUT --against REF``."""
        tidx, _, _ = cute.arch.thread_idx()
        wg_tidx = tidx % 128
        thr_qk = tiled_mma_qk.get_slice(wg_tidx)
        thr_pv = tiled_mma_pv.get_slice(wg_tidx)
        tSrQ = tiled_mma_qk.make_fragment_A(thr_qk.partition_A(sQ))
        tSrK = tiled_mma_qk.make_fragment_B(thr_qk.partition_B(sK))
        tOrV = tiled_mma_pv.make_fragment_B(thr_pv.partition_B(sV))
        acc_ss = [thr_qk.make_fragment_C(thr_qk.partition_shape_C((BLOCK_M, keys))) for _ in range(n_s)]
        acc_o = thr_pv.make_fragment_C(thr_pv.partition_shape_C((BLOCK_M, self.vrows)))
        acc_pv = thr_pv.make_fragment_C(thr_pv.partition_shape_C((BLOCK_M, self.vrows))) if acc_t else None
        # P as the PV A operand: (values (4,2,2), MMA_M 1, MMA_K 2) fp8 = 8 registers per 64 keys
        p = [cute.make_rmem_tensor(thr_pv.partition_shape_A((BLOCK_M, BLOCK_N)), cutlass.Float8E4M3FN)
             for _ in range(n_p)]
        words = [cute.recast_tensor(x, Uint32) for x in p] if p32 else []
        row0 = m_block * (BLOCK_M * NUM_MMA_WG) + wg * BLOCK_M
        # row / column of every S and O element (for the masks and the epilogue)
        tScS = thr_qk.partition_C(cute.make_identity_tensor((BLOCK_M, keys)))
        tOcO = thr_pv.partition_C(cute.make_identity_tensor((BLOCK_M, self.vrows)))
        return ConsumerFragments(wg_tidx, tSrQ, tSrK, tOrV, acc_ss, acc_o, acc_pv, p, words, row0, tScS, tOcO)

    @cute.jit
    def consumer_begin(self, mTL: cute.Tensor, wg: Int32, cta: Int32, bref: cute.Tensor, scale: cute.Tensor,
                       acc_o: cute.Tensor) -> cute.Tensor:
        """Initial state of a consumer warpgroup (no reference block, scales 1, acc 0), its SM id in the
        timeline, the ping-pong's first arrival; returns this warpgroup's (event, block) timeline slice."""
        for h in cutlass.range_constexpr(2):
            bref[h] = -Float32.inf
        for i in cutlass.range_constexpr(cute.size(scale)):
            scale[i] = 1.0
        acc_o.fill(0.0)
        tl = mTL[None, None, wg, cta] if const_expr(self.timeline) else mTL
        if const_expr(self.timeline):
            tl[0, cute.size(mTL.shape[1]) - 1] = Int64(cute.arch.smid())
        if const_expr(self.pingpong):
            if wg == 0:  # the first warpgroup's first turn needs the other's arrival: arrive once for it
                cute.arch.barrier_arrive(barrier_id=2, number_of_threads=256)
        return tl

    @cute.jit
    def consumer_end(self, acc_o: cute.Tensor, tOcO: cute.Tensor, bref: cute.Tensor, dv: Float32, mO: cute.Tensor,
                     mLse: cute.Tensor, row0: Int32, head: Int32, batch: Int32, seqlen_q: Int32, wg: Int32):
        """After the key loop of every consumer: the ping-pong's last arrival balanced, then the epilogue."""
        if const_expr(self.pingpong):
            if wg == 0:  # balance the first arrival: consume the other warpgroup's last one
                cute.arch.barrier(barrier_id=2, number_of_threads=256)
        self.epilogue(acc_o, tOcO, bref, dv, mO, mLse, row0, head, batch, seqlen_q)

    @cute.jit
    def first_qk(self, acc_s: cute.Tensor, q_slice: cute.Tensor, tSrK: cute.Tensor, pipe_k, wg: Int32,
                 tl: cute.Tensor):
        """S of the first key block or tile, in this warpgroup's turn, waited for (no PV yet)."""
        state = stage(0, self.kv_stages, False)
        pipe_k.consumer_wait(state)
        self.turn_begin(wg)
        self.stamp(tl, 0, 0)
        self.gemm(False, acc_s, q_slice, tSrK[None, None, None, state.index], zero_init=True)
        warpgroup.commit_group()
        self.turn_end(wg)
        warpgroup.wait_group(0)
        self.stamp(tl, 1, 0)
        self.stamp(tl, 2, 0)
        pipe_k.consumer_release(state)

    @cute.jit
    def turn_gemms(self, j: Int32, acc_s: cute.Tensor, q_slice: cute.Tensor, tSrK: cute.Tensor, acc_t: cute.Tensor,
                   p_prev, tOrV: cute.Tensor, pipe_k, pipe_v, wg: Int32, tl: cute.Tensor,
                   tile: cutlass.Constexpr = False, zero_init: cutlass.Constexpr = True):
        """In this warpgroup's turn: S_j = Q K_j^T and the PV GEMM of the previous block (P from ``p_prev``,
        V stage j-1; for n128 the first 64-key block of tile j-1; with ``tile``, both halves of 128-key
        tile j-1 via tile_pv, into ``acc_t`` from zero or, without ``zero_init``, accumulating: runmax's O);
        waits for S_j only (the PV may still run) and frees K_j. Returns V's pipeline state, released
        after the merge. The prologue of every variant's steady-state step (v1, n128, runmax, t128)."""
        state = stage(j, self.kv_stages, False)
        state_v = stage(j - 1, self.kv_stages, False)
        pipe_k.consumer_wait(state)
        pipe_v.consumer_wait(state_v)
        self.turn_begin(wg)
        self.stamp(tl, 0, j)
        self.gemm(False, acc_s, q_slice, tSrK[None, None, None, state.index], zero_init=True)
        warpgroup.commit_group()
        if const_expr(tile):
            self.tile_pv(acc_t, p_prev, tOrV, state_v, zero_init=zero_init)
        else:
            self.gemm(True, acc_t, p_prev, tOrV[None, None, None, state_v.index], zero_init=zero_init)
            warpgroup.commit_group()
        self.turn_end(wg)
        warpgroup.wait_group(1)
        self.stamp(tl, 1, j)
        pipe_k.consumer_release(state)
        return state_v

    @cute.jit
    def first_masked_block(self, row0: Int32, offset: Int32, seqlen_k: Int32, n_blocks: Int32) -> Int32:
        """The first block with a disallowed key for some row of this warpgroup (or n_blocks)."""
        n_full = cutlass.min(n_blocks, seqlen_k // self.tile_n)
        if const_expr(self.causal):
            n_full = cutlass.min(n_full, cutlass.max(row0 + offset + 1, 0) // self.tile_n)
        return n_full

    @cute.jit
    def key_block(self, j: Int32, p32: cute.Tensor, p: cute.Tensor, tSrK: cute.Tensor, tOrV: cute.Tensor,
                  q_slice: cute.Tensor, acc_s: cute.Tensor, acc_o: cute.Tensor, acc_t: cute.Tensor,
                  tScS: cute.Tensor, bref: cute.Tensor, scale: cute.Tensor, pipe_k, pipe_v, t: Float32,
                  t8: Float32, row0: Int32, offset: Int32, seqlen_k: Int32, wg: Int32, tl: cute.Tensor,
                  masked: cutlass.Constexpr):
        """Block j >= 1: in this warpgroup's turn issue S_j = Q K_j^T and PV of block j-1 (P from ``p``),
        then the softmax of block j, which merges PV of j-1 and then writes its codes into the same
        registers (``p32``, a view of ``p``)."""
        state_v = self.turn_gemms(j, acc_s, q_slice, tSrK, acc_t, p, tOrV, pipe_k, pipe_v, wg, tl)
        self.softmax_block(acc_s, tScS, p32, acc_o, acc_t, bref, scale, t, t8, row0, j, offset,
                           seqlen_k, masked, tl, merge=True)
        self.stamp(tl, 3, j)
        pipe_v.consumer_release(state_v)

    @cute.jit
    def stamp(self, tl: cute.Tensor, event: cutlass.Constexpr, j: Int32):
        """Timeline only: ``tl[event, j] = clock64()`` from every thread of the warpgroup (the same
        address: no branch, which ptxas would answer with an early wgmma wait). Events per block j:
        0 turn taken (GEMMs issued next), 1 S_j ready, 2 PV of block j-1 done, 3 softmax of j done;
        column n_blocks holds the last PV (0 issued, 2 done), column n_blocks + 1 the SM id."""
        if const_expr(self.timeline):
            tl[event, j] = cute.arch.clock64()

    @cute.jit
    def turn_begin(self, wg: Int32):
        if const_expr(self.pingpong):
            cute.arch.barrier(barrier_id=2 + wg, number_of_threads=256)

    @cute.jit
    def turn_end(self, wg: Int32):
        if const_expr(self.pingpong):
            cute.arch.barrier_arrive(barrier_id=3 - wg, number_of_threads=256)

    def make_tiled_mma(self, pv: bool) -> cute.TiledMma:
        """The QK^T (A = Q from shared memory) or PV (A = P from registers) tiled MMA: fp8 x fp8 -> fp32,
        both operands K-major, one warpgroup of 64 rows."""
        kmaj = cute.nvgpu.OperandMajorMode.K
        fp8 = cutlass.Float8E4M3FN
        if pv:
            return sm90_utils.make_trivial_tiled_mma(fp8, fp8, kmaj, kmaj, Float32, (1, 1, 1),
                                                     (BLOCK_M, self.vrows), warpgroup.OperandSource.RMEM)
        return sm90_utils.make_trivial_tiled_mma(fp8, fp8, kmaj, kmaj, Float32, (1, 1, 1), (BLOCK_M, self.tile_n),
                                                 warpgroup.OperandSource.SMEM)

    @cute.jit
    def gemm(self, pv: cutlass.Constexpr, acc: cute.Tensor, tA: cute.Tensor, tB: cute.Tensor,
             zero_init: cutlass.Constexpr, k_b: cutlass.Constexpr = 0):
        """acc (+)= A B over A's k-steps; B's k-steps start at ``k_b`` (n128: the second 64-key block
        of a 128-key V tile)."""
        # a fresh TiledMma per call: set(ACCUMULATE) rebinds its state, which must not escape the
        # staged if/for regions this is called from
        tiled_mma = self.make_tiled_mma(pv)
        warpgroup.fence()
        if const_expr(self.exact):
            part = cute.make_rmem_tensor_like(acc)
            for k in cutlass.range_constexpr(cute.size(tA, mode=[2])):
                first = zero_init and k == 0
                dst = acc if const_expr(first) else part
                tiled_mma.set(warpgroup.Field.ACCUMULATE, False)
                warpgroup.fence()
                cute.gemm(tiled_mma, dst, tA[None, None, k], tB[None, None, k_b + k], dst)
                warpgroup.commit_group()
                warpgroup.wait_group(0)
                if const_expr(not first):
                    for i in cutlass.range_constexpr(cute.size(acc)):
                        acc[i] = add_rn(acc[i], part[i])
        else:
            for k in cutlass.range_constexpr(cute.size(tA, mode=[2])):
                tiled_mma.set(warpgroup.Field.ACCUMULATE, not zero_init or k != 0)
                cute.gemm(tiled_mma, acc, tA[None, None, k], tB[None, None, k_b + k], acc)

    @cute.jit
    def block_needs_mask(self, j: Int32, row0: Int32, offset: Int32, seqlen_k: Int32) -> cutlass.Boolean:
        """Whether any key of block j is disallowed for some row of this warpgroup."""
        end = (j + 1) * self.tile_n
        need = end > seqlen_k
        if const_expr(self.causal):
            need = need or (end - 1 > row0 + offset)
        return need

    @cute.jit
    def merge(self, acc_o: cute.Tensor, acc_t: cute.Tensor, scale: cute.Tensor, half: cutlass.Constexpr = 0):
        """acc = acc * 2^(bm_prev - bm) + PV of the block (one FFMA, exact scaling, one rounding).

        Each block's PV GEMM starts from zero, so the tensor core's reduced-precision fp8 accumulation
        spans 64 keys only; across blocks the sum is IEEE fp32 (as in the spec)."""
        for i in cutlass.range_constexpr(cute.size(acc_o)):
            acc_o[i] = fma_rn(acc_o[i], scale[(i // 2) % 2 + 2 * half], acc_t[i])

    @cute.jit
    def softmax_block(self, acc_s: cute.Tensor, tScS: cute.Tensor, tOrP32: cute.Tensor, acc_o: cute.Tensor,
                      acc_t: cute.Tensor, bref: cute.Tensor, scale: cute.Tensor, t: Float32, t8: Float32,
                      row0: Int32, j: Int32, offset: Int32, seqlen_k: Int32, masked, tl: cute.Tensor,
                      merge: cutlass.Constexpr):
        """Lean P of block j: S (acc layout ((2,2,8),1,1): col = 8g + 2q + c, row = r + 8h) -> P codes.

        Element i = c + 2h + 4g. A-operand word (h, kk, kb) = bytes (c, g) for g = 4kb + 2kk + {0, 1}.
        With ``merge``, first waits for the PV GEMM of block j-1 and adds it into acc (with the scale
        of block j-1, before this block's scale replaces it).
        """
        if masked:  # a Python bool inside the key loop (no branch), a runtime flag for block 0
            self.mask_keys(acc_s, tScS, j * BLOCK_N, row0, offset, seqlen_k)
        mxs = [row_max(acc_s, h, 0) for h in range(2)]
        if const_expr(merge):
            warpgroup.wait_group(0)  # PV of block j-1 done: its result is in acc_t, its P registers free
            self.stamp(tl, 2, j)
            self.merge(acc_o, acc_t, scale)
        new_scale = [self.block_codes(acc_s, tOrP32, h, 0, mxs[h], bref, t, t8) for h in range(2)]
        for h in cutlass.range_constexpr(2):
            scale[h] = new_scale[h]

    @cute.jit
    def mask_keys(self, acc_s: cute.Tensor, tScS: cute.Tensor, key0: Int32, row0: Int32, offset: Int32,
                  seqlen_k: Int32):
        """S = -inf where the key (``key0`` + column) lies beyond ``seqlen_k`` or after the row (causal)."""
        for i in cutlass.range_constexpr(cute.size(acc_s)):
            r, cidx = tScS[i]
            key = key0 + cidx
            ok = key < seqlen_k
            if const_expr(self.causal):
                ok = ok and key <= row0 + r + offset
            if not ok:
                acc_s[i] = -Float32.inf

    @cute.jit
    def block_codes(self, acc_s: cute.Tensor, tOrP32: cute.Tensor, h: cutlass.Constexpr, g0: cutlass.Constexpr,
                    mx: Float32, bref: cute.Tensor, t: Float32, t8: Float32, tOrP32_b=None) -> Float32:
        """Lean P of one 64-key block (n8 groups ``g0 .. g0 + 7`` of S) for row half ``h``, given its row
        max ``mx``: ``bm = ceil(t mx)``, the P codes into ``tOrP32`` (A-operand word (h, kk, kb) = bytes
        (c, g) for g = g0 + 4kb + 2kk + {0, 1}); moves the row's reference ``bref[h]`` to ``bm`` and
        returns the accumulator's scale ``2^(bref_old - bm)`` (1 for an empty or dropped block).
        ``tOrP32_b`` (t128: one scaling block of 128 keys, ``mx`` its max): also the codes of n8 groups
        ``g0 + 8 .. g0 + 15`` with the same ``bm``, into ``tOrP32_b``."""
        bm = ceil_mul(t, mx)
        c_h = -Float32.inf
        sc_h = Float32(1.0)
        if mx > -Float32.inf and bm >= bref[h] - MAX_DROP:
            c_h = (120.0 - 8.0 * bm) + 12582912.0
            sc_h = pow2_of(bref[h] - bm)
            bref[h] = bm
        self.pack_codes(acc_s, tOrP32, h, g0, t8, c_h)
        if const_expr(tOrP32_b is not None):
            self.pack_codes(acc_s, tOrP32_b, h, g0 + BLOCK_N // 8, t8, c_h)
        return sc_h

    @cute.jit
    def pack_codes(self, acc_s: cute.Tensor, tOrP32: cute.Tensor, h: cutlass.Constexpr, g0: cutlass.Constexpr,
                   t8: Float32, c_h: Float32):
        """The Lean P codes ``lowbyte(max(fma(s, 8t, c_h), 1.5*2^23))`` of the 64 keys of n8 groups
        ``g0 .. g0 + 7``, row half ``h``, into ``tOrP32`` (A-operand word (h, kk, kb) = bytes (c, g) for
        g = g0 + 4kb + 2kk + {0, 1})."""
        for kb in cutlass.range_constexpr(BLOCK_N // 32):
            for kk in cutlass.range_constexpr(2):
                i0 = 2 * h + 4 * (g0 + 4 * kb + 2 * kk)
                tOrP32[h + 2 * kk + 4 * kb] = lean_p_pack4(
                    acc_s[i0], acc_s[i0 + 1], acc_s[i0 + 4], acc_s[i0 + 5], t8, c_h)

    # -- n128: 128-key QK^T tiles, two 64-key scaling blocks per softmax pass ----
    @cute.jit
    def consumer_n128(self, tiled_mma_qk: cute.TiledMma, tiled_mma_pv: cute.TiledMma, sQ: cute.Tensor,
                      sK: cute.Tensor, sV: cute.Tensor, pipe_q, pipe_k, pipe_v, mO: cute.Tensor,
                      mLse: cute.Tensor, t: Float32, dv: Float32, mTL: cute.Tensor, cta: Int32, m_block: Int32,
                      head: Int32, batch: Int32, wg: Int32, n_tiles: Int32, offset: Int32, seqlen_q: Int32,
                      seqlen_k: Int32):
        """As :meth:`consumer`, over 128-key K/V tiles: per tile one S GEMM (64 x 128) and one softmax
        pass; the tile's two 64-key blocks keep their own ``bm`` and P codes, their PV GEMMs (from
        zero) and merges run one after the other (block a's PV in the turn with the next S GEMM,
        block b's issued inside the softmax, after block a's merge has freed ``acc_t``)."""
        _, tSrQ, tSrK, tOrV, (acc_s,), acc_o, acc_t, (p_a, p_b), (p32_a, p32_b), row0, tScS, tOcO = \
            self.fragments(tiled_mma_qk, tiled_mma_pv, sQ, sK, sV, m_block, wg, 2 * BLOCK_N, p32=True)

        t8 = t * 8.0
        bref = cute.make_rmem_tensor(cute.make_layout(2), Float32)  # per row half: bm of the reference block
        scale = cute.make_rmem_tensor(cute.make_layout(4), Float32)  # [h + 2 half]: scale for merging PV
        tl = self.consumer_begin(mTL, wg, cta, bref, scale, acc_o)
        n_tl = cute.size(mTL.shape[1]) - 2
        pipe_q.consumer_wait(stage(0, 1, False))
        q_slice = tSrQ[None, None, None, wg]
        sm = (acc_s, tScS, p32_a, p32_b, p_b, tOrV, acc_o, acc_t, bref, scale, t, t8, row0, offset, seqlen_k, tl, wg)

        if n_tiles > 0:  # first tile: S only (no PV yet)
            self.first_qk(acc_s, q_slice, tSrK, pipe_k, wg, tl)
            self.softmax_tile(0, Int32(0), *sm, self.block_needs_mask(0, row0, offset, seqlen_k), merge=False)
            self.stamp(tl, 3, 0)
        n_full = self.first_masked_block(row0, offset, seqlen_k, n_tiles)
        for j in cutlass.range(1, n_full, unroll=1):
            self.key_tile(j, tSrK, q_slice, p_a, pipe_k, pipe_v, wg, sm, masked=False)
        for j in cutlass.range(cutlass.max(n_full, 1), n_tiles, unroll=1):
            self.key_tile(j, tSrK, q_slice, p_a, pipe_k, pipe_v, wg, sm, masked=True)
        if n_tiles > 0:  # the last tile's two PV GEMMs
            state_v = stage(n_tiles - 1, self.kv_stages, False)
            pipe_v.consumer_wait(state_v)
            self.turn_begin(wg)
            self.stamp(tl, 0, n_tl)
            self.gemm(True, acc_t, p_a, tOrV[None, None, None, state_v.index], zero_init=True)
            warpgroup.commit_group()
            self.turn_end(wg)
            warpgroup.wait_group(0)
            self.merge(acc_o, acc_t, scale)
            self.gemm(True, acc_t, p_b, tOrV[None, None, None, state_v.index], zero_init=True, k_b=2)
            warpgroup.commit_group()
            warpgroup.wait_group(0)
            self.stamp(tl, 2, n_tl)
            pipe_v.consumer_release(state_v)
            self.merge(acc_o, acc_t, scale, half=1)
        self.consumer_end(acc_o, tOcO, bref, dv, mO, mLse, row0, head, batch, seqlen_q, wg)

    @cute.jit
    def key_tile(self, j: Int32, tSrK: cute.Tensor, q_slice: cute.Tensor, p_a: cute.Tensor, pipe_k, pipe_v,
                 wg: Int32, sm, masked: cutlass.Constexpr):
        """Tile j >= 1: in this warpgroup's turn issue S_j and the PV GEMM of block a of tile j-1, then
        the softmax of tile j (which also runs block b of tile j-1's PV GEMM and both merges)."""
        acc_s, acc_t, tOrV, tl = sm[0], sm[7], sm[5], sm[15]
        state_v = self.turn_gemms(j, acc_s, q_slice, tSrK, acc_t, p_a, tOrV, pipe_k, pipe_v, wg, tl)
        self.softmax_tile(j, state_v.index, *sm, masked, merge=True)
        self.stamp(tl, 3, j)
        pipe_v.consumer_release(state_v)

    @cute.jit
    def softmax_tile(self, j: Int32, v_index: Int32, acc_s: cute.Tensor, tScS: cute.Tensor, p32_a: cute.Tensor,
                     p32_b: cute.Tensor, p_b: cute.Tensor, tOrV: cute.Tensor, acc_o: cute.Tensor,
                     acc_t: cute.Tensor, bref: cute.Tensor, scale: cute.Tensor, t: Float32, t8: Float32,
                     row0: Int32, offset: Int32, seqlen_k: Int32, tl: cute.Tensor, wg: Int32, masked,
                     merge: cutlass.Constexpr):
        """Lean P of tile j's two 64-key blocks (a: n8 groups 0-7, b: 8-15), each with its own ``bm``.
        With ``merge``: after the four row maxima, wait for block a's PV of tile j-1, merge it, issue
        block b's PV of tile j-1 (V stage ``v_index``, P from ``p_b``), write block a's codes, wait,
        merge block b, then write block b's codes."""
        if masked:  # a Python bool inside the key loop (no branch), a runtime flag for tile 0
            self.mask_keys(acc_s, tScS, j * (2 * BLOCK_N), row0, offset, seqlen_k)
        mxs = [[row_max(acc_s, h, 8 * half) for h in range(2)] for half in range(2)]
        if const_expr(merge):
            for h in cutlass.range_constexpr(2):  # the merge (and its wgmma wait) after the row maxima
                scale[h] = after_max(scale[h], mxs[0][h], mxs[1][h])
            arrive_after(FREE_BARRIER + wg, scale[0], scale[1])
            warpgroup.wait_group(0)  # block a's PV of tile j-1 done: acc_t and p_a free
            self.stamp(tl, 2, j)
            self.merge(acc_o, acc_t, scale)
            self.gemm(True, acc_t, p_b, tOrV[None, None, None, v_index], zero_init=True, k_b=2)
            warpgroup.commit_group()
        new_a = [self.block_codes(acc_s, p32_a, h, 0, mxs[0][h], bref, t, t8) for h in range(2)]
        if const_expr(merge):
            for h in cutlass.range_constexpr(2):  # block b's merge (and its wait) after block a's codes
                scale[h + 2] = after_word(scale[h + 2], p32_a[h + 2 + 4 * (BLOCK_N // 32 - 1)])
            arrive_after(FREE_BARRIER + wg, scale[2], scale[3])
            warpgroup.wait_group(0)  # block b's PV of tile j-1 done: acc_t and p_b free
            self.merge(acc_o, acc_t, scale, half=1)
        new_b = [self.block_codes(acc_s, p32_b, h, 8, mxs[1][h], bref, t, t8) for h in range(2)]
        for h in cutlass.range_constexpr(2):
            scale[h] = new_a[h]
            scale[h + 2] = new_b[h]

    @cute.jit
    def epilogue(self, acc_o: cute.Tensor, cO: cute.Tensor, bref: cute.Tensor, dv: Float32, mO: cute.Tensor,
                 mLse: cute.Tensor, row0: Int32, head: Int32, batch: Int32, seqlen_q: Int32):
        """out = fp32(acc / l) * dv -> bf16, lse = (bref - 8 + log2 l) ln 2; rows without keys: 0, +inf."""
        tidx, _, _ = cute.arch.thread_idx()
        n_g = self.vrows // 8
        for h in cutlass.range_constexpr(2):
            l_sum = acc_o[2 * h + 4 * (n_g - 1)]  # column d_v: P @ ones
            has = l_sum > 0.0
            inv_ok = l_sum
            if not has:
                inv_ok = 1.0
            r_local, _ = cO[2 * h]
            row = row0 + r_local
            if row < seqlen_q:
                for g in cutlass.range_constexpr(n_g - 1):
                    for c in cutlass.range_constexpr(2):
                        i = c + 2 * h + 4 * g
                        _, col = cO[i]
                        val = div_rn(acc_o[i], inv_ok) * dv
                        if not has:
                            val = Float32(0.0)
                        mO[row, col, head, batch] = val.to(mO.element_type)
                if tidx % 4 == 0:
                    lse = Float32.inf
                    if has:
                        lse = (bref[h] - 8.0 + log2_approx(l_sum)) * LN2
                    mLse[row, head, batch] = lse

    # -- runmax: one scaling block per 128-key tile against the row's running max, O in the tensor core ----
    @cute.jit
    def consumer_runmax(self, tiled_mma_qk: cute.TiledMma, tiled_mma_pv: cute.TiledMma, sQ: cute.Tensor,
                        sK: cute.Tensor, sV: cute.Tensor, pipe_q, pipe_k, pipe_v, mO: cute.Tensor,
                        mLse: cute.Tensor, t: Float32, dv: Float32, mTL: cute.Tensor, cta: Int32, m_block: Int32,
                        head: Int32, batch: Int32, wg: Int32, n_tiles: Int32, offset: Int32, seqlen_q: Int32,
                        seqlen_k: Int32):
        """Recipe ``zyfa-runmax`` over 128-key tiles: per tile one S GEMM (64 x 128); the row max ``m``
        (an integer, ``ceil(t * max s)`` over the keys so far) sets every code of the tile, so the tile's
        PV GEMM accumulates straight into O (both 64-key halves, one commit group) without a per-block
        accumulator or merge. P is double-buffered by tile parity: tile j's codes are written while the
        PV GEMM of tile j-1 (issued in the turn with S_j) still reads the other buffer; after it, O is
        scaled by ``2^(m_old - m)`` in the rows whose max grew (a branch, taken rarely). (Moving the
        codes into one PV buffer instead made ptxas serialise every wgmma, remark C7513.)"""
        _, tSrQ, tSrK, tOrV, (acc_s,), acc_o, _, p4, _, row0, tScS, tOcO = self.fragments(
            tiled_mma_qk, tiled_mma_pv, sQ, sK, sV, m_block, wg, 2 * BLOCK_N, acc_t=False, n_p=4)
        p = [p4[0:2], p4[2:4]]  # P[tile parity][half a, half b]

        t8 = t * 8.0
        bref = cute.make_rmem_tensor(cute.make_layout(2), Float32)  # per row half: the running max m
        scale = cute.make_rmem_tensor(cute.make_layout(2), Float32)  # per row half: O's factor 2^(m_old - m)
        tl = self.consumer_begin(mTL, wg, cta, bref, scale, acc_o)
        n_tl = cute.size(mTL.shape[1]) - 2
        pipe_q.consumer_wait(stage(0, 1, False))
        q_slice = tSrQ[None, None, None, wg]
        rest = (acc_o, bref, scale, t, t8, row0, offset, seqlen_k, tl, wg)
        sm = ((acc_s, tScS, p[0], p[1]) + rest, (acc_s, tScS, p[1], p[0]) + rest)  # even, odd tiles

        if n_tiles > 0:  # first tile: S only (no PV yet)
            self.first_qk(acc_s, q_slice, tSrK, pipe_k, wg, tl)
            self.runmax_softmax(0, *sm[0], self.block_needs_mask(0, row0, offset, seqlen_k), pv_pending=False)
            self.stamp(tl, 3, 0)
        n_full = self.first_masked_block(row0, offset, seqlen_k, n_tiles)
        for j in cutlass.range(1, n_full, unroll=1):
            self.runmax_tile_parity(j, tSrK, q_slice, tOrV, pipe_k, pipe_v, sm, masked=False)
        for j in cutlass.range(cutlass.max(n_full, 1), n_tiles, unroll=1):
            self.runmax_tile_parity(j, tSrK, q_slice, tOrV, pipe_k, pipe_v, sm, masked=True)
        if n_tiles > 0:  # the last tile's PV GEMM (issue and wait inside the parity branch)
            if (n_tiles - 1) % 2 == 1:
                self.last_tile_pv(n_tiles, acc_o, p[1], tOrV, pipe_v, wg, tl, n_tl)
            else:
                self.last_tile_pv(n_tiles, acc_o, p[0], tOrV, pipe_v, wg, tl, n_tl)
        self.consumer_end(acc_o, tOcO, bref, dv, mO, mLse, row0, head, batch, seqlen_q, wg)

    @cute.jit
    def tile_pv(self, acc: cute.Tensor, p_pv, tOrV: cute.Tensor, state_v, zero_init: cutlass.Constexpr = False):
        """acc (+)= P V over a 128-key tile (both halves' codes, V stage ``state_v``), one commit group."""
        for half in cutlass.range_constexpr(2):
            self.gemm(True, acc, p_pv[half], tOrV[None, None, None, state_v.index], zero_init=zero_init and half == 0,
                      k_b=2 * half)
        warpgroup.commit_group()

    @cute.jit
    def last_tile_pv(self, n_tiles: Int32, acc: cute.Tensor, p_pv, tOrV: cute.Tensor, pipe_v, wg: Int32,
                     tl: cute.Tensor, n_tl: Int32, zero_init: cutlass.Constexpr = False):
        """acc (+)= P V of the last 128-key tile, in this warpgroup's turn, waited for (runmax: into O;
        t128: from zero into its per-tile accumulator, merged by the caller)."""
        state_v = stage(n_tiles - 1, self.kv_stages, False)
        pipe_v.consumer_wait(state_v)
        self.turn_begin(wg)
        self.stamp(tl, 0, n_tl)
        self.tile_pv(acc, p_pv, tOrV, state_v, zero_init=zero_init)
        self.turn_end(wg)
        warpgroup.wait_group(0)
        self.stamp(tl, 2, n_tl)
        pipe_v.consumer_release(state_v)

    @cute.jit
    def runmax_tile_parity(self, j: Int32, tSrK: cute.Tensor, q_slice: cute.Tensor, tOrV: cute.Tensor, pipe_k,
                           pipe_v, sm, masked: cutlass.Constexpr):
        """runmax_tile with the P buffers of tile j's parity; the branch sits between tiles, where no
        wgmma is in flight."""
        if j % 2 == 1:
            self.runmax_tile(j, tSrK, q_slice, tOrV, pipe_k, pipe_v, sm[1], masked=masked)
        else:
            self.runmax_tile(j, tSrK, q_slice, tOrV, pipe_k, pipe_v, sm[0], masked=masked)

    @cute.jit
    def runmax_tile(self, j: Int32, tSrK: cute.Tensor, q_slice: cute.Tensor, tOrV: cute.Tensor, pipe_k, pipe_v,
                    sm, masked: cutlass.Constexpr):
        """Tile j >= 1: in this warpgroup's turn issue S_j and O += P_{j-1} V_{j-1}; then tile j's
        softmax (which waits for that PV GEMM only after its codes and rescales O)."""
        acc_s, p_pv, acc_o, tl, wg = sm[0], sm[3], sm[4], sm[12], sm[13]
        state_v = self.turn_gemms(j, acc_s, q_slice, tSrK, acc_o, p_pv, tOrV, pipe_k, pipe_v, wg, tl, tile=True,
                                  zero_init=False)
        self.runmax_softmax(j, *sm, masked, pv_pending=True)
        self.stamp(tl, 3, j)
        pipe_v.consumer_release(state_v)

    @cute.jit
    def runmax_softmax(self, j: Int32, acc_s: cute.Tensor, tScS: cute.Tensor, p_new, p_pv, acc_o: cute.Tensor,
                       bref: cute.Tensor, scale: cute.Tensor, t: Float32, t8: Float32, row0: Int32,
                       offset: Int32, seqlen_k: Int32, tl: cute.Tensor, wg: Int32, masked,
                       pv_pending: cutlass.Constexpr):
        """Lean P of tile j against the running max: ``m = max(m, ceil(t * max s))`` per row, every
        code ``lowbyte(max(fma(s, 8t, (120 - 8m) + 1.5*2^23), 1.5*2^23))`` (0 for keys > ~15 doublings
        below m), into ``p_new``. With ``pv_pending``: then waits for the previous tile's PV GEMM (which
        reads ``p_pv``; the wait pinned after the codes) and scales O by ``2^(m_old - m)`` where m grew
        (exact; 0 below 2^-126)."""
        if masked:  # a Python bool inside the key loop (no branch), a runtime flag for tile 0
            self.mask_keys(acc_s, tScS, j * (2 * BLOCK_N), row0, offset, seqlen_k)
        mxs = [[row_max(acc_s, h, 8 * half) for h in range(2)] for half in range(2)]
        for h in cutlass.range_constexpr(2):
            m_new = cute.arch.fmax(bref[h], ceil_mul(t, cute.arch.fmax(mxs[0][h], mxs[1][h])))
            c_h = -Float32.inf
            if m_new > -Float32.inf:
                c_h = (120.0 - 8.0 * m_new) + 12582912.0
            scale[h] = pow2_of(bref[h] - m_new)
            bref[h] = m_new
            for half in cutlass.range_constexpr(2):
                self.pack_codes(acc_s, cute.recast_tensor(p_new[half], Uint32), h, 8 * half, t8, c_h)
        if const_expr(pv_pending):
            last = cute.recast_tensor(p_new[1], Uint32)
            for h in cutlass.range_constexpr(2):  # the PV wait (which ptxas hoists) after the last codes
                scale[h] = after_word(scale[h], last[h + 2 + 4 * (BLOCK_N // 32 - 1)])
            arrive_after(FREE_BARRIER + wg, scale[0], scale[1])
            warpgroup.wait_group(0)  # PV of tile j-1 done: O and the p_pv registers free
            self.stamp(tl, 2, j)
            if scale[0] < 1.0 or scale[1] < 1.0:  # a row's max grew (no wgmma in flight here)
                for i in cutlass.range_constexpr(cute.size(acc_o)):
                    acc_o[i] = mul_rn(acc_o[i], scale[(i // 2) % 2])

    # -- t128: v1 with one scaling block per 128-key tile (one PV GEMM and one merge per tile) ----
    @cute.jit
    def consumer_t128(self, tiled_mma_qk: cute.TiledMma, tiled_mma_pv: cute.TiledMma, sQ: cute.Tensor,
                      sK: cute.Tensor, sV: cute.Tensor, pipe_q, pipe_k, pipe_v, mO: cute.Tensor,
                      mLse: cute.Tensor, t: Float32, dv: Float32, mTL: cute.Tensor, cta: Int32, m_block: Int32,
                      head: Int32, batch: Int32, wg: Int32, n_tiles: Int32, offset: Int32, seqlen_q: Int32,
                      seqlen_k: Int32):
        """Recipe zyfa-v1 with ``block=128`` over 128-key tiles: one ``bm`` per row and tile, so the
        tile's PV GEMM runs from zero over all 128 keys (one commit group) into ``acc_t`` and is merged
        once, ``acc = acc * 2^(bm_prev - bm) + P V`` (n128: two PV GEMMs, two waits and two merges per
        tile). The PV GEMM of tile j-1 is issued in the turn with S_j; its wait (pinned after tile j's
        row maxima) frees ``acc_t`` and the one P buffer for tile j's codes."""
        # acc_t: PV of one tile; p: the tile's halves a, b
        _, tSrQ, tSrK, tOrV, (acc_s,), acc_o, acc_t, p, _, row0, tScS, tOcO = self.fragments(
            tiled_mma_qk, tiled_mma_pv, sQ, sK, sV, m_block, wg, 2 * BLOCK_N)

        t8 = t * 8.0
        bref = cute.make_rmem_tensor(cute.make_layout(2), Float32)  # per row half: bm of the reference tile
        scale = cute.make_rmem_tensor(cute.make_layout(2), Float32)  # per row half: merge scale of the last tile
        tl = self.consumer_begin(mTL, wg, cta, bref, scale, acc_o)
        n_tl = cute.size(mTL.shape[1]) - 2
        pipe_q.consumer_wait(stage(0, 1, False))
        q_slice = tSrQ[None, None, None, wg]
        sm = (acc_s, tScS, p, acc_o, acc_t, bref, scale, t, t8, row0, offset, seqlen_k, tl, wg)

        if n_tiles > 0:  # first tile: S only (no PV yet)
            self.first_qk(acc_s, q_slice, tSrK, pipe_k, wg, tl)
            self.t128_softmax(0, *sm, self.block_needs_mask(0, row0, offset, seqlen_k), merge=False)
            self.stamp(tl, 3, 0)
        n_full = self.first_masked_block(row0, offset, seqlen_k, n_tiles)
        for j in cutlass.range(1, n_full, unroll=1):
            self.t128_tile(j, tSrK, q_slice, tOrV, pipe_k, pipe_v, sm, masked=False)
        for j in cutlass.range(cutlass.max(n_full, 1), n_tiles, unroll=1):
            self.t128_tile(j, tSrK, q_slice, tOrV, pipe_k, pipe_v, sm, masked=True)
        if n_tiles > 0:  # the last tile's PV GEMM and merge
            self.last_tile_pv(n_tiles, acc_t, p, tOrV, pipe_v, wg, tl, n_tl, zero_init=True)
            self.merge(acc_o, acc_t, scale)
        self.consumer_end(acc_o, tOcO, bref, dv, mO, mLse, row0, head, batch, seqlen_q, wg)

    @cute.jit
    def t128_tile(self, j: Int32, tSrK: cute.Tensor, q_slice: cute.Tensor, tOrV: cute.Tensor, pipe_k, pipe_v,
                  sm, masked: cutlass.Constexpr):
        """Tile j >= 1: in this warpgroup's turn issue S_j and tile j-1's PV GEMM (from zero into
        ``acc_t``); then tile j's softmax, which merges that GEMM before writing the codes."""
        acc_s, p, acc_t, tl, wg = sm[0], sm[2], sm[4], sm[12], sm[13]
        state_v = self.turn_gemms(j, acc_s, q_slice, tSrK, acc_t, p, tOrV, pipe_k, pipe_v, wg, tl, tile=True)
        self.t128_softmax(j, *sm, masked, merge=True)
        self.stamp(tl, 3, j)
        pipe_v.consumer_release(state_v)

    @cute.jit
    def t128_softmax(self, j: Int32, acc_s: cute.Tensor, tScS: cute.Tensor, p, acc_o: cute.Tensor,
                     acc_t: cute.Tensor, bref: cute.Tensor, scale: cute.Tensor, t: Float32, t8: Float32,
                     row0: Int32, offset: Int32, seqlen_k: Int32, tl: cute.Tensor, wg: Int32, masked,
                     merge: cutlass.Constexpr):
        """Lean P of tile j as one 128-key scaling block (``bm = ceil(t * max s)`` over the tile). With
        ``merge``: after the row maxima, waits for tile j-1's PV GEMM and merges it with tile j-1's
        scale, then writes tile j's codes and keeps its scale."""
        if masked:  # a Python bool inside the key loop (no branch), a runtime flag for tile 0
            self.mask_keys(acc_s, tScS, j * (2 * BLOCK_N), row0, offset, seqlen_k)
        mxs = [[row_max(acc_s, h, 8 * half) for h in range(2)] for half in range(2)]
        if const_expr(merge):
            for h in cutlass.range_constexpr(2):  # the merge (and its wgmma wait) after the row maxima
                scale[h] = after_max(scale[h], mxs[0][h], mxs[1][h])
            arrive_after(FREE_BARRIER + wg, scale[0], scale[1])
            warpgroup.wait_group(0)  # tile j-1's PV done: acc_t and the P registers free
            self.stamp(tl, 2, j)
            self.merge(acc_o, acc_t, scale)
        p32 = [cute.recast_tensor(x, Uint32) for x in p]
        for h in cutlass.range_constexpr(2):
            scale[h] = self.block_codes(acc_s, p32[0], h, 0, cute.arch.fmax(mxs[0][h], mxs[1][h]), bref, t, t8,
                                        tOrP32_b=p32[1])

    # -- grouped: runmax over groups of G tiles in the tensor core, each group added into O in shared memory --
    @cute.jit
    def consumer_grouped(self, tiled_mma_qk: cute.TiledMma, tiled_mma_pv: cute.TiledMma, sQ: cute.Tensor,
                         sK: cute.Tensor, sV: cute.Tensor, pipe_q, pipe_k, pipe_v, mO: cute.Tensor,
                         mLse: cute.Tensor, t: Float32, dv: Float32, mTL: cute.Tensor, cta: Int32, m_block: Int32,
                         head: Int32, batch: Int32, wg: Int32, n_tiles: Int32, offset: Int32, seqlen_q: Int32,
                         seqlen_k: Int32, sO: cute.Tensor):
        """Recipe ``zyfa-grouped`` (G = ``self.grouped`` tiles of 128 keys per group): tile j's codes are
        taken against the running max ``gmax`` of its group, so its PV GEMM accumulates straight into the
        group's accumulator ``acc_o`` (scaled by ``2^(gmax_old - gmax)`` where a row's max grew); at a
        group's first tile the finished group is added into this thread's fp32 O in shared memory,
        ``O = O * 2^(bref - gmax) + acc_o`` (``bref``: the last added group's max; a group more than
        MAX_DROP below it is dropped, as t128 drops a tile). Two S accumulators: S_{j+1} is issued in
        the turn with PV_{j-1}, before tile j's softmax, so S's latency leaves the softmax chain."""
        # acc_o: the open group's O; p: the tile's halves a, b
        wg_tidx, tSrQ, tSrK, tOrV, acc_s, acc_o, _, p, _, row0, tScS, tOcO = self.fragments(
            tiled_mma_qk, tiled_mma_pv, sQ, sK, sV, m_block, wg, 2 * BLOCK_N, n_s=2, acc_t=False)
        o_smem = sO[None, wg_tidx, wg]  # this thread's fp32 O, in units of 2^(bref - 8)

        t8 = t * 8.0
        bref = cute.make_rmem_tensor(cute.make_layout(2), Float32)  # per row half: max of the last added group
        gmax = cute.make_rmem_tensor(cute.make_layout(2), Float32)  # per row half: the open group's running max
        scale = cute.make_rmem_tensor(cute.make_layout(2), Float32)  # per row half: acc_o's factor 2^(old - new)
        tl = self.consumer_begin(mTL, wg, cta, bref, scale, acc_o)
        for h in cutlass.range_constexpr(2):
            gmax[h] = -Float32.inf
        for i in cutlass.range_constexpr(self.o_words):
            o_smem[i] = Float32(0.0)
        n_tl = cute.size(mTL.shape[1]) - 2
        pipe_q.consumer_wait(stage(0, 1, False))
        q_slice = tSrQ[None, None, None, wg]
        sm = (tScS, p, acc_o, o_smem, bref, gmax, scale, t, t8, row0, offset, seqlen_k, tl, wg)

        if n_tiles > 0:  # first tile: S_0 waited for, then (S_1 issued) tile 0's softmax, no PV yet
            self.first_qk(acc_s[0], q_slice, tSrK, pipe_k, wg, tl)
            mask0 = self.block_needs_mask(0, row0, offset, seqlen_k)
            if n_tiles > 1:
                self.grouped_tile(0, acc_s[0], acc_s[1], tSrK, q_slice, tOrV, pipe_k, pipe_v, sm, mask0, pv=False,
                                  nxt=True)
            else:
                self.grouped_tile(0, acc_s[0], acc_s[1], tSrK, q_slice, tOrV, pipe_k, pipe_v, sm, mask0, pv=False,
                                  nxt=False)
        n_full = self.first_masked_block(row0, offset, seqlen_k, n_tiles)
        for j in cutlass.range(1, cutlass.min(n_full, n_tiles - 1), unroll=1):
            self.grouped_tile_parity(j, acc_s, tSrK, q_slice, tOrV, pipe_k, pipe_v, sm, False, nxt=True)
        for j in cutlass.range(cutlass.max(n_full, 1), n_tiles - 1, unroll=1):
            self.grouped_tile_parity(j, acc_s, tSrK, q_slice, tOrV, pipe_k, pipe_v, sm, True, nxt=True)
        if n_tiles > 1:  # the last tile: no S after it
            self.grouped_tile_parity(n_tiles - 1, acc_s, tSrK, q_slice, tOrV, pipe_k, pipe_v, sm,
                                     self.block_needs_mask(n_tiles - 1, row0, offset, seqlen_k), nxt=False)
        if n_tiles > 0:  # the last tile's PV GEMM, then the open group added to O, in registers
            if (n_tiles - 1) % self.grouped == 0:
                self.last_tile_pv(n_tiles, acc_o, p, tOrV, pipe_v, wg, tl, n_tl, zero_init=True)
            else:
                self.last_tile_pv(n_tiles, acc_o, p, tOrV, pipe_v, wg, tl, n_tl)
            self.add_group(acc_o, o_smem, bref, gmax, to_smem=False)
        self.consumer_end(acc_o, tOcO, bref, dv, mO, mLse, row0, head, batch, seqlen_q, wg)

    @cute.jit
    def grouped_tile_parity(self, j: Int32, acc_s, tSrK: cute.Tensor, q_slice: cute.Tensor, tOrV: cute.Tensor,
                            pipe_k, pipe_v, sm, masked, nxt: cutlass.Constexpr):
        """grouped_tile with tile j's S accumulator (``acc_s[j % 2]``; S_{j+1} into the other); the
        branch sits between tiles."""
        if j % 2 == 1:
            self.grouped_tile(j, acc_s[1], acc_s[0], tSrK, q_slice, tOrV, pipe_k, pipe_v, sm, masked, pv=True, nxt=nxt)
        else:
            self.grouped_tile(j, acc_s[0], acc_s[1], tSrK, q_slice, tOrV, pipe_k, pipe_v, sm, masked, pv=True, nxt=nxt)

    @cute.jit
    def grouped_tile(self, j: Int32, acc_s: cute.Tensor, acc_next: cute.Tensor, tSrK: cute.Tensor,
                     q_slice: cute.Tensor, tOrV: cute.Tensor, pipe_k, pipe_v, sm, masked, pv: cutlass.Constexpr,
                     nxt: cutlass.Constexpr):
        """Tile j, whose S is ready (waited for at the end of tile j-1): in this warpgroup's turn issue
        ``acc_o += P_{j-1} V_{j-1}`` (``pv``) and S_{j+1} (``nxt``); then tile j's softmax, which waits for
        that PV GEMM only after its row maxima (then adds a finished group to O or rescales acc_o, then
        writes its codes); then waits for S_{j+1}, which ran under the softmax. Every GEMM is waited for
        in the tile that issues it: a wgmma left in flight across the loop's back edge (or the parity
        branch) made ptxas serialise every wgmma of the kernel (a wait after each, seen in the SASS)."""
        p, acc_o, tl, wg = sm[1], sm[2], sm[12], sm[13]
        state_v = stage(j - 1, self.kv_stages, False)
        state_n = stage(j + 1, self.kv_stages, False)
        if const_expr(pv):
            pipe_v.consumer_wait(state_v)
        if const_expr(nxt):
            pipe_k.consumer_wait(state_n)
        if const_expr(pv or nxt):
            self.turn_begin(wg)
            self.stamp(tl, 0, j)
            if const_expr(pv):
                if (j - 1) % self.grouped == 0:  # tile j-1 opened a group: its PV GEMM from zero
                    self.tile_pv(acc_o, p, tOrV, state_v, zero_init=True)
                else:
                    self.tile_pv(acc_o, p, tOrV, state_v)
            if const_expr(nxt):
                self.gemm(False, acc_next, q_slice, tSrK[None, None, None, state_n.index], zero_init=True)
                warpgroup.commit_group()
            self.turn_end(wg)
        self.stamp(tl, 1, j)  # S_j was ready before the turn
        self.grouped_softmax(j, acc_s, *sm, masked, pv_waits=(1 if nxt else 0) if pv else -1)
        if const_expr(nxt):
            warpgroup.wait_group(0)  # S_{j+1}
            pipe_k.consumer_release(state_n)
        self.stamp(tl, 3, j)
        if const_expr(pv):
            pipe_v.consumer_release(state_v)

    @cute.jit
    def grouped_softmax(self, j: Int32, acc_s: cute.Tensor, tScS: cute.Tensor, p, acc_o: cute.Tensor,
                        o_smem: cute.Tensor, bref: cute.Tensor, gmax: cute.Tensor, scale: cute.Tensor, t: Float32,
                        t8: Float32, row0: Int32, offset: Int32, seqlen_k: Int32, tl: cute.Tensor, wg: Int32,
                        masked, pv_waits: cutlass.Constexpr):
        """Lean P of tile j against its group's running max ``gmax = max(gmax, ceil(t * max s))`` (a new
        group, every G tiles: ``gmax = ceil(t * max s)``), codes ``lowbyte(max(fma(s, 8t, (120 - 8 gmax) +
        1.5*2^23), 1.5*2^23))`` into ``p``. ``pv_waits`` >= 0: first waits (``wait_group(pv_waits)``,
        pinned after the row maxima) for the PV GEMM of tile j-1, then at a group's first tile adds the
        finished group into O (shared memory; this tile's PV GEMM will start from zero), elsewhere
        scales ``acc_o`` by ``2^(gmax_old - gmax)`` where a row's max grew (exact; 0 below 2^-126)."""
        if masked:  # a Python bool inside the key loop (no branch), a runtime flag for tiles 0 and n-1
            self.mask_keys(acc_s, tScS, j * (2 * BLOCK_N), row0, offset, seqlen_k)
        mxs = [[row_max(acc_s, h, 8 * half) for h in range(2)] for half in range(2)]
        first = j % self.grouped == 0
        g_new = [cute.arch.fmax(mxs[0][h], mxs[1][h]) for h in range(2)]
        for h in cutlass.range_constexpr(2):
            g_old = gmax[h]
            if first:
                g_old = -Float32.inf
            g_new[h] = cute.arch.fmax(g_old, ceil_mul(t, g_new[h]))
            scale[h] = pow2_of(g_old - g_new[h])
        if const_expr(pv_waits >= 0):
            for h in cutlass.range_constexpr(2):  # the PV wait after the row maxima (see after_max)
                scale[h] = after_max(scale[h], mxs[0][h], mxs[1][h])
            arrive_after(FREE_BARRIER + wg, scale[0], scale[1])
            warpgroup.wait_group(pv_waits)  # PV of tile j-1 done: acc_o and the P registers free
            self.stamp(tl, 2, j)
            if first:
                self.add_group(acc_o, o_smem, bref, gmax, to_smem=True)
            elif scale[0] < 1.0 or scale[1] < 1.0:  # a row's max grew
                for i in cutlass.range_constexpr(cute.size(acc_o)):
                    acc_o[i] = mul_rn(acc_o[i], scale[(i // 2) % 2])
        p32 = [cute.recast_tensor(x, Uint32) for x in p]
        for h in cutlass.range_constexpr(2):
            gmax[h] = g_new[h]
            c_h = -Float32.inf
            if g_new[h] > -Float32.inf:
                c_h = (120.0 - 8.0 * g_new[h]) + 12582912.0
            for half in cutlass.range_constexpr(2):
                self.pack_codes(acc_s, p32[half], h, 8 * half, t8, c_h)

    @cute.jit
    def add_group(self, acc_o: cute.Tensor, o_smem: cute.Tensor, bref: cute.Tensor, gmax: cute.Tensor,
                  to_smem: cutlass.Constexpr):
        """O = O * 2^(bref - gmax) + acc_o per row half (one FFMA: exact scaling, one rounding) and
        bref = gmax; a group with no allowed key or more than MAX_DROP below bref adds nothing (acc_o
        times 0 first, in a branch taken rarely: a NaN still passes). ``to_smem``: O stays in shared
        memory (the next group's first PV GEMM starts from zero); else the sum goes into ``acc_o`` (the
        epilogue's input)."""
        fac = cute.make_rmem_tensor(cute.make_layout(4), Float32)  # per row half h: keep (0 / 1), O's factor
        for h in cutlass.range_constexpr(2):
            fac[h] = 0.0
            fac[2 + h] = 1.0
            if gmax[h] > -Float32.inf and gmax[h] >= bref[h] - MAX_DROP:
                fac[h] = 1.0
                fac[2 + h] = pow2_of(bref[h] - gmax[h])
                bref[h] = gmax[h]
        if fac[0] == 0.0 or fac[1] == 0.0:
            for i in cutlass.range_constexpr(cute.size(acc_o)):
                acc_o[i] = mul_rn(acc_o[i], fac[(i // 2) % 2])
        for i in cutlass.range_constexpr(cute.size(acc_o)):
            o = fma_rn(o_smem[i], fac[2 + (i // 2) % 2], acc_o[i])
            if const_expr(to_smem):
                o_smem[i] = o
            else:
                acc_o[i] = o


# -- host side ----
_COMPILED: dict = {}
_TIMELINE_DUMMY: dict = {}  # per device: the unused timeline argument of the untraced kernel


def _cute_tensor(x, leading_dim: int, element_type=None):
    t = from_dlpack(x, assumed_align=16).mark_layout_dynamic(leading_dim=leading_dim)
    if element_type is not None:
        t.element_type = element_type
    return t


def compile_without_gpu(head_dim: int, head_dim_v: int, causal: bool, **variant):
    """Compile the kernel for ``CUTE_DSL_ARCH`` (e.g. ``sm_90a``) where no GPU is present: zero CPU
    tensors of a small shape (b1, s 256, h 4 / h_k 2) stand in for the arguments, whose sizes are
    dynamic in the compiled code. ``variant``: :class:`LeanPAttentionSm90`'s keyword options. Returns
    the compiled function (with ``CUTE_DSL_KEEP=cubin`` its ``__cubin__`` names the cubin file)."""
    b, s, h, hk = 1, 256, 4, 2
    q = torch.zeros(b, s, h, head_dim, dtype=torch.uint8)
    k = torch.zeros(b, s, hk, head_dim, dtype=torch.uint8)
    vt = torch.zeros(b, hk, head_dim_v + ONES_ROWS, s, dtype=torch.uint8)
    o = torch.zeros(b, s, h, head_dim_v, dtype=torch.bfloat16)
    lse, t, dv = torch.zeros(b, h, s), torch.ones(b, hk), torch.ones(b, hk)
    tl = torch.zeros(2 * h * b, 2, s // BLOCK_N + 2, 4, dtype=torch.int64)
    f8 = cutlass.Float8E4M3FN
    args = (_cute_tensor(q.permute(1, 3, 2, 0), 1, f8), _cute_tensor(k.permute(1, 3, 2, 0), 1, f8),
            _cute_tensor(vt.permute(2, 3, 1, 0), 1, f8), _cute_tensor(o.permute(1, 3, 2, 0), 1),
            _cute_tensor(lse.permute(2, 1, 0), 0), _cute_tensor(t.permute(1, 0), 0),
            _cute_tensor(dv.permute(1, 0), 0), _cute_tensor(tl.permute(3, 2, 1, 0), 0),
            Int32(s), Int32(s), cuda.CUstream(0))
    return cute.compile(LeanPAttentionSm90(head_dim, head_dim_v, causal, **variant), *args)


def attention_fp8_sm90(q, k, v, softmax_scale: float, causal: bool, q_descale=None, k_descale=None,
                       v_descale=None, out_dtype=None, pingpong: bool = True, v_prepared=None, timeline=None,
                       n128: bool = False, lpt: bool = True,
                       exact: bool = False, kv_stages: int = 4, runmax: bool = False, t128: bool = False,
                       grouped: int = 0):
    """ZYFA FP8 forward on Hopper. q, k, v: float8_e4m3fn ``(b, s, h, d)`` on an sm_90 GPU; descales
    float32 ``(b, h_k)`` (None: 1). Returns ``out`` ``(b, s_q, h, d_v)`` (bfloat16, or ``out_dtype``
    float32 for conformance tests) and ``softmax_lse`` float32 ``(b, h, s_q)``.

    V is first rewritten as V' (:func:`zyfa.kernels.hopper.vprep.prepare_v_triton`: keys contiguous
    and permuted, 8 rows of ones); that copy is part of the call unless ``v_prepared`` passes it in.
    ``pingpong=False`` drops the named-barrier turns between the two consumer warpgroups;
    ``n128=True`` computes S over 128-key tiles (two 64-key scaling blocks per softmax pass);
    ``lpt=False`` launches causal query tiles lightest first instead of heaviest first.
    ``runmax=True`` (with ``n128``) computes recipe ``zyfa-runmax`` instead of ``zyfa-v1``
    (``docs/numerics.md``: codes against the row's running max per 128-key tile, PV accumulated in O).
    ``t128=True`` (with ``n128``) computes recipe ``zyfa-v1`` with 128-key scaling blocks
    (``zyfa.numerics`` ``block=128``): one PV GEMM and one merge per tile.
    ``grouped=G`` (G > 0, with ``n128``) computes recipe ``zyfa-grouped`` with ``block=128, group=G``: PV
    accumulated in the tensor core over G tiles, each group added into an fp32 O in shared memory,
    S of the next tile issued before each tile's softmax.
    ``kv_stages``: K/V pipeline depth (n128: 4 means two 128-key stages, the same bytes; grouped: three).
    ``exact=True`` sums every 32-wide tensor-core partial product in IEEE fp32 (slow; conformance:
    equal to :func:`zyfa.numerics.zyfa_fp8_attention` bit for bit where fp32 sums are exact).
    ``timeline``: an int64 tensor ``(ctas, 2, n_blocks + 2, 4)`` (``ctas`` = query tiles x heads x
    batch, ``n_blocks`` = key blocks of 64) that receives the per-warpgroup clock64 stamps
    (:mod:`zyfa.trace.cute_clock` turns them into a trace); a separately compiled kernel.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dtype != torch.float8_e4m3fn:
            raise TypeError(f"{name} must be float8_e4m3fn, got {x.dtype}")
        if x.stride(-1) != 1:
            raise ValueError(f"{name} needs a unit stride along headdim")
    out_dtype = torch.bfloat16 if out_dtype is None else out_dtype
    if out_dtype not in (torch.bfloat16, torch.float32):
        raise ValueError(f"out_dtype must be torch.bfloat16 or torch.float32, got {out_dtype}")
    b, s_q, h, d = q.shape
    _, s_k, _, d_v = v.shape
    t, dv = fp8_launch_constants(softmax_scale, v, q_descale, k_descale, v_descale)
    vt = prepare_v_triton(v) if v_prepared is None else v_prepared
    out = torch.empty(b, s_q, h, d_v, dtype=out_dtype, device=q.device)
    lse = torch.empty(b, h, s_q, dtype=torch.float32, device=q.device)
    f8 = cutlass.Float8E4M3FN
    tl = _TIMELINE_DUMMY.setdefault(q.device, torch.zeros(1, 2, 2, 4, dtype=torch.int64, device=q.device)) \
        if timeline is None else timeline
    args = (_cute_tensor(q.view(torch.uint8).permute(1, 3, 2, 0), 1, f8),
            _cute_tensor(k.view(torch.uint8).permute(1, 3, 2, 0), 1, f8),
            _cute_tensor(vt.view(torch.uint8).permute(2, 3, 1, 0), 1, f8),
            _cute_tensor(out.permute(1, 3, 2, 0), 1),
            _cute_tensor(lse.permute(2, 1, 0), 0),
            _cute_tensor(t.permute(1, 0), 0), _cute_tensor(dv.permute(1, 0), 0),
            _cute_tensor(tl.permute(3, 2, 1, 0), 0), Int32(s_q), Int32(s_k), cuda.CUstream(torch.cuda.current_stream(q.device).cuda_stream))
    key = (d, d_v, bool(causal), bool(pingpong), timeline is not None, out_dtype,
           bool(n128), bool(lpt), bool(exact), int(kv_stages), bool(runmax), bool(t128), int(grouped))
    fn = _COMPILED.get(key)
    if fn is None:
        fn = cute.compile(LeanPAttentionSm90(d, d_v, causal, pingpong=pingpong, timeline=timeline is not None,
                                             n128=n128, lpt=lpt, exact=exact, kv_stages=kv_stages, runmax=runmax,
                                             t128=t128, grouped=grouped), *args)
        _COMPILED[key] = fn
    fn(*args)
    return out, lse
