"""Cycle model of one CDNA4 compute unit running gfx950 code: scalar-functional, vector-timed.

The machine (every number from :mod:`zyfa.gfx950.timing`):

- One CU = 4 SIMDs. Wave ``i`` of a workgroup goes to SIMD ``i % 4``, slot ``i // 4`` (waves of
  later workgroups on the same CU take the next slots).
- Issue: each SIMD has an issue slot every ``issue_period`` cycles. In a slot a wave issues at
  most one instruction, and each execution unit (MFMA, VALU incl. TRANS, SALU, SMEM, LDS, VMEM,
  branch/other) accepts at most one. Among eligible waves the higher ``s_setprio`` wins, then
  the one that issued least recently (round robin).
- MFMA occupies the SIMD's XDL pipe ``passes * 4`` cycles (a scaled MFMA issued to an idle pipe
  starts one pass late). A VALU op may issue while an MFMA runs (co-issue) once the MFMA's
  source-read window is over; packed-FP32 and DOT ops only ``NumPasses + 2`` (+1) passes after it.
- Transcendentals (TRANS) hold the wave's VALU issue ``issue_passes`` and the SIMD's trans pipe
  ``passes`` (timing table); ordinary VALU ops may issue while the trans pipe is busy.
- Register dependencies: a reader waits for ``start + latency`` of the writer. MFMA/VALU hazard
  wait states (timing.HAZARDS) are enforced in cycles (``wait_states * WAIT_STATE_CYCLES`` after
  the producer's issue): code that lacks them is timed as if it had them; the static checker
  (:func:`zyfa.gfx950.hazards.check_hazards`) reports them.
- Memory: LDS and global ops share one CU pipe each (bytes / bandwidth) and complete
  ``latency`` later, in order per wave; ``s_waitcnt vmcnt/lgkmcnt`` waits on those counters.
- ``s_nop N`` holds the wave N+1 wait states, ``s_sleep N`` 64*N cycles, ``s_barrier`` until all
  live waves of the workgroup arrive, a taken branch adds the re-fetch penalty.

Long loops: when a reference wave's loop back-edge shows the same period (cycles and the
instruction sequence of every wave) for several iterations, the loop is *extrapolated*: whole
periods are skipped by replaying only the scalar side (to keep trip counts and addresses exact)
and shifting every time by the period. ``CUResult.extrapolated`` says what was skipped. A loop
whose period holds a rate-decided branch (:func:`rate_taken`) repeats only once per pattern cycle:
a *pattern period* of ``P`` back-edges is skipped instead, once it has been seen to start and end
in the same steady period (:meth:`CUSim._on_backedge`), as often as its scalar side replays as
recorded, rate branches included, and then the steady periods up to the next jump. ``P`` is the
lcm of the rates' pattern lengths, a rate's denominator where it is at most
:data:`PATTERN_PERIOD_MAX` (the span must then start at the same pattern phase: it repeats until
the loop changes) and its nearest short pattern's (:func:`pattern_rate`) for a longer one: 97/1250
jumps every 13th execution with a 12 every ninth jump, so its spans of 13 repeat about eight
times before one differs and is simulated in detail.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Optional, Union

from zyfa.gfx950 import scalar, timing
from zyfa.gfx950.hazards import consumer_reads
from zyfa.gfx950.isa import SGPR_BASE, Program, mfma_flops

UNIT_PIPE = {"MFMA": "MFMA", "VALU": "VALU", "TRANS": "VALU", "SALU": "SALU", "SMEM": "SMEM", "LDS": "LDS",
             "VMEM": "VMEM", "BRANCH": "OTHER", "BARRIER": "OTHER", "WAIT": "OTHER", "MISC": "OTHER"}
_WAITCNT = re.compile(r"(vmcnt|lgkmcnt|expcnt)\((\d+)\)")
INF = float("inf")
RECORD_COLUMNS = ("cu", "simd", "wave", "slot", "pc", "opcode", "operands", "unit", "issue", "start", "end",
                  "stall", "stall_reason", "iteration", "region")
HZ_KINDS = ("MFMA_AB", "MFMA_C", "VALU", "MEM")  # consumer kinds of hazards.consumer_reads


@dataclass(frozen=True)
class SimConfig:
    """Knobs of one simulation (timings live in :mod:`timing`, not here).

    ``fast_forward``: extrapolate steady-state loops (after ``stable_periods`` equal periods, one
    more when registers do not change linearly period to period); ``unknown_branch``: how a branch on values
    the model does not compute (vector data: e.g. ``s_cbranch_execz`` after a data-dependent
    ``s_and_saveexec``) goes: ``"not-taken"`` (default: the guarded code runs, the conservative
    choice), ``"taken"``, or ``None`` to raise; ``stable_periods``: equal consecutive
    periods required first; ``max_cycles``: guard against a kernel that never ends;
    ``record``: keep per-instruction records (the trace)."""

    fast_forward: bool = True
    unknown_branch: Optional[str] = "not-taken"
    stable_periods: int = 3
    max_cycles: int = 2_000_000_000
    record: bool = True

    def __post_init__(self):
        if self.unknown_branch not in scalar.UNKNOWN_BRANCH_POLICIES + (None,):
            raise ValueError(f"SimConfig.unknown_branch must be one of {scalar.UNKNOWN_BRANCH_POLICIES} or None, "
                             f"got {self.unknown_branch!r}")
        if not isinstance(self.stable_periods, int) or self.stable_periods < 2:
            raise ValueError(f"SimConfig.stable_periods must be an int >= 2, got {self.stable_periods!r}")
        if not isinstance(self.max_cycles, int) or self.max_cycles <= 0:
            raise ValueError(f"SimConfig.max_cycles must be a positive int, got {self.max_cycles!r}")


@dataclass
class CUResult:
    """Outcome of one CU simulation. ``cycles``: cycle the last wave ended; ``wg_end``: end
    cycle per workgroup; ``records``: per-instruction columns of the trace schema;
    ``simulated_instructions``: issued in detail; ``extrapolated_instructions``: covered by
    skipped loop periods; ``extrapolated``: one dict per skip (wave 0 loop, period, count, where
    on the record timeline it belongs: ``at_cycle``, and the MFMA-busy cycles it held per SIMD:
    ``mfma_cycles_skipped``; VALU+TRANS busy cycles and LDS/VMEM bytes, as the clock model reads
    them from records)."""

    cycles: int
    wg_end: list
    records: dict
    simulated_instructions: int
    extrapolated_instructions: int
    extrapolated: list = field(default_factory=list)
    mfma_busy: dict = field(default_factory=dict)  # simd -> busy cycles (incl. extrapolated)
    iterations: dict = field(default_factory=dict)  # wave -> loop iterations (back-edges taken)
    counts: list = field(default_factory=list)  # instruction index -> times executed (all waves)
    unknown_branches: dict = field(default_factory=dict)  # pc -> detailed executions decided by policy
    # pc -> [executions, taken] of every branch decided by a rate (extrapolated periods included)
    rate_branches: dict = field(default_factory=dict)

    def skipped_periods(self) -> list:
        """The skips as a trace states them (``meta.extra["skipped_periods"]``): where on the
        record timeline each belongs (``at_cycle``), its ``cycles``, MFMA-busy cycles per SIMD
        (``mfma_cycles``: the analyzer's MFMA busy adds them) and VALU+TRANS busy cycles, LDS and
        VMEM bytes (:func:`zyfa.trace.cdna4.power.activity` adds them)."""
        return [{"at_cycle": x["at_cycle"], "cycles": x["cycles_skipped"],
                 "mfma_cycles": list(x["mfma_cycles_skipped"]), "valu_cycles": x["valu_cycles_skipped"],
                 "lds_bytes": x["lds_bytes_skipped"], "vmem_bytes": x["vmem_bytes_skipped"]} for x in self.extrapolated]

    def mfma_flops(self, program: Program) -> int:
        """Matrix FLOPs executed: :func:`zyfa.gfx950.isa.mfma_flops` per MFMA x executions (an MFMA
        whose mnemonic gives no shape counts 0)."""
        return sum(n * (mfma_flops(program.instructions[i].opcode) or 0)
                   for i, n in enumerate(self.counts) if n and program.instructions[i].unit == "MFMA")


# -- per-instruction static data ------------------------------------------------------------------
def mem_bytes(opcode: str) -> int:
    """Bytes per lane moved by a memory instruction (``ds_read_b128`` -> 16)."""
    m = re.search(r"(?:_b|_dword|_short|_byte|_ubyte|_sbyte|_ushort|_sshort)(x?)(\d*)", opcode)
    if not m:
        return 4
    if "dword" in m.group(0):
        return 4 * int(m.group(2) or 1)
    if "short" in m.group(0):
        return 2
    if "byte" in m.group(0):
        return 1
    return max(1, int(m.group(2) or 32) // 8)


def branch_rate(value) -> Optional[Fraction]:
    """A rate branch policy as an exact fraction in (0, 1), or ``None`` for ``"taken"`` /
    ``"not-taken"`` (a rate of 1 or 0 is returned as that string by :func:`normal_policy`)."""
    return value if isinstance(value, Fraction) else None


def normal_policy(value, where: str) -> Union[str, Fraction]:
    """``"taken"``, ``"not-taken"``, or a rate: a number in [0, 1] (the fraction of executions that
    jump), kept exact as its decimal :class:`Fraction`; 0 and 1 become ``"not-taken"``/``"taken"``
    (so they behave exactly as those policies, loop extrapolation included)."""
    if value in scalar.UNKNOWN_BRANCH_POLICIES:
        return value
    if isinstance(value, (int, float, Fraction)) and not isinstance(value, bool) and 0 <= value <= 1:
        rate = value if isinstance(value, Fraction) else Fraction(str(value))
        return "not-taken" if rate == 0 else "taken" if rate == 1 else rate
    raise ValueError(f"{where} must be one of {scalar.UNKNOWN_BRANCH_POLICIES} or a rate in [0, 1], got {value!r}")


# The longest rate pattern (a rate's denominator: ``rate_taken`` repeats every that many executions)
# that loop extrapolation follows with its own pattern period (module docstring); a longer one is
# followed with the pattern period of its nearest pattern within it (:func:`pattern_rate`).
PATTERN_PERIOD_MAX = 32


def pattern_rate(rate) -> Fraction:
    """The fraction with denominator <= :data:`PATTERN_PERIOD_MAX` nearest ``rate`` (in [0, 1]):
    for a measured rate such as 0.0776 (97/1250, a pattern of 1250 executions) it is 1/13 (7.69 %,
    one jump per 13 executions). A loop at the rate is extrapolated by pattern periods of the
    nearest pattern's length (module docstring)."""
    return Fraction(str(rate) if isinstance(rate, float) else rate).limit_denominator(PATTERN_PERIOD_MAX)


def rate_taken(n: int, rate: Fraction) -> bool:
    """Whether execution ``n`` (0-based, counted per wave and branch) of a branch taken at ``rate``
    jumps: iff ``floor((n + 1) r) > floor(n r)``. Deterministic (no RNG): any ``k`` consecutive
    executions jump ``floor(k r)`` or ``ceil(k r)`` times, the first ``k`` exactly ``floor(k r)``."""
    return (n + 1) * rate.numerator // rate.denominator > n * rate.numerator // rate.denominator


class _Static:
    __slots__ = ("inst", "pipe", "unit", "cycles", "latency", "reads", "hz_reads", "vdefs", "sdefs",
                 "co_issue", "src_read", "packed_after", "scaled", "issue_cycles", "vmcnt", "lgkmcnt", "nop", "sleep", "bytes", "fn", "is_branch",
                 "target", "passes", "is_mfma", "vdefs_sorted", "hz_waits", "hz_max", "operand_text", "index",
                 "busy_cycles", "opcode_bytes", "control")

    def __init__(self, program: Program, index: int):
        inst = program.instructions[index]
        cls = timing.op_class(inst.opcode)
        self.inst = inst
        self.index = index
        self.operand_text = inst.operand_text
        self.unit = inst.unit
        self.pipe = UNIT_PIPE[inst.unit]
        self.is_mfma = inst.unit == "MFMA"
        self.cycles = cls.cycles
        self.busy_cycles = max(cls.cycles, 1)  # cycles from start to end (at least one)
        self.passes = cls.passes
        self.latency = cls.latency_cycles
        self.co_issue = cls.co_issue
        self.reads = tuple(k for k in inst.uses)
        self.hz_reads = tuple((HZ_KINDS.index(kind), tuple(sorted(keys))) for kind, keys in consumer_reads(inst) if keys)
        self.vdefs = tuple(k for k in inst.defs if k < SGPR_BASE)
        self.sdefs = tuple(k for k in inst.defs if k >= SGPR_BASE)
        self.vdefs_sorted = tuple(sorted(self.vdefs))
        self.hz_waits = None  # wait cycles after issue per consumer kind (HZ_KINDS), for producers
        self.hz_max = 0  # the largest of them
        if inst.unit in ("MFMA", "VALU", "TRANS") and self.vdefs:
            waits = []
            for kind in HZ_KINDS:
                rule = timing.hazard_rule(inst.unit, "MFMA_C_SAME" if kind == "MFMA_C" else kind)
                waits.append(rule.wait_states(cls.passes) * timing.WAIT_STATE_CYCLES if rule else 0)
            self.hz_waits = tuple(waits)
            self.hz_max = max(waits)
        self.src_read = timing.mfma_src_read_passes(inst) * timing.CYCLES_PER_PASS if self.is_mfma else 0
        self.packed_after = (timing.packed_after_mfma_passes(inst, cls.passes) * timing.CYCLES_PER_PASS
                             if self.is_mfma else 0)
        self.scaled = self.is_mfma and inst.base.startswith("v_mfma_scale_")
        self.issue_cycles = cls.issue_cycles
        self.vmcnt = self.lgkmcnt = None
        if inst.opcode.startswith("s_waitcnt") and inst.operands:
            for name, value in _WAITCNT.findall(inst.operands[0]):
                if name == "vmcnt":
                    self.vmcnt = int(value)
                elif name == "lgkmcnt":
                    self.lgkmcnt = int(value)
        self.nop = timing.nop_wait_states(inst) * timing.WAIT_STATE_CYCLES if inst.opcode == "s_nop" else 0
        self.sleep = 0
        if inst.opcode == "s_sleep":
            self.sleep = int(inst.operands[0], 0) * int(timing.param("sleep_cycles_per_unit")) if inst.operands else 0
        wave = int(timing.param("wave_size"))
        self.bytes = mem_bytes(inst.base) * wave if inst.unit in ("LDS", "VMEM") else 0
        self.opcode_bytes = mem_bytes(inst.opcode) * wave if inst.unit in ("LDS", "VMEM") else 0  # as power.activity reads them
        self.fn = scalar.executor(inst)
        self.is_branch = inst.opcode.startswith(("s_branch", "s_cbranch"))
        # what CUSim._issue does after the functional effect: 0 nothing more; else "branch",
        # "s_endpgm", "s_barrier", "s_setprio", "nop", "sleep" (one test instead of five per issue)
        self.control = ("branch" if self.is_branch else inst.opcode if inst.opcode in ("s_endpgm", "s_barrier", "s_setprio")
                        else "nop" if self.nop else "sleep" if self.sleep else 0)
        self.target = program.branch_targets.get(index)

    def at(self, program: Program, index: int) -> "_Static":
        """This instruction's static data for an instruction of the same text at ``index``."""
        other = object.__new__(_Static)
        for name in _Static.__slots__:
            setattr(other, name, getattr(self, name))
        other.inst = program.instructions[index]
        other.index = index
        other.target = program.branch_targets.get(index)
        return other


_STATIC: dict = {}  # id(program) -> (program, its _Static list): a few programs, each simulated several times
_STATIC_KEEP = 8


def static_of(program: Program) -> list:
    """The per-instruction static data of ``program`` (read-only during a simulation), built once
    per program object: the estimate simulates one program for several workgroups, and building
    it took ~20% of a 32K simulation. Held for the last few programs (the cache keeps each alive,
    so its id cannot be reused while cached). It reads :mod:`zyfa.gfx950.timing`'s op classes and
    ``wave_size`` / ``sleep_cycles_per_unit``, module constants: code that edits them at run time
    must clear ``_STATIC``."""
    hit = _STATIC.get(id(program))
    if hit is not None and hit[0] is program:
        return hit[1]
    static, seen = [], {}
    for i, inst in enumerate(program.instructions):
        # everything but inst, index and target follows from the instruction's text (and its
        # defs/uses): equal texts share one computation (a kernel repeats a few hundred texts)
        key = (inst.opcode, inst.operands, inst.modifiers, inst.unit, inst.defs, inst.uses)
        first = seen.get(key)
        if first is None:
            static.append(seen.setdefault(key, _Static(program, i)))
        else:
            static.append(first.at(program, i))
    if len(_STATIC) >= _STATIC_KEEP:
        del _STATIC[next(iter(_STATIC))]
    _STATIC[id(program)] = (program, static)
    return static


def lean_steps(steps: list) -> tuple[list, frozenset]:
    """(``steps`` less those that cannot change a wave's scalar state, the register keys that must
    be ``None`` at the start for that), for :meth:`CUSim._replay`.

    Most of a replayed loop period computes unknowns: an MFMA, LDS or unmodelled VALU result is
    ``None`` (``scalar._forgetter``), and so is a lane-0 VALU result with a ``None`` source
    (``scalar._fast_valu``), e.g. a row-max chain over MFMA results feeding a rate-decided branch.
    Such a step whose destinations are ``None`` already (without per-lane values) changes nothing and
    is dropped. Which vector keys are ``None`` at each step follows from the steps alone: a pass from
    nothing known gives the keys that are ``None`` after any run of them (the start condition: a
    replay starts where a run of the same steps ended, and checks it), a second pass from those
    finds the steps to drop. Any other executor may write its vector destinations: they leave
    the known-``None`` set. ``steps`` itself is returned where nothing can be dropped."""

    def scan(none: set, drop: Optional[set]) -> set:
        for j, (s, _) in enumerate(steps):
            fn = s.fn
            if fn is None:
                continue
            forgets = getattr(fn, "forgets", None)
            lane0 = getattr(fn, "lane0", None)
            if forgets is not None:
                if drop is not None and none.issuperset(forgets):
                    drop.add(j)
                none.update(k for k in forgets if k <= scalar.VECTOR_KEY0)
            elif lane0 is not None and lane0[0] <= scalar.VECTOR_KEY0:
                dst, sources = lane0
                if none.intersection(sources):
                    if drop is not None and dst in none:
                        drop.add(j)
                    none.add(dst)
                else:
                    none.discard(dst)
            else:
                none.difference_update(scalar.VECTOR_KEY0 - k for k in s.inst.defs if k < SGPR_BASE)
        return none

    need = frozenset(scan(set(), None))
    drop: set = set()
    scan(set(need), drop)
    if not drop:
        return steps, frozenset()
    return [step for j, step in enumerate(steps) if j not in drop], need



# -- waves ---------------------------------------------------------------------------------------
class _Wave:
    __slots__ = ("wid", "wg", "simd", "slot", "pc", "prio", "ready", "last_issue", "done", "at_barrier",
                 "vm", "lgkm", "reg_ready", "last_writer", "state", "iters", "log", "region", "end", "ready_reason",
                 "rr_until", "hz_until", "head_pc", "head_best", "head_reason", "rate_n")

    def __init__(self, wid, wg, simd, slot, state):
        self.wid, self.wg, self.simd, self.slot = wid, wg, simd, slot
        self.pc = 0
        self.prio = 0
        self.ready = 0
        self.ready_reason = "issue"
        self.last_issue = -1
        self.done = False
        self.at_barrier = False
        self.vm: list = []
        self.lgkm: list = []
        self.reg_ready: dict = {}
        self.last_writer: dict = {}
        self.rr_until = 0  # latest reg_ready / hazard time recorded: below it the per-register checks are skipped
        self.hz_until = 0
        # CUSim._earliest's wave-own part (ready, register dependencies, hazards) of the instruction
        # at head_pc: it changes only when this wave issues, is shifted or leaves a barrier (each
        # sets head_pc = -1), not while the wave waits on other waves' units
        self.head_pc = -1
        self.head_best = 0
        self.head_reason = "issue"
        self.state = state
        self.iters = 0
        self.log: list = []
        self.region = None
        self.end = 0
        self.rate_n: dict = {}  # instruction index -> executions so far of a rate-policy branch


def _initial_state(program: Program, kernarg: bytes, wg_id: tuple, wave_in_wg: int, wg_dims: tuple) -> scalar.State:
    st = scalar.State(kernarg)
    desc = program.descriptor
    layout = desc.sgpr_layout()
    if "kernarg_segment_ptr" in layout:
        base = layout["kernarg_segment_ptr"]
        st.regs[base] = scalar.KERNARG_BASE & scalar.M32
        st.regs[base + 1] = scalar.KERNARG_BASE >> 32
    if "kernarg_preload" in layout:
        first = layout["kernarg_preload"]
        offset = 4 * desc.get("user_sgpr_kernarg_preload_offset")
        for i in range(desc.get("user_sgpr_kernarg_preload_length")):
            at = offset + 4 * i
            st.regs[first + i] = int.from_bytes(kernarg[at:at + 4], "little") if at + 4 <= len(kernarg) else None
    for axis, name in enumerate(("workgroup_id_x", "workgroup_id_y", "workgroup_id_z")):
        if name in layout:
            st.regs[layout[name]] = wg_id[axis]
    flat = wave_in_wg * int(timing.param("wave_size"))
    x = flat % wg_dims[0]
    y = (flat // wg_dims[0]) % wg_dims[1]
    z = flat // (wg_dims[0] * wg_dims[1])
    st.set_vgpr(0, x | (y << 10) | (z << 20))
    return st


# -- the simulator -------------------------------------------------------------------------------------
class CUSim:
    """One CU running the given workgroups (all resident from cycle 0)."""

    def __init__(self, program: Program, kernarg: bytes, workgroups: list, workgroup_size: int,
                 config: SimConfig = SimConfig(), wg_dims: Optional[tuple] = None,
                 regions: Optional[list] = None, branch_policy: Optional[dict] = None,
                 iteration_starts: Optional[frozenset] = None):
        """``regions``: schedule-cluster name per instruction index (e.g. the generator's
        ``instruction_clusters``) for the trace's ``region`` column; default: the label of the
        enclosing basic block. ``branch_policy``: pc -> "taken"/"not-taken" for data-dependent
        branches whose steady-state direction the kernel's author states, or a rate in [0, 1]
        (the fraction of a wave's executions that jump, :func:`rate_taken`: e.g. measured on data);
        others follow ``config.unknown_branch``. ``iteration_starts``: instruction indices that begin one
        main-loop iteration (e.g. each tile of a loop unrolled by two) for the trace's
        ``iteration`` column; default: a wave's iteration counts its taken back-edges."""
        if not isinstance(program, Program):
            raise TypeError(f"program must be a Program, got {type(program).__name__}")
        if not isinstance(kernarg, (bytes, bytearray)):
            raise TypeError(f"kernarg must be bytes, got {type(kernarg).__name__}")
        if not isinstance(workgroup_size, int) or not 1 <= workgroup_size <= 1024:
            raise ValueError(f"workgroup_size must be an int in 1..1024, got {workgroup_size!r}")
        if not workgroups:
            raise ValueError("workgroups must name at least one workgroup id (x, y, z)")
        if regions is not None and len(regions) != len(program):
            raise ValueError(f"regions must name one cluster per instruction ({len(program)}), got {len(regions)}")
        branch_policy = {pc: normal_policy(policy, f"branch_policy[{pc}]") for pc, policy in (branch_policy or {}).items()}
        self.program = program
        self.config = config
        self.regions = regions
        self.iteration_starts = iteration_starts
        self.policy = [branch_policy.get(inst.pc, config.unknown_branch) for inst in program.instructions]
        self.rates = [branch_rate(p) for p in self.policy]  # instruction index -> rate (None: a direction)
        # back-edges per pattern period: the lcm of the rates' pattern lengths, a long pattern's nearest
        # short one's (None: no rate, or too long)
        denominators = {r.denominator if r.denominator <= PATTERN_PERIOD_MAX else pattern_rate(r).denominator
                        for r in self.rates if r is not None}
        lcm = math.lcm(*denominators) if denominators else 0
        self.pattern_period = lcm if 0 < lcm <= PATTERN_PERIOD_MAX else None
        self.static = static_of(program)
        wave_size = int(timing.param("wave_size"))
        simds = int(timing.param("simds_per_cu"))
        waves_per_wg = -(-workgroup_size // wave_size)
        dims = wg_dims or (workgroup_size, 1, 1)
        self.waves: list[_Wave] = []
        for g, wg_id in enumerate(workgroups):
            for w in range(waves_per_wg):
                wid = g * waves_per_wg + w
                st = _initial_state(program, bytes(kernarg), tuple(wg_id), w, dims)
                self.waves.append(_Wave(wid, g, wid % simds, wid // simds, st))
        self.n_wg = len(workgroups)
        self.simds = simds
        self.pipe_free = [dict.fromkeys(("MFMA", "VALU", "TRANS", "SALU", "SMEM", "LDS", "VMEM", "OTHER"), 0)
                          for _ in range(simds)]
        self.mfma_src_until = [0] * simds
        self.mfma_packed_until = [0] * simds
        self.scaled_idle_delay = int(timing.SCALED_MFMA_IDLE_START_PASSES.value) * timing.CYCLES_PER_PASS
        self.mfma_busy = [0] * simds
        self.lds_free = 0
        self.vmem_free = 0
        self._live = len(self.waves)  # waves not done (s_endpgm)
        self._at_barrier = 0  # waves waiting at s_barrier: _release_barriers has work only then
        self._rows: list = []
        self.counts = [0] * len(program)  # executions per instruction, extrapolated periods included
        self.unknown_branches: dict = {}  # pc -> times decided by the unknown-branch policy (detailed only)
        self.simulated = 0
        self.extrapolated_insts = 0
        self.extrapolated: list = []
        self.backedges: dict = {}  # wave-0 back-edge history: list of (cycle, per-wave log lengths)
        # loop branch index -> [cycle, per-wave log lengths, rate counters, steady (period, sequences)
        # or None] of its last back-edges, skipped ones included (only with a pattern_period)
        self._marks: dict = {}
        self._plans: dict = {}  # per-wave sequence -> its replay plan (_replay_plan)
        self._tallies: dict = {}  # per-wave sequence -> what one period of it adds (_tally)
        self.labels_at = [None] * (len(program) + 1)  # instruction index -> the label there (None: none)
        for name, i in program.labels.items():
            self.labels_at[i] = name
        self._backedge: Optional[int] = None
        self.time_offset = 0  # cycles skipped so far: records are stored contiguous (skips removed)
        self._record = config.record
        self._pass_cycles = timing.CYCLES_PER_PASS
        self._starts_iteration = (None if iteration_starts is None else
                                  [i in iteration_starts for i in range(len(program))])
        self.issue_period = int(timing.param("issue_period"))
        self.branch_penalty = int(timing.param("branch_taken_cycles"))
        self.barrier_release = int(timing.param("barrier_release_cycles"))
        self.lds_bpc = int(timing.param("lds_bytes_per_cycle"))
        self.lds_latency = int(timing.param("lds_latency"))
        self.vmem_bpc = int(timing.param("global_bytes_per_cycle"))
        self.vmem_latency = int(timing.param("global_latency"))
        self.smem_latency = int(timing.param("smem_latency"))

    # -- earliest issue time of a wave's next instruction and the binding reason ------------------
    def _earliest(self, w: _Wave, s: _Static):
        if w.head_pc == w.pc:  # the wave-own part, as computed when this instruction came to its head
            best, reason = w.head_best, w.head_reason
        else:
            best, reason = w.ready, w.ready_reason
            if w.rr_until > best:
                rr = w.reg_ready
                for k in s.reads:
                    r = rr.get(k)
                    if r is not None and r > best:
                        best, reason = r, "dependency"
            if s.hz_reads and w.hz_until > best:
                lw = w.last_writer
                for kind, keys in s.hz_reads:
                    for k in keys:
                        prod = lw.get(k)
                        if prod is None:
                            continue
                        issued, waits, p_defs, p_mfma = prod  # waits: cycles after issue per consumer kind
                        if kind == 1 and p_mfma and p_defs != keys:
                            need = issued + waits[0]  # partial C overlap: the A/B rule
                        else:
                            need = issued + waits[kind]
                        if need > best:
                            best, reason = need, "hazard"
            w.head_pc, w.head_best, w.head_reason = w.pc, best, reason
        pf = self.pipe_free[w.simd]
        free = pf[s.pipe]
        if free > best:
            best, reason = free, "unit_busy"
        if s.pipe == "VALU":
            src = self.mfma_src_until[w.simd]
            if src > best:
                best, reason = src, "unit_busy"
            if not s.co_issue:
                packed = self.mfma_packed_until[w.simd]
                if packed > best:
                    best, reason = packed, "unit_busy"
            if s.unit == "TRANS" and pf["TRANS"] > best:
                best, reason = pf["TRANS"], "unit_busy"
        if s.vmcnt is not None and len(w.vm) > s.vmcnt:
            need = w.vm[len(w.vm) - s.vmcnt - 1]
            if need > best:
                best, reason = need, "waitcnt"
        if s.lgkmcnt is not None and len(w.lgkm) > s.lgkmcnt:
            need = w.lgkm[len(w.lgkm) - s.lgkmcnt - 1]
            if need > best:
                best, reason = need, "waitcnt"
        return best, reason

    def run(self) -> CUResult:
        period = int(timing.param("issue_period"))
        waves = self.waves
        static = self.static
        n = len(self.program)
        t = 0
        by_simd = [[w for w in waves if w.simd == s] for s in range(self.simds)]
        cfg = self.config
        earliest, issue = self._earliest, self._issue
        live = self._live = len(waves)
        while live:
            if t > cfg.max_cycles:
                raise RuntimeError(f"simulation passed max_cycles={cfg.max_cycles} at pc indices "
                                   f"{[w.pc for w in waves if not w.done]}: a loop that never exits?")
            issued_any = False
            next_t = INF
            for simd in range(self.simds):
                cands = []
                for w in by_simd[simd]:
                    if w.done or w.at_barrier:
                        continue
                    if w.pc >= n:
                        raise RuntimeError(f"wave {w.wid} ran past the end of {self.program.name!r} without s_endpgm")
                    s = static[w.pc]
                    e, reason = earliest(w, s)
                    if e <= t:
                        cands.append((-w.prio, w.last_issue, w.wid, w, s, reason))
                    elif e < next_t:
                        next_t = e
                if not cands:
                    continue
                if len(cands) > 1:
                    cands.sort()  # by (-prio, last issue, wave id): ids are unique, the tuples never tie
                used = set()
                for _, _, _, w, s, reason in cands:
                    if s.pipe in used:
                        next_t = min(next_t, t + period)
                        continue
                    used.add(s.pipe)
                    issue(w, s, t, reason)
                    issued_any = True
            if self._at_barrier:
                self._release_barriers()
            if self._backedge is not None:
                pending = self._on_backedge(self._backedge, t)
                self._backedge = None
                if pending is not None:
                    t += self._fast_forward(*pending, at=t + period - self.time_offset)
            live = self._live
            if not live:
                break
            if issued_any:
                t += period
            else:
                if all(w.done or w.at_barrier for w in waves):
                    raise RuntimeError("deadlock: every live wave waits at s_barrier")
                nt = next_t if next_t != INF else t + period
                t = max(t + period, -(-int(nt) // period) * period)
        end = max(w.end for w in waves)
        wg_end = [max(w.end for w in waves if w.wg == g) for g in range(self.n_wg)]
        columns = list(zip(*self._rows)) if self._rows else [()] * len(RECORD_COLUMNS[1:])
        records = {"cu": [0] * len(self._rows), **dict(zip(RECORD_COLUMNS[1:], map(list, columns)))}
        return CUResult(cycles=end, wg_end=wg_end, records=records if cfg.record else {},
                        simulated_instructions=self.simulated, extrapolated_instructions=self.extrapolated_insts,
                        extrapolated=self.extrapolated, mfma_busy=dict(enumerate(self.mfma_busy)),
                        iterations={w.wid: w.iters for w in waves}, counts=list(self.counts),
                        unknown_branches=dict(self.unknown_branches),
                        rate_branches=self._rate_tally())

    def _rate_tally(self) -> dict:
        """pc -> [executions, taken] of the rate-decided branches over all waves: a wave's first
        ``n`` executions at rate ``r`` jump ``floor(n r)`` times (:func:`rate_taken` telescopes)."""
        out: dict = {}
        for w in self.waves:
            for index, n in sorted(w.rate_n.items()):
                rate = self.rates[index]
                tally = out.setdefault(self.program.instructions[index].pc, [0, 0])
                tally[0] += n
                tally[1] += n * rate.numerator // rate.denominator
        return out

    # -- issuing one instruction --------------------------------------------------------------------
    def _issue(self, w: _Wave, s: _Static, t: int, reason: str) -> None:
        inst = s.inst
        simd = w.simd
        w.head_pc = -1  # its ready time, registers and pc change here
        pf = self.pipe_free[simd]
        start = t
        if s.scaled and (pf["MFMA"] < t or not self.mfma_busy[simd]):
            start = t + self.scaled_idle_delay  # idle XDL pipe: a scaled MFMA starts one pass late
        end = start + s.busy_cycles
        if s.is_mfma:
            pf["MFMA"] = start + s.cycles
            self.mfma_src_until[simd] = t + s.src_read
            self.mfma_packed_until[simd] = t + s.packed_after
            self.mfma_busy[simd] += s.cycles
        elif s.pipe == "VALU":
            pf["VALU"] = start + s.issue_cycles
            if s.unit == "TRANS":
                pf["TRANS"] = start + s.cycles
        elif s.pipe in ("SALU", "SMEM", "OTHER"):
            pf[s.pipe] = start + timing.CYCLES_PER_PASS
        if s.unit == "LDS":
            begin = max(t, self.lds_free)
            self.lds_free = begin + -(-s.bytes // self.lds_bpc)
            end = self.lds_free + self.lds_latency
            pf["LDS"] = t + timing.CYCLES_PER_PASS
            self._push(w.lgkm, end)
        elif s.unit == "VMEM":
            begin = max(t, self.vmem_free)
            self.vmem_free = begin + -(-s.bytes // self.vmem_bpc)
            end = self.vmem_free + self.vmem_latency
            pf["VMEM"] = t + timing.CYCLES_PER_PASS
            self._push(w.vm, end)
        elif s.unit == "SMEM":
            end = t + self.smem_latency
            self._push(w.lgkm, end)
        # register results (memory results are covered by s_waitcnt, not tracked per register)
        if s.vdefs or s.sdefs:
            rr = w.reg_ready
            if s.unit not in ("LDS", "VMEM", "SMEM", "MFMA"):  # MFMA results: hazard rules only
                ready = start + s.latency
                for k in s.vdefs:
                    rr[k] = ready
                for k in s.sdefs:
                    rr[k] = ready
                if ready > w.rr_until:
                    w.rr_until = ready
            lw = w.last_writer
            if s.hz_waits is not None:
                rec = (t, s.hz_waits, s.vdefs_sorted, s.is_mfma)
                for k in s.vdefs:
                    lw[k] = rec
                if t + s.hz_max > w.hz_until:
                    w.hz_until = t + s.hz_max
            else:
                for k in s.vdefs:
                    lw.pop(k, None)
        if self._starts_iteration is not None and self._starts_iteration[w.pc]:
            w.iters += 1
        # record
        stall = t - (w.last_issue + self._pass_cycles) if w.last_issue >= 0 else t
        if self._record:
            if stall <= 0:
                stall, reason = 0, None
            elif reason == "issue":
                reason = "arbitration"
            o = self.time_offset
            region = self.regions[w.pc] if self.regions is not None else w.region
            self._rows.append((simd, w.wid, w.slot, inst.pc, inst.opcode, s.operand_text, inst.unit, t - o, start - o,
                               end - o, stall, reason, w.iters, region))
        self.simulated += 1
        self.counts[w.pc] += 1
        w.last_issue = t
        w.log.append(w.pc)
        if end > w.end:
            w.end = end
        # functional effect and control flow
        if s.fn is not None:
            s.fn(w.state)
        nxt = w.pc + 1
        w.ready, w.ready_reason = t + self.issue_period, "issue"
        control = s.control
        if not control:
            pass
        elif control == "branch":
            taken = scalar.condition(inst, w.state)
            if taken is None:
                self.unknown_branches[inst.pc] = self.unknown_branches.get(inst.pc, 0) + 1
                rate = self.rates[w.pc]
                if rate is None:
                    taken = scalar.branch_taken(inst, w.state, self.policy[w.pc])
                else:
                    n = w.rate_n.get(w.pc, 0)
                    w.rate_n[w.pc] = n + 1
                    taken = rate_taken(n, rate)
            if taken:
                nxt = s.target
                w.ready, w.ready_reason = w.ready + self.branch_penalty, "branch"
                if nxt <= w.pc:
                    if self.iteration_starts is None:
                        w.iters += 1
                    if w.wid == 0 and self.config.fast_forward:
                        self._backedge = w.pc
        elif control == "s_endpgm":
            w.done = True
            self._live -= 1
            w.end = max(w.end, t + timing.CYCLES_PER_PASS)
        elif control == "s_barrier":
            w.at_barrier = True
            self._at_barrier += 1
        elif control == "s_setprio":
            w.prio = int(inst.operands[0], 0) if inst.operands else 0
        elif control == "nop":
            w.ready, w.ready_reason = t + s.nop, "nop"
        elif control == "sleep":
            w.ready, w.ready_reason = t + s.sleep, "sleep"
        w.pc = nxt
        label = self.labels_at[nxt]
        if label is not None:
            w.region = label

    @staticmethod
    def _push(queue: list, done: int) -> None:
        if queue and queue[-1] > done:
            done = queue[-1]  # counters retire in order
        queue.append(done)

    # -- barriers -------------------------------------------------------------------------------------
    def _release_barriers(self) -> None:
        for g in range(self.n_wg):
            group = [w for w in self.waves if w.wg == g and not w.done]
            if group and all(w.at_barrier for w in group):
                release = max(w.last_issue for w in group) + self.barrier_release
                for w in group:
                    w.at_barrier = False
                    w.ready, w.ready_reason = max(w.ready, release), "barrier"
                    w.head_pc = -1
                self._at_barrier -= len(group)

    # -- steady-state loop extrapolation --------------------------------------------------------------
    def _on_backedge(self, branch_index: int, t: int) -> Optional[tuple]:
        """Record a wave-0 back-edge (at the end of its issue slot); return (period, sequences,
        branch, snapshots, span) once the last ``stable_periods`` periods agree in cycles and in
        every wave's instruction sequence. With a :attr:`pattern_period` of P back-edges and a
        rate-decided branch in that steady period, ``span`` is (cycles, sequences) of the last P
        back-edges (else ``None``) when the back-edge P before this one was steady with the same
        period and sequences and every rate counter has moved by a multiple of its pattern length
        since (the same phase: the span repeats until a branch deviates)."""
        hist = self.backedges.setdefault(branch_index, [])
        hist.append((t, [len(w.log) for w in self.waves], [dict(w.state.regs) for w in self.waves]))
        del hist[:-(self.config.stable_periods + 2)]
        marks = None
        if self.pattern_period:
            marks = self._marks.setdefault(branch_index, [])
            marks.append([t, hist[-1][1], [dict(w.rate_n) for w in self.waves], None])
            del marks[:-(self.pattern_period + 1)]
        k = self.config.stable_periods
        if len(hist) < k + 1:
            return None
        if len(hist) == k + 1 and self._deltas([h[2] for h in hist], 1) is None:
            return None  # not linear period to period: wait one more period (lag 2 or replay)
        recent = hist[-(k + 1):] if len(hist) == k + 1 else hist
        periods = {b[0] - a[0] for a, b in zip(recent, recent[1:])}
        if len(periods) != 1:
            return None
        seqs = []
        for wi, w in enumerate(self.waves):
            per = [tuple(w.log[recent[j][1][wi]:recent[j + 1][1][wi]]) for j in range(len(recent) - 1)]
            if w.done or any(p != per[0] for p in per[1:]):
                return None
            if per[0] and per[0][0] != w.pc:
                return None
            seqs.append(per[0])
        snapshots = [h[2] for h in recent]
        hist.clear()
        period = periods.pop()
        if marks is not None:  # every back-edge that ends one of the equal periods is in that steady state
            for mark in marks[-(len(recent) - 1):]:
                mark[3] = (period, seqs)
            return period, seqs, branch_index, snapshots, self._pattern_span(marks)
        return period, seqs, branch_index, snapshots, None

    def _pattern_span(self, marks: list) -> Optional[tuple]:
        """(cycles, per-wave sequences) of the pattern period ending at ``marks``' last back-edge,
        or ``None`` where the back-edge a pattern period earlier was not steady alike (or at
        another phase of a short rate pattern, or the period runs no rate-decided branch). A long
        pattern has no phase that repeats within a loop: the replay of the span (rate branches at
        their counters) decides how often it repeats."""
        p = self.pattern_period
        if len(marks) <= p or marks[0][3] != marks[-1][3]:
            return None
        (start, before_lens, before, _), (end, after_lens, after, _) = marks[0], marks[-1]
        if after == before or any((n - b.get(i, 0)) % self.rates[i].denominator
                                  for a, b in zip(after, before) for i, n in a.items()
                                  if self.rates[i].denominator <= PATTERN_PERIOD_MAX):
            return None
        seqs = [tuple(w.log[before_lens[wi]:after_lens[wi]]) for wi, w in enumerate(self.waves)]
        if any(seq and seq[0] != w.pc for seq, w in zip(seqs, self.waves)):
            return None
        return end - start, seqs

    def _mark_skip(self, branch_index: int, period: int, seqs: list, skipped: int, pattern: bool) -> None:
        """After a skip: the skipped instructions join each wave's log and, for a period skip, each
        skipped back-edge joins the pattern marks (steady, its rate counters advanced), so a
        pattern period can span skipped periods; a pattern skip starts the marks afresh."""
        for w, seq in zip(self.waves, seqs):
            w.log.extend(seq * skipped)
        marks = self._marks.get(branch_index)
        if not marks:
            return
        if pattern:
            marks.clear()
            return
        t, lens, counters, steady = marks[-1]
        runs = []
        for seq in seqs:
            run = {}
            for i in seq:
                if self.rates[i] is not None and self.static[i].is_branch:
                    run[i] = run.get(i, 0) + 1
            runs.append(run)
        for m in range(max(1, skipped - self.pattern_period), skipped + 1):
            marks.append([t + m * period, [n + m * len(seq) for n, seq in zip(lens, seqs)],
                          [{**c, **{i: c.get(i, 0) + m * r for i, r in run.items()}} for c, run in zip(counters, runs)],
                          steady])
        del marks[:-(self.pattern_period + 1)]

    def _replay_plan(self, seq: tuple) -> tuple:
        """(steps, lean steps, their start condition) of ``seq``'s replay (cached per sequence: the
        waves of a workgroup mostly share one). Steps: (static, expected next index) for the
        instructions of ``seq`` that can change scalar state or control flow. Vector-only writes
        (which only make lane-0 values unknown) are kept only where a lane-0-evaluated instruction
        of the sequence reads them. Lean steps: the same less those that cannot change the state
        (:func:`lean_steps`), valid where the start state holds ``None`` at every key of the condition."""
        hit = self._plans.get(seq)
        if hit is not None:
            return hit
        static = self.static
        # backward slice (twice round the cyclic sequence) from the vector values scalar code reads
        relevant = set()
        for index in seq:
            s = static[index]
            if s.unit in ("SALU", "SMEM") or s.is_branch or (s.unit == "VALU" and s.sdefs and not s.vdefs):
                relevant.update(k for k in s.reads)
        keep_vector = set()
        for _ in range(2):
            for index in reversed(seq):
                s = static[index]
                if s.unit in ("VALU", "TRANS") and s.fn is not None and relevant.intersection(s.inst.defs):
                    keep_vector.add(index)
                    relevant.update(s.reads)
        plan = []
        for j, index in enumerate(seq):
            s = static[index]
            if s.is_branch or s.unit in ("SALU", "SMEM") or index in keep_vector or (
                    s.fn is not None and relevant.intersection(s.vdefs)):
                plan.append((s, seq[j + 1] if j + 1 < len(seq) else seq[0]))
        self._plans[seq] = out = (plan, *lean_steps(plan))
        return out

    def _tally(self, seq: tuple) -> tuple:
        """What one period of ``seq`` adds (cached per sequence): (instruction index -> executions,
        MFMA busy cycles, VALU+TRANS busy cycles, LDS bytes, VMEM bytes, iterations begun: loop
        iteration starts, else taken back-edges)."""
        hit = self._tallies.get(seq)
        if hit is not None:
            return hit
        times: dict = {}
        mfma = valu = lds = vmem = backs = 0
        for j, index in enumerate(seq):
            s = self.static[index]
            nxt_index = seq[j + 1] if j + 1 < len(seq) else seq[0]
            if self.iteration_starts is not None:
                backs += index in self.iteration_starts
            elif s.is_branch and s.target is not None and s.target <= index and nxt_index == s.target:
                backs += 1
            if s.is_mfma:
                mfma += s.cycles
            elif s.unit in ("VALU", "TRANS"):
                valu += s.busy_cycles
            elif s.unit == "LDS":
                lds += s.opcode_bytes
            elif s.unit == "VMEM":
                vmem += s.opcode_bytes
            times[index] = times.get(index, 0) + 1
        self._tallies[seq] = out = (times, mfma, valu, lds, vmem, backs)
        return out

    def _replay(self, regs: list, plans: list, counters: Optional[list] = None) -> Optional[list]:
        """Scalar side of one more period for every wave; ``None`` if any branch deviates.
        ``plans``: per wave, :meth:`_replay_plan`'s; ``counters``: per wave, the executions so far
        of each rate-policy branch (updated in place); without them a rate-decided branch counts
        as a deviation."""
        out = []
        for wi, w in enumerate(self.waves):
            st = scalar.State(w.state.kernarg)
            st.regs = dict(regs[wi])
            st.laned = {k[1] for k in st.regs if isinstance(k, tuple)}
            steps, lean, need = plans[wi]
            if lean is not steps and st.laned.isdisjoint(need) and all(st.regs.get(k, 0) is None for k in need):
                steps = lean
            for s, expected in steps:
                if s.fn is not None:
                    s.fn(st)
                if s.is_branch:
                    rate = self.rates[s.index]
                    try:
                        taken = scalar.condition(s.inst, st)
                        if taken is None and rate is None:
                            taken = scalar.branch_taken(s.inst, st, self.policy[s.index])
                    except scalar.ScalarUnknown:
                        return None
                    if taken is None:
                        if counters is None:
                            return None
                        n = counters[wi].get(s.index, 0)
                        counters[wi][s.index] = n + 1
                        taken = rate_taken(n, rate)
                    if (s.target if taken else s.index + 1) != expected:
                        return None
            out.append(st.regs)
        return out

    @staticmethod
    def _deltas(snapshots: list, lag: int) -> Optional[list]:
        """Per-wave register increments per ``lag`` periods when the last three snapshots ``lag``
        apart change every register linearly (mod 2**32); ``None`` otherwise."""
        if len(snapshots) < 2 * lag + 1:
            return None
        a, b, c = snapshots[-1 - 2 * lag], snapshots[-1 - lag], snapshots[-1]
        out = []
        for wa, wb, wc in zip(a, b, c):
            d = {}
            for k in set(wa) | set(wb) | set(wc):
                x, y, z = wa.get(k), wb.get(k), wc.get(k)
                if x is None or y is None or z is None:
                    if x is not None or y is not None or z is not None:
                        return None
                    continue
                d1, d2 = (y - x) & scalar.M32, (z - y) & scalar.M32
                if d1 != d2:
                    return None
                if d1:
                    d[k] = d1
            out.append(d)
        return out

    @staticmethod
    def _advance(states: list, deltas: list, m: int) -> list:
        return [{**st, **{k: (st[k] + m * d) & scalar.M32 for k, d in dl.items()}} for st, dl in zip(states, deltas)]

    def _consistent_periods(self, current: list, plans: list, snapshots: list, period: int) -> tuple[int, list, list]:
        """(periods to skip, scalar state after them, rate-branch counters per wave after them).

        Without a rate-decided branch in the period: all periods that replay exactly as recorded
        from ``current`` except the last one (or last ``lag``); linear register evolution (lag 1 or 2
        periods) is found by binary search over single-block replays from extrapolated states,
        otherwise every period is replayed in turn. With one (its pattern is not the same period to
        period): every period is replayed in turn, rate branches following their per-wave execution
        counters, and every period that replays as recorded is skipped, the last one too: the first
        deviating one (a jump, a pattern period that differs, the loop's exit) is simulated in detail
        from the state the skipped periods leave, which a detailed run reaches at the same cycle (a
        period's timing follows from its start state and its instructions; the tests compare such
        skips with fully detailed runs)."""
        limit = self.config.max_cycles // max(period, 1)
        rated = any(self.rates[s.index] is not None for plan in plans for s, _ in plan[0] if s.is_branch)
        for lag in () if rated else (1, 2):
            deltas = self._deltas(snapshots, lag)
            if deltas is None:
                continue

            def regular(m: int) -> bool:
                state = self._advance(current, deltas, m)
                for _ in range(lag):
                    state = self._replay(state, plans)
                    if state is None:
                        return False
                expect = self._advance(current, deltas, m + 1)
                return all(x == y for x, y in zip(state, expect))

            if not regular(0):
                continue
            good, bad = 0, 1
            while regular(bad):
                good, bad = bad, bad * 2
                if bad * lag > limit:
                    raise RuntimeError("a steady-state loop extrapolates past max_cycles: it never exits")
            while bad - good > 1:
                mid = (good + bad) // 2
                good, bad = (mid, bad) if regular(mid) else (good, mid)
            return good * lag, self._advance(current, deltas, good), [w.rate_n for w in self.waves]
        previous = state = current
        completed = 0
        before = now = [dict(w.rate_n) for w in self.waves]  # rate counters, as ``previous`` and ``state``
        while (completed + 1) < limit:
            trial = [dict(c) for c in now]
            nxt = self._replay(state, plans, trial)
            if nxt is None:
                break
            previous, state = state, nxt
            before, now = now, trial
            completed += 1
        if rated:
            return completed, state, now
        return max(completed - 1, 0), previous, before

    def _fast_forward(self, period: int, seqs: list, branch_index: int, snapshots: list, span: Optional[tuple],
                      at: int) -> int:
        """Skip whole periods: the scalar side must replay each wave's recorded sequence with
        every branch going the recorded way (:meth:`_consistent_periods` says how far); shift every
        time by (periods skipped) * period. Returns the shift.
        ``span``: (cycles, sequences) of a pattern period (:meth:`_on_backedge`), tried first; it
        starts and ends in the steady ``period``, so from where its skip stops the steady period is
        tried as well (up to the next jump), as it is where not one whole pattern period can be skipped.
        ``at``: the record time (skips removed) of the first issue slot after the skip, where
        the skipped periods belong on the trace's timeline."""
        if any(w.at_barrier or w.done for w in self.waves):
            return 0
        shift = 0
        if span is not None:
            shift = self._skip(span[0], span[1], branch_index, [], at, pattern=True)
        # after a pattern skip the snapshots are stale: the steady periods are replayed one by one
        return shift + self._skip(period, seqs, branch_index, [] if shift else snapshots, at, pattern=False)

    def _skip(self, period: int, seqs: list, branch_index: int, snapshots: list, at: int, pattern: bool) -> int:
        """Skip as many whole ``period``-cycle periods of the per-wave sequences ``seqs`` as replay
        as recorded from the waves' present state (:meth:`_fast_forward`); returns the shift."""
        plans = [self._replay_plan(seq) for seq in seqs]
        skipped, state, counters = self._consistent_periods([w.state.regs for w in self.waves], plans, snapshots,
                                                            period)
        if skipped <= 0:
            return 0
        if self.pattern_period:
            self._mark_skip(branch_index, period, seqs, skipped, pattern)
        for wi, w in enumerate(self.waves):
            w.state.regs = state[wi]
            w.rate_n = counters[wi]
        shift = skipped * period
        self._shift(shift)
        self.time_offset += shift
        count = 0
        busy = [0] * self.simds
        valu = lds = vmem = 0  # what power.activity reads from records: VALU+TRANS busy, LDS/VMEM bytes
        counts = self.counts
        for w, seq in zip(self.waves, seqs):
            times, mfma, seq_valu, seq_lds, seq_vmem, backs = self._tally(seq)
            count += len(seq)
            busy[w.simd] += skipped * mfma
            valu += skipped * seq_valu
            lds += skipped * seq_lds
            vmem += skipped * seq_vmem
            for index, n in times.items():
                counts[index] += skipped * n
            w.iters += skipped * backs
        for simd, b in enumerate(busy):
            self.mfma_busy[simd] += b
        self.extrapolated_insts += skipped * count
        self.extrapolated.append({"loop_pc": self.program.instructions[branch_index].pc, "period_cycles": period,
                                  "periods_skipped": skipped, "cycles_skipped": shift,
                                  "instructions_skipped": skipped * count, "at_cycle": at,
                                  "mfma_cycles_skipped": busy, "valu_cycles_skipped": valu,
                                  "lds_bytes_skipped": lds, "vmem_bytes_skipped": vmem})
        return shift

    def _shift(self, d: int) -> None:
        for w in self.waves:
            w.head_pc = -1
            w.ready += d
            w.last_issue += d
            w.end += d
            w.vm = [x + d for x in w.vm]
            w.lgkm = [x + d for x in w.lgkm]
            w.reg_ready = {k: v + d for k, v in w.reg_ready.items()}
            w.rr_until += d
            w.hz_until += d
            w.last_writer = {k: (issued + d, waits, defs, m) for k, (issued, waits, defs, m) in w.last_writer.items()}
        for pf in self.pipe_free:
            for key in pf:
                pf[key] += d
        self.mfma_src_until = [x + d for x in self.mfma_src_until]
        self.mfma_packed_until = [x + d for x in self.mfma_packed_until]
        self.lds_free += d
        self.vmem_free += d
