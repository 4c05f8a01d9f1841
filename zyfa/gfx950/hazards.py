"""Static gfx950 hazard check: MFMA/VALU register hazards that software must cover with
independent instructions or ``s_nop`` (MI355X does not interlock on them).

``check_hazards(program)`` walks back from every consumer through the control-flow graph
(fall-through and branch edges), counting wait states (:func:`timing.nop_wait_states`), and
reports each producer closer than its rule in :data:`timing.HAZARDS` requires.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from zyfa.gfx950 import timing
from zyfa.gfx950.isa import Instruction, Program, is_vector_key, register_keys

_MAX_WAIT_STATES = 24  # > the largest rule (16 passes + 4)


@dataclass(frozen=True)
class Violation:
    """A consumer at ``index`` reads a register written ``actual`` wait states after the
    producer at ``producer_index``; ``rule`` requires ``needed``."""

    index: int
    pc: int
    producer_index: int
    producer_pc: int
    rule: str
    needed: int
    actual: int
    registers: tuple[int, ...]
    text: str

    def __str__(self) -> str:
        return (f"pc 0x{self.pc:x} {self.text!r}: {self.rule} needs {self.needed} wait states after "
                f"pc 0x{self.producer_pc:x}, has {self.actual} (insert s_nop {self.needed - self.actual - 1})")


# _vector and _consumer_reads are memoised on register-key tuples and operand texts (immutable
# results): the generator's hazard padding and the cycle model's static tables ask them for every
# instruction, and a kernel repeats a few hundred distinct ones.
@functools.lru_cache(maxsize=1 << 16)  # bounded: long-running sweeps / web UI
def _vector(keys: tuple) -> frozenset:
    return frozenset(k for k in keys if is_vector_key(k))


@functools.lru_cache(maxsize=1 << 16)
def _consumer_reads(unit: str, operands: tuple, uses: tuple) -> tuple[tuple[str, frozenset], ...]:
    if unit == "MFMA":
        ab = frozenset()
        for operand in operands[1:3] + operands[4:]:
            ab |= _vector(register_keys(operand))
        c = _vector(register_keys(operands[3])) if len(operands) > 3 else frozenset()
        return (("MFMA_AB", ab), ("MFMA_C", c))
    if unit in ("VALU", "TRANS"):
        return (("VALU", _vector(uses)),)
    if unit in ("LDS", "VMEM"):
        return (("MEM", _vector(uses)),)
    return ()


def consumer_reads(inst: Instruction) -> list[tuple[str, frozenset]]:
    """(consumer kind, vector registers read) of one instruction, kinds as in HazardRule."""
    return list(_consumer_reads(inst.unit, inst.operands, inst.uses))


def required_wait_states(producer: Instruction, consumer: Instruction) -> list[tuple[timing.HazardRule, int, frozenset]]:
    """Rules that apply between a producer and a later consumer: (rule, wait states, registers)."""
    written = _vector(producer.defs)
    if not written or producer.unit not in ("MFMA", "VALU", "TRANS"):
        return []
    passes = timing.op_class(producer.opcode).passes if producer.unit == "MFMA" else 0
    out = []
    for kind, read in consumer_reads(consumer):
        regs = written & read
        if not regs:
            continue
        if kind == "MFMA_C":
            same = producer.unit == "MFMA" and read == written
            kind = "MFMA_C_SAME" if same else ("MFMA_AB" if producer.unit == "MFMA" else "MFMA_C_SAME")
        rule = timing.hazard_rule(producer.unit, kind)
        if rule is not None:
            needed = rule.wait_states(passes)
            if needed > 0:
                out.append((rule, needed, regs))
    return out


def _predecessors(program: Program) -> list[list[int]]:
    n = len(program)
    preds: list[list[int]] = [[] for _ in range(n + 1)]
    for i, inst in enumerate(program.instructions):
        unconditional = inst.opcode in ("s_branch", "s_endpgm", "s_setpc_b64")
        if not unconditional and i + 1 <= n:
            preds[i + 1].append(i)
        if i in program.branch_targets:
            preds[program.branch_targets[i]].append(i)
    return preds


def check_hazards(program: Program) -> list[Violation]:
    """Every MFMA/VALU register hazard in ``program`` not covered by enough wait states."""
    if not isinstance(program, Program):
        raise TypeError(f"program must be a zyfa.gfx950.isa.Program, got {type(program).__name__}")
    preds = _predecessors(program)
    insts = program.instructions
    violations: list[Violation] = []
    for index, consumer in enumerate(insts):
        groups = consumer_reads(consumer)
        if not groups:
            continue
        reads = frozenset().union(*(r for _, r in groups))
        seen: dict[int, int] = {}
        stack = [(p, 0) for p in preds[index]]
        while stack:
            j, distance = stack.pop()
            if distance >= _MAX_WAIT_STATES or seen.get(j, _MAX_WAIT_STATES + 1) <= distance:
                continue
            seen[j] = distance
            producer = insts[j]
            for rule, needed, regs in required_wait_states(producer, consumer):
                if distance < needed:
                    violations.append(Violation(index, consumer.pc, j, producer.pc, rule.name, needed, distance,
                                                tuple(sorted(regs)), consumer.text))
            if _vector(producer.defs) >= reads:
                continue  # a nearer write of every register read hides older producers
            step = timing.nop_wait_states(producer)
            stack.extend((p, distance + step) for p in preds[j])
    unique = {(v.index, v.producer_index, v.rule): v for v in violations}
    return sorted(unique.values(), key=lambda v: (v.index, v.producer_index))
