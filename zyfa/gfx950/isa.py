"""gfx950 instruction streams: parse llvm-mc ``.s`` text and ``llvm-objdump`` disassembly.

The front end of the CDNA4 cycle model (and of the functional emulator). It never decodes
machine code itself: code objects are disassembled by a real LLVM that knows gfx950
(Debian ``llvm-objdump-22``), kernel descriptors are decoded by the same tool, and kernel
metadata (argument layout, workgroup size) is read from ``llvm-readelf-22 --notes``.

Register keys: every register an instruction names becomes an int, so dependency checks are
set operations. VGPR ``vN`` -> N, AGPR ``aN`` -> 256 + N (gfx950 has one 512-entry vector file
per lane), SGPR ``sN`` -> 1000 + N, and special scalar registers (``vcc``, ``exec``, ``m0``)
have their own keys above that.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional, Sequence

MAX_ASM_BYTES = 64 * 2**20  # a generated attention kernel's .s is well under 1 MiB

UNITS = ("MFMA", "VALU", "TRANS", "SALU", "SMEM", "LDS", "VMEM", "BRANCH", "BARRIER", "WAIT", "MISC")

LLVM_OBJDUMP = "llvm-objdump-22"
LLVM_READELF = "llvm-readelf-22"
LLVM_MC = "llvm-mc-22"
MCPU = "gfx950"

# -- register keys ---------------------------------------------------------------------------
AGPR_BASE = 256
SGPR_BASE = 1000
_SPECIAL_SGPR = {
    "vcc_lo": SGPR_BASE + 106, "vcc_hi": SGPR_BASE + 107, "vcc": (SGPR_BASE + 106, SGPR_BASE + 107),
    "m0": SGPR_BASE + 124,
    "exec_lo": SGPR_BASE + 126, "exec_hi": SGPR_BASE + 127, "exec": (SGPR_BASE + 126, SGPR_BASE + 127),
    "flat_scratch_lo": SGPR_BASE + 102, "flat_scratch_hi": SGPR_BASE + 103,
    "flat_scratch": (SGPR_BASE + 102, SGPR_BASE + 103),
}
_REG = re.compile(r"(?<![\w.])([vas])(?:\[(\d+):(\d+)\]|(\d+))(?![\w])")
_SPECIAL = re.compile(r"(?<![\w])(vcc_lo|vcc_hi|vcc|exec_lo|exec_hi|exec|m0|flat_scratch_lo|flat_scratch_hi|flat_scratch)(?![\w])")


# The pure functions of mnemonic/operand text below are memoised (functools.cache): a kernel of
# 3k-8k instructions repeats a few hundred distinct texts, and parsing them again and again (with
# the generator's hazard padding) was about a tenth of the headline command's CPU (py-spy, 2-core
# box, 2026-12-03). They return immutable values (str, tuples); the caches keyed by whole
# instructions are bounded, those keyed by one operand or mnemonic need not be.
@functools.cache
def register_keys(operand: str) -> tuple[int, ...]:
    """All register keys named by one operand string (``v[0:15]`` -> 0..15, ``a3`` -> 259)."""
    keys: list[int] = []
    for match in _REG.finditer(operand):
        kind, lo, hi, single = match.groups()
        first, last = (int(lo), int(hi)) if single is None else (int(single), int(single))
        if last < first:
            raise ValueError(f"bad register range {match.group(0)!r} in operand {operand!r}")
        base = {"v": 0, "a": AGPR_BASE, "s": SGPR_BASE}[kind]
        keys.extend(range(base + first, base + last + 1))
    for match in _SPECIAL.finditer(operand):
        value = _SPECIAL_SGPR[match.group(1)]
        keys.extend(value if isinstance(value, tuple) else (value,))
    return tuple(keys)


def is_vector_key(key: int) -> bool:
    return key < SGPR_BASE


# -- unit classification ---------------------------------------------------------------------
_TRANS = re.compile(r"^v_(exp|log|rcp|rsq|sqrt|sin|cos)(_legacy|_iflag)?_f(16|32|64)")
_SMEM = re.compile(r"^s_(load|buffer_load|store|buffer_store|scratch_load|scratch_store|dcache|memtime|memrealtime|atc_probe)")
_VMEM = re.compile(r"^(buffer|tbuffer|global|flat|scratch)_")
_BRANCH = re.compile(r"^s_(branch|cbranch_\w+|setpc_b64|swappc_b64|call_b64)$")
_WAIT = re.compile(r"^s_(waitcnt\w*|nop|sleep)$")
_MISC_S = re.compile(r"^s_(setprio|endpgm\w*|sendmsg\w*|trap|code_end|icache_inv|set_gpr_idx_\w+|setreg\w*|ttracedata|incperflevel|decperflevel|setkill|sethalt)$")


@functools.cache
def classify(opcode: str) -> str:
    """Execution unit of a mnemonic, one of :data:`UNITS`."""
    if not isinstance(opcode, str) or not opcode:
        raise ValueError(f"opcode must be a non-empty string, got {opcode!r}")
    op = opcode.lower()
    if op.startswith(("v_mfma", "v_smfmac")):
        return "MFMA"
    if op.startswith("v_"):
        return "TRANS" if _TRANS.match(op) else "VALU"
    if op.startswith("ds_"):
        return "LDS"
    if _VMEM.match(op):
        return "VMEM"
    if op == "s_barrier":
        return "BARRIER"
    if _WAIT.match(op):
        return "WAIT"
    if _BRANCH.match(op):
        return "BRANCH"
    if _SMEM.match(op):
        return "SMEM"
    if _MISC_S.match(op):
        return "MISC"
    if op.startswith("s_"):
        return "SALU"
    return "MISC"


_ENCODING_SUFFIX = re.compile(r"_(e32|e64|sdwa|dpp)$")


@functools.cache
def base_opcode(opcode: str) -> str:
    """Mnemonic without its encoding suffix (``v_exp_f32_e32`` -> ``v_exp_f32``)."""
    return _ENCODING_SUFFIX.sub("", opcode.lower())


# -- MFMA flops per instruction -----------------------------------------------------------------
# Sources: [isa] AMD CDNA4 ISA guide: an MxNxK MFMA computes an MxN += MxK * KxN product, 2*M*N*K
# flop (one multiply + one add per term); the mnemonic spells M, N and K. [card]
# ../shared/design/README.md section 2 (MI355X data sheet; its flops/inst column is 2*M*N*K for
# every MFMA it lists). This is the one flops table: the cycle model's MFMA work check and the
# analyzer's TFLOP/s both read it.
# v_mfma_<dst>_<M>x<N>x<K>[_<blocks>b]_<src> and v_smfmac_* (sparse: the mnemonic's K is the
# dense-equivalent K, so the same formula counts the flops of the dense product it stands for).
# Blocked MFMAs (..._4b, ..._16b) compute that many independent products. [isa]
_MFMA_SHAPE = re.compile(r"^v_(?:mfma|smfmac)(?:_scale)?_[a-z0-9]+_(\d+)x(\d+)x(\d+)(?:_(\d+)b(?:_|$))?")

# explicit rows, checked against the design card [card]; the regex above covers the rest
MFMA_FLOPS: dict[str, int] = {
    "v_mfma_f32_32x32x64_f8f6f4": 2 * 32 * 32 * 64,  # [card] 16 passes
    "v_mfma_f32_16x16x128_f8f6f4": 2 * 16 * 16 * 128,  # [card] 8 passes
    "v_mfma_scale_f32_32x32x64_f8f6f4": 2 * 32 * 32 * 64,  # [card] same as unscaled
    "v_mfma_scale_f32_16x16x128_f8f6f4": 2 * 16 * 16 * 128,  # [isa]
    "v_mfma_f32_32x32x16_bf16": 2 * 32 * 32 * 16,  # [card] 8 passes
    "v_mfma_f32_16x16x32_bf16": 2 * 16 * 16 * 32,  # [card] 4 passes
    "v_mfma_ld_scale_b32": 0,  # [isa] loads the E8M0 scales of the next scaled MFMA; no arithmetic
}


def mfma_flops(opcode: str) -> Optional[int]:
    """Flops of one MFMA/SMFMAC instruction (2*M*N*K*blocks), or None for a mnemonic we cannot read."""
    op = base_opcode(opcode)
    if op in MFMA_FLOPS:
        return MFMA_FLOPS[op]
    match = _MFMA_SHAPE.match(op)
    if not match:
        return None
    m, n, k = (int(x) for x in match.group(1, 2, 3))
    blocks = int(match.group(4) or 1)
    return 2 * m * n * k * blocks


# -- definitions and uses ----------------------------------------------------------------------
_NO_DEST = re.compile(
    r"^(s_cmp\w*|s_bitcmp\w*|s_cbranch\w*|s_branch|s_waitcnt\w*|s_nop|s_barrier|s_setprio|s_sleep|"
    r"s_endpgm\w*|s_sendmsg\w*|s_trap|s_dcache\w*|s_icache\w*|s_setreg\w*|s_set_gpr_idx\w*|s_store\w*|"
    r"s_buffer_store\w*|s_code_end|s_setpc_b64|v_nop|"
    r"buffer_store\w*|tbuffer_store\w*|global_store\w*|flat_store\w*|scratch_store\w*|buffer_wbl2|buffer_inv\w*)$"
)
_TWO_DEST = re.compile(r"^(v_\w+_co_\w+|v_div_scale_\w+|v_mad_u64_u32|v_mad_i64_i32)(_e32|_e64)?$")


def _ds_has_dest(op: str) -> bool:
    return any(word in op for word in ("read", "_rtn", "swizzle", "permute", "consume", "append"))


def _atomic_returns(op: str, modifiers: tuple[str, ...]) -> bool:
    return any(m in ("glc", "sc0") for m in modifiers)


@functools.lru_cache(maxsize=1 << 16)  # bounded: a sweep or the web UI generates many variants in one process
def defs_uses(opcode: str, operands: tuple[str, ...], modifiers: tuple[str, ...] = ()) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Register keys written and read by one instruction (explicit operands only; SCC is left to
    the scalar executor)."""
    op = opcode.lower()
    if not operands or _NO_DEST.match(op):
        n_dest = 0
    elif op.startswith("ds_"):
        n_dest = 1 if _ds_has_dest(op) else 0
    elif _VMEM.match(op):
        if "lds" in modifiers:
            n_dest = 0
        elif "atomic" in op:
            n_dest = 1 if _atomic_returns(op, modifiers) else 0
        else:
            n_dest = 1
    elif _TWO_DEST.match(op):
        n_dest = 2
    else:
        n_dest = 1
    defs: list[int] = []
    uses: list[int] = []
    for i, operand in enumerate(operands):
        (defs if i < n_dest else uses).extend(register_keys(operand))
    if op.startswith("v_cmpx"):
        defs.extend(_SPECIAL_SGPR["exec"])
    return tuple(defs), tuple(uses)


# -- data types --------------------------------------------------------------------------------
_MNEMONIC = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Instruction:
    """One instruction of a program.

    ``pc`` is the byte address (code-object virtual address for disassembly, offset from the
    kernel start for assembled text); ``size`` its encoded length in bytes; ``target`` the label
    a branch jumps to (``None`` otherwise); ``defs``/``uses`` register keys (module docstring);
    ``cluster``: the schedule cluster that emitted it, when the generator says (:meth:`Program.with_clusters`).
    """

    pc: int
    opcode: str
    operands: tuple[str, ...] = ()
    modifiers: tuple[str, ...] = ()
    text: str = ""
    size: int = 4
    target: Optional[str] = None
    unit: str = field(default="")
    defs: tuple[int, ...] = field(default=(), compare=False)
    uses: tuple[int, ...] = field(default=(), compare=False)
    cluster: Optional[str] = field(default=None, compare=False)

    def __post_init__(self):
        if not isinstance(self.pc, int) or self.pc < 0:
            raise ValueError(f"Instruction.pc must be a non-negative int, got {self.pc!r}")
        if not isinstance(self.opcode, str) or not _MNEMONIC.match(self.opcode):
            raise ValueError(f"Instruction.opcode must be a lower-case mnemonic, got {self.opcode!r}")
        if self.size not in (4, 8, 12, 16):
            raise ValueError(f"Instruction.size must be 4, 8, 12 or 16 bytes, got {self.size!r}")
        unit = self.unit or classify(self.opcode)
        if unit not in UNITS:
            raise ValueError(f"Instruction.unit must be one of {UNITS}, got {unit!r}")
        object.__setattr__(self, "unit", unit)
        if not self.defs and not self.uses:
            d, u = defs_uses(self.opcode, self.operands, self.modifiers)
            object.__setattr__(self, "defs", d)
            object.__setattr__(self, "uses", u)
        if not self.text:
            object.__setattr__(self, "text", _render(self.opcode, self.operands, self.modifiers))

    @property
    def base(self) -> str:
        return base_opcode(self.opcode)

    @property
    def operand_text(self) -> str:
        return _render("", self.operands, self.modifiers).strip()


def _render(opcode: str, operands: tuple[str, ...], modifiers: tuple[str, ...]) -> str:
    text = opcode
    if operands:
        text += " " + ", ".join(operands)
    if modifiers:
        text += " " + " ".join(modifiers)
    return text


@dataclass(frozen=True)
class KernelArg:
    """One kernel argument from the code object's metadata (``.args``)."""

    name: str
    offset: int
    size: int
    value_kind: str = "by_value"


_USER_SGPRS = (  # (descriptor flag, SGPR count), in hardware order (AMDGPUUsage "Initial Kernel Execution State")
    ("user_sgpr_private_segment_buffer", 4),
    ("user_sgpr_dispatch_ptr", 2),
    ("user_sgpr_queue_ptr", 2),
    ("user_sgpr_kernarg_segment_ptr", 2),
    ("user_sgpr_dispatch_id", 2),
    ("user_sgpr_flat_scratch_init", 2),
    ("user_sgpr_private_segment_size", 1),
)
_SYSTEM_SGPRS = (
    "system_sgpr_workgroup_id_x", "system_sgpr_workgroup_id_y", "system_sgpr_workgroup_id_z",
    "system_sgpr_workgroup_info",
)


@dataclass(frozen=True)
class KernelDescriptor:
    """The ``.amdhsa_*`` fields of a kernel (names without the ``.amdhsa_`` prefix).

    ``workgroup_size`` comes from metadata (``.reqd_workgroup_size`` or
    ``.max_flat_workgroup_size``) or the kernel registry; ``None`` when unknown.
    """

    fields: dict = field(default_factory=dict)
    workgroup_size: Optional[int] = None
    args: tuple[KernelArg, ...] = ()

    def __post_init__(self):
        if not isinstance(self.fields, dict):
            raise TypeError(f"KernelDescriptor.fields must be a dict, got {type(self.fields).__name__}")
        for key, value in self.fields.items():
            if not isinstance(value, int):
                raise ValueError(f"KernelDescriptor field .amdhsa_{key} must be an int, got {value!r}")
        if self.workgroup_size is not None and (not isinstance(self.workgroup_size, int) or not 1 <= self.workgroup_size <= 1024):
            raise ValueError(f"KernelDescriptor.workgroup_size must be 1..1024, got {self.workgroup_size!r}")

    def get(self, name: str, default: int = 0) -> int:
        return self.fields.get(name, default)

    @property
    def vgpr_count(self) -> int:
        """Architectural VGPRs per lane (``accum_offset`` splits the unified file on gfx90a+)."""
        total = self.get("next_free_vgpr")
        return self.get("accum_offset", total) if "accum_offset" in self.fields else total

    @property
    def agpr_count(self) -> int:
        if "accum_offset" not in self.fields:
            return 0
        return max(0, self.get("next_free_vgpr") - self.get("accum_offset"))

    @property
    def total_vgprs(self) -> int:
        """VGPR + AGPR registers per lane that this kernel's waves occupy."""
        return self.get("next_free_vgpr")

    @property
    def sgpr_count(self) -> int:
        return self.get("next_free_sgpr")

    @property
    def lds_bytes(self) -> int:
        return self.get("group_segment_fixed_size")

    @property
    def kernarg_size(self) -> int:
        return self.get("kernarg_size")

    def sgpr_layout(self) -> dict[str, int]:
        """First SGPR of each enabled user/system SGPR input, in hardware order."""
        layout: dict[str, int] = {}
        next_sgpr = 0
        for name, count in _USER_SGPRS:
            if self.get(name):
                layout[name.removeprefix("user_sgpr_")] = next_sgpr
                next_sgpr += count
        if self.get("user_sgpr_kernarg_preload_length"):  # gfx950 kernarg preloading (Triton)
            layout["kernarg_preload"] = next_sgpr
            next_sgpr += self.get("user_sgpr_kernarg_preload_length")
        if "user_sgpr_count" in self.fields:
            next_sgpr = max(next_sgpr, self.get("user_sgpr_count"))
        for name in _SYSTEM_SGPRS:
            if self.get(name):
                layout[name.removeprefix("system_sgpr_")] = next_sgpr
                next_sgpr += 1
        return layout

    @property
    def workitem_id_dims(self) -> int:
        """1, 2 or 3: how many of v0 (packed x/y/z ids on gfx90a+) are set up."""
        return self.get("system_vgpr_workitem_id") + 1


@dataclass(frozen=True)
class Program:
    """A kernel's instruction stream with resolved labels and its descriptor."""

    name: str
    instructions: tuple[Instruction, ...]
    labels: dict = field(default_factory=dict)  # label -> instruction index
    descriptor: KernelDescriptor = field(default_factory=KernelDescriptor)
    source: str = ""  # path or "<asm>"

    def __post_init__(self):
        if not self.instructions:
            raise ValueError(f"Program {self.name!r} has no instructions")
        for label, index in self.labels.items():
            if not 0 <= index <= len(self.instructions):
                raise ValueError(f"Program {self.name!r}: label {label!r} points outside the program ({index})")
        for inst in self.instructions:
            if inst.target is not None and inst.target not in self.labels:
                raise ValueError(f"Program {self.name!r}: branch at pc 0x{inst.pc:x} targets unknown label {inst.target!r}")

    def __len__(self) -> int:
        return len(self.instructions)

    @functools.cached_property
    def branch_targets(self) -> dict[int, int]:
        """Instruction index of each branch -> index of its target."""
        return {i: self.labels[inst.target] for i, inst in enumerate(self.instructions) if inst.target is not None}

    @functools.cached_property
    def index_of_pc(self) -> dict[int, int]:
        return {inst.pc: i for i, inst in enumerate(self.instructions)}

    def with_clusters(self, clusters) -> "Program":
        """This program with each instruction tagged by its schedule cluster (one name or None
        per instruction, in order, e.g. the generator's ``instruction_clusters``). ValueError when
        the count differs: tags never attach to the wrong instructions."""
        clusters = list(clusters)
        if len(clusters) != len(self.instructions):
            raise ValueError(f"Program {self.name!r}: {len(clusters)} cluster tags for {len(self.instructions)} "
                             "instructions (the build's instruction_clusters do not belong to this program)")
        tagged = tuple(replace(inst, cluster=name) for inst, name in zip(self.instructions, clusters))
        return replace(self, instructions=tagged)

    @property
    def clusters(self) -> Optional[list]:
        """Schedule-cluster name per instruction, or None when no instruction is tagged."""
        names = [inst.cluster for inst in self.instructions]
        return names if any(n is not None for n in names) else None

    def label_at(self, index: int) -> Optional[str]:
        for label, i in self.labels.items():
            if i == index:
                return label
        return None


# -- operand splitting ---------------------------------------------------------------------------
def _split_operands(rest: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``"v[0:3], v1 offset:16 glc"`` -> (("v[0:3]", "v1"), ("offset:16", "glc"))."""
    rest = rest.strip()
    if not rest:
        return (), ()
    parts, depth, current = [], 0, []
    for ch in rest:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    parts.append("".join(current).strip())
    last_tokens = _split_spaces(parts[-1])
    operands = parts[:-1] + last_tokens[:1]
    modifiers = last_tokens[1:]
    return tuple(p for p in operands if p), tuple(modifiers)


def _split_spaces(text: str) -> list[str]:
    tokens, depth, current = [], 0, []
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch.isspace() and depth == 0:
            if current:
                tokens.append("".join(current))
                current = []
        else:
            current.append(ch)
    if current:
        tokens.append("".join(current))
    return tokens


def _make(pc: int, opcode: str, rest: str, size: int, target: Optional[str]) -> Instruction:
    if opcode.startswith("s_waitcnt") or opcode in ("s_nop", "s_sleep", "s_setprio"):
        operands, modifiers = ((rest.strip(),) if rest.strip() else ()), ()
    else:
        operands, modifiers = _split_operands(rest)
    if target is not None and operands:
        operands = (target,) + operands[1:]
    return Instruction(pc=pc, opcode=opcode, operands=operands, modifiers=modifiers, size=size, target=target)


# -- llvm-objdump text ---------------------------------------------------------------------------
_OBJ_LABEL = re.compile(r"^([0-9a-fA-F]+) <([^>]+)>:\s*$")
_OBJ_INST = re.compile(r"^\s+([a-z][a-z0-9_]*)\b(.*?)\s*//\s*([0-9A-Fa-f]+):((?:\s+[0-9A-Fa-f]{1,8})+)\s*(?:<([^>]+)>)?\s*$")


def parse_objdump(text: str, kernel: Optional[str] = None, functions: Optional[set] = None,
                  descriptor: Optional[KernelDescriptor] = None, source: str = "<objdump>") -> Program:
    """Parse ``llvm-objdump -d --mcpu=gfx950`` output.

    ``kernel``: the function symbol to take (default: the first symbol in the text).
    ``functions``: names of all function symbols (from the symbol table); parsing of ``kernel``
    stops at the next of them. Other ``<name>:`` headers are labels inside the kernel.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    instructions: list[Instruction] = []
    label_pcs: dict[str, int] = {}
    name: Optional[str] = None
    taking = False
    raw_targets: list[Optional[int]] = []
    for line in text.splitlines():
        header = _OBJ_LABEL.match(line)
        if header:
            sym = header.group(2)
            if name is None and (kernel is None or sym == kernel):
                name, taking = sym, True
            elif taking and functions is not None and sym in functions and sym != name:
                taking = False
            elif taking:
                label_pcs[sym] = int(header.group(1), 16)
            continue
        if not taking:
            continue
        match = _OBJ_INST.match(line)
        if not match:
            continue
        opcode, rest, pc_hex, words, annotation = match.groups()
        pc = int(pc_hex, 16)
        size = 4 * len(words.split())
        target, raw = None, None
        if _BRANCH.match(opcode) and opcode.startswith(("s_branch", "s_cbranch")):
            first = _split_operands(rest)[0]
            token = first[0] if first else ""
            if re.fullmatch(r"-?\d+", token):
                imm = int(token) & 0xFFFF
                imm = imm - 0x10000 if imm & 0x8000 else imm
                raw = pc + 4 + 4 * imm
            else:
                target = token
        instructions.append(_make(pc, opcode, rest, size, target))
        raw_targets.append(raw)
    if name is None:
        wanted = f" {kernel!r}" if kernel else ""
        raise ValueError(f"no kernel{wanted} found in the disassembly text ({source})")
    if not instructions:
        raise ValueError(f"kernel {name!r} has no instructions in the disassembly text ({source})")
    pc_index = {inst.pc: i for i, inst in enumerate(instructions)}
    labels = {label: pc_index[pc] for label, pc in label_pcs.items() if pc in pc_index}
    end_pc = instructions[-1].pc + instructions[-1].size
    for label, pc in label_pcs.items():
        if pc == end_pc:
            labels[label] = len(instructions)
    fixed = []
    for inst, raw in zip(instructions, raw_targets):
        if raw is not None:
            if raw not in pc_index:
                raise ValueError(f"branch at pc 0x{inst.pc:x} jumps to 0x{raw:x}, not an instruction of {name!r}")
            label = f"pc_{raw:x}"
            labels.setdefault(label, pc_index[raw])
            inst = _make(inst.pc, inst.opcode, inst.operand_text, inst.size, label)
        fixed.append(inst)
    return Program(name=name, instructions=tuple(fixed), labels=labels,
                   descriptor=descriptor or KernelDescriptor(), source=source)


# -- llvm-mc syntax .s text ----------------------------------------------------------------------
_ASM_LABEL = re.compile(r"^\s*([A-Za-z_.$][\w.$]*):\s*(.*)$")
_ASM_DIRECTIVE = re.compile(r"^\s*\.amdhsa_(\w+)\s+(-?(?:0x[0-9a-fA-F]+|\d+))\s*$")
_ASM_KERNEL = re.compile(r"^\s*\.amdhsa_kernel\s+(\S+)")


def _strip_comment(line: str) -> str:
    for marker in ("//", ";"):
        pos = line.find(marker)
        if pos >= 0:
            line = line[:pos]
    return line.rstrip()


def parse_asm(text: str, kernel: Optional[str] = None, workgroup_size: Optional[int] = None,
              encode: bool = True, source: str = "<asm>", sizes: Optional[Sequence[int]] = None) -> Program:
    """Parse llvm-mc syntax gfx950 assembly (our generator's ``.s``).

    Labels are ``name:`` lines; ``.amdhsa_*`` directives inside ``.amdhsa_kernel`` fill the
    descriptor. Instruction sizes (and so pcs): ``sizes`` when given (the encoded bytes of every
    instruction in order, e.g. from the disassembly of the code object this text was assembled
    into); else, with ``encode`` and ``llvm-mc-22`` present, from assembling the instructions;
    otherwise every size is estimated (4 bytes, 8 for VOP3, MFMA, memory and literal forms) and
    the program's pcs are approximate.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    lines: list[tuple[str, str]] = []  # (opcode, rest)
    labels: dict[str, int] = {}
    fields: dict[str, int] = {}
    name: Optional[str] = kernel
    aligns: dict[int, tuple] = {}  # instruction index -> (.p2align boundary, max skip) before it; no nops emitted
    in_kd = in_meta = False
    meta_lines: list[str] = []
    for raw in text.splitlines():
        if raw.strip().startswith(".amdgpu_metadata"):
            in_meta = True
            continue
        if raw.strip().startswith(".end_amdgpu_metadata"):
            in_meta = False
            continue
        if in_meta:
            meta_lines.append(raw)
            continue
        line = _strip_comment(raw)
        if not line.strip():
            continue
        kd = _ASM_KERNEL.match(line)
        if kd:
            in_kd = True
            name = name or kd.group(1)
            continue
        if line.strip().startswith(".end_amdhsa_kernel"):
            in_kd = False
            continue
        if in_kd:
            directive = _ASM_DIRECTIVE.match(line)
            if directive:
                fields[directive.group(1)] = int(directive.group(2), 0)
            continue
        label = _ASM_LABEL.match(line)
        if label:
            if name is None and not label.group(1).startswith("."):
                name = label.group(1)
            labels[label.group(1)] = len(lines)
            line = label.group(2)
            if not line.strip():
                continue
        stripped = line.strip()
        align = re.match(r"^\.p2align\s+(\d+)\s*(?:,\s*[^,]*(?:,\s*(\d+))?)?", stripped)
        if align and lines:
            aligns[len(lines)] = (1 << int(align.group(1)), int(align.group(2)) if align.group(2) else None)
        if stripped.startswith("."):
            continue
        parts = stripped.split(None, 1)
        lines.append((parts[0].lower(), parts[1] if len(parts) > 1 else ""))
    if not lines:
        raise ValueError(f"no instructions found in the assembly text ({source})")
    if sizes is not None:
        sizes = list(sizes)
        if len(sizes) != len(lines):
            raise ValueError(f"parse_asm: {len(sizes)} sizes given for {len(lines)} instructions ({source})")
    elif encode:
        sizes = _encoded_sizes([f"{op} {rest}".strip() for op, rest in lines])
    if sizes is None:
        sizes = [_estimate_size(op, rest) for op, rest in lines]
    instructions = []
    pc = 0
    for index, ((opcode, rest), size) in enumerate(zip(lines, sizes)):
        if index in aligns:
            boundary, max_skip = aligns[index]
            aligned = -(-pc // boundary) * boundary
            if max_skip is None or aligned - pc <= max_skip:
                pc = aligned
        instructions.append(_make(pc, opcode, rest, size, _branch_target(opcode, rest, source)))
        pc += size
    meta_wg, args = parse_metadata("\n".join(meta_lines), name) if meta_lines and name else (None, ())
    descriptor = KernelDescriptor(fields=fields, workgroup_size=workgroup_size or meta_wg, args=args)
    return Program(name=name or "kernel", instructions=tuple(instructions), labels=labels,
                   descriptor=descriptor, source=source)


def _branch_target(opcode: str, rest: str, source: str) -> Optional[str]:
    if not (opcode.startswith(("s_branch", "s_cbranch")) and rest.strip()):
        return None
    target = rest.strip().split()[0].rstrip(",")
    if re.fullmatch(r"-?\d+", target):
        raise ValueError(f"{source}: branch {opcode} {rest!r} uses a numeric offset; use a label")
    return target


@functools.lru_cache(maxsize=1 << 16)  # the generator's hazard padding parses every emitted line; most repeat
def parse_instruction(text: str, pc: int = 0) -> Instruction:
    """One instruction from its llvm-mc text (``v_add_f32 v0, v1, v2``), as :func:`parse_asm`
    reads it (size estimated, branch targets are labels). Memoised: equal texts give the same
    (immutable) Instruction object."""
    line = _strip_comment(text).strip()
    if not line:
        raise ValueError(f"no instruction in {text!r}")
    parts = line.split(None, 1)
    opcode, rest = parts[0].lower(), parts[1] if len(parts) > 1 else ""
    return _make(pc, opcode, rest, _estimate_size(opcode, rest), _branch_target(opcode, rest, "<instruction>"))


def _estimate_size(opcode: str, rest: str) -> int:
    unit = classify(opcode)
    if opcode.startswith("v_mfma_scale"):
        return 16
    size = 8 if unit in ("MFMA", "SMEM", "LDS", "VMEM") or opcode.endswith("_e64") or opcode.startswith("v_pk_") else 4
    if re.search(r"(?<![\w:])0x[0-9a-fA-F]{3,}", rest) and size == 4:
        size += 4
    return size


_ENCODING = re.compile(r"encoding:\s*\[([^\]]*)\]")


def _encoded_sizes(lines: list[str]) -> Optional[list[int]]:
    """Exact encoded sizes from ``llvm-mc-22 -show-encoding``; ``None`` if unavailable."""
    if shutil.which(LLVM_MC) is None:
        return None
    body = []
    for i, line in enumerate(lines):
        op = line.split()[0]
        if op.startswith(("s_branch", "s_cbranch")):
            line = f"{op} 0"  # size does not depend on the target
        body.append(line)
    proc = subprocess.run([LLVM_MC, "-triple=amdgcn-amd-amdhsa", f"-mcpu={MCPU}", "-show-encoding"],
                          input="\n".join(body) + "\n", capture_output=True, text=True)
    if proc.returncode != 0:
        raise ValueError(f"{LLVM_MC} rejected the assembly:\n{proc.stderr.strip()[:2000]}")
    sizes = [len([b for b in m.group(1).split(",") if b.strip()]) for m in _ENCODING.finditer(proc.stdout)]
    return sizes if len(sizes) == len(lines) else None


# -- code objects ------------------------------------------------------------------------------
def _run(cmd: list[str]) -> str:
    if shutil.which(cmd[0]) is None:
        raise FileNotFoundError(f"{cmd[0]} not found: install Debian llvm-22 (apt-get install llvm-22)")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ValueError(f"{' '.join(cmd)} failed: {proc.stderr.strip()[:2000]}")
    return proc.stdout


_SYM = re.compile(r"^\s*\d+:\s+([0-9a-fA-F]+)\s+(\d+)\s+(\w+)\s+(\w+)\s+\w+\s+\S+\s+(\S+)\s*$")


def _symbols(readelf_text: str) -> dict[str, str]:
    """Symbol name -> type (FUNC, OBJECT, NOTYPE) from ``llvm-readelf -s``."""
    out = {}
    for line in readelf_text.splitlines():
        match = _SYM.match(line)
        if match:
            out[match.group(5)] = match.group(3)
    return out


def parse_metadata(notes_text: str, kernel: str) -> tuple[Optional[int], tuple[KernelArg, ...]]:
    """Workgroup size and argument layout of ``kernel`` from AMDGPU metadata YAML (the
    ``llvm-readelf --notes`` dump or an assembly file's ``.amdgpu_metadata`` block).

    A line-based reader of the few keys used here (no YAML dependency): kernels are the
    ``  - `` items of ``amdhsa.kernels``; their ``.args`` items (``.name``, ``.offset``,
    ``.size``, ``.value_kind``), ``.reqd_workgroup_size`` and ``.max_flat_workgroup_size``.
    """
    kernels: list[list[str]] = []
    for line in notes_text.splitlines():
        if re.match(r"^\s*amdhsa\.", line) and not line.startswith("  "):
            kernels.append([]) if line.strip().startswith("amdhsa.kernels") else None
            continue
        if re.match(r"^  - ", line):
            kernels.append([line.replace("  - ", "    ", 1)])
        elif kernels and kernels[-1] is not None and line.startswith("    "):
            kernels[-1].append(line)
    for lines in kernels:
        text = "\n".join(lines)
        if not re.search(rf"^    \.name:\s+{re.escape(kernel)}\s*$", text, flags=re.M):
            continue
        args: list[KernelArg] = []
        entries: list[dict] = []
        in_args = False
        for line in lines:
            if re.match(r"^    \.args:", line):
                in_args = True
                continue
            if in_args and re.match(r"^    \S", line):
                in_args = False
            if not in_args:
                continue
            item = re.match(r"^      - (.*)$", line)
            if item:
                entries.append({})
                line = "        " + item.group(1)
            key = re.match(r"^        \.(\w+):\s+(\S+)", line)
            if key and entries:
                entries[-1][key.group(1)] = key.group(2)
        for fields in entries:
            if "offset" in fields and "size" in fields:
                args.append(KernelArg(name=fields.get("name", f"arg{len(args)}"), offset=int(fields["offset"]),
                                      size=int(fields["size"]), value_kind=fields.get("value_kind", "by_value")))
        wg = None
        reqd = re.search(r"^    \.reqd_workgroup_size:\s*\n\s+-\s*(\d+)\s*\n\s+-\s*(\d+)\s*\n\s+-\s*(\d+)", text, flags=re.M)
        if reqd:
            wg = int(reqd.group(1)) * int(reqd.group(2)) * int(reqd.group(3))
        else:
            flat = re.search(r"^    \.max_flat_workgroup_size:\s+(\d+)", text, flags=re.M)
            wg = int(flat.group(1)) if flat else None
        return wg, tuple(args)
    return None, ()


def parse_descriptor_text(text: str) -> dict[str, int]:
    """``.amdhsa_*`` fields from ``llvm-objdump -D --disassemble-symbols=NAME.kd`` output."""
    return {m.group(1): int(m.group(2), 0) for m in map(_ASM_DIRECTIVE.match, text.splitlines()) if m}


@functools.lru_cache(maxsize=32)
def _disassemble_cached(path: str, mtime: float, kernel: Optional[str]) -> Program:
    symbols = _symbols(_run([LLVM_READELF, "-s", path]))
    functions = {name for name, kind in symbols.items() if kind == "FUNC"}
    if not functions:
        raise ValueError(f"{path}: no function symbols; is it an AMDGPU code object?")
    if kernel is None:
        kernel = sorted(functions)[0]
    elif kernel not in functions:
        raise ValueError(f"{path}: no kernel {kernel!r}; kernels: {', '.join(sorted(functions))}")
    fields = {}
    if f"{kernel}.kd" in symbols:
        fields = parse_descriptor_text(_run([LLVM_OBJDUMP, "-D", f"--mcpu={MCPU}", f"--disassemble-symbols={kernel}.kd", path]))
    workgroup_size, args = parse_metadata(_run([LLVM_READELF, "--notes", path]), kernel)
    descriptor = KernelDescriptor(fields=fields, workgroup_size=workgroup_size, args=args)
    text = _run([LLVM_OBJDUMP, "-d", f"--mcpu={MCPU}", path])
    return parse_objdump(text, kernel=kernel, functions=functions, descriptor=descriptor, source=path)


def disassemble(path, kernel: Optional[str] = None) -> Program:
    """Disassemble a gfx950 code object (.co/.hsaco) with ``llvm-objdump-22`` into a Program,
    with its kernel descriptor and metadata (argument layout, workgroup size)."""
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"code object {str(p)!r} does not exist or is not a regular file")
    return _disassemble_cached(str(p.resolve()), p.stat().st_mtime, kernel)


def load_program(path, kernel: Optional[str] = None, workgroup_size: Optional[int] = None) -> Program:
    """A Program from a code object or a ``.s`` file (by suffix)."""
    p = Path(path)
    if p.suffix == ".s":
        if not p.is_file():  # regular files only: reading a FIFO would block, /dev/zero never end
            raise FileNotFoundError(f"assembly file {str(p)!r} does not exist or is not a regular file")
        if p.stat().st_size > MAX_ASM_BYTES:
            raise ValueError(f"assembly file {str(p)!r} is over {MAX_ASM_BYTES} bytes")
        return parse_asm(p.read_text(), kernel=kernel, workgroup_size=workgroup_size, source=str(p))
    if p.suffix not in (".co", ".hsaco", ".o", ".elf"):
        raise ValueError(f"path must end in .s, .co, .hsaco, .o or .elf, got {str(p)!r}")
    return disassemble(p, kernel)
