"""Every number of the CDNA4 (gfx950) cycle model, each with its source.

Shaped like LLVM's ``AMDGPU/SISchedule.td``: named classes, opcode regexes mapping to them,
resources declared once. ``guess=True`` marks a number that no source pins down for gfx950;
the simulator (:mod:`zyfa.trace.cdna4.sim`) and the hazard checker contain no literal timings.

Units of time: one *pass* = :data:`CYCLES_PER_PASS` cycles (a wave64 VALU op on a 16-lane
SIMD). One *wait state* (hazard distances, ``s_nop``) = one issue slot of a wave =
:data:`WAIT_STATE_CYCLES` cycles. LLVM's VALU latencies are in passes ("1 / (operations /
cycle) / 4"); LLVM's VALU classes occupy the VALU for one pass (default ``ResourceCycles``).

Sources (short names used in the rows):
  SISched   LLVM llvm/lib/Target/AMDGPU/SISchedule.td (SICommonWriteRes, SIDPGFX940FullSpeedModel)
  Hazard    LLVM llvm/lib/Target/AMDGPU/GCNHazardRecognizer.cpp (checkMAIHazards90A,
            checkMAIVALUHazards; gfx950 adds one wait state to the XDL write -> read rules)
  Design    docs/cdna4-facts.md "Machine" (CDNA4 facts, with the MI355X data sheet)
  ISA       AMD CDNA4 ISA guide (s_nop, s_sleep, s_setprio semantics)
  PR233721  LLVM PR #233721 (and #184084): gfx950 VALU-while-MFMA rules fitted to MI350X thread
            traces (docs/cdna4-facts.md "VALU issue while an MFMA runs")
  PR126727  LLVM PR #126727 / #126132: gfx950 XDL write -> VALU read/overwrite = NumPasses + 4
  LDSblog   ROCm blog "FP8 GEMM Optimization on AMD CDNA4" (AMD, 2026-03-10): LDS reads 256 B/clk/CU
Every source is summarised, with links, in docs/cdna4-facts.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from zyfa.gfx950.isa import UNITS, Instruction, classify, is_vector_key, register_keys


@dataclass(frozen=True)
class Param:
    """One scalar model parameter."""

    value: float
    unit: str
    source: str
    guess: bool = False

    def __post_init__(self):
        if not isinstance(self.value, (int, float)) or self.value < 0:
            raise ValueError(f"Param.value must be a non-negative number, got {self.value!r}")
        if not self.source:
            raise ValueError("Param.source must name where the number comes from")


# -- machine and clock ---------------------------------------------------------------------------
CYCLES_PER_PASS = 4  # SISched "latency values are 1/(operations/cycle)/4"; Design "1 pass = 4 cycles"
WAIT_STATE_CYCLES = 4  # one issue slot per wave every pass (GCN issue cadence); Design, ISA
PARAMS: dict[str, Param] = {
    "cus": Param(256, "CU", "Design: MI355X 256 CUs"),
    "simds_per_cu": Param(4, "SIMD", "Design: 4 SIMDs per CU"),
    "wave_size": Param(64, "lanes", "Design: wave64"),
    "vgprs_per_simd_lane": Param(512, "registers", "Design: 512 VGPR+AGPR per lane per SIMD"),
    "max_waves_per_simd": Param(8, "waves", "assumption: 8 wave slots per SIMD (CDNA3 ISA guide; gfx950 unverified)", guess=True),
    "lds_bytes_per_cu": Param(160 * 1024, "bytes", "Design: LDS 160 KiB per CU"),
    "clock_mhz": Param(2400, "MHz", "Design: MI355X up to 2.4 GHz"),
    # issue
    "issue_period": Param(CYCLES_PER_PASS, "cycles", "GCN/CDNA: each SIMD gets an issue slot every 4 cycles; a wave issues at most one instruction per slot", guess=True),
    # scalar and control
    "salu_passes": Param(1, "passes", "SISched WriteSALU latency 1"),
    "branch_taken_cycles": Param(8, "cycles", "SISched WriteBranch latency 8 (instruction re-fetch after a taken branch)", guess=True),
    "barrier_release_cycles": Param(16, "cycles", "no public gfx950 figure; SISched's WriteBarrier 500 is a scheduling guess ('XXX: Guessed')", guess=True),
    "sleep_cycles_per_unit": Param(64, "cycles", "ISA: s_sleep N sleeps about 64*N clocks"),
    "smem_latency": Param(64, "cycles", "scalar-cache hit; SISched WriteSMEM 5 passes is a lower bound", guess=True),
    # LDS
    "lds_latency": Param(64, "cycles", "Design: LDS ~64-128 cycles; low end chosen", guess=True),
    "lds_bytes_per_cycle": Param(256, "bytes/cycle/CU", "LDSblog: CDNA4 LDS reads 256 B/clk per CU (CDNA3: 128); writes not stated, modelled the same", guess=False),
    # global memory
    "global_latency": Param(700, "cycles", "Design: buffer_load ~500-900 cycles; mid-point chosen", guess=True),
    "global_bytes_per_cycle": Param(64, "bytes/cycle/CU", "assumption: 64 B/clk per CU from L2 (one 64 B line per clock); no gfx950 source here", guess=True),
}


def param(name: str) -> float:
    if name not in PARAMS:
        raise KeyError(f"unknown cycle-model parameter {name!r}; known: {', '.join(PARAMS)}")
    return PARAMS[name].value


# -- instruction classes ----------------------------------------------------------------------------
@dataclass(frozen=True)
class OpClass:
    """Timing of one class of instructions.

    ``passes``: cycles the class's pipe is busy = passes * CYCLES_PER_PASS (MFMA: the XDL pipe;
    VALU/TRANS: the VALU). ``latency_passes``: from start until a dependent instruction may read
    the result. ``co_issue``: VALU classes only: whether the op may issue while an MFMA executes
    on the same SIMD (after that MFMA's source-read window). MFMA flops are not a timing fact:
    :func:`zyfa.gfx950.isa.mfma_flops` reads them from the mnemonic.
    """

    name: str
    unit: str
    passes: int
    latency_passes: int
    source: str
    guess: bool = False
    co_issue: bool = True
    issue_passes: Optional[int] = None  # TRANS: passes the wave's VALU issue is held (default: passes)

    def __post_init__(self):
        if self.unit not in UNITS:
            raise ValueError(f"OpClass.unit must be one of {UNITS}, got {self.unit!r}")
        if self.passes < 0 or self.latency_passes < 0:
            raise ValueError(f"OpClass {self.name}: passes and latency_passes must be >= 0")

    @property
    def cycles(self) -> int:
        return self.passes * CYCLES_PER_PASS

    @property
    def latency_cycles(self) -> int:
        return self.latency_passes * CYCLES_PER_PASS

    @property
    def issue_cycles(self) -> int:
        """Cycles the SIMD's VALU issue is held (TRANS: one pass; others: the whole op)."""
        return (self.passes if self.issue_passes is None else self.issue_passes) * CYCLES_PER_PASS


def _mfma(name, passes, source, guess=False):
    return OpClass(name, "MFMA", passes, passes, source, guess=guess)


# Scaled MFMA (v_mfma_scale_*): same rate as unscaled back to back; when the XDL pipe was idle it
# starts one pass late (PR233721).
SCALED_MFMA_IDLE_START_PASSES = Param(1, "passes", "PR233721: a scaled MFMA issued to an idle XDL pipe starts 1 pass late; back to back: same rate as unscaled")
# Packed FP32 / DOT after an MFMA: NumPasses + PACKED_AFTER_MFMA_PASSES (+1 if A >= 16 B per lane)
PACKED_AFTER_MFMA_PASSES = Param(2, "passes", "PR233721: packed FP32 and DOT cannot issue until NumPasses+2 after an MFMA (+1 if its A operand is >= 16 B per lane)")


# (regex on the base mnemonic, class), first match wins; like SISchedule.td's InstRW instregex.
TABLE: tuple[tuple[str, OpClass], ...] = (
    # MFMA, gfx950 (Design section 2 table; LLVM models 1 pass = 4 cycles)
    (r"^v_mfma_scale_f32_32x32x64_f8f6f4$", _mfma("Write16PassMAI_scale_32x32x64", 16, "Design: 16 passes (fp8 operands)")),
    (r"^v_mfma_scale_f32_16x16x128_f8f6f4$", _mfma("Write8PassMAI_scale_16x16x128", 8, "Design: 8 passes (fp8 operands)")),
    (r"^v_mfma_f32_32x32x64_f8f6f4$", _mfma("Write16PassMAI_32x32x64", 16, "Design: 16 passes = 64 cycles (fp8 operands; fp4/fp6 operand formats are faster and not modelled)")),
    (r"^v_mfma_f32_16x16x128_f8f6f4$", _mfma("Write8PassMAI_16x16x128", 8, "Design: 8 passes = 32 cycles (fp8 operands)")),
    (r"^v_mfma_f32_32x32x16_(bf16|f16)$", _mfma("Write8PassMAI_32x32x16", 8, "Design: 8 passes; SISched gfx940 ^V_MFMA_.32_32X32X16 -> Write8PassMAI")),
    (r"^v_mfma_f32_16x16x32_(bf16|f16)$", _mfma("Write4PassMAI_16x16x32", 4, "Design: 4 passes; SISched gfx940 ^V_MFMA_.32_16X16X32 -> Write4PassMAI")),
    (r"^v_mfma_f32_32x32x16_(fp8|bf8)_(fp8|bf8)$", _mfma("Write8PassMAI_32x32x16_f8", 8, "SISched gfx940 ^V_MFMA_.32_32X32X16 -> Write8PassMAI")),
    (r"^v_mfma_f32_16x16x32_(fp8|bf8)_(fp8|bf8)$", _mfma("Write4PassMAI_16x16x32_f8", 4, "SISched gfx940 ^V_MFMA_.32_16X16X32 -> Write4PassMAI")),
    # gfx950's new 16-bit/i8 shapes: SIDPGFX950FullSpeedModel ^V_MFMA_.32_16X16X64 -> Write4PassMAI,
    # ^V_MFMA_.32_32X32X32_ -> Write8PassMAI (tools/check_sischedule.py found i8 16x16x64 at the unknown row's 16)
    (r"^v_mfma_[fi]32_16x16x64_\w+$", _mfma("Write4PassMAI_16x16x64", 4, "SISched gfx950 ^V_MFMA_.32_16X16X64 -> Write4PassMAI")),
    (r"^v_mfma_[fi]32_32x32x32_\w+$", _mfma("Write8PassMAI_32x32x32", 8, "SISched gfx950 ^V_MFMA_.32_32X32X32_ -> Write8PassMAI")),
    (r"^v_mfma_[fi]32_32x32x(8|4_?xf32|16_i8)\w*$", _mfma("Write8PassMAI_32x32x8", 8, "SISched gfx940 ^V_MFMA_.32_32X32X8 / X4XF -> Write8PassMAI")),
    (r"^v_mfma_[fi]32_16x16x(16|8_?xf32|32_i8)\w*$", _mfma("Write4PassMAI_16x16x16", 4, "SISched gfx940 ^V_MFMA_.32_16X16X16 / X8X -> Write4PassMAI")),
    (r"^v_mfma_[fi]32_32x32x[124]_?(\d+b_)?(f32|f16|bf16|i8)\w*$", _mfma("Write16PassMAI_32x32x2", 16, "SISched gfx940 ^V_MFMA_.32_32X32X[124][FBI] -> Write16PassMAI")),
    (r"^v_mfma_[fi]32_16x16x[14]_?(\d+b_)?(f32|f16|bf16|i8)\w*$", _mfma("Write8PassMAI_16x16x4", 8, "SISched gfx940 ^V_MFMA_.32_16X16X[14][FBI] -> Write8PassMAI")),
    (r"^v_mfma_[fi]32_4x4x\w*$", _mfma("Write2PassMAI_4x4", 2, "SISched gfx940 ^V_MFMA_.32_4X4X -> Write2PassMAI")),
    (r"^v_mfma_f64_16x16x4\w*$", _mfma("Write8PassDGEMM", 8, "SISched gfx940 ^V_MFMA_.64_16X16X -> Write8PassDGEMM")),
    (r"^v_mfma_f64_4x4x4\w*$", _mfma("Write4PassDGEMM", 4, "SISched gfx940 ^V_MFMA_.64_4X4X -> Write4PassDGEMM")),
    (r"^v_smfmac_\w+_32x32x\w+$", _mfma("Write8PassMAI_smfmac32", 8, "SISched gfx940 ^V_SMFMAC_.32_32X32X -> Write8PassMAI; gfx950 fp8 shapes unverified", guess=True)),
    (r"^v_smfmac_\w+_16x16x\w+$", _mfma("Write4PassMAI_smfmac16", 4, "SISched gfx940 ^V_SMFMAC_.32_16X16X -> Write4PassMAI; gfx950 fp8 shapes unverified", guess=True)),
    (r"^v_mfma_\w+$", _mfma("Write16PassMAI_unknown", 16, "no table row for this MFMA: worst-case 16 passes", guess=True)),
    # transcendental: LLVM SISchedule's "quarter rate" = WriteTrans32 latency 4 passes with the default
    # ResourceCycles 1 (the VALU is held one pass). ``passes`` = cycles the SIMD's trans pipe is held;
    # a quarter-rate *throughput* (4 passes) was tried and rejected: it puts AITER v3 FP8 causal 32K at
    # 48.2% steady MFMA busy vs 65.8% with 1 pass, against 68.3% measured in thread traces
    # (docs/cdna4-facts.md "Transcendentals"). No public gfx950 measurement of v_exp throughput.
    (r"^v_(exp|log|rcp|rsq|sqrt|sin|cos)(_legacy|_iflag)?_f(16|32)$", OpClass("WriteTrans32", "TRANS", 1, 4, "SISched WriteTrans32 latency 4 ('these are quarter rate'), ResourceCycles 1; 4-pass occupancy contradicted by the AITER FP8 thread-trace MFMA idle (docs/cdna4-facts.md)", guess=True, issue_passes=1)),
    (r"^v_(rcp|rsq|sqrt)_f64$", OpClass("WriteTrans64", "TRANS", 1, 4, "SISched gfx940 WriteTrans64 latency 4", issue_passes=1)),
    # packed FP32 and DOT: one pass, no co-issue with a running MFMA: may not issue until
    # NumPasses + 2 (+1 if the MFMA's A operand >= 16 B/lane) passes after it (PR233721)
    (r"^(v_pk_(fma|mul|add)_f32|v_pk_mov_b32)$", OpClass("WritePackedF32", "VALU", 1, 1, "PR233721: packed FP32 (v_pk_fma/mul/add_f32, v_pk_mov_b32) 1 pass, issues NumPasses+2 (+1 if A >= 16 B) after an MFMA", co_issue=False)),
    (r"^v_dot\w+$", OpClass("WriteDot", "VALU", 1, 1, "PR233721: DOT ops issue NumPasses+2 (+1 if A >= 16 B) after an MFMA; latency SISched Write32Bit 1", co_issue=False)),
    # conversions to/from f32: SICommonWriteRes WriteFloatCvt latency 4, issue one pass
    (r"^v_cvt_(f32_[iu]32|[iu]32_f32|f32_f16|f16_f32|rpi_i32_f32|flr_i32_f32|off_f32_i4)$", OpClass("WriteFloatCvt", "VALU", 1, 4, "SISched WriteFloatCvt latency 4, ResourceCycles 1")),
    # integer multiply, f64: full speed on gfx940+ (SIDPGFX940FullSpeedModel)
    (r"^v_(mul_lo_u32|mul_hi_[iu]32|mad_u64_u32|mad_i64_i32|mul_lo_i32)$", OpClass("WriteIntMul", "VALU", 1, 1, "SISched gfx940 WriteIntMul latency 1")),
    (r"^v_\w+_f64$", OpClass("WriteDouble", "VALU", 1, 1, "SISched gfx940 WriteDouble latency 1")),
    (r"^v_\w+$", OpClass("Write32Bit", "VALU", 1, 1, "SISched Write32Bit latency 1; Design: a wave64 VALU op occupies the VALU 4 cycles")),
    # scalar, memory, control (memory latency/bandwidth are PARAMS)
    (r"^s_(load|buffer_load|store|buffer_store|dcache|memtime|memrealtime)\w*$", OpClass("WriteSMEM", "SMEM", 1, 0, "SISched WriteSMEM issue; latency = PARAMS smem_latency")),
    (r"^ds_\w+$", OpClass("WriteLDS", "LDS", 1, 0, "SISched WriteLDS issue; latency/bandwidth = PARAMS lds_*")),
    (r"^(buffer|tbuffer|global|flat|scratch)_\w+$", OpClass("WriteVMEM", "VMEM", 1, 0, "SISched WriteVMEM issue; latency/bandwidth = PARAMS global_*")),
    (r"^s_barrier$", OpClass("WriteBarrier", "BARRIER", 1, 0, "release latency = PARAMS barrier_release_cycles", guess=True)),
    (r"^s_(branch|cbranch_\w+|setpc_b64|swappc_b64|call_b64)$", OpClass("WriteBranch", "BRANCH", 1, 0, "SISched WriteBranch; taken penalty = PARAMS branch_taken_cycles")),
    (r"^s_(waitcnt\w*|nop|sleep)$", OpClass("Wait", "WAIT", 1, 0, "ISA: occupies one issue slot; the wait itself is modelled by the simulator")),
    (r"^s_\w+$", OpClass("WriteSALU", "SALU", 1, 1, "SISched WriteSALU latency 1")),
)

_COMPILED = tuple((re.compile(pattern), cls) for pattern, cls in TABLE)
_CACHE: dict[str, OpClass] = {}


def op_class(opcode: str) -> OpClass:
    """Timing class of a mnemonic (encoding suffix ignored)."""
    if not isinstance(opcode, str) or not opcode:
        raise ValueError(f"opcode must be a non-empty string, got {opcode!r}")
    base = re.sub(r"_(e32|e64|sdwa|dpp)$", "", opcode.lower())
    cached = _CACHE.get(base)
    if cached is not None:
        return cached
    for pattern, cls in _COMPILED:
        if pattern.match(base):
            if cls.unit == "SALU" and classify(base) != "SALU":  # s_setprio, s_endpgm, ...
                cls = OpClass(f"Write{classify(base)}", classify(base), 1, 0, "ISA: one issue slot, no result")
            _CACHE[base] = cls
            return cls
    raise ValueError(f"no timing class for opcode {opcode!r} (not a gfx950 mnemonic?)")


# -- MFMA source-read window (co-issue rule) -------------------------------------------------------
def _operand_bytes(inst: Instruction) -> tuple[int, int]:
    """Bytes per lane of an MFMA's A and B operands (4 per VGPR)."""
    a, b = (4 * len(_vector_keys(op)) for op in inst.operands[1:3])
    return a, b


def mfma_src_read_passes(inst: Instruction) -> int:
    """Passes after an MFMA issues during which its SIMD's ordinary VALU cannot issue (the MFMA is
    still reading its sources): 1 + (the wider of A and B, bytes per lane) / 16 (PR233721, fitted to
    MI350X thread traces): FP8 32x32x64 (32 B) blocks 3 of its 16 passes, BF16 32x32x16 (16 B) 2."""
    return 1 + max(_operand_bytes(inst)) // 16


def packed_after_mfma_passes(inst: Instruction, passes: int) -> int:
    """Passes after an MFMA issues before a packed-FP32 or DOT op may issue on its SIMD:
    NumPasses + 2, +1 when A is >= 16 B per lane (PR233721)."""
    a, _ = _operand_bytes(inst)
    return passes + int(PACKED_AFTER_MFMA_PASSES.value) + (1 if a >= 16 else 0)


def _vector_keys(operand: str):
    return [k for k in register_keys(operand) if is_vector_key(k)]


# -- hazards (wait states between a producer and a consumer) ------------------------------------------
@dataclass(frozen=True)
class HazardRule:
    """``consumer`` must issue at least ``wait_states(passes)`` wait states after ``producer``
    when it reads (``kind='raw'``) a register the producer writes."""

    name: str
    producer: str  # "MFMA" or "VALU"
    consumer: str  # "MFMA_AB" (MFMA A/B operand), "MFMA_C_SAME" (C is exactly the producer's D), "VALU", "MEM"
    passes_factor: int  # wait states = passes_factor * producer passes + offset
    offset: int
    source: str
    guess: bool = False

    def wait_states(self, producer_passes: int) -> int:
        return self.passes_factor * producer_passes + self.offset


HAZARDS: tuple[HazardRule, ...] = (
    HazardRule("mfma_write_mfma_srcab", "MFMA", "MFMA_AB", 1, 3,
               "Hazard: XDL write VGPR -> MFMA SrcA/B read, NumPasses+2 on gfx940, +1 on gfx950; Design: passes+2..4"),
    HazardRule("mfma_write_mfma_srcc_same", "MFMA", "MFMA_C_SAME", 0, 0,
               "Hazard/Design: back-to-back dependent accumulation (same C/D) needs no extra wait"),
    HazardRule("mfma_write_valu_read", "MFMA", "VALU", 1, 4,
               "PR126727: XDL write VGPR -> VALU read/overwrite NumPasses+4 on gfx950 (gfx940: +3) = 8/12/20 for 4/8/16 passes"),
    HazardRule("mfma_write_mem_read", "MFMA", "MEM", 1, 4,
               "Hazard: XDL write VGPR -> VMEM/LDS/export read NumPasses+3 on gfx940, +1 on gfx950"),
    HazardRule("valu_write_mfma_read", "VALU", "MFMA_AB", 0, 2,
               "Hazard/Design: VALU write VGPR -> MFMA read needs 2 wait states"),
    HazardRule("valu_write_mfma_srcc", "VALU", "MFMA_C_SAME", 0, 2,
               "Hazard/Design: VALU write VGPR -> MFMA read needs 2 wait states"),
)


def hazard_rule(producer_unit: str, consumer: str) -> Optional[HazardRule]:
    producer = "MFMA" if producer_unit == "MFMA" else ("VALU" if producer_unit in ("VALU", "TRANS") else None)
    if producer is None:
        return None
    for rule in HAZARDS:
        if rule.producer == producer and rule.consumer == consumer:
            return rule
    return None


def nop_wait_states(inst: Instruction) -> int:
    """Wait states an instruction provides while counting hazard distance: ``s_nop N`` -> N+1
    (ISA), every other instruction 1 (LLVM's getWaitStatesSince)."""
    if inst.opcode == "s_nop":
        return int(inst.operands[0], 0) + 1 if inst.operands else 1
    return 1
