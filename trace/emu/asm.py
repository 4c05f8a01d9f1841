"""What the emulator executes, read by the machine description's one asm front end.

The emulator needs, per instruction, the opcode, the operand strings and the modifiers; per
kernel, the ``.amdhsa_*`` descriptor fields (initial SGPR/VGPR layout, LDS size) and the
kernel-argument layout from the ``.amdgpu_metadata`` block. All of it comes from
:mod:`zyfa.gfx950.isa` (``parse_asm`` for llvm-mc text, ``disassemble`` for code objects),
converted by :func:`from_cdna4_program`; there is no second parser here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from zyfa.gfx950 import isa
from zyfa.gfx950.isa import KernelArg  # one argument record for the model and the emulator
from zyfa.trace.emu.errors import EmulationError

@dataclass(frozen=True)
class Inst:
    """One instruction: ``opcode`` (lower case, encoding suffix kept), operand strings, modifiers."""

    index: int
    opcode: str
    operands: tuple[str, ...]
    modifiers: tuple[tuple[str, str], ...]
    text: str
    line: int

    def mod(self, name: str, default=None):
        for key, value in self.modifiers:
            if key == name:
                return value
        return default


@dataclass(frozen=True)
class AsmKernel:
    """A parsed kernel: instructions, label -> instruction index, descriptor and kernargs."""

    name: str
    insts: tuple[Inst, ...]
    labels: dict = field(default_factory=dict)
    descriptor: dict = field(default_factory=dict)
    args: tuple[KernelArg, ...] = ()

    def desc(self, key: str, default: int = 0) -> int:
        return int(self.descriptor.get(key, default))


def parse_asm(text: str, kernel: str | None = None, check: bool = False) -> AsmKernel:
    """Parse llvm-mc gfx950 assembly of one kernel with the machine description's front end
    (:func:`zyfa.gfx950.isa.parse_asm`: the one asm parser of the model and the emulator);
    ``check`` has ``llvm-mc-22`` (when present) assemble the text and reject what it rejects.

    Raises:
        EmulationError: if no instruction is found, a branch names an unknown label or
            llvm-mc rejects the text.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    try:
        return from_cdna4_program(isa.parse_asm(text, kernel=kernel, encode=check))
    except ValueError as exc:
        raise EmulationError(str(exc)) from exc


def from_cdna4_program(program) -> AsmKernel:
    """Convert a ``zyfa.gfx950.isa.Program`` (the cycle model's front end, which also reads
    llvm-objdump output of code objects) into the emulator's :class:`AsmKernel`."""
    insts = []
    for i, ins in enumerate(program.instructions):
        operands = tuple(ins.operands)
        if ins.target is not None and ins.opcode.startswith("s_"):
            operands = (ins.target,)
        mods = []
        for mod in ins.modifiers:
            key, _, value = mod.partition(":")
            mods.append((key, value if value else "1"))
        if ins.opcode == "s_waitcnt":
            operands, mods = (), [(m.group(1), m.group(2))
                                  for m in re.finditer(r"(\w+)\((\d+)\)", ins.text)]
        insts.append(Inst(i, ins.opcode, operands, tuple(mods), ins.text, i))
    d = program.descriptor
    return AsmKernel(program.name, tuple(insts), dict(program.labels), dict(d.fields), tuple(d.args))
