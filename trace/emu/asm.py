"""Read llvm-mc syntax gfx950 assembly (``.s``) into what the emulator executes.

The emulator needs, per instruction, the opcode, the operand strings and the modifiers; per
kernel, the ``.amdhsa_*`` descriptor fields (initial SGPR/VGPR layout, LDS size) and the
kernel-argument layout from the ``.amdgpu_metadata`` block. Text from llvm-objdump (``//``
comments, numeric branch offsets ``<sym+0x100>``) is accepted too. Programs parsed by
``zyfa.gfx950.isa`` are converted with :func:`from_cdna4_program`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from zyfa.gfx950.isa import KernelArg  # one argument record for the model and the emulator
from zyfa.trace.emu.errors import EmulationError

_MODIFIER = re.compile(r"^[a-z_0-9]+:\S+$|^(off|offen|idxen|glc|slc|sc0|sc1|nt|lds|clamp|gds|"
                       r"addr64|tfe|lwe|bound_ctrl:\S*|row_\w+|wave_\w+)$")
_BARE_MODIFIERS = {"offen", "idxen", "glc", "slc", "sc0", "sc1", "nt", "lds", "clamp", "gds",
                   "addr64", "tfe", "lwe"}


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


def _split_operands(rest: str) -> tuple[list[str], list[tuple[str, str]]]:
    pieces, depth, cur = [], 0, ""
    for ch in rest:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            pieces.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        pieces.append(cur.strip())
    operands, modifiers = [], []
    for i, piece in enumerate(pieces):
        tokens = re.findall(r"\S+\[[^\]]*\]|\S+", piece) if i == len(pieces) - 1 else [piece]
        if i == len(pieces) - 1 and tokens:
            operands.append(tokens[0])
            for tok in tokens[1:]:
                key, _, value = tok.partition(":")
                modifiers.append((key, value if value else "1"))
        else:
            operands.append(piece)
    # modifiers written as the only "operand" (e.g. "s_endpgm" has none; "offen" after "0")
    while operands and (operands[-1] in _BARE_MODIFIERS or re.match(r"^[a-z_0-9]+:", operands[-1])):
        key, _, value = operands.pop().partition(":")
        modifiers.insert(0, (key, value if value else "1"))
    return operands, modifiers


def _parse_waitcnt(rest: str) -> tuple[list[str], list[tuple[str, str]]]:
    return [], [(m.group(1), m.group(2)) for m in re.finditer(r"(\w+)\((\d+)\)", rest)]


def parse_instruction(text: str, index: int = 0, line: int = 0) -> Inst:
    """Parse one instruction line (comments already removed)."""
    text = text.strip()
    opcode, _, rest = text.partition(" ")
    opcode = opcode.lower()
    if opcode == "s_waitcnt":
        operands, modifiers = _parse_waitcnt(rest)
    else:
        operands, modifiers = _split_operands(rest.strip())
    return Inst(index, opcode, tuple(operands), tuple(modifiers), text, line)


def _parse_metadata_args(meta: str, kernel: str) -> tuple[KernelArg, ...]:
    blocks = re.split(r"\n\s*- \.agpr_count|\n  - ", meta)
    for block in blocks:
        if re.search(rf"\.name:\s+{re.escape(kernel)}\s*$", block, re.M) or len(blocks) <= 2:
            args = []
            for m in re.finditer(r"-\s+(\.[^\n]*\n(?:\s+\.[^\n]*\n)*)", block):
                fields = dict(re.findall(r"\.(\w+):\s+(\S+)", m.group(1)))
                if "offset" in fields and "value_kind" in fields:
                    args.append(KernelArg(name=fields.get("name", ""), offset=int(fields["offset"]),
                                          size=int(fields["size"]), value_kind=fields["value_kind"]))
            if args:
                return tuple(args)
    return ()


def parse_asm(text: str, kernel: str | None = None) -> AsmKernel:
    """Parse llvm-mc (or llvm-objdump) gfx950 assembly of one kernel.

    Raises:
        EmulationError: if no instruction is found or a branch names an unknown label.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    meta = ""
    if ".amdgpu_metadata" in text:
        text, _, meta = text.partition(".amdgpu_metadata")
        meta = meta.split(".end_amdgpu_metadata")[0]
    insts: list[Inst] = []
    labels: dict[str, int] = {}
    descriptor: dict[str, int] = {}
    name = kernel or ""
    in_desc = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = re.split(r"//|;", raw, maxsplit=1)[0].strip()
        if not line:
            continue
        if line.startswith(".amdhsa_kernel"):
            in_desc = True
            name = name or line.split()[1]
            continue
        if line.startswith(".end_amdhsa_kernel"):
            in_desc = False
            continue
        if in_desc:
            parts = line.split()
            if len(parts) >= 2 and parts[0].startswith(".amdhsa_"):
                descriptor[parts[0][len(".amdhsa_"):]] = int(parts[1], 0)
            continue
        m = re.match(r"^([\w.$]+):(.*)$", line)
        if m and not m.group(1).startswith("s_") or (m and m.group(2).strip() == ""):
            labels[m.group(1)] = len(insts)
            line = m.group(2).strip()
            if not line:
                continue
        if line.startswith(".") or re.match(r"^\d+:", line):
            continue
        m = re.match(r"^([0-9a-f]+) <([\w.$]+)>:$", line)
        if m:
            name = name or m.group(2)
            continue
        if not re.match(r"^[a-z]", line):
            continue
        insts.append(parse_instruction(line, len(insts), lineno))
    if not insts:
        raise EmulationError("no instructions found in assembly text")
    args = _parse_metadata_args(meta, name) if meta else ()
    return AsmKernel(name, tuple(insts), labels, descriptor, args)


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
