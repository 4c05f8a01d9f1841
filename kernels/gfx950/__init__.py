"""Hand-scheduled gfx950 attention kernels generated from Python (see README.md in this folder).

``SPECS`` describes ``zyfa-fp8`` (Lean P folded into the QK MFMA + two-wave ping-pong + rounded
row sum on the MFMA pipe), ``zyfa-fp8-v1`` (spec v1: Lean P by FMA + convert, per-64-key pow2
scaled MFMA), ``zyfa-fp8-valu-rowsum`` (zyfa-fp8 with the row sum on the VALU), ``zyfa-fp8-exact``
(v1's scaling with v_exp softmax), ``aiter-like-fp8`` (AITER v3 numerics and structure) and
``zyfa-bf16``; :mod:`zyfa.kernels.registry` registers them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Optional

from zyfa.kernels.gfx950 import kernargs
from zyfa.kernels.gfx950.build import build
from zyfa.kernels.gfx950.generator import RESCALE_LABEL
from zyfa.kernels.gfx950.schedule import ROWS_PER_WG, VARIANTS, WAVES, KernelConfig
from zyfa.kernels.spec import KernelBuild, KernelSpec
from zyfa.shapes import AttnShape

__all__ = ["branch_assumptions", "rescale_branches", "MEASURED_RESCALE_RATES", "measured_rescale_rate", "RESCALE_LABEL", "config_for", "specialise", "configure", "build_for", "build_config", "grid", "SPECS", "VARIANTS", "KernelConfig", "WORKGROUP_SIZE"]

WORKGROUP_SIZE = WAVES * 64  # threads of every generated kernel


def config_for(name: str, shape: AttnShape) -> KernelConfig:
    """The registered variant ``name`` specialised to ``shape``'s head dims (hd 128, MLA 192/128).
    A folded kernel whose row sum runs on the MFMA pipe takes the VALU row sum at head dims other
    than 128: its row-sum operand and accumulator-start block do not fit in the registers beside a
    wider Q (``KernelConfig`` says so); the numerics are the same bits (docs/numerics.md)."""
    if name not in VARIANTS:
        raise ValueError(f"unknown gfx950 kernel {name!r}; known: {', '.join(VARIANTS)}")
    if not isinstance(shape, AttnShape):
        raise TypeError(f"shape must be a zyfa.shapes.AttnShape, got {type(shape).__name__}")
    base = VARIANTS[name]
    if shape.dtype != base.dtype:
        raise ValueError(f"kernel {name} takes dtype {base.dtype!r}, the shape has dtype={shape.dtype!r}")
    return specialise(base, shape.headdim, shape.headdim_v)


def _rowsum(softmax: str, headdim: int, rowsum: str) -> str:
    """The row sum a config with this softmax and head dim can run: the folded forms (``valu``,
    ``split``) need folded P, and a row-sum MFMA beside folded's registers fits head dim 128 only."""
    if softmax != "folded":
        return "mfma" if rowsum in ("valu", "split") else rowsum
    return "valu" if headdim != 128 else rowsum


# Widest head dim at which O and the row sum fit in architectural VGPRs beside Q (accumulators=
# 'vgpr'): at 256 the register budget is exceeded (the generator's allocator says so) and the
# accumulators go back to AGPRs, as every variant had them before; the bits are the same.
VGPR_ACCUMULATOR_MAX_HEADDIM = 192


def _accumulators(accumulators: str, headdim: int) -> str:
    return "agpr" if accumulators == "vgpr" and headdim > VGPR_ACCUMULATOR_MAX_HEADDIM else accumulators


def specialise(base: KernelConfig, headdim: int, headdim_v: int) -> KernelConfig:
    """``base`` at these head dims; a folded row sum that uses the MFMA pipe becomes the VALU row
    sum where it does not fit (head dim other than 128), and VGPR accumulators become AGPRs above
    :data:`VGPR_ACCUMULATOR_MAX_HEADDIM`."""
    return replace(base, headdim=headdim, headdim_v=headdim_v, rowsum=_rowsum(base.softmax, headdim, base.rowsum),
                   accumulators=_accumulators(base.accumulators, headdim))


def configure(base: KernelConfig, shape: AttnShape, params: Mapping, name: str) -> KernelConfig:
    """``base`` renamed, with generator parameters ``params`` (KernelConfig fields) applied, at
    ``shape``'s head dims: what the registry's overrides and the sweep evaluate. Unless ``params``
    sets the row sum itself, it follows the softmax and head dim (a folded base's split or VALU
    row sum becomes the MFMA row sum under ``softmax="lean"``, and so on); the accumulators likewise
    follow the head dim (:func:`specialise`)."""
    fields = dict(params)
    if "rowsum" not in fields:
        fields["rowsum"] = _rowsum(fields.get("softmax", base.softmax), shape.headdim, base.rowsum)
    if "accumulators" not in fields:
        fields["accumulators"] = _accumulators(base.accumulators, shape.headdim)
    return replace(base, name=name, headdim=shape.headdim, headdim_v=shape.headdim_v, **fields)


def grid(shape: AttnShape, config: Optional[KernelConfig] = None, pair: Optional[bool] = None) -> tuple[int, int, int]:
    """Workgroups: (query blocks of 256 rows, heads, batch); with ``config.pair_query_blocks``, where
    the kernel arguments say so (:func:`kernargs.paired`, ``pair`` forces it), half the query
    blocks, rounded up (workgroup x also runs block ``blocks - 1 - x``)."""
    blocks = -(-shape.seqlen_q // ROWS_PER_WG)
    if config is not None and config.pair_query_blocks and kernargs.paired(shape, pair):
        blocks = -(-blocks // 2)
    return (blocks, shape.heads, shape.batch)


def branch_assumptions(built) -> list[dict]:
    """Data-dependent branches (their condition comes from vector values) and the direction a
    static model should assume in steady state (the build meta's ``branch_assumptions``)."""
    out = []
    for index, inst in enumerate(built.generated.instructions):
        if inst.opcode == "s_cbranch_execnz" and inst.operands[0].name.startswith(RESCALE_LABEL):
            out.append({"index": index, "pc": built.pcs[index], "label": inst.operands[0].name,
                        "steady_state": "not-taken",
                        "why": "lazy O rescale: only lanes whose block max exceeds the running max execute it; "
                               "every lane does on the first tile; afterwards on data 8-44 % of a wave's tiles "
                               "(benchmarks/v2_rescale_rate.py at 32K), not modelled unless --rescale-rate"})
        elif inst.opcode == "s_cbranch_vccnz" and inst.operands[0].name == ".L_divide_exact":
            out.append({"index": index, "pc": built.pcs[index], "label": inst.operands[0].name,
                        "steady_state": "not-taken",
                        "why": "epilogue: the per-element IEEE division runs only for a wave with an empty row, "
                               "an output element that is exactly 0, or one outside [den 2^-100, 2^100]"})
        elif inst.opcode == "s_cbranch_vccz" and inst.operands[0].name.startswith(".L_vnan"):
            out.append({"index": index, "pc": built.pcs[index], "label": inst.operands[0].name,
                        "steady_state": "taken",
                        "why": "fp8 V NaN masking: the slow path runs only when a NaN code is in V "
                               "(a diagonal tile's slice of the wave, or the workgroup's diagonal tiles)"})
    return out


def rescale_branches(assumptions) -> list[dict]:
    """The lazy O rescale branches among :func:`branch_assumptions` (or the build meta's list)."""
    return [b for b in assumptions if str(b.get("label", "")).startswith(RESCALE_LABEL)]


# The lazy O rescale branch's rate on data where it was measured: (kernel, seqlen) -> {input: the fraction
# of the branch's executions that jump}, causal, seqlen_q = seqlen_k. From ``python3
# benchmarks/v2_rescale_rate.py --fold-headroom 1 --source gaussian llm --seqlen S --heads 2 --waves 64``
# (b1 h2, 64 waves of 32 rows per head; the folded rule reproduces the functional emulator's branch
# counts; 2-core CPU box, 2026-12-03, docs/numerics.md "Headroom"; "sink" is its --source llm).
# zyfa-fp8-valu-rowsum has the same check and fix-up, so the same rate.
MEASURED_RESCALE_RATES = {
    (kernel, seqlen): rates for kernel in ("zyfa-fp8", "zyfa-fp8-valu-rowsum")
    for seqlen, rates in ((8192, {"gaussian": 0.1534, "sink": 0.1522}), (32768, {"gaussian": 0.0776, "sink": 0.0468}))
}


def measured_rescale_rate(name: str, shape: AttnShape) -> Optional[tuple[float, str]]:
    """(rate, input) of ``name``'s lazy O rescale on ``shape`` where measured (causal, seqlen_q =
    seqlen_k in :data:`MEASURED_RESCALE_RATES`): the larger of the measured inputs' rates, the
    conservative one; ``None`` elsewhere (a model then takes the stated never, with a caveat)."""
    if not shape.causal or shape.seqlen_q != shape.seqlen_k:
        return None
    rates = MEASURED_RESCALE_RATES.get((name, shape.seqlen_k))
    if rates is None:
        return None
    source = max(rates, key=rates.get)
    return rates[source], source


def build_for(name: str, shape: AttnShape) -> KernelBuild:
    return build_config(config_for(name, shape))


def build_config(config: KernelConfig) -> KernelBuild:
    """Generate, assemble and describe any :class:`KernelConfig` (registered or not: the
    sweep and the web UI's what-if build variants this way)."""
    built = build(config)
    gen = built.generated
    meta = {
        "clusters": built.clusters,
        # cluster of every instruction (None outside clusters) and its byte offset from the entry
        "instruction_clusters": [inst.cluster for inst in gen.instructions],
        # the generator line that emitted each instruction, "kernels/gfx950/generator.py:612"
        # (repository path:line; hazard s_nops name pad_hazards), for source links
        "instruction_sources": [inst.source for inst in gen.instructions],
        "instruction_pcs": list(built.pcs),
        # encoded bytes per instruction (the disassembly's): the model's parser needs no second assembler run
        "instruction_sizes": list(built.sizes),
        "config": {k: getattr(gen.config, k) for k in gen.config.__dataclass_fields__},
        "registers": gen.registers,
        "vgprs": gen.vgprs, "agprs": gen.agprs, "sgprs": gen.sgprs, "lds_bytes": gen.lds_bytes, "read_ahead": gen.read_ahead,
        "rows_per_workgroup": ROWS_PER_WG, "keys_per_tile": 128,
        # the main loop is unrolled by two: each tile body starts here (the trace's iteration = tile)
        "iteration_starts": list(gen.tile_starts),
        "branch_assumptions": branch_assumptions(built),
        # grid(): x is the query block (with its mirror where paired) and alone sets a workgroup's causal
        # work; heads (y) and batch (z) do the same work, so the cycle model needs no probe along them
        "work_axis": 0,
    }
    return KernelBuild(name=config.name, asm=gen.asm, code_object=built.code_object, symbol=gen.symbol, meta=meta)


def _kernargs(name: str, shape: AttnShape) -> bytes:
    config_for(name, shape)  # validates dtype and head dims
    return kernargs.pack(shape)


_DESCRIPTIONS = {
    "zyfa-fp8": "FP8 causal, the write-up's kernel: Lean P folded into the QK MFMA (re-quantised Q, accumulator "
                "started at the offset, one convert per probability, overflow fix-up out of line; numerics "
                "zyfa-folded), two-wave ping-pong, rounded row sum by two 16x16x128 MFMAs per tile",
    "zyfa-fp8-v1": "FP8 e4m3 causal, spec v1 (the FP8 backend's kernel): Lean P by FMA + convert, two-wave "
                   "ping-pong, per-64-key pow2 scaled MFMA, rounded row sum by one scaled MFMA per block",
    "zyfa-fp8-valu-rowsum": "zyfa-fp8 with the rounded row sum on the VALU (100 ops per tile) instead of the "
                            "MFMA pipe (same bits)",
    "zyfa-fp8-v2": "FP8 e4m3 causal, numerics spec v2: Lean P with the hybrid phi offset (row max P = 256 exactly, "
                   "unbiased constant), per-tile fp32 running max, O and L rescaled by spec v2's alpha out of line",
    "zyfa-fp8-exact": "FP8 ablation: exact v_exp softmax with the same scaling, row sum and schedule",
    "aiter-like-fp8": "FP8 baseline rebuilt on AITER v3 FP8's loop (six barrier intervals per tile): running "
                      "fp32 max, v_exp, unrounded row sum",
    "zyfa-bf16": "BF16 causal: exact fp32 softmax, two-wave ping-pong",
}


SPECS: tuple[KernelSpec, ...] = tuple(
    KernelSpec(
        name=name,
        description=_DESCRIPTIONS[name],
        build=lambda shape, name=name: build_for(name, shape),
        kernargs=lambda shape, name=name: _kernargs(name, shape),
        grid=lambda shape, config=config: grid(shape, config),
        workgroup_size=WORKGROUP_SIZE,
        dtype=config.dtype,
        causal=None,  # the mask is a kernel argument (kernargs.mask_offset)
        variant=config,
    )
    for name, config in VARIANTS.items())
