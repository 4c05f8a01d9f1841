"""Run a parsed gfx950 kernel: dispatch workgroups, initialise registers per the HSA ABI,
interpret each wave, synchronise ``s_barrier``.

Waves of a workgroup run one at a time, each until it reaches ``s_barrier`` or ``s_endpgm``;
when every live wave waits at the barrier, all are released. Memory operations complete at
issue, so the order of waves between barriers does not change the values a race-free kernel
computes.

Initial state (AMDGPU HSA ABI, code object v5, from the kernel's ``.amdhsa_*`` fields): user
SGPRs in the order private-segment buffer (4), dispatch ptr (2), queue ptr (2), kernarg segment
ptr (2), dispatch id (2), flat-scratch init (2), private segment size (1), then preloaded
kernarg dwords (``user_sgpr_kernarg_preload_length``); after ``user_sgpr_count``, the enabled
workgroup ids x, y, z. VGPR v0 holds the work-item id (x, or x | y << 10 | z << 20 when
``system_vgpr_workitem_id`` > 0).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from zyfa.trace.emu.asm import AsmKernel, Inst, parse_asm
from zyfa.trace.emu.errors import EmulationError
from zyfa.trace.emu.mfma import compile_mfma, compile_smfmac
from zyfa.trace.emu.scalar import BARRIER, ENDPGM, compile_scalar
from zyfa.trace.emu.state import LANES, Lds, Memory, Wave
from zyfa.trace.emu.valu import compile_valu, split_opcode
from zyfa.trace.emu.vmem import compile_vmem

LDS_BYTES = 160 * 1024  # gfx950 LDS per CU (design notes section 2)
MAX_STEPS_PER_WAVE = 5_000_000


def compile_inst(inst: Inst, labels: dict):
    """The semantic function of one instruction: fn(wave, group) -> next index | None."""
    base, enc = split_opcode(inst.opcode)
    try:
        if inst.opcode.startswith("s_"):
            fn = compile_scalar(inst, labels)
        elif inst.opcode.startswith("v_mfma"):
            fn = compile_mfma(inst)
        elif inst.opcode.startswith("v_smfmac"):
            fn = compile_smfmac(inst)
        elif inst.opcode.startswith("v_"):
            fn = compile_valu(inst, base, enc)
        else:
            fn = compile_vmem(inst)
    except EmulationError as exc:
        raise EmulationError(f"instruction {inst.index} (line {inst.line}) {inst.text!r}: {exc}") \
            from None
    except (ValueError, IndexError, KeyError) as exc:
        raise EmulationError(f"cannot decode instruction {inst.index} (line {inst.line}) "
                             f"{inst.text!r}: {exc!r}") from None
    if fn is None:
        raise EmulationError(f"opcode {inst.opcode!r} is not implemented (instruction "
                             f"{inst.index}, line {inst.line}: {inst.text})")
    return fn


@dataclass
class Stats:
    """What the emulator counted: executed instructions per opcode, LDS bank conflicts
    (per instruction index: executions and extra cycles, see :meth:`Lds.conflict_cycles`) and,
    per conditional branch (``s_cbranch_*``, by instruction index), wave executions and how many
    jumped (the data path's branch outcomes, :mod:`zyfa.trace.emu.branches`)."""

    executed: Counter = field(default_factory=Counter)
    branch_runs: Counter = field(default_factory=Counter)
    branch_taken: Counter = field(default_factory=Counter)
    lds_accesses: Counter = field(default_factory=Counter)
    lds_conflict_cycles: Counter = field(default_factory=Counter)


class Group:
    """Per-workgroup context the instruction functions receive."""

    def __init__(self, memory: Memory, lds_bytes: int, stats: Stats) -> None:
        self.memory = memory
        self.lds = Lds(lds_bytes)
        self.stats = stats

    def count_lds(self, inst: Inst, extra_cycles: int) -> None:
        self.stats.lds_accesses[inst.index] += 1
        self.stats.lds_conflict_cycles[inst.index] += extra_cycles


class Program:
    """A kernel compiled to instruction functions (done once, reused for every workgroup)."""

    def __init__(self, kernel: AsmKernel) -> None:
        self.kernel = kernel
        self.fns = [compile_inst(inst, kernel.labels) for inst in kernel.insts]
        self.cbranch = [inst.opcode.startswith("s_cbranch") for inst in kernel.insts]


def _initial_sgprs(kernel: AsmKernel, kernarg_addr: int, kernargs: bytes, wg_id) -> list[int]:
    d = kernel.desc
    sgprs: list[int] = []
    if d("user_sgpr_private_segment_buffer"):
        sgprs += [0, 0, 0, 0]
    if d("user_sgpr_dispatch_ptr"):
        raise EmulationError("kernels reading the dispatch packet are not supported")
    if d("user_sgpr_queue_ptr"):
        raise EmulationError("kernels reading the queue pointer are not supported")
    if d("user_sgpr_kernarg_segment_ptr", 1):
        sgprs += [kernarg_addr & 0xFFFFFFFF, kernarg_addr >> 32]
    if d("user_sgpr_dispatch_id"):
        sgprs += [0, 0]
    if d("user_sgpr_flat_scratch_init"):
        sgprs += [0, 0]
    if d("user_sgpr_private_segment_size"):
        sgprs += [0]
    preload = d("user_sgpr_kernarg_preload_length")
    if preload:
        start = d("user_sgpr_kernarg_preload_offset") * 4
        padded = kernargs + bytes(start + 4 * preload)
        words = np.frombuffer(padded[start: start + 4 * preload], dtype=np.uint32)
        sgprs += [int(x) for x in words]
    count = d("user_sgpr_count", len(sgprs))
    sgprs = (sgprs + [0] * count)[:count]
    for axis, key in enumerate(("x", "y", "z")):
        if d(f"system_sgpr_workgroup_id_{key}", 1 if key == "x" else 0):
            sgprs.append(wg_id[axis])
    return sgprs


@dataclass(frozen=True)
class Launch:
    """Grid (workgroups in x, y, z) and workgroup size (threads in x, y, z)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]

    def __post_init__(self) -> None:
        for name in ("grid", "block"):
            value = getattr(self, name)
            if len(value) != 3 or any(not isinstance(v, (int, np.integer)) or v < 1 for v in value):
                raise ValueError(f"{name} must be three positive ints, got {value!r}")
        if np.prod(self.block) > 1024:
            raise ValueError(f"block must have at most 1024 threads, got {self.block}")


def run_kernel(program: Program, launch: Launch, kernargs: bytes, memory: Memory,
               workgroups=None, stats: Stats | None = None, quantum: int | None = None) -> Stats:
    """Run ``program`` over the grid (or only the listed workgroup ids); ``quantum`` as in
    :func:`_run_group`."""
    kernel = program.kernel
    stats = stats or Stats()
    kernarg_addr = memory.put(np.frombuffer(bytes(kernargs) + bytes(8), dtype=np.uint8))
    lds_bytes = max(kernel.desc("group_segment_fixed_size"), 0) or LDS_BYTES
    threads = int(np.prod(launch.block))
    nwaves = -(-threads // LANES)
    ids = workgroups if workgroups is not None else [
        (x, y, z) for z in range(launch.grid[2]) for y in range(launch.grid[1])
        for x in range(launch.grid[0])]
    bx, by, _ = launch.block
    packed = kernel.desc("system_vgpr_workitem_id") > 0
    for wg_id in ids:
        group = Group(memory, max(lds_bytes, LDS_BYTES), stats)
        sgprs = _initial_sgprs(kernel, kernarg_addr, kernargs, wg_id)
        waves = []
        for wid in range(nwaves):
            w = Wave(wid)
            w.s[: len(sgprs)] = sgprs
            tid = wid * LANES + np.arange(LANES)
            tx, ty, tz = tid % bx, (tid // bx) % by, tid // (bx * by)
            w.v[0] = (tx | (ty << 10) | (tz << 20)) if packed else tx
            if packed is False and launch.block[1] > 1:
                w.v[1], w.v[2] = ty, tz
            active = tid < threads
            w.exec = int(sum(1 << i for i in range(LANES) if active[i]))
            waves.append(w)
        _run_group(program, waves, group, quantum)
    return stats


def _run_group(program: Program, waves: list[Wave], group: Group,
               quantum: int | None = None) -> None:
    """Interpret the waves of one workgroup. ``quantum``: instructions a wave runs before the
    next wave gets a turn (None: until its next barrier); 1 interleaves the waves round-robin,
    which approximates hardware concurrency for kernels whose waves communicate through LDS
    between barriers relying on timing."""
    fns, insts, cbranch = program.fns, program.kernel.insts, program.cbranch
    executed, branch_runs, branch_taken = group.stats.executed, group.stats.branch_runs, group.stats.branch_taken
    n = len(fns)
    limit = quantum or MAX_STEPS_PER_WAVE + 1
    since_barrier = {id(w): 0 for w in waves}
    while True:
        progressed = False
        for w in waves:
            if w.done or w.at_barrier:
                continue
            progressed = True
            for _ in range(limit):
                if w.pc >= n:
                    raise EmulationError(f"wave {w.wave_id} ran past the last instruction")
                pc = w.pc
                try:
                    nxt = fns[pc](w, group)
                except EmulationError as exc:
                    inst = insts[pc]
                    raise EmulationError(f"wave {w.wave_id}, instruction {pc} (line {inst.line}) "
                                         f"{inst.text!r}: {exc}") from None
                executed[insts[pc].opcode] += 1
                if cbranch[pc]:
                    branch_runs[pc] += 1
                    branch_taken[pc] += nxt is not None
                w.executed += 1
                since_barrier[id(w)] += 1
                if nxt is None:
                    w.pc = pc + 1
                elif nxt == ENDPGM:
                    w.done = True
                    break
                elif nxt == BARRIER:
                    w.pc = pc + 1
                    w.at_barrier = True
                    since_barrier[id(w)] = 0
                    break
                else:
                    w.pc = nxt
                if since_barrier[id(w)] > MAX_STEPS_PER_WAVE:
                    raise EmulationError(f"wave {w.wave_id} exceeded {MAX_STEPS_PER_WAVE} "
                                         "instructions without a barrier (infinite loop?)")
        live = [w for w in waves if not w.done]
        if not live:
            return
        if all(w.at_barrier for w in live):
            for w in live:
                w.at_barrier = False
        elif not progressed:
            raise EmulationError("deadlock: waves wait at a barrier others never reach")


def run_snippet(text: str, vgprs: dict | None = None, sgprs: dict | None = None,
                exec_mask: int = 2**64 - 1, memory: Memory | None = None,
                lds: np.ndarray | None = None) -> tuple[Wave, Group]:
    """Run a few instructions on one wave from a given register state (unit tests, REPL).

    ``vgprs`` maps a VGPR number (AGPR ``a[i]`` is ``AGPR_BASE + i``) to 64 lane values or one
    value for all lanes (float arrays are stored as fp32 bits, integers as uint32); ``sgprs`` maps an SGPR number to a uint32. Execution stops at
    ``s_endpgm`` or after the last instruction. Returns the wave and its workgroup context
    (``group.lds``, ``group.stats``).
    """
    body = text if "s_endpgm" in text else text + "\ns_endpgm"
    program = Program(parse_asm(body))
    group = Group(memory or Memory(), LDS_BYTES, Stats())
    if lds is not None:
        group.lds.data[: len(lds)] = np.asarray(lds, np.uint8)
    w = Wave(0)
    for index, value in (vgprs or {}).items():
        arr = np.asarray(value)
        bits = arr.astype(np.float32).view(np.uint32) if arr.dtype.kind == "f" else \
            arr.astype(np.int64).astype(np.uint32)
        w.v[index] = np.broadcast_to(bits, LANES)
    for index, value in (sgprs or {}).items():
        w.s[index] = int(value) & 0xFFFFFFFF
    w.exec = exec_mask
    _run_group(program, [w], group)
    return w, group
