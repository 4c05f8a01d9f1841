"""Decoded thread-trace waves -> trace schema v1 records (``zyfa.trace.rocprof.records``).

Both hardware routes end here: the ``rocprofv3 --att`` importer (waves read from the JSON files)
and the ctypes binding (waves handed over by rocprof-trace-decoder). One :class:`AttWave` is one
``rocprofiler_thread_trace_decoder_wave_t``; one :class:`AttInstruction` is one
``rocprofiler_thread_trace_decoder_inst_t`` (trace_decoder_types.h).

Timing on gfx9 (CDNA), per the decoder header: ``time`` is the cycle the wave first tried to
issue the instruction, ``time + stall`` the cycle it issued, ``time + duration`` the cycle the
issue completed. The schema record is therefore

    issue = start = time + stall,   stall = stall,   end = time + duration,   pc = vaddr - entry

except for MFMA, whose ``end`` is ``start + cycles(opcode)`` when an MFMA timing table is given
(the schema's MFMA convention; the decoder does not see the matrix pipe finish). Without a table
MFMA ``end`` is the issue completion too, and the metadata says so (``extra["mfma_end"]``).
``opcode`` is the mnemonic without the ``_e32/_e64`` suffix the disassembler adds (it prints
``v_add_f32_e32`` for what the generator writes as ``v_add_f32``; ``_sdwa``/``_dpp`` stay), as the
cycle model spells it; ``pc`` counts bytes from the entry of the kernel holding the instruction, as the cycle model does
for kernels it reads from assembly (first instruction = 0); the ELF vaddr is kept only when the
entry is unknown (``extra["pc"]`` says which).

Waves get ids unique within their CU in order of (begin, se, simd, slot). ``cu`` is
``se * CU_STRIDE + cu_in_se`` so captures over several shader engines keep CUs apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Optional

from zyfa.gfx950.isa import disassemble, parse_asm
from zyfa.trace.rocprof.isa import CATEGORIES, canonical_opcode, split_isa, stall_reason, unit_of

CU_STRIDE = 16  # att-target-cu is 0-15 (rocprofv3 thread-trace guide, parameter table)


@dataclass(frozen=True)
class AttInstruction:
    """One traced instruction: decoder timing plus where it lives in the code."""

    time: int
    category: int
    stall: int
    duration: int
    vaddr: Optional[int] = None  # ELF vaddr in its code object; None if the decoder could not place it
    isa: Optional[str] = None  # disassembly text, None if unknown
    entry: Optional[int] = None  # ELF vaddr of the entry of the kernel holding it (None: unknown)

    def __post_init__(self):
        for name in ("time", "category", "stall", "duration"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"AttInstruction.{name} must be an int, got {value!r}")
        if self.category not in CATEGORIES:
            raise ValueError(f"AttInstruction.category: unknown decoder category {self.category}; "
                             f"expected one of {sorted(CATEGORIES)}")
        if self.stall < 0:
            raise ValueError(f"AttInstruction.stall must be >= 0, got {self.stall}")
        if self.entry is not None and (self.vaddr is None or self.entry > self.vaddr):
            raise ValueError(f"AttInstruction.entry ({self.entry}) must be <= vaddr ({self.vaddr})")
        if self.duration < self.stall:
            raise ValueError(f"AttInstruction.duration ({self.duration}) must be >= stall ({self.stall}): "
                             "the decoder's duration is stall + issue time")


@dataclass(frozen=True)
class AttWave:
    """One traced wave on the target CU of one shader engine."""

    se: int
    cu: int
    simd: int
    slot: int
    begin: int
    end: int
    instructions: tuple[AttInstruction, ...]

    def __post_init__(self):
        for name in ("se", "cu", "simd", "slot"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"AttWave.{name} must be a non-negative int, got {value!r}")
        if self.cu >= CU_STRIDE:
            raise ValueError(f"AttWave.cu must be < {CU_STRIDE} (a CU index within its shader engine), got {self.cu}")
        if self.simd > 3:
            raise ValueError(f"AttWave.simd must be 0-3, got {self.simd}")
        if self.end < self.begin:
            raise ValueError(f"AttWave: end ({self.end}) < begin ({self.begin})")
        object.__setattr__(self, "instructions", tuple(self.instructions))


MfmaCycles = Callable[[str], Optional[int]]


def _pc(inst: AttInstruction) -> Optional[int]:
    """Schema pc: byte offset from the kernel entry (vaddr - entry); the vaddr if the entry is unknown."""
    if inst.isa is None or inst.vaddr is None:
        return None
    return inst.vaddr - inst.entry if inst.entry is not None else inst.vaddr


def wave_records(waves: Iterable[AttWave], mfma_cycles: Optional[MfmaCycles] = None) -> tuple[list[dict], dict]:
    """Schema records of all waves, and counters for the metadata.

    ``mfma_cycles(opcode)`` gives the matrix-pipe busy cycles of an MFMA (None if unknown).
    Returns ``(records, stats)`` with ``stats = {"waves", "unmapped", "pc", "mfma_end"}``: waves seen,
    records whose code address was unknown (opcode ``<unmapped:CATEGORY>``, pc null), what ``pc``
    means, and how MFMA ends were computed.
    """
    waves = sorted(waves, key=lambda w: (w.se * CU_STRIDE + w.cu, w.begin, w.se, w.simd, w.slot))
    next_id: dict[int, int] = {}
    records: list[dict] = []
    unmapped = relative = absolute = 0
    mfma_from_table = mfma_issue_only = 0
    for wave in waves:
        cu = wave.se * CU_STRIDE + wave.cu
        wave_id = next_id.get(cu, 0)
        next_id[cu] = wave_id + 1
        for inst in wave.instructions:
            if inst.isa is not None:
                opcode, operands = split_isa(inst.isa)
                opcode = canonical_opcode(opcode)
                relative += inst.entry is not None
                absolute += inst.entry is None
            else:
                opcode, operands = f"<unmapped:{CATEGORIES[inst.category][0]}>", None
                unmapped += 1
            unit = unit_of(None if inst.isa is None else opcode, inst.category)
            issue = inst.time + inst.stall
            end = inst.time + inst.duration
            if unit == "MFMA":
                cycles = mfma_cycles(opcode) if mfma_cycles else None
                if cycles is not None:
                    end = issue + cycles
                    mfma_from_table += 1
                else:
                    mfma_issue_only += 1
            records.append({
                "cu": cu, "simd": wave.simd, "wave": wave_id, "slot": wave.slot,
                "pc": _pc(inst),
                "opcode": opcode, "operands": operands, "unit": unit,
                "issue": issue, "start": issue, "end": end,
                "stall": inst.stall, "stall_reason": stall_reason(opcode, inst.stall),
            })
    if mfma_issue_only and mfma_from_table:
        mfma_end = "mixed: timing table where the opcode is listed, issue completion otherwise"
    elif mfma_issue_only:
        mfma_end = "issue completion (time + duration): no MFMA timing table given"
    else:
        mfma_end = "start + matrix-pipe cycles from the MFMA timing table"
    if absolute:
        pc = f"ELF vaddr in the code object for {absolute} records whose kernel entry is unknown, " \
             "byte offset from the kernel entry for the rest"
    else:
        pc = "byte offset from the kernel entry (ELF vaddr - entry symbol vaddr)"
    return records, {"waves": len(waves), "unmapped": unmapped, "pc": pc, "mfma_end": mfma_end}


def cycles_from_table(table: Mapping[str, int]) -> MfmaCycles:
    """An ``mfma_cycles`` function over a ``{opcode: cycles}`` table (values checked here)."""
    for opcode, cycles in table.items():
        if isinstance(cycles, bool) or not isinstance(cycles, int) or cycles <= 0:
            raise ValueError(f"cycles_from_table: cycles of {opcode!r} must be a positive int, got {cycles!r}")
    return lambda opcode: table.get(opcode)


@dataclass(frozen=True)
class RegionMap:
    """Where ``region`` and ``iteration`` come from, exactly as the cycle model takes them.

    ``labels``: ``{pc: label}`` of the program (pcs from the kernel entry). ``clusters``: ``{pc:
    schedule-cluster name}`` when the generator names the cluster of every instruction (its
    ``meta["instruction_clusters"]``); then ``region`` is that static name, else the label of the
    last labelled instruction the wave arrived at (the model's two rules, cdna4.sim).
    ``iteration_starts``: pcs that begin one main-loop iteration (the generator's
    ``meta["iteration_starts"]``, one per tile of a loop unrolled by two); None: count back-edges.
    """

    labels: Mapping[int, str]
    clusters: Optional[Mapping[int, str]] = None
    iteration_starts: Optional[frozenset] = None

    @classmethod
    def from_program(cls, program, iteration_starts=None) -> "RegionMap":
        """From a :class:`zyfa.gfx950.isa.Program` (its labels, and the cluster tags its
        instructions carry, see ``Program.with_clusters``) and the loop-iteration start indices,
        if known."""
        base = program.instructions[0].pc
        labels = {program.instructions[i].pc - base: name for name, i in program.labels.items()
                  if i < len(program.instructions)}
        clusters = None
        if program.clusters is not None:
            clusters = {inst.pc - base: inst.cluster for inst in program.instructions}
        starts = None
        if iteration_starts:
            starts = frozenset(program.instructions[i].pc - base for i in iteration_starts)
        return cls(labels, clusters, starts)

    @classmethod
    def from_build(cls, build) -> "RegionMap":
        """From a :class:`zyfa.kernels.spec.KernelBuild` (assembly text preferred, as the model)."""
        if build.asm is not None:
            program = parse_asm(build.asm, kernel=build.symbol)
        elif build.code_object is not None:
            program = disassemble(build.code_object, build.symbol)
        else:
            raise ValueError(f"kernel build {build.name!r} has neither assembly nor a code object")
        if build.meta.get("instruction_clusters") is not None:
            program = program.with_clusters(build.meta["instruction_clusters"])
        return cls.from_program(program, build.meta.get("iteration_starts"))


def annotate(records: list[dict], regions: RegionMap) -> None:
    """Fill ``region`` and ``iteration`` in place, the way the cycle model defines them.

    Per wave, in issue order: ``iteration`` counts the iteration starts reached so far when the
    map has them, else the backward jumps taken so far (an instruction whose pc is not after the
    previous one's); ``region`` is ``regions.clusters[pc]`` when clusters
    are known, else the label of the last labelled instruction the wave arrived at. Records without
    a pc keep the state of the wave at that point.
    """
    waves: dict[tuple, list[dict]] = {}
    for rec in records:
        waves.setdefault((rec["cu"], rec["simd"], rec["wave"]), []).append(rec)
    for recs in waves.values():
        recs.sort(key=lambda r: r["issue"])
        iteration, label, prev = 0, None, None
        for rec in recs:
            pc = rec["pc"]
            if regions.iteration_starts is not None:
                iteration += pc in regions.iteration_starts
            if pc is not None and prev is not None:
                if regions.iteration_starts is None:
                    iteration += pc <= prev
                label = regions.labels.get(pc, label)
            if regions.clusters is not None:
                rec["region"] = regions.clusters.get(pc) if pc is not None else rec.get("region")
            else:
                rec["region"] = label
            rec["iteration"] = iteration
            prev = pc if pc is not None else prev
