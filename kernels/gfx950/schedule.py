"""Kernel variants and their schedules, as data.

A :class:`KernelConfig` names the numerics (softmax variant, P scaling) and the schedule. A
schedule is a tuple of :class:`Cluster` s, the loop body of one wave: each cluster is a named
phase (``QK_j``, ``softmax_j``, ``PV_j-1``), the (unit, count) instruction groups it contains, the
``s_setprio`` priority it runs at and whether it ends in ``s_barrier``. The generator emits the
clusters in this order and checks that what it emitted matches the declared groups; the build
meta carries the same list (with instruction ranges) to the cycle model, which names trace
regions after it.

Two-wave ping-pong (``pingpong``): each SIMD holds one wave of group 0 (waves 0-3) and one of
group 1 (waves 4-7). Group 1 starts one barrier late, so while one wave runs its MFMA phase at
priority 1 the other runs its softmax phase; every barrier hands the MFMA pipe over.
``serial``: the same loop with no stagger and no priorities (both waves of a SIMD compete).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

BLOCK_M = 32  # query rows per wave (one 32x32 MFMA tile of columns)
WAVES = 8  # waves per workgroup, two per SIMD
ROWS_PER_WG = BLOCK_M * WAVES
BLOCK_N = 128  # keys per loop iteration (tile)
SCALE_BLOCK = 64  # keys per pow2 scaling block (docs/numerics.md)
SCORES_PER_LANE = BLOCK_M * BLOCK_N // 64  # S values each lane of a wave holds per tile

SOFTMAX = ("lean", "exact")
SCALING = ("block", "none")
SCHEDULES = ("pingpong", "serial")
FMA_FORMS = ("scalar", "packed")
DTYPES = ("fp8", "bf16")


@dataclass(frozen=True)
class KernelConfig:
    """One generated kernel.

    ``softmax``: ``lean`` (Lean P: one FMA + ``v_cvt_u32_f32`` per probability builds the e4m3
    code) or ``exact`` (``v_exp_f32`` + fp8/bf16 convert). ``scaling``: ``block`` (per-64-key
    pow2 scale into ``v_mfma_scale_f32_32x32x64_f8f6f4``, row sum of the rounded P by one extra
    MFMA per 64-key block, lazy rescale of O) or ``none`` (AITER v3 numerics: running fp32
    max, O rescaled every tile, row sum of the unrounded p by VALU adds).
    ``rescale_threshold``: with block scaling, O is rescaled only in lanes whose block max exceeds
    the reference by more than this many doublings (0 = whenever the running max grows, as the
    spec; larger values rescale less often and let P's E8M0 scale exceed 2^-8, up to 2^(T - 8)).
    ``fma``: ``scalar`` (``v_fma_f32``, co-issues with MFMA) or ``packed`` (``v_pk_fma_f32``: half
    the instructions, but a packed FP32 op cannot issue while an MFMA executes on its SIMD).
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

    def __post_init__(self):
        for field_name, allowed in (("dtype", DTYPES), ("softmax", SOFTMAX), ("scaling", SCALING),
                                    ("schedule", SCHEDULES), ("fma", FMA_FORMS)):
            value = getattr(self, field_name)
            if value not in allowed:
                raise ValueError(f"Unknown KernelConfig.{field_name}: {value!r} (expected one of {allowed})")
        if self.softmax == "lean" and self.scaling != "block":
            raise ValueError("KernelConfig: softmax='lean' needs scaling='block' (the code is relative to the block max)")
        if self.dtype == "bf16" and (self.softmax, self.scaling) != ("exact", "none"):
            raise ValueError("KernelConfig: bf16 kernels use softmax='exact', scaling='none'")
        step = 64 if self.dtype == "fp8" else 16
        if not isinstance(self.headdim, int) or self.headdim % step or not step <= self.headdim <= 256:
            raise ValueError(f"KernelConfig.headdim must be a multiple of {step} in [{step}, 256], got {self.headdim!r}")
        if isinstance(self.rescale_threshold, bool) or not isinstance(self.rescale_threshold, int) \
                or not 0 <= self.rescale_threshold <= 64:
            raise ValueError(f"KernelConfig.rescale_threshold must be an int in [0, 64], got {self.rescale_threshold!r}")
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
        """Extra MFMAs per tile for the rounded-P row sum: one per 64-key scaling block."""
        return BLOCK_N // SCALE_BLOCK if self.scaling == "block" else 0

    @property
    def mfma_opcode(self) -> str:
        return "v_mfma_f32_32x32x64_f8f6f4" if self.dtype == "fp8" else "v_mfma_f32_32x32x16_bf16"

    @property
    def pv_opcode(self) -> str:
        return "v_mfma_scale_f32_32x32x64_f8f6f4" if self.scaling == "block" else self.mfma_opcode


@dataclass(frozen=True)
class Group:
    """``count`` instructions on ``unit`` (a trace-schema unit name)."""

    unit: str
    count: int

    def __post_init__(self):
        if self.unit not in ("MFMA", "VALU", "TRANS", "LDS", "VMEM"):
            raise ValueError(f"Unknown Group.unit: {self.unit!r}")
        if not isinstance(self.count, int) or self.count < 0:
            raise ValueError(f"Group.count must be a non-negative int, got {self.count!r}")


@dataclass(frozen=True)
class Cluster:
    """One named phase of the loop body (see the module docstring)."""

    name: str
    work: str  # the generator routine that emits it
    groups: tuple[Group, ...]
    priority: int = 0
    barrier: bool = False

    def __post_init__(self):
        if self.work not in WORK:
            raise ValueError(f"Unknown Cluster.work: {self.work!r} (expected one of {WORK})")
        if self.priority not in (0, 1, 2, 3):
            raise ValueError(f"Cluster.priority must be 0-3 (s_setprio), got {self.priority!r}")

    def count(self, unit: str) -> int:
        return sum(g.count for g in self.groups if g.unit == unit)

    def as_dict(self) -> dict:
        return {"name": self.name, "work": self.work, "priority": self.priority, "barrier": self.barrier,
                "units": {g.unit: g.count for g in self.groups}}


WORK = ("pv", "qk", "mask", "softmax", "rescale", "load_issue", "lds_store")


def loads_per_thread(config: KernelConfig) -> tuple[int, int]:
    """16-byte global loads per thread per tile: (K tile, V^T tile), 512 threads per workgroup."""
    k_bytes = BLOCK_N * config.headdim * config.esize
    v_bytes = config.headdim_v * BLOCK_N * config.esize
    threads = WAVES * 64
    if k_bytes % (16 * threads) or v_bytes % (16 * threads):
        raise ValueError(f"{config.name}: tile sizes must split into 16-byte loads over {threads} threads")
    return k_bytes // (16 * threads), v_bytes // (16 * threads)


def valu_groups(config: KernelConfig) -> tuple[Group, ...]:
    """VALU/TRANS instructions of one softmax cluster (per wave, 32 queries x 128 keys).

    Per lane: 64 scores (two 64-key blocks of 32). Derivation, per tile:
      block max: 15 v_max3 + 1 v_max per block (lane-local)
    lean/exact with block scaling, per tile: lane halves of both blocks joined and bm = ceil(t*mx)
      clamped for both blocks by one shared exchange (7: swap, max, mul, ceil, max, mov, swap);
      per block: scale byte (4),
      lean: FMA constant (1) + 32 FMAs (16 v_pk_fma if packed) + 32 v_cvt_u32_f32 (SDWA byte insert),
      exact: constant (1) + the FMAs + 32 v_exp (TRANS) + 16 v_cvt_pk_fp8;
      per tile: max of the two block maxima + compare for the lazy rescale (2, + 1 add of the
      threshold when rescale_threshold > 0).
    none (AITER v3): max over 64 (31 v_max3 + 1 v_max + 3), m_new (2), -inf guard (2), alpha (1 +
      1 TRANS), -m (1), 64 FMAs (32 v_pk_fma if packed), 64 v_exp (TRANS), l*alpha (1) + 64 v_add,
      64 v_mul (O rescale), convert (32 v_cvt_pk_fp8 or v_cvt_pk_bf16), m update (1).
    The lazy O rescale (cluster ``rescale_O``, nested in softmax_j behind a branch taken only by
    lanes whose block max grew) is not counted here.
    """
    fmas = SCORES_PER_LANE // (2 if config.fma == "packed" else 1)
    if config.scaling == "block":
        per_block = 16 + 4 + 1 + fmas // 2 + (32 if config.softmax == "lean" else 16)
        valu = 2 * per_block + 7 + 2 + (1 if config.rescale_threshold else 0)
        trans = 0 if config.softmax == "lean" else 64
    else:
        valu = 32 + 3 + 2 + 2 + 1 + 1 + fmas + 1 + 64 + 64 + 32 + 1
        trans = 64 + 1
    groups = [Group("VALU", valu)]
    if trans:
        groups.append(Group("TRANS", trans))
    return tuple(groups)


def mfma_lds_reads(config: KernelConfig, work: str) -> int:
    """ds_read instructions that feed one tile's MFMAs (one per 16 bytes of A operand)."""
    a_bytes = {"fp8": 32, "bf16": 16}[config.dtype]
    if work == "qk":
        return config.qk_mfmas * a_bytes // 16
    return config.pv_mfmas * a_bytes // 16


def schedule(config: KernelConfig) -> tuple[Cluster, ...]:
    """Loop body of one wave for one 128-key tile j (the generator's input).

    MFMA phase: PV_j-1 (P of the previous tile times its V^T, plus the row-sum MFMAs), QK_j (S of
    this tile); softmax phase: mask_j (only on tiles that cross the causal diagonal or seqlen_k:
    one v_cmp + v_cndmask per score, + 1 for the lane's limit), then P_j from S_j. The K_j+1 / V_j tile moves from global memory to LDS
    in two halves (issue, then LDS store one phase later) whose placement is decided per wave
    group by :func:`placement`.
    """
    pingpong = config.schedule == "pingpong"
    mfma_prio = 1 if pingpong else 0
    k_loads, v_loads = loads_per_thread(config)
    return (
        Cluster("PV_j-1", "pv", (Group("MFMA", config.pv_mfmas + config.rowsum_mfmas),
                                 Group("LDS", mfma_lds_reads(config, "pv"))), priority=mfma_prio),
        Cluster("QK_j", "qk", (Group("MFMA", config.qk_mfmas), Group("LDS", mfma_lds_reads(config, "qk"))),
                priority=mfma_prio, barrier=True),
        Cluster("mask_j", "mask", (Group("VALU", 2 * SCORES_PER_LANE + 1),)),
        Cluster("softmax_j", "softmax", valu_groups(config), barrier=True),
        *((Cluster("rescale_O", "rescale", (Group("VALU", 3 * (config.headdim_v // 2 + 16) + 3),)),)
          if config.scaling == "block" else ()),
        Cluster("load_K_j+1_V_j", "load_issue", (Group("VMEM", k_loads + v_loads),)),
        Cluster("store_K_j+1_V_j", "lds_store", (Group("LDS", k_loads + v_loads),)),
    )


def placement(config: KernelConfig, wave_group: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Cluster names of the two phases (MFMA phase, softmax phase) of one wave group's loop body.

    The K_j+1/V_j LDS stores must land in the barrier interval where no wave reads the buffers
    they overwrite; both groups store in the same (odd) interval. That interval is the softmax
    phase of group 0 (and of every wave under ``serial``) but the MFMA phase of the staggered
    group 1, whose global loads are therefore issued one phase earlier.
    """
    if wave_group not in (0, 1):
        raise ValueError(f"wave_group must be 0 or 1, got {wave_group!r}")
    if config.schedule == "serial" or wave_group == 0:
        return ("PV_j-1", "QK_j", "load_K_j+1_V_j"), ("mask_j", "softmax_j", "store_K_j+1_V_j")
    return ("PV_j-1", "QK_j", "store_K_j+1_V_j"), ("mask_j", "softmax_j", "load_K_j+1_V_j")


# -- the registered variants -------------------------------------------------------------------------
VARIANTS: dict[str, KernelConfig] = {
    "zyfa-fp8": KernelConfig("zyfa-fp8", softmax="lean", scaling="block", schedule="pingpong"),
    "zyfa-fp8-exact": KernelConfig("zyfa-fp8-exact", softmax="exact", scaling="block", schedule="pingpong"),
    "aiter-like-fp8": KernelConfig("aiter-like-fp8", softmax="exact", scaling="none", schedule="pingpong",
                                   fma="packed"),
    "zyfa-bf16": KernelConfig("zyfa-bf16", dtype="bf16", softmax="exact", scaling="none", schedule="pingpong"),
}


def all_configs(headdims=(128, 192)) -> list[KernelConfig]:
    """Every valid (softmax, scaling, schedule, headdim) fp8 combination, for tests and what-if."""
    configs = []
    for softmax, scaling, sched, d in product(SOFTMAX, SCALING, SCHEDULES, headdims):
        if softmax == "lean" and scaling != "block":
            continue
        configs.append(KernelConfig(f"fp8-{softmax}-{scaling}-{sched}-d{d}", softmax=softmax, scaling=scaling,
                                    schedule=sched, headdim=d))
    return configs
