"""A small assembly DSL for gfx950: register files, validated instructions, a program builder.

Registers are objects, not strings: ``v[4]``, ``v[8:16]`` (Python slice, end exclusive; renders
``v[8:15]``), ``a[0:16]``, ``s[2]``. Out-of-range or empty ranges raise at construction.
:meth:`Asm.emit` checks every operand against the opcode's signature in :data:`SIGNATURES`
(register file, width in dwords, alignment) before the instruction is recorded, so a wrong
operand is a Python traceback at generation time, not an llvm-mc error later.

Limits are gfx950's (CDNA4 ISA guide): 256 architectural VGPRs and 256 AGPRs per lane (one
512-entry file shared by the waves of a SIMD), 102 allocatable SGPRs.
"""

from __future__ import annotations

import functools
import math
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

FILE_SIZES = {"v": 256, "a": 256, "s": 102}
SPECIAL = ("vcc", "exec", "m0", "off", "scc")


@dataclass(frozen=True)
class Reg:
    """``count`` consecutive registers of file ``kind`` starting at ``index``."""

    kind: str
    index: int
    count: int = 1

    def __post_init__(self):
        if self.kind not in FILE_SIZES:
            raise ValueError(f"Reg.kind must be one of {tuple(FILE_SIZES)}, got {self.kind!r}")
        if not isinstance(self.index, int) or not isinstance(self.count, int):
            raise TypeError(f"Reg index/count must be int, got {self.index!r}, {self.count!r}")
        if self.count < 1 or self.index < 0 or self.index + self.count > FILE_SIZES[self.kind]:
            raise ValueError(f"register range {self.kind}[{self.index}:{self.index + self.count}] is outside "
                             f"the {self.kind} file (0..{FILE_SIZES[self.kind] - 1})")

    def __getitem__(self, key: Union[int, slice]) -> "Reg":
        """Sub-range, relative to this range: ``S[4]``, ``S[0:8]``."""
        if isinstance(key, int):
            if not 0 <= key < self.count:
                raise IndexError(f"{self} has {self.count} registers, index {key} is out of range")
            return Reg(self.kind, self.index + key)
        start, stop, step = key.indices(self.count)
        if step != 1 or stop <= start:
            raise IndexError(f"bad register slice {key} of {self}")
        return Reg(self.kind, self.index + start, stop - start)

    def __str__(self) -> str:
        if self.count == 1:
            return f"{self.kind}{self.index}"
        return f"{self.kind}[{self.index}:{self.index + self.count - 1}]"


class RegFile:
    """Indexable register file: ``v[3]`` or ``v[0:16]``."""

    def __init__(self, kind: str):
        if kind not in FILE_SIZES:
            raise ValueError(f"unknown register file {kind!r}")
        self.kind = kind

    def __getitem__(self, key: Union[int, slice]) -> Reg:
        if isinstance(key, int):
            return Reg(self.kind, key)
        if key.step not in (None, 1) or key.start is None or key.stop is None:
            raise ValueError(f"register slices need explicit start:stop, got {key}")
        return Reg(self.kind, key.start, key.stop - key.start)


v, a, s = RegFile("v"), RegFile("a"), RegFile("s")


@dataclass(frozen=True)
class Label:
    name: str

    def __post_init__(self):
        if not self.name.replace("_", "").replace(".", "").isalnum():
            raise ValueError(f"bad label name {self.name!r}")


def f32_bits(x: float) -> int:
    """IEEE single bit pattern of ``x`` (for literal operands)."""
    return struct.unpack("<I", struct.pack("<f", x))[0]


@dataclass(frozen=True)
class Neg:
    """A negated VALU source operand (``-v3``); VOP3 encodings only."""

    reg: Reg

    def __str__(self) -> str:
        return f"-{self.reg}"


@dataclass(frozen=True)
class Abs:
    """The absolute value of a VALU source operand (``|v3|``); VOP3 encodings only."""

    reg: Reg

    def __str__(self) -> str:
        return f"|{self.reg}|"


Operand = Union[Reg, Neg, Abs, Label, int, float, str]

# -- operand signatures --------------------------------------------------------------------------
# Spec letters: v VGPR, a AGPR, s SGPR, c constant (int/float literal), k special register (vcc...),
# l label. A spec is (letters, width in dwords). "*" width: any. Every opcode the generator emits
# is listed; emitting anything else is an error.
V1, S1, S2, S4 = ("v", 1), ("s", 1), ("s", 2), ("s", 4)
VSC = ("vsc", 1)  # VALU source: VGPR, SGPR or constant
VC = ("vsc", 1)  # VOP3 source: no literal on gfx9 (checked in Instr)
SC = ("sc", 1)
SIGNATURES: dict[str, tuple] = {
    # MFMA: D, A, B, C (+ scale A, scale B)
    "v_mfma_f32_32x32x64_f8f6f4": (("va", 16), ("v", 8), ("v", 8), ("vac", 16)),
    "v_mfma_scale_f32_32x32x64_f8f6f4": (("va", 16), ("v", 8), ("v", 8), ("vac", 16), V1, V1),
    "v_mfma_f32_16x16x128_f8f6f4": (("va", 4), ("v", 8), ("v", 8), ("vac", 4)),
    "v_mfma_f32_32x32x16_bf16": (("va", 16), ("v", 4), ("v", 4), ("vac", 16)),
    # VALU
    "v_mov_b32": (V1, VSC), "v_add_f32": (V1, VSC, V1), "v_sub_f32": (V1, VSC, V1), "v_mul_f32": (V1, VSC, V1),
    "v_max_f32": (V1, VSC, V1), "v_add_u32": (V1, VSC, V1), "v_sub_u32": (V1, VSC, V1), "v_subrev_u32": (V1, VSC, V1),
    "v_mul_lo_u32": (V1, VC, VC), "v_or_b32": (V1, VSC, V1), "v_xor_b32": (V1, VSC, V1),
    "v_and_b32": (V1, VSC, V1), "v_lshrrev_b32": (V1, VSC, V1), "v_lshlrev_b32": (V1, VSC, V1),
    "v_mul_u32_u24": (V1, VSC, V1), "v_min_i32": (V1, VSC, V1), "v_max_i32": (V1, VSC, V1),
    "v_mad_u32_u24": (V1, VC, VC, VC),
    "v_cndmask_b32": (V1, VSC, V1, ("k", 2)),
    "v_cmp_lt_i32": (("k", 2), VSC, V1), "v_cmp_gt_f32": (("k", 2), VSC, V1),
    "v_cmp_eq_f32": (("k", 2), VSC, V1), "v_cmp_gt_u32": (("k", 2), VSC, V1), "v_cmp_eq_u32": (("k", 2), VSC, V1),
    "v_cmp_lt_f32": (("k", 2), VSC, V1), "v_cmp_nlt_f32": (("k", 2), VSC, V1),
    "v_cmp_ngt_f32": (("k", 2), VSC, V1),
    "v_cmp_ne_u32": (("k", 2), VSC, V1), "v_ffbl_b32": (V1, VSC), "v_min_u32": (V1, VSC, V1),
    "v_min_u32_dpp": (V1, V1, V1), "v_or3_b32": (V1, VC, VC, VC), "v_bfi_b32": (V1, VC, VC, VC), "v_add3_u32": (V1, VC, VC, VC),
    "v_min3_f32": (V1, VC, VC, VC), "v_maximum3_f32": (V1, VC, VC, VC),
    "v_max3_f32": (V1, VC, VC, VC), "v_fma_f32": (V1, VC, VC, VC), "v_med3_i32": (V1, VC, VC, VC),
    "v_ldexp_f32": (V1, VC, VC),
    "v_pk_fma_f32": (("v", 2), ("v", 2), ("v", 2), ("v", 2)), "v_pk_mul_f32": (("v", 2), ("v", 2), ("v", 2)),
    "v_ceil_f32": (V1, VSC), "v_floor_f32": (V1, VSC), "v_cvt_i32_f32": (V1, VSC), "v_cvt_u32_f32": (V1, VSC), "v_cvt_u32_f32_sdwa": (V1, V1),
    "v_cvt_f32_u32": (V1, VSC), "v_cvt_f32_i32": (V1, VSC),
    "v_cvt_pk_fp8_f32": (V1, VC, VC), "v_cvt_pk_f32_fp8": (("v", 2), VC),
    "v_cvt_pk_f32_fp8_sdwa": (("v", 2), V1), "v_cvt_pk_bf16_f32": (V1, VC, VC),
    "v_exp_f32": (V1, VSC), "v_log_f32": (V1, VSC), "v_rcp_f32": (V1, VSC),
    "v_div_scale_f32": (V1, ("k", 2), VC, VC, VC), "v_div_fmas_f32": (V1, VC, VC, VC),
    "v_div_fixup_f32": (V1, VC, VC, VC),
    "v_permlane32_swap_b32": (V1, V1), "v_readfirstlane_b32": (S1, V1),
    "v_accvgpr_read_b32": (V1, ("a", 1)), "v_accvgpr_write_b32": (("a", 1), VC),
    # SALU / SMEM
    "s_load_dwordx16": (("s", 16), S2, ("c", 1)), "s_load_dwordx4": (S4, S2, SC),
    "s_mov_b32": (S1, SC), "s_mov_b64": (S2, ("sk", 2)), "s_add_u32": (S1, SC, SC), "s_addc_u32": (S1, SC, SC),
    "s_sub_u32": (S1, SC, SC), "s_sub_i32": (S1, SC, SC), "s_add_i32": (S1, SC, SC),
    "s_mul_i32": (S1, SC, SC), "s_mul_hi_u32": (S1, SC, SC), "s_lshl_b32": (S1, SC, SC),
    "s_lshr_b32": (S1, SC, SC), "s_min_i32": (S1, SC, SC), "s_max_i32": (S1, SC, SC), "s_min_u32": (S1, SC, SC),
    "s_or_b32": (S1, SC, SC), "s_and_b32": (S1, SC, SC),
    "s_cmp_lt_i32": (SC, SC), "s_cmp_le_i32": (SC, SC), "s_cmp_eq_u32": (SC, SC), "s_cmp_ge_i32": (SC, SC), "s_cmp_ge_u32": (SC, SC), "s_cmp_lt_u32": (SC, SC),
    "s_and_saveexec_b64": (S2, ("k", 2)), "s_or_b64": (("k", 2), ("k", 2), S2),
    # control
    "s_branch": (("l", 1),), "s_cbranch_scc0": (("l", 1),), "s_cbranch_scc1": (("l", 1),),
    "s_cbranch_execz": (("l", 1),), "s_cbranch_execnz": (("l", 1),), "s_cbranch_vccnz": (("l", 1),),
    "s_cbranch_vccz": (("l", 1),),
    "s_barrier": (), "s_setprio": (("c", 1),), "s_nop": (("c", 1),), "s_endpgm": (),
    "s_waitcnt": ("*",),
    # memory
    "buffer_load_dwordx4": (("v", 4), V1, S4, SC), "buffer_store_dwordx4": (("v", 4), V1, S4, SC),
    "buffer_store_dword": (V1, V1, S4, SC),
    "ds_read_b128": (("v", 4), V1), "ds_read2_b32": (("v", 2), V1), "ds_read2_b64": (("v", 4), V1),
    "ds_write_b128": (V1, ("v", 4)), "ds_read_b32": (V1, V1), "ds_write_b32": (V1, V1),
}
# Modifiers each opcode accepts (anything else is rejected).
MODIFIERS = {
    "buffer_load_dwordx4": ("offen", "offset:"), "buffer_store_dwordx4": ("offen", "offset:"),
    "buffer_store_dword": ("offen", "offset:"),
    "ds_read_b128": ("offset:",), "ds_write_b128": ("offset:",), "ds_read_b32": ("offset:",),
    "ds_write_b32": ("offset:",), "v_min_u32_dpp": ("quad_perm:", "row_mask:", "bank_mask:"), "ds_read2_b32": ("offset0:", "offset1:"),
    "ds_read2_b64": ("offset0:", "offset1:"),
    "v_pk_fma_f32": ("op_sel_hi:",), "v_pk_mul_f32": ("op_sel_hi:",),
    "v_mfma_scale_f32_32x32x64_f8f6f4": ("op_sel_hi:",),
    "v_cvt_u32_f32_sdwa": ("dst_sel:", "dst_unused:", "src0_sel:"),
    "v_cvt_pk_fp8_f32": ("op_sel:",), "v_cvt_pk_f32_fp8_sdwa": ("src0_sel:",), "v_fma_f32": ("neg_lo:",),
}
_ALIGN = {2: 2, 4: 4, 8: 4, 16: 4}  # operand alignment gfx90a+ requires for register tuples
_SPECIAL_WIDTH = {"vcc": 2, "exec": 2, "m0": 1, "off": 1, "scc": 1}


def _check_operand(opcode: str, position: int, spec: tuple, operand: Operand) -> None:
    letters, width = spec
    where = f"{opcode} operand {position}"
    if isinstance(operand, Label):
        if "l" not in letters:
            raise TypeError(f"{where}: a label is not allowed here (expected {letters!r})")
        return
    if isinstance(operand, bool) or isinstance(operand, (int, float)):
        if "c" not in letters:
            raise TypeError(f"{where}: a constant ({operand!r}) is not allowed here (expected {letters!r})")
        if isinstance(operand, float) and not math.isfinite(operand):
            raise ValueError(f"{where}: non-finite constant {operand!r}; pass the bit pattern as an int")
        return
    if isinstance(operand, str):
        if operand not in SPECIAL or "k" not in letters:
            raise TypeError(f"{where}: {operand!r} is not allowed here (expected {letters!r})")
        if width != _SPECIAL_WIDTH[operand] and width != "*":
            raise ValueError(f"{where}: {operand} is {_SPECIAL_WIDTH[operand]} dwords, expected {width}")
        return
    if isinstance(operand, (Neg, Abs)):
        if letters != "vsc":
            raise TypeError(f"{where}: a {type(operand).__name__.lower()} modifier needs a VOP3 source slot")
        operand = operand.reg
    if not isinstance(operand, Reg):
        raise TypeError(f"{where}: expected a register, constant or label, got {type(operand).__name__}")
    if operand.kind not in letters:
        raise TypeError(f"{where}: {operand} is in the {operand.kind} file, expected one of {letters!r}")
    if width != "*" and operand.count != width:
        raise ValueError(f"{where}: {operand} is {operand.count} registers wide, expected {width}")
    align = _ALIGN.get(operand.count, 1) if operand.kind == "s" else (2 if operand.count >= 2 else 1)
    if operand.index % align:
        raise ValueError(f"{where}: {operand} must start at a multiple of {align}")


_INLINE_FLOATS = (0.0, 0.5, 1.0, 2.0, 4.0, -0.5, -1.0, -2.0, -4.0)
# VALU opcodes encoded only as VOP3/VOP3P on gfx9: they cannot take a 32-bit literal.
_VOP3_ONLY = ("v_max3", "v_min3", "v_maximum3", "v_fma", "v_med3", "v_ldexp", "v_mul_lo", "v_cvt_pk", "v_div_", "v_pk_", "v_mad",
              "v_mfma", "v_cmp_")


def _is_literal(operand) -> bool:
    if isinstance(operand, bool):
        return False
    if isinstance(operand, int):
        return not -16 <= operand <= 64
    if isinstance(operand, float):
        return operand not in _INLINE_FLOATS
    return False


def _check_constant_bus(opcode: str, operands: tuple) -> None:
    """gfx9 VALU: at most one SGPR or literal read per instruction; VOP3 forms take no literal."""
    sources = operands[1:]
    sgprs = {str(o) for o in sources if (isinstance(o, Reg) and o.kind == "s") or o == "vcc"}
    literals = [o for o in sources if _is_literal(o)]
    if len(sgprs) + len(literals) > 1:
        raise ValueError(f"{opcode}: reads {len(sgprs)} SGPR(s) and {len(literals)} literal(s); gfx9 allows one "
                         "constant-bus operand per VALU instruction")
    vop3 = opcode.startswith(_VOP3_ONLY) and not opcode.startswith("v_cmp_")
    if literals and vop3:
        raise ValueError(f"{opcode}: literal {literals[0]!r} in a VOP3 instruction (gfx9 has no VOP3 literals); "
                         "put it in a register")
    if literals and opcode not in ("v_mov_b32",) and operands.index(literals[0]) != 1 and not opcode.startswith("v_cmp_"):
        raise ValueError(f"{opcode}: a literal must be the first source operand (VOP1/VOP2 src0)")
    if opcode.startswith("v_cmp_") and literals and operands.index(literals[0]) != 1:
        raise ValueError(f"{opcode}: a literal must be the first source operand")


def _render_operand(operand: Operand) -> str:
    if isinstance(operand, float):
        return f"0x{f32_bits(operand):08x}" if operand not in _INLINE_FLOATS else repr(operand)
    if isinstance(operand, int):
        return str(operand) if -16 <= operand <= 64 else hex(operand & 0xFFFFFFFF)
    if isinstance(operand, Label):
        return operand.name
    return str(operand)


@functools.lru_cache(maxsize=None)
def _repository_path(filename: str) -> str:
    """``filename`` relative to the package root: a checkout's kernels/gfx950/dsl.py and an
    installed zyfa/kernels/gfx950/dsl.py both give "kernels/gfx950/...", the path in the
    repository. Files outside that root keep their absolute path."""
    path = Path(filename).resolve()
    try:
        return path.relative_to(Path(__file__).resolve().parents[2]).as_posix()
    except ValueError:
        return path.as_posix()


_FORWARDERS: set = set()  # code objects of emit wrappers that emit on their caller's behalf


def forwards_source(function):
    """Decorator for a thin emit wrapper (``self.e(...)``): instructions it emits are attributed
    to the line that called it, not to the wrapper's own line."""
    _FORWARDERS.add(function.__code__)
    return function


def emitter_source() -> str:
    """``"kernels/gfx950/generator.py:612"``: file and line of the innermost caller outside this
    module and outside :func:`forwards_source` wrappers, i.e. the emitter line that produced an
    instruction (the explorer links to it)."""
    frame = sys._getframe(1)
    while frame is not None and (frame.f_code.co_filename == __file__ or frame.f_code in _FORWARDERS):
        frame = frame.f_back
    if frame is None:
        return "?"
    return f"{_repository_path(frame.f_code.co_filename)}:{frame.f_lineno}"


@dataclass(frozen=True)
class Instr:
    """One validated instruction; ``cluster`` names the schedule cluster that emitted it,
    ``source`` the generator line that emitted it (:func:`emitter_source`; not part of equality)."""

    opcode: str
    operands: tuple
    modifiers: tuple = ()
    cluster: Optional[str] = None
    source: Optional[str] = field(default=None, compare=False)

    def __post_init__(self):
        if self.opcode not in SIGNATURES:
            raise ValueError(f"opcode {self.opcode!r} is not in the DSL's signature table")
        sig = SIGNATURES[self.opcode]
        if sig != ("*",):
            if len(self.operands) != len(sig):
                raise ValueError(f"{self.opcode} takes {len(sig)} operands, got {len(self.operands)}")
            for i, (spec, operand) in enumerate(zip(sig, self.operands)):
                _check_operand(self.opcode, i, spec, operand)
        if self.opcode.startswith("v_") and sig != ("*",):
            _check_constant_bus(self.opcode, self.operands)
        allowed = MODIFIERS.get(self.opcode, ())
        for mod in self.modifiers:
            if not any(mod == m or (m.endswith(":") and mod.startswith(m)) for m in allowed):
                raise ValueError(f"{self.opcode}: modifier {mod!r} not allowed (allowed: {allowed or 'none'})")

    @property
    def text(self) -> str:
        ops = ", ".join(_render_operand(o) for o in self.operands) if self.operands else ""
        return " ".join(p for p in (self.opcode, ops, " ".join(self.modifiers)) if p)


@dataclass
class Asm:
    """Program under construction: instructions, labels and comments, in order."""

    items: list = field(default_factory=list)
    cluster: Optional[str] = None

    def emit(self, opcode: str, *operands: Operand, mods: tuple = ()) -> Instr:
        inst = Instr(opcode, tuple(operands), tuple(mods), self.cluster, emitter_source())
        self.items.append(inst)
        return inst

    def label(self, name: str) -> Label:
        lab = Label(name)
        self.items.append(lab)
        return lab

    def comment(self, text: str) -> None:
        self.items.append(f"; {text}")

    @property
    def instructions(self) -> list[Instr]:
        return [item for item in self.items if isinstance(item, Instr)]

    def render(self) -> str:
        lines = []
        for item in self.items:
            if isinstance(item, Instr):
                lines.append(f"  {item.text}")
            elif isinstance(item, Label):
                lines.append(f"{item.name}:")
            elif isinstance(item, str):
                lines.append(f"  {item}")
        return "\n".join(lines)


# -- register allocation ------------------------------------------------------------------------------
class RegisterFileFull(ValueError):
    """An allocation ran past the end of its register file (the generator then tries a smaller
    operand read-ahead, or reports the budget)."""


@dataclass
class Allocator:
    """Bump allocator that names every range (the names go into the README table and build meta)."""

    next: dict = field(default_factory=lambda: {"v": 0, "a": 0, "s": 0})
    named: dict = field(default_factory=dict)

    def take(self, kind: str, name: str, count: int, align: int = 1) -> Reg:
        if name in self.named:
            raise ValueError(f"register range {name!r} allocated twice")
        start = -(-self.next[kind] // align) * align
        if kind in FILE_SIZES and start + count > FILE_SIZES[kind]:
            raise RegisterFileFull(f"register range {name!r} ({count} {kind} registers from {kind}{start}) does not "
                                   f"fit the {kind} file ({FILE_SIZES[kind]} registers)")
        reg = Reg(kind, start, count)
        self.next[kind] = start + count
        self.named[name] = reg
        return reg

    def at(self, kind: str, name: str, index: int, count: int) -> Reg:
        """A fixed range (hardware-initialised SGPRs); later allocations start after it."""
        reg = Reg(kind, index, count)
        self.named[name] = reg
        self.next[kind] = max(self.next[kind], index + count)
        return reg

    def used(self, kind: str) -> int:
        return self.next[kind]
