"""Kernel variants and their schedules, as data.

A :class:`KernelConfig` names the numerics (softmax variant, P scaling) and the schedule. A
schedule is the table :func:`schedule` returns per wave group: the loop body of one wave as an
ordered tuple of :class:`Cluster` s, each naming its emitter, its ``s_setprio`` level, whether a
barrier interval ends after it, whether it runs only on diagonal tiles, which clusters it nests
out of line, and whether its instructions are spread over the MFMAs. The generator emits exactly
this table (it has no cluster names of its own) and records in the build meta, per cluster
instance, the instruction range and the unit counts it emitted; the cycle model names trace
regions after it.

Two-wave ping-pong (``pingpong``): each SIMD holds one wave of group 0 (waves 0-3) and one of
group 1 (waves 4-7). Group 1 starts one barrier late, so while one wave runs its MFMA phase at
priority 1 the other runs its softmax phase; every barrier hands the MFMA pipe over.
``serial``: the same loop with no stagger and no priorities (both waves of a SIMD compete).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import product

BLOCK_M = 32  # query rows per wave (one 32x32 MFMA tile of columns)
WAVES = 8  # waves per workgroup, two per SIMD
ROWS_PER_WG = BLOCK_M * WAVES
BLOCK_N = 128  # keys per loop iteration (tile)
SCALE_BLOCK = 64  # keys per pow2 scaling block (docs/numerics.md)

SOFTMAX = ("lean", "exact", "folded", "lean-v2")
SCALING = ("block", "none")
SCHEDULES = ("pingpong", "serial", "aiter")
FMA_FORMS = ("scalar", "packed")
ROWSUMS = ("mfma", "valu", "split")
ACCUMULATORS = ("agpr", "vgpr")
DTYPES = ("fp8", "bf16")


@dataclass(frozen=True)
class KernelConfig:
    """One generated kernel.

    ``softmax``: ``lean`` (Lean P: one FMA + ``v_cvt_u32_f32`` per probability builds the e4m3
    code), ``exact`` (``v_exp_f32`` + fp8/bf16 convert) or ``folded`` (Lean P with the FMA folded
    into the QK MFMA: Q re-quantised with ``8 t``'s non-power-of-two part, its power of two as the
    MFMA's E8M0 scale, the accumulator started at ``120.5 - 8 ref``; one ``v_cvt_u32_f32`` per
    probability, an overflow check per tile; numerics ``zyfa-folded``, docs/numerics.md) or ``lean-v2``
    (Lean P with spec v2's hybrid phi offset: the running max M in fp32, the FMA constant
    ``c - 8 bm'``, alpha = 2^(M_old - M) by spec v2's FMA sequence in the out-of-line rescale, which
    multiplies O and L by it; numerics ``zyfa-v2``). ``scaling``: ``block`` (per-64-key
    pow2 scale into ``v_mfma_scale_f32_32x32x64_f8f6f4``, row sum of the rounded P by one extra
    MFMA per 64-key block, lazy rescale of O) or ``none`` (AITER v3 numerics: running fp32
    max, O rescaled every tile, row sum of the unrounded p by VALU adds).
    ``rescale_threshold``: with block scaling, O is rescaled only in lanes whose block max exceeds
    the reference by more than this many doublings (0 = whenever the running max grows, as the
    spec; larger values rescale less often and let P's E8M0 scale exceed 2^-8, up to 2^(T - 8)).
    ``fma``: ``scalar`` (``v_fma_f32``, co-issues with MFMA) or ``packed`` (``v_pk_fma_f32``: half
    the instructions, but a packed FP32 op cannot issue while an MFMA executes on its SIMD).
    ``rowsum``: the rounded row sum of P, ``mfma`` (one MFMA per 64-key block), ``valu`` (folded
    only: each lane decodes and adds its codes, 100 VALU ops per tile) or ``split`` (folded only:
    the tile's first block by its MFMA, the second on the VALU, 51 ops (53 with AGPR accumulators),
    added to l one tile later so the order is zyfa.numerics' ``(l + S0) + S1``): all three give the
    same bits.
    ``pair_query_blocks``: where the host asks for it (kernel argument ``pair_query_blocks``: the
    unpaired grid would exceed the CUs), workgroup ``x`` computes query block ``x`` and then, when
    it exists and is larger, block ``blocks - 1 - x`` (grid x halved), as AITER v3's causal host
    code pairs its query tiles: under a causal mask every workgroup then does the same work, so the dispatch has no tail
    of long workgroups (the cycle model's dispatch: 5.16M -> 4.80M cycles at b1 h32 s32K).
    ``accumulators``: where a block-scaled kernel keeps O and the row-sum accumulator: ``agpr``
    (every VALU access, the lazy rescale's included, goes through ``v_accvgpr_read/write``: 3 ops
    per register) or ``vgpr`` (the MFMAs accumulate into architectural VGPRs, which the VALU reads
    and writes directly: the rescale is one ``v_ldexp_f32`` per register; needs the 256-VGPR file
    to hold them). Kernels without block scaling keep O in VGPRs either way.
    """

    name: str
    dtype: str = "fp8"
    softmax: str = "lean"
    scaling: str = "block"
    schedule: str = "pingpong"
    headdim: int = 128
    headdim_v: int = 128
    rescale_threshold: int = 0
    fma: str = "scalar"
    rowsum: str = "mfma"
    pair_query_blocks: bool = False
    accumulators: str = "agpr"

    def __post_init__(self):
        for field_name, allowed in (("dtype", DTYPES), ("softmax", SOFTMAX), ("scaling", SCALING),
                                    ("schedule", SCHEDULES), ("fma", FMA_FORMS), ("rowsum", ROWSUMS),
                                    ("accumulators", ACCUMULATORS)):
            value = getattr(self, field_name)
            if value not in allowed:
                raise ValueError(f"Unknown KernelConfig.{field_name}: {value!r} (expected one of {allowed})")
        if self.softmax in ("lean", "folded", "lean-v2") and self.scaling != "block":
            raise ValueError(f"KernelConfig: softmax={self.softmax!r} needs scaling='block' (the code is relative to "
                             "a power-of-two reference that the scaled MFMA removes)")
        if self.schedule == "aiter" and (self.softmax, self.scaling) != ("exact", "none"):
            raise ValueError("KernelConfig: schedule='aiter' is AITER v3's numerics: softmax='exact', scaling='none'")
        if self.dtype == "bf16" and (self.softmax, self.scaling) != ("exact", "none"):
            raise ValueError("KernelConfig: bf16 kernels use softmax='exact', scaling='none'")
        step = 64 if self.dtype == "fp8" else 16
        if not isinstance(self.headdim, int) or self.headdim % step or not step <= self.headdim <= 256:
            raise ValueError(f"KernelConfig.headdim must be a multiple of {step} in [{step}, 256], got {self.headdim!r}")
        if isinstance(self.rescale_threshold, bool) or not isinstance(self.rescale_threshold, int) \
                or not 0 <= self.rescale_threshold <= 64:
            raise ValueError(f"KernelConfig.rescale_threshold must be an int in [0, 64], got {self.rescale_threshold!r}")
        if self.softmax == "lean-v2" and self.rescale_threshold:
            raise ValueError("KernelConfig: softmax='lean-v2' rescales whenever the running max grows (spec v2): "
                             f"rescale_threshold must be 0, got {self.rescale_threshold!r}")
        if self.rowsum in ("valu", "split") and self.softmax != "folded":
            raise ValueError(f"KernelConfig: rowsum={self.rowsum!r} needs softmax='folded' (unscaled P)")
        if self.softmax == "folded" and self.rowsum != "valu" and self.headdim != 128:
            raise ValueError(f"KernelConfig: softmax='folded' with rowsum={self.rowsum!r} is implemented for headdim "
                             "128 only "
                             f"(its 16-VGPR accumulator-start block and the row-sum operand do not fit beside a "
                             f"{self.headdim}-wide Q operand; rowsum='valu' does), got {self.headdim!r}")
        if not isinstance(self.pair_query_blocks, bool):
            raise ValueError(f"KernelConfig.pair_query_blocks must be a bool, got {self.pair_query_blocks!r}")
        if self.headdim_v != 128:
            raise ValueError(f"KernelConfig.headdim_v must be 128 (four 32-row MFMA tiles), got {self.headdim_v!r}")

    @property
    def esize(self) -> int:
        """Bytes per Q/K/V element."""
        return 1 if self.dtype == "fp8" else 2

    @property
    def k_per_mfma(self) -> int:
        return 64 if self.dtype == "fp8" else 16

    @property
    def qk_mfmas(self) -> int:
        """MFMAs for one 32-query x 128-key S tile."""
        return (BLOCK_N // 32) * (self.headdim // self.k_per_mfma)

    @property
    def pv_mfmas(self) -> int:
        """MFMAs for P (32 x 128 keys) times V (128 keys x headdim_v)."""
        return (self.headdim_v // 32) * (BLOCK_N // self.k_per_mfma)

    @property
    def rowsum_mfmas(self) -> int:
        """Extra MFMAs per tile for the rounded-P row sum: one per 64-key scaling block (``split``:
        block 0's only, block 1 is summed on the VALU)."""
        if self.scaling != "block" or self.rowsum == "valu":
            return 0
        return 1 if self.rowsum == "split" else BLOCK_N // SCALE_BLOCK

    @property
    def mfma_opcode(self) -> str:
        return "v_mfma_f32_32x32x64_f8f6f4" if self.dtype == "fp8" else "v_mfma_f32_32x32x16_bf16"

    @property
    def qk_opcode(self) -> str:
        """QK^T MFMA: scaled when Q carries folded's power-of-two factor as an E8M0 scale."""
        return "v_mfma_scale_f32_32x32x64_f8f6f4" if self.softmax == "folded" else self.mfma_opcode

    @property
    def pv_opcode(self) -> str:
        """PV MFMA: scaled when P carries a per-block E8M0 scale (folded's P scale is constant:
        unscaled, the constant cancels between O and l)."""
        if self.scaling == "block" and self.softmax != "folded":
            return "v_mfma_scale_f32_32x32x64_f8f6f4"
        return self.mfma_opcode

    @property
    def rowsum_opcode(self) -> str:
        """Row sum of the rounded P, one per 64-key block: a 32x32x64 MFMA against a ones operand
        (scaled like PV), or for folded (no per-block scale) a 16x16x128 MFMA, half the cycles,
        whose selector operand routes each query's 64 keys into its lane's first D register."""
        return "v_mfma_f32_16x16x128_f8f6f4" if self.softmax == "folded" else self.pv_opcode


EMITTERS = ("pv", "qk", "mask", "rowsum", "rowsum_carry", "rescale", "load_issue", "lds_store", "prefetch",
            # P of one tile, one emitter per recipe (softmax_emitter)
            "softmax_folded", "softmax_lean", "softmax_lean_v2", "softmax_exact", "softmax_naive",
            # the "aiter" schedule's softmax in three barrier intervals, and an interval of its own with nothing
            "softmax_max", "softmax_exp", "softmax_cvt", "idle")
# emitters that produce MFMA steps: consecutive clusters of these kinds form ONE operand-read
# pipeline (ds_reads run ahead of the MFMAs through a register ring), in table order
MFMA_EMITTERS = ("pv", "qk")
ONLY = ("always", "diagonal")


@dataclass(frozen=True)
class Cluster:
    """One named piece of a wave's loop body and how it is emitted (the generator reads every field).

    ``name``: the region name in build meta and traces. ``emitter``: the generator routine that
    emits it (one of :data:`EMITTERS`; clusters of :data:`MFMA_EMITTERS` next to each other share
    one operand pipeline). ``priority``: the ``s_setprio`` level while it runs (the generator
    emits ``s_setprio`` only where the level changes). ``barrier``: the barrier interval ends
    after this cluster: priority hand-over to 0, ``s_waitcnt lgkmcnt(0)``, ``s_barrier``.
    ``only``: ``"diagonal"`` skips it with a scalar branch on tiles ``j < nfull`` (no key masked
    for any row). ``nested``: clusters the emitter places out of line behind a rare branch (the
    lazy O rescale). ``spread``: instead of running after the previous cluster, its instructions
    are spread evenly over the MFMA steps of its barrier interval (``ceil(instructions / MFMAs)``
    after each MFMA, HipKittens' ``sched_group_barrier`` pairs derived from the counts); only for
    clusters without LDS instructions, whose ``lgkmcnt`` the operand pipeline would miscount.
    ``before_end``: a cluster right after an MFMA run is emitted inside its operand pipeline, this
    many MFMA steps before the run's end, instead of after it (its LDS operations are counted in
    the pipeline's waits): an LDS store there completes under the last MFMAs instead of delaying
    the hand-over. ``at_entry``: also emitted once before the loop, for tile 0 (the prefetch of
    the first MFMA phase's operands). ``drain``: an MFMA cluster that also runs once after the loop,
    for the last tile (its PV). Unit counts are not declared: the build meta records what the
    emitter emitted.
    """

    name: str
    emitter: str
    priority: int = 0
    barrier: bool = False
    only: str = "always"
    nested: tuple["Cluster", ...] = ()
    spread: bool = False
    before_end: int = 0
    at_entry: bool = False
    drain: bool = False

    def __post_init__(self):
        if self.emitter not in EMITTERS:
            raise ValueError(f"Unknown Cluster.emitter: {self.emitter!r} (expected one of {EMITTERS})")
        if self.priority not in (0, 1, 2, 3):
            raise ValueError(f"Cluster.priority must be 0-3 (s_setprio), got {self.priority!r}")
        if self.only not in ONLY:
            raise ValueError(f"Unknown Cluster.only: {self.only!r} (expected one of {ONLY})")
        if self.spread and self.emitter not in SPREADABLE:
            raise ValueError(f"Cluster {self.name}: emitter {self.emitter!r} cannot be spread over MFMAs "
                             f"(allowed: {SPREADABLE})")
        if self.spread and self.only != "always":
            raise ValueError(f"Cluster {self.name}: a spread cluster cannot be conditional")
        if isinstance(self.before_end, bool) or not isinstance(self.before_end, int) or self.before_end < 0:
            raise ValueError(f"Cluster {self.name}: before_end must be an int >= 0, got {self.before_end!r}")
        if self.before_end and (self.spread or self.only != "always" or self.emitter in MFMA_EMITTERS):
            raise ValueError(f"Cluster {self.name}: only an unconditional, unspread non-MFMA cluster can run "
                             "before_end MFMA steps inside an MFMA run")
        if self.drain and self.emitter not in MFMA_EMITTERS:
            raise ValueError(f"Cluster {self.name}: only an MFMA cluster ({MFMA_EMITTERS}) can drain after the loop")
        if self.at_entry and (self.spread or self.before_end or self.emitter in MFMA_EMITTERS):
            raise ValueError(f"Cluster {self.name}: only a plain non-MFMA cluster can run at the loop entry")

    def as_dict(self) -> dict:
        return {"name": self.name, "emitter": self.emitter, "priority": self.priority, "barrier": self.barrier,
                "only": self.only, "spread": self.spread, "before_end": self.before_end,
                "at_entry": self.at_entry, "drain": self.drain}


SPREADABLE = ("load_issue",)  # VMEM + SALU only: no LDS counter traffic inside the operand pipeline
# block-scaled fp8 kernels, group 1: its LDS stores run this many MFMA steps before the end of its MFMA phase
STORE_BEFORE_END = 3


def loads_per_thread(config: KernelConfig) -> tuple[int, int]:
    """16-byte global loads per thread per tile: (K tile, V^T tile), 512 threads per workgroup."""
    k_bytes = BLOCK_N * config.headdim * config.esize
    v_bytes = config.headdim_v * BLOCK_N * config.esize
    threads = WAVES * 64
    if k_bytes % (16 * threads) or v_bytes % (16 * threads):
        raise ValueError(f"{config.name}: tile sizes must split into 16-byte loads over {threads} threads")
    return k_bytes // (16 * threads), v_bytes // (16 * threads)


def softmax_emitter(config: KernelConfig) -> str:
    """The emitter of a tile's P for the config's recipe: ``softmax_folded`` (folded Lean P),
    ``softmax_lean`` (spec v1 Lean P), ``softmax_lean_v2`` (spec v2), ``softmax_exact`` (exact exp2
    with v1's block scaling) or ``softmax_naive`` (AITER v3 numerics, BF16)."""
    if config.scaling == "none":
        return "softmax_naive"
    return {"folded": "softmax_folded", "lean": "softmax_lean", "lean-v2": "softmax_lean_v2",
            "exact": "softmax_exact"}[config.softmax]


def schedule(config: KernelConfig, wave_group: int) -> tuple[Cluster, ...]:
    """Loop body of one wave of ``wave_group`` for one 128-key tile j: the generator's input.

    Two barrier intervals. MFMA phase: PV_j-1 (P of the previous tile times its V^T, plus one
    row-sum MFMA per 64-key block with block scaling) and QK_j (S of this tile) as one operand
    pipeline, at priority 1 under ping-pong. Softmax phase: mask_j (only on tiles that cross the
    causal diagonal or seqlen_k), then P_j from S_j (with the lazy O rescale out of line). The
    K_j+1 / V_j tile moves from global memory to LDS in two halves, issue then LDS store one
    phase later. The stores must land in the barrier interval where no wave reads the buffers
    they overwrite; both groups store in the same (odd) interval. That is the softmax phase of
    group 0 (and of every wave under ``serial``) but the MFMA phase of the staggered group 1,
    whose global loads are therefore issued one phase earlier (in its softmax phase).
    """
    if wave_group not in (0, 1):
        raise ValueError(f"wave_group must be 0 or 1, got {wave_group!r}")
    if config.schedule == "aiter":
        return aiter_schedule(config)
    prio = 1 if config.schedule == "pingpong" else 0
    rescale = (Cluster("rescale_O", "rescale"),) if config.scaling == "block" else ()
    load = Cluster("load_K_j+1_V_j", "load_issue")
    store = Cluster("store_K_j+1_V_j", "lds_store")
    mfma_side, softmax_side = (load, store) if config.schedule == "serial" or wave_group == 0 else (store, load)
    # the global loads ride on the MFMA stream (spread over its steps); the LDS stores cannot
    # (their lgkmcnt would mix with the operand reads'), so they follow it
    mfma_side = replace(mfma_side, priority=prio, barrier=True, spread=mfma_side.emitter in SPREADABLE)
    # group 1 stores during its MFMA phase, so at the end of its softmax phase the next tile's
    # operands are in LDS and nobody writes LDS until the next barrier: it reads the first ones
    # ahead and its next MFMA phase starts without waiting for LDS (not group 0: its softmax
    # phase is the store interval)
    if config.scaling == "block" and config.schedule == "pingpong" and wave_group == 1:
        # group 1 stores during its MFMA phase: STORE_BEFORE_END MFMAs before its end, so the
        # stores complete under those MFMAs and group 0's MFMA phase starts right after them
        mfma_side = replace(mfma_side, before_end=STORE_BEFORE_END)
    tail = (replace(softmax_side, barrier=True),)
    if config.schedule == "pingpong" and wave_group == 1:
        tail = (softmax_side, Cluster("prefetch_j+1", "prefetch", barrier=True, at_entry=True))
    return (
        Cluster("PV_j-1", "pv", priority=prio, drain=True),
        Cluster("QK_j", "qk", priority=prio),
        mfma_side,
        Cluster("mask_j", "mask", only="diagonal"),
        # rowsum="split": the previous tile's VALU block sum joins l before the fix-up may rescale it
        *((Cluster("rowsum_carry_j", "rowsum_carry"),) if config.rowsum == "split" else ()),
        Cluster("softmax_j", softmax_emitter(config), nested=rescale),
        *((Cluster("rowsum_j", "rowsum"),) if config.rowsum in ("valu", "split") else ()),
        *tail,
    )


AITER_STAGGER = 3  # barrier intervals group 1 runs behind group 0 under the "aiter" schedule


def aiter_schedule(config: KernelConfig) -> tuple[Cluster, ...]:
    """The loop body of AITER v3 FP8's forward (``fwd_hd128_fp8_causal.co``, ROCm/aiter), as its
    cycle-model trace shows it per 128-key tile and wave: six barrier intervals, the same for both
    wave groups, group 1 :data:`AITER_STAGGER` intervals behind group 0, so per SIMD:

    ======  ===========================================  ==========================================
    k       this wave                                    the other wave of its SIMD (k + 3)
    ======  ===========================================  ==========================================
    0       MFMA phase: PV_j-1 + QK_j (prio 1), global    exp phase: 65 v_exp, 64 v_add, 66 v_mul
            loads of K_j+1 / V_j spread over it
    1       LDS store of K_j+1 / V_j                      convert: 32 v_cvt_pk_fp8_f32
    2       mask (diagonal tiles), max phase: v_max3      nothing
            row max, 32 v_pk_fma (MFMA pipe idle: packed
            FP32 could not issue beside an MFMA)
    3       exp phase (beside the other's MFMAs)          MFMA phase
    4       convert P to e4m3                             LDS store
    5       nothing                                       mask, max phase
    ======  ===========================================  ==========================================

    The MFMA pipe idles through the max and convert phases: that is AITER's structure (the
    thread traces measured 31.7% MFMA idle), which this variant reproduces instead of our own
    two-interval ping-pong. The stores of K_j+1 / V_j land in interval 1 of each group: after
    both groups' reads of those buffers (tile j-1's MFMA phases, intervals 6j-6 and 6j-3) and
    before the next reads (6j+6 and 6j+9)."""
    return (
        Cluster("PV_j-1", "pv", priority=1, drain=True),
        Cluster("QK_j", "qk", priority=1),
        Cluster("load_K_j+1_V_j", "load_issue", priority=1, barrier=True, spread=True),
        Cluster("store_K_j+1_V_j", "lds_store", barrier=True),
        Cluster("mask_j", "mask", only="diagonal"),
        Cluster("softmax_max_j", "softmax_max", barrier=True),
        Cluster("softmax_exp_j", "softmax_exp", barrier=True),
        Cluster("softmax_cvt_j", "softmax_cvt", barrier=True),
        Cluster("idle_j", "idle", barrier=True),
    )


def barrier_intervals(table: tuple[Cluster, ...]) -> list[tuple[Cluster, ...]]:
    """The table split after every cluster with ``barrier`` (a trailing open interval is an error:
    the loop body must end at a barrier so the next tile's LDS buffers are safe)."""
    intervals, current = [], []
    for cluster in table:
        current.append(cluster)
        if cluster.barrier:
            intervals.append(tuple(current))
            current = []
    if current:
        raise ValueError(f"schedule ends with {[c.name for c in current]} outside a barrier interval")
    return intervals


# -- the registered variants -------------------------------------------------------------------------
# zyfa-fp8 is the write-up's kernel: Lean P folded into the QK MFMA (388 VALU cycles per tile; the
# spec-v1 Lean P cannot go below 512: one FMA + one convert per probability), the rounded row sum
# on the MFMA pipe (one 16x16x128 per 64-key block: in the power model 32 MFMA cycles cost less
# energy than rowsum="split"'s 51 VALU ops, kernels/gfx950/README.md), O and the row sum in VGPRs
# (accumulators="vgpr": a one-op-per-register lazy rescale), query blocks paired per workgroup.
# zyfa-fp8-v1 is spec v1 literally (the FP8 backend's kernel: its bits are recipe zyfa-v1; one query
# block per workgroup), zyfa-fp8-v2 spec v2, zyfa-fp8-valu-rowsum zyfa-fp8 with both block sums on
# the VALU, zyfa-fp8-exact exact exp2 with block scaling; all block-scaled ones accumulate in VGPRs.
VARIANTS: dict[str, KernelConfig] = {
    "zyfa-fp8": KernelConfig("zyfa-fp8", softmax="folded", scaling="block", schedule="pingpong", rowsum="mfma",
                             pair_query_blocks=True, accumulators="vgpr"),
    "zyfa-fp8-v1": KernelConfig("zyfa-fp8-v1", softmax="lean", scaling="block", schedule="pingpong",
                                accumulators="vgpr"),
    "zyfa-fp8-v2": KernelConfig("zyfa-fp8-v2", softmax="lean-v2", scaling="block", schedule="pingpong",
                                accumulators="vgpr"),
    "zyfa-fp8-valu-rowsum": KernelConfig("zyfa-fp8-valu-rowsum", softmax="folded", scaling="block",
                                         schedule="pingpong", rowsum="valu", pair_query_blocks=True,
                                         accumulators="vgpr"),
    "zyfa-fp8-exact": KernelConfig("zyfa-fp8-exact", softmax="exact", scaling="block", schedule="pingpong",
                                   accumulators="vgpr"),
    "aiter-like-fp8": KernelConfig("aiter-like-fp8", softmax="exact", scaling="none", schedule="aiter",
                                   fma="packed"),
    "zyfa-bf16": KernelConfig("zyfa-bf16", dtype="bf16", softmax="exact", scaling="none", schedule="pingpong"),
}


def all_configs(headdims=(128, 192)) -> list[KernelConfig]:
    """Every valid (softmax, scaling, schedule, headdim) fp8 combination, for tests and what-if."""
    configs = []
    for softmax, scaling, sched, d in product(SOFTMAX, SCALING, SCHEDULES, headdims):
        if softmax in ("lean", "folded", "lean-v2") and scaling != "block" \
                or sched == "aiter" and (softmax, scaling) != ("exact", "none"):
            continue
        configs.append(KernelConfig(f"fp8-{softmax}-{scaling}-{sched}-d{d}", softmax=softmax, scaling=scaling,
                                    schedule=sched, headdim=d, rowsum="valu" if softmax == "folded" else "mfma"))
    return configs
