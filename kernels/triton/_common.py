"""Pieces shared by the Triton attention kernels: constants, per-arch autotune tables, launch helpers.

Autotune configurations live in one table keyed by (architecture, kernel): ``sm_90`` for Hopper,
``gfx950`` for CDNA4, ``default`` otherwise; each entry has tiers by padded head width, so that a
wide head (MLA 192, 256) gets tiles that fit the shared memory. Triton's autotuner keeps the
winner per problem key in memory and, with ``cache_results=True``, on disk under Triton's cache
directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634  # 1/ln(2), rounded to fp32 where used (docs/numerics.md)
BLOCK_KEYS = 64  # ZYFA scales P per 64-key block (docs/numerics.md): the FP8 kernel steps keys by it


@dataclass(frozen=True)
class TileConfig:
    """One launch configuration: query rows per program, warps, software-pipeline depth.

    ``warp_specialize`` asks Triton to split the key loop into producer/consumer warp groups
    (``tl.range(..., warp_specialize=True)``); it only compiles where Triton supports it.
    FP8 kernel only: ``rowsum_mma`` sums the rounded P on the tensor cores (``P @ ones``) instead
    of converting P to fp32; ``acc_in_dot`` feeds the rescaled accumulator into the PV product
    (one multiply less per element, but on Hopper the fp8 product then accumulates the whole key
    loop in the tensor core's reduced-precision adder instead of fp32 FMAs every 64 keys);
    ``scaled_pv`` computes PV as ``tl.dot_scaled`` with P's power of two as an E8M0 scale
    (gfx950's scaled MFMA; other targets emulate it); ``precise_acc`` makes Hopper's fp8 tensor-core
    products accumulate in IEEE fp32 (``max_num_imprecise_acc=0``; slower, for conformance tests).
    """

    block_m: int
    num_warps: int
    num_stages: int
    warp_specialize: bool = False
    rowsum_mma: bool = False
    acc_in_dot: bool = False
    block_n: int = BLOCK_KEYS
    scaled_pv: bool = False
    precise_acc: bool = False

    def __post_init__(self):
        if self.block_m not in (16, 32, 64, 128, 256):
            raise ValueError(f"TileConfig.block_m must be a power of two in [16, 256], got {self.block_m}")
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"TileConfig.num_warps must be a power of two <= 16, got {self.num_warps}")
        if self.block_n not in (32, 64, 128):
            raise ValueError(f"TileConfig.block_n must be 32, 64 or 128, got {self.block_n}")
        if self.num_stages < 1:
            raise ValueError(f"TileConfig.num_stages must be >= 1, got {self.num_stages}")

    def meta(self, fp8: bool) -> dict:
        """The kernel's tile constexprs for this configuration."""
        meta = {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "WARP_SPEC": self.warp_specialize}
        if fp8:
            if self.block_n != BLOCK_KEYS:
                raise ValueError(f"the FP8 kernel scales P per {BLOCK_KEYS}-key block: block_n must be "
                                 f"{BLOCK_KEYS}, got {self.block_n}")
            meta.update(ROWSUM_MMA=self.rowsum_mma, ACC_IN_DOT=self.acc_in_dot, SCALED_PV=self.scaled_pv,
                        IMPRECISE_ACC=0 if self.precise_acc else None)
        return meta

    def to_triton(self, fp8: bool) -> triton.Config:
        return triton.Config(self.meta(fp8), num_warps=self.num_warps, num_stages=self.num_stages)


# (arch, kernel) -> {head-width tier: candidate configs}. A kernel runs the configs of the smallest tier
# >= max(HEAD_DIM_PAD, HEAD_DIM_V_PAD) (:func:`tier_configs`); the autotuner gets all of them and
# :func:`prune_for_headdim` drops the other tiers per problem. Small lists: each candidate is one compile.
HEAD_TIERS = (128, 256)
AUTOTUNE_CONFIGS: dict[tuple[str, str], dict[int, tuple[TileConfig, ...]]] = {
    # sm_90 tier 128: the fastest configs of the H200 probe (benchmarks/results/h200_run2/probe.txt),
    # less (128, 8, 3, block_n=128), the probe's best BF16 config: since the NaN-propagation change of
    # the BF16 kernel it asks for 233472 B with Triton 3.6 (the H200's), 1 KB over Hopper's 232448,
    # so the autotuner could only discard it; (128, 8, 4) replaces it. Tier 256 (MLA 192, 256): the
    # 128 list asks for up to 458752 B at a padded width of 256; these halve the key tile or the
    # pipeline depth. Every config is compiled for sm_90 on the CPU by tests/kernels/triton/
    # test_hopper_smem.py (bytes at the tier's widest head with Triton 3.6, in list order: BF16 tier
    # 128 167936 / 135168 / 215040 / 167936, tier 256 204800 / 167936 / 135168 / 139264; FP8 at 256
    # 86016 / 118784 / 102400 / 135168, v1; v2 reads two key blocks per stage, its 4-stage configs do
    # not fit at 256: V2_WIDE_MAX_STAGES). Tier 256 and (128, 8, 4) are not timed on the
    # H200 yet.
    ("sm_90", "fp8"): {
        256: (TileConfig(64, 4, 3), TileConfig(64, 4, 4), TileConfig(128, 8, 3), TileConfig(128, 8, 4)),
    },
    ("sm_90", "bf16"): {
        128: (TileConfig(128, 8, 2, block_n=128), TileConfig(128, 8, 3), TileConfig(64, 4, 3, block_n=128),
              TileConfig(128, 8, 4)),
        256: (TileConfig(128, 8, 2), TileConfig(64, 4, 2), TileConfig(64, 4, 3, block_n=32),
              TileConfig(128, 8, 2, block_n=32)),
    },
    # gfx950 lists: not measured (no MI355X here); fp8 uses the scaled MFMA for PV (see aot.py)
    ("gfx950", "fp8"): {256: (TileConfig(128, 8, 2, scaled_pv=True), TileConfig(128, 4, 2, scaled_pv=True))},
    ("gfx950", "bf16"): {256: (TileConfig(128, 8, 2), TileConfig(256, 8, 2), TileConfig(128, 4, 2))},
    ("default", "fp8"): {256: (TileConfig(128, 8, 2), TileConfig(64, 4, 2))},
    ("default", "bf16"): {256: (TileConfig(128, 8, 2), TileConfig(64, 4, 2))},
}
# spec v2's FP8 loop holds two 64-key K/V blocks per pipeline stage: above a padded head width of 128 on
# sm_90 only three stages fit (tests/kernels/triton/test_hopper_smem.py compiles them; four asked for
# more than Hopper's 232448 B with Triton 3.9), so the prune drops the deeper configs there
V2_WIDE_MAX_STAGES = 3
# Interpreter runs (CPU tests) use one small tile so the tests stay fast.
INTERPRET_CONFIG = TileConfig(16, 1, 1, block_n=BLOCK_KEYS)


def interpreting() -> bool:
    """True when ``triton.jit`` currently builds CPU-interpreted kernels (``TRITON_INTERPRET=1``)."""
    return bool(triton.knobs.runtime.interpret)


def device_arch(device: torch.device | None = None) -> str:
    """``sm_90``, ``gfx950``... for the current GPU; ``default`` without one."""
    if not torch.cuda.is_available():
        return "default"
    props = torch.cuda.get_device_properties(device or torch.cuda.current_device())
    if torch.version.hip is not None:
        return str(getattr(props, "gcnArchName", "default")).split(":")[0]
    return f"sm_{props.major}{props.minor}"


def _kind(fp8: bool) -> str:
    return "fp8" if fp8 else "bf16"


def _table(fp8: bool, arch: str) -> dict[int, tuple[TileConfig, ...]]:
    return AUTOTUNE_CONFIGS.get((arch, _kind(fp8)), AUTOTUNE_CONFIGS[("default", _kind(fp8))])


def head_tier(headdim_pad: int, headdim_v_pad: int) -> int:
    """The config tier of a problem: the smallest of :data:`HEAD_TIERS` >= both padded widths."""
    width = max(headdim_pad, headdim_v_pad)
    for tier in HEAD_TIERS:
        if width <= tier:
            return tier
    raise ValueError(f"padded head width {width} exceeds the largest tier {HEAD_TIERS[-1]}")


def tier_configs(fp8: bool, arch: str, headdim_pad: int, headdim_v_pad: int) -> tuple[TileConfig, ...]:
    """The candidate configs for one problem: the table's smallest tier that covers its padded width."""
    table = _table(fp8, arch)
    need = head_tier(headdim_pad, headdim_v_pad)
    return table[min(t for t in table if t >= need)]


# Test-only mode for conformance runs of thousands of shapes (FlashAttention's upstream tests through
# examples/fa_shim): ``ZYFA_TRITON_FIXED_CONFIG=1`` launches the first candidate of the problem's tier,
# untimed, through a twin of the kernel whose sequence-length-dependent integer arguments are not
# specialised. Without it every new (seqlen_q, seqlen_k) re-runs the autotuner (each candidate timed,
# the autotune key holds both lengths) and Triton compiles one kernel per {== 1, % 16 == 0, other}
# class of each such argument. The fixed tile is not a tuned one (run 11: FP8 64/4/3 at 16K took 1.07x
# the autotuner's pick, benchmarks/results/NOTES.md): never set it for timing or production.
FIXED_CONFIG_ENV = "ZYFA_TRITON_FIXED_CONFIG"


def fixed_config_mode() -> bool:
    """True when ``ZYFA_TRITON_FIXED_CONFIG=1``: launches bypass the autotuner (test runs only)."""
    return os.environ.get(FIXED_CONFIG_ENV, "0") == "1"


def fixed_config(fp8: bool, headdim_pad: int, headdim_v_pad: int, arch: str | None = None) -> TileConfig:
    """The launch config of the fixed mode: the first candidate of the problem's tier (interpreter: its own)."""
    if interpreting():
        return INTERPRET_CONFIG
    return tier_configs(fp8, arch or device_arch(), headdim_pad, headdim_v_pad)[0]


def length_bucket(n: int) -> int:
    """The autotune bucket of a sequence length: the next power of two (0 and 1 stay themselves)."""
    return n if n <= 1 else triton.next_power_of_2(n)


class BucketedAutotune:
    """``kernel[grid](*args, **kwargs)`` for a ``triton.autotune``d kernel, tuned once per length bucket.

    Triton's autotune key holds the exact ``SEQ_Q`` and ``SEQ_K``, so a prefill of every new prompt
    length would time all candidates again (and compile each of them per length class). Here the
    first launch of each (power-of-two bucket of both lengths, the rest of the kernel's key, argument
    dtypes) runs the autotuner; later launches in that bucket reuse its winner (``best_config``)
    untimed, through the kernel's ``fn`` exactly as the autotuner launches it.
    """

    LENGTHS = ("SEQ_Q", "SEQ_K")

    def __init__(self, kernel):
        self.kernel = kernel
        self.winners: dict[tuple, triton.Config] = {}

    def key(self, args: tuple, kwargs: dict) -> tuple:
        named = dict(zip(self.kernel.arg_names, args), **kwargs)
        key = tuple(length_bucket(named[k]) if k in self.LENGTHS else named.get(k) for k in self.kernel.keys)
        return key + tuple(str(a.dtype) for a in args if hasattr(a, "dtype"))

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            key = self.key(args, kwargs)
            winner = self.winners.get(key)
            if winner is None:
                self.kernel[grid](*args, **kwargs)
                self.winners[key] = self.kernel.best_config
            else:
                self.kernel.fn[grid](*args, **kwargs, **winner.all_kwargs())
        return launch


def _with_ws(configs) -> list[TileConfig]:
    configs = list(configs)
    if os.environ.get("ZYFA_TRITON_WS", "0") == "1":
        configs += [replace(c, warp_specialize=True) for c in configs]
    return configs


def autotune_configs(fp8: bool, arch: str | None = None) -> list[triton.Config]:
    """All autotune candidates for ``arch``, every tier (``ZYFA_TRITON_WS=1`` adds warp-specialised twins)."""
    if interpreting():
        return [INTERPRET_CONFIG.to_triton(fp8)]
    arch = arch or device_arch()
    configs = dict.fromkeys(c for tier in _table(fp8, arch).values() for c in tier)
    return [c.to_triton(fp8) for c in _with_ws(configs)]


def prune_for_headdim(fp8: bool, arch: str | None = None):
    """``early_config_prune`` for ``triton.autotune``: keeps the configs of the problem's tier."""
    arch = arch or device_arch()

    def prune(configs, named_args, **kwargs):
        if interpreting():
            return configs
        tier = tier_configs(fp8, arch, kwargs["HEAD_DIM_PAD"], kwargs["HEAD_DIM_V_PAD"])
        if fp8 and kwargs.get("RECIPE_V2") and max(kwargs["HEAD_DIM_PAD"], kwargs["HEAD_DIM_V_PAD"]) > 128:
            tier = [c for c in tier if c.num_stages <= V2_WIDE_MAX_STAGES]
        wanted = [c.to_triton(fp8).all_kwargs() for c in _with_ws(tier)]
        return [c for c in configs if c.all_kwargs() in wanted]

    return prune


def padded_headdim(d: int, fp8: bool = False) -> int:
    """Next power of two >= d (Triton tiles are powers of two; MLA's 192 runs as 256, masked).

    At least 16, and 32 for the FP8 kernel: Hopper's fp8 tensor-core product has K = 32, and
    Triton refuses a narrower fp8 ``tl.dot`` (a 16-wide Q K^T fails to compile for sm_90).
    """
    if d <= 0:
        raise ValueError(f"headdim must be positive, got {d}")
    return max(32 if fp8 else 16, triton.next_power_of_2(d))


@triton.jit
def key_ranges(start_m, SEQ_Q, SEQ_K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr):
    """Key ranges of the query tile starting at ``start_m``: ``[0, full_hi)`` needs no mask for any
    row of the tile, ``[full_hi, hi)`` is masked (causal diagonal, seqlen_k edge). Bottom-right
    causal alignment: query i sits at key position ``i + SEQ_K - SEQ_Q``. Returns (full_hi, hi, offset)."""
    offset = SEQ_K - SEQ_Q
    if IS_CAUSAL:
        hi = tl.maximum(tl.minimum(start_m + BLOCK_M + offset, SEQ_K), 0)
        full_hi = tl.maximum(tl.minimum(start_m + offset + 1, SEQ_K), 0) // BLOCK_N * BLOCK_N
    else:
        hi = SEQ_K
        full_hi = SEQ_K // BLOCK_N * BLOCK_N
    return full_hi, hi, offset


# -- device helpers both attention kernels inline (FP8 and BF16: same loads, same score masking) ----
@triton.jit
def load_kv_block(k_base, v_base, offs_n, offs_d, offs_dv, stride_ks, stride_vs, stride_vd, SEQ_K,
                  HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr, MASKED: tl.constexpr):
    """K^T and V tiles of keys ``offs_n`` (padded head dims read as 0; masked blocks: keys >= SEQ_K too)."""
    kt_ptrs = k_base + offs_n[None, :] * stride_ks + offs_d[:, None]
    v_ptrs = v_base + offs_n[:, None] * stride_vs + offs_dv[None, :] * stride_vd
    if MASKED:
        kt = tl.load(kt_ptrs, mask=(offs_n[None, :] < SEQ_K) & (offs_d[:, None] < HEAD_DIM), other=0.0)
        v = tl.load(v_ptrs, mask=(offs_n[:, None] < SEQ_K) & (offs_dv[None, :] < HEAD_DIM_V), other=0.0)
    else:
        kt = tl.load(kt_ptrs, mask=offs_d[:, None] < HEAD_DIM, other=0.0)
        v = tl.load(v_ptrs, mask=offs_dv[None, :] < HEAD_DIM_V, other=0.0)
    return kt, v


@triton.jit
def block_scores(q, kt, offs_n, offs_m, offset, SEQ_K, MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr,
                 INTERPRET: tl.constexpr, IMPRECISE_ACC: tl.constexpr):
    """s = q k^T (fp32 accumulate); in masked blocks the disallowed keys (bottom-right causal, >= SEQ_K) are -inf."""
    if INTERPRET:  # the interpreter's bf16 dot is wrong: widen to fp32
        s = tl.dot(q.to(tl.float32), kt.to(tl.float32), input_precision="ieee")
    else:
        s = tl.dot(q, kt, max_num_imprecise_acc=IMPRECISE_ACC)
    if MASKED:
        allowed = offs_n[None, :] < SEQ_K
        if IS_CAUSAL:
            allowed = allowed & (offs_n[None, :] <= offs_m[:, None] + offset)
        s = tl.where(allowed, s, float("-inf"))
    return s
