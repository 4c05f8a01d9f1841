"""Functional execution of the scalar side of gfx950 code (SALU, SMEM from the kernel-argument
segment, branches) plus lane 0 of the uniform integer/f32 VALU arithmetic that feeds
``v_readfirstlane`` (e.g. AITER's head / GQA division through ``v_rcp_iflag_f32``).

Vector values are otherwise not computed: every VGPR an unsupported VALU/MFMA/memory
instruction writes becomes unknown (``None``). A branch whose condition is unknown raises
:class:`ScalarUnknown`, naming the instruction, rather than guessing a path.
"""

from __future__ import annotations

import re
import struct
from typing import Callable, Optional

from zyfa.gfx950.isa import AGPR_BASE, SGPR_BASE, Instruction

M32 = 0xFFFFFFFF
KERNARG_BASE = 0x7F00_0000_0000  # address the model gives the kernel-argument segment
SCC = -1  # key of SCC in the register dict
VECTOR_KEY0 = -1000  # key of v0 in the register dict: vector register k (AGPRs after VGPRs) is VECTOR_KEY0 - k


class ScalarUnknown(RuntimeError):
    """Control flow depends on a value the model does not compute."""


# -- operand values ---------------------------------------------------------------------------
_INLINE_FLOAT = {"0.5": 0x3F000000, "-0.5": 0xBF000000, "1.0": 0x3F800000, "-1.0": 0xBF800000,
                 "2.0": 0x40000000, "-2.0": 0xC0000000, "4.0": 0x40800000, "-4.0": 0xC0800000,
                 "0.15915494": 0x3E22F983}
_SREG = re.compile(r"^s(\d+)$")
_SPAIR = re.compile(r"^s\[(\d+):(\d+)\]$")
_VREG = re.compile(r"^([va])(\d+)$")
_SPECIAL = {"vcc_lo": 106, "vcc_hi": 107, "m0": 124, "exec_lo": 126, "exec_hi": 127}


def f2u(x: float) -> int:
    try:
        return struct.unpack("<I", struct.pack("<f", x))[0]
    except OverflowError:
        return 0x7F800000 if x > 0 else 0xFF800000


def u2f(u: int) -> float:
    return struct.unpack("<f", struct.pack("<I", u & M32))[0]


def s32(u: int) -> int:
    u &= M32
    return u - (1 << 32) if u & 0x80000000 else u


_PARSED: dict[str, tuple] = {}


def _parse_operand(text: str) -> tuple:
    """(True, register dict key) or (False, constant or None) for a 32-bit operand."""
    t = text.strip()
    m = _SREG.match(t)
    if m:
        return True, int(m.group(1))
    if t in _SPECIAL:
        return True, _SPECIAL[t]
    m = _VREG.match(t)
    if m:
        return True, VECTOR_KEY0 - (int(m.group(2)) + (AGPR_BASE if m.group(1) == "a" else 0))
    if t in _INLINE_FLOAT:
        return False, _INLINE_FLOAT[t]
    try:
        return False, int(t, 0) & M32
    except ValueError:
        return False, None


class State:
    """Registers of one wave: ``regs`` maps SGPR index / lane-0 vector key / SCC to an int
    (or ``None`` = unknown). 64-bit specials (vcc, exec) are two SGPRs as on hardware."""

    __slots__ = ("regs", "kernarg", "laned")

    def __init__(self, kernarg: bytes):
        self.regs: dict = {126: M32, 127: M32}
        self.kernarg = kernarg
        self.laned: set = set()  # vector keys with per-lane values (v_writelane), cleared on full writes

    # scalar operand read
    def read(self, text: str) -> Optional[int]:
        parsed = _PARSED.get(text)
        if parsed is None:
            parsed = _PARSED[text] = _parse_operand(text)
        is_reg, value = parsed
        return self.regs.get(value) if is_reg else value

    def read64(self, text: str) -> Optional[int]:
        t = text.strip()
        m = _SPAIR.match(t)
        if m:
            lo, hi = self.regs.get(int(m.group(1))), self.regs.get(int(m.group(1)) + 1)
            return None if lo is None or hi is None else lo | (hi << 32)
        if t in ("vcc", "exec"):
            base = 106 if t == "vcc" else 126
            lo, hi = self.regs.get(base), self.regs.get(base + 1)
            return None if lo is None or hi is None else lo | (hi << 32)
        v = self.read(t)
        if v is not None and v & 0x80000000 and re.fullmatch(r"-\d+", t):
            v |= M32 << 32
        return v

    def write(self, text: str, value: Optional[int]) -> None:
        t = text.strip()
        m = _SREG.match(t)
        if m:
            self.regs[int(m.group(1))] = None if value is None else value & M32
            return
        if t in _SPECIAL:
            self.regs[_SPECIAL[t]] = None if value is None else value & M32
            return
        m = _VREG.match(t)
        if m:
            key = int(m.group(2)) + (AGPR_BASE if m.group(1) == "a" else 0)
            self.regs[VECTOR_KEY0 - key] = None if value is None else value & M32

    def write64(self, text: str, value: Optional[int]) -> None:
        t = text.strip()
        m = _SPAIR.match(t)
        base = int(m.group(1)) if m else {"vcc": 106, "exec": 126}.get(t)
        if base is None:
            self.write(t, value)
            return
        self.regs[base] = None if value is None else value & M32
        self.regs[base + 1] = None if value is None else (value >> 32) & M32

    def set_vgpr(self, index: int, value: Optional[int]) -> None:
        self.regs[VECTOR_KEY0 - index] = value

    def forget_vector(self, keys) -> None:
        for key in keys:
            if key < SGPR_BASE:
                self.regs[VECTOR_KEY0 - key] = None
                if self.laned:
                    self.clear_lanes(VECTOR_KEY0 - key)
            else:
                self.regs[key - SGPR_BASE] = None

    def clear_lanes(self, key: int) -> None:
        if key in self.laned:
            self.laned.discard(key)
            for lane in range(1, 64):
                self.regs.pop(("lane", key, lane), None)


# -- SALU semantics (one table: the cycle model's scalar side and the emulator both execute it) ----
# SCC follows the CDNA4 ISA guide per opcode: carry/borrow for unsigned add/sub, signed overflow
# for s_add_i32/s_sub_i32, result != 0 for bitwise ops, shifts and bit-field extracts, the
# comparison for s_min/max; None = SCC unchanged.
M64 = 2**64 - 1


def s64(x: int) -> int:
    x &= M64
    return x - (1 << 64) if x >> 63 else x


def sext16(x: int) -> int:
    x &= 0xFFFF
    return x - 0x10000 if x >> 15 else x


def _bfe(x: int, ctl: int, width_bits: int, signed: bool) -> int:
    off, width = ctl & (width_bits - 1), (ctl >> 16) & 0x7F
    val = (x >> off) & ((1 << width) - 1)
    if signed and width and val >> (width - 1):
        val -= 1 << width
    return val


# name: (dwords of dst, dwords of sources, fn(a, b, scc) -> (result, scc or None))
SOP2 = {
    "s_add_u32": (1, 1, lambda a, b, c: ((a + b) & M32, int(a + b > M32))),
    "s_addc_u32": (1, 1, lambda a, b, c: ((a + b + c) & M32, int(a + b + c > M32))),
    "s_sub_u32": (1, 1, lambda a, b, c: ((a - b) & M32, int(b > a))),
    "s_subb_u32": (1, 1, lambda a, b, c: ((a - b - c) & M32, int(b + c > a))),
    "s_add_i32": (1, 1, lambda a, b, c: ((a + b) & M32,
                                         int(not -2**31 <= s32(a) + s32(b) < 2**31))),
    "s_sub_i32": (1, 1, lambda a, b, c: ((a - b) & M32,
                                         int(not -2**31 <= s32(a) - s32(b) < 2**31))),
    "s_mul_i32": (1, 1, lambda a, b, c: ((s32(a) * s32(b)) & M32, None)),
    "s_mul_hi_u32": (1, 1, lambda a, b, c: ((a * b) >> 32, None)),
    "s_mul_hi_i32": (1, 1, lambda a, b, c: (((s32(a) * s32(b)) >> 32) & M32, None)),
    "s_and_b32": (1, 1, lambda a, b, c: (a & b, int(a & b != 0))),
    "s_or_b32": (1, 1, lambda a, b, c: (a | b, int(a | b != 0))),
    "s_xor_b32": (1, 1, lambda a, b, c: (a ^ b, int(a ^ b != 0))),
    "s_andn2_b32": (1, 1, lambda a, b, c: (a & ~b & M32, int(a & ~b & M32 != 0))),
    "s_orn2_b32": (1, 1, lambda a, b, c: ((a | ~b) & M32, int((a | ~b) & M32 != 0))),
    "s_nand_b32": (1, 1, lambda a, b, c: (~(a & b) & M32, int(~(a & b) & M32 != 0))),
    "s_nor_b32": (1, 1, lambda a, b, c: (~(a | b) & M32, int(~(a | b) & M32 != 0))),
    "s_xnor_b32": (1, 1, lambda a, b, c: (~(a ^ b) & M32, int(~(a ^ b) & M32 != 0))),
    "s_and_b64": (2, 2, lambda a, b, c: (a & b, int(a & b != 0))),
    "s_or_b64": (2, 2, lambda a, b, c: (a | b, int(a | b != 0))),
    "s_xor_b64": (2, 2, lambda a, b, c: (a ^ b, int(a ^ b != 0))),
    "s_andn2_b64": (2, 2, lambda a, b, c: (a & ~b & M64, int(a & ~b & M64 != 0))),
    "s_orn2_b64": (2, 2, lambda a, b, c: ((a | ~b) & M64, int((a | ~b) & M64 != 0))),
    "s_lshl_b32": (1, 1, lambda a, b, c: ((a << (b & 31)) & M32, int((a << (b & 31)) & M32 != 0))),
    "s_lshr_b32": (1, 1, lambda a, b, c: (a >> (b & 31), int(a >> (b & 31) != 0))),
    "s_ashr_i32": (1, 1, lambda a, b, c: ((s32(a) >> (b & 31)) & M32, int(s32(a) >> (b & 31) != 0))),
    "s_lshl_b64": (2, (2, 1), lambda a, b, c: ((a << (b & 63)) & M64,
                                               int((a << (b & 63)) & M64 != 0))),
    "s_lshr_b64": (2, (2, 1), lambda a, b, c: (a >> (b & 63), int(a >> (b & 63) != 0))),
    "s_ashr_i64": (2, (2, 1), lambda a, b, c: ((s64(a) >> (b & 63)) & M64,
                                               int(s64(a) >> (b & 63) != 0))),
    # SCC: carry out of the whole 64-bit (S0 << n) + S1, shifted-out bits included (ISA pseudo-code
    # tmp = (64'U(S0.u32) << n) + 64'U(S1.u32); SCC = tmp >= 0x100000000)
    "s_lshl1_add_u32": (1, 1, lambda a, b, c: (((a << 1) + b) & M32, int((a << 1) + b > M32))),
    "s_lshl2_add_u32": (1, 1, lambda a, b, c: (((a << 2) + b) & M32, int((a << 2) + b > M32))),
    "s_lshl3_add_u32": (1, 1, lambda a, b, c: (((a << 3) + b) & M32, int((a << 3) + b > M32))),
    "s_lshl4_add_u32": (1, 1, lambda a, b, c: (((a << 4) + b) & M32, int((a << 4) + b > M32))),
    "s_min_i32": (1, 1, lambda a, b, c: (a if s32(a) < s32(b) else b, int(s32(a) < s32(b)))),
    "s_max_i32": (1, 1, lambda a, b, c: (a if s32(a) > s32(b) else b, int(s32(a) > s32(b)))),
    "s_min_u32": (1, 1, lambda a, b, c: (min(a, b), int(a < b))),
    "s_max_u32": (1, 1, lambda a, b, c: (max(a, b), int(a > b))),
    "s_cselect_b32": (1, 1, lambda a, b, c: (a if c else b, None)),
    "s_cselect_b64": (2, 2, lambda a, b, c: (a if c else b, None)),
    "s_bfe_u32": (1, 1, lambda a, b, c: (_bfe(a, b, 32, False), int(_bfe(a, b, 32, False) != 0))),
    "s_bfe_i32": (1, 1, lambda a, b, c: (_bfe(a, b, 32, True) & M32, int(_bfe(a, b, 32, True) != 0))),
    "s_bfm_b32": (1, 1, lambda a, b, c: ((((1 << (a & 31)) - 1) << (b & 31)) & M32, None)),
    "s_pack_ll_b32_b16": (1, 1, lambda a, b, c: ((a & 0xFFFF) | ((b & 0xFFFF) << 16), None)),
    "s_pack_lh_b32_b16": (1, 1, lambda a, b, c: ((a & 0xFFFF) | (b & 0xFFFF0000), None)),
    "s_pack_hh_b32_b16": (1, 1, lambda a, b, c: ((a >> 16) | (b & 0xFFFF0000), None)),
    "s_absdiff_i32": (1, 1, lambda a, b, c: (abs(s32(a) - s32(b)) & M32,
                                             int(abs(s32(a) - s32(b)) != 0))),
}

SOP1 = {
    "s_mov_b32": (1, 1, lambda a, c: (a, None)),
    "s_mov_b64": (2, 2, lambda a, c: (a, None)),
    "s_not_b32": (1, 1, lambda a, c: (~a & M32, int(~a & M32 != 0))),
    "s_not_b64": (2, 2, lambda a, c: (~a & M64, int(~a & M64 != 0))),
    "s_brev_b32": (1, 1, lambda a, c: (int(f"{a:032b}"[::-1], 2), None)),
    "s_bcnt1_i32_b32": (1, 1, lambda a, c: (bin(a).count("1"), int(a != 0))),
    "s_bcnt1_i32_b64": (1, 2, lambda a, c: (bin(a).count("1"), int(a != 0))),
    "s_ff1_i32_b32": (1, 1, lambda a, c: ((a & -a).bit_length() - 1 & M32 if a else M32, None)),
    "s_ff1_i32_b64": (1, 2, lambda a, c: ((a & -a).bit_length() - 1 & M32 if a else M32, None)),
    "s_flbit_i32_b32": (1, 1, lambda a, c: (32 - a.bit_length() if a else M32, None)),
    "s_abs_i32": (1, 1, lambda a, c: (abs(s32(a)) & M32, int(a != 0))),
    "s_sext_i32_i8": (1, 1, lambda a, c: (((a & 0xFF) ^ 0x80) - 0x80 & M32, None)),
    "s_sext_i32_i16": (1, 1, lambda a, c: (sext16(a) & M32, None)),
}


# -- SALU ----------------------------------------------------------------------------------------
def _u(v):
    return v


_READS_SCC = frozenset({"s_addc_u32", "s_subb_u32"})  # carry/borrow in
# SOPK: ``s_*k_i32 dst, simm16``: fn(dst's current value, sign-extended imm16, scc) -> (value, scc
# or None = unchanged); SCC of s_addk_i32 is signed overflow, as s_add_i32's.
SOPK = {
    "s_movk_i32": lambda cur, k, c: (k & M32, None),
    "s_cmovk_i32": lambda cur, k, c: ((k & M32) if c else cur, None),
    "s_addk_i32": lambda cur, k, c: ((cur + k) & M32, int(not -2**31 <= s32(cur) + k < 2**31)),
    "s_mulk_i32": lambda cur, k, c: ((s32(cur) * k) & M32, None),
}
# s_cmp* / s_cmpk* / v_cmp* relations (the condition of every scalar and vector integer compare)
SCMP = {"eq": lambda a, b: a == b, "lg": lambda a, b: a != b, "gt": lambda a, b: a > b,
         "ge": lambda a, b: a >= b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b}


def _exec_salu(op: str, ops: tuple[str, ...], st: State) -> bool:
    """Execute one SALU instruction; False if it is not modelled (its destination becomes unknown)."""
    regs = st.regs
    if op in ("s_cselect_b32", "s_cselect_b64"):  # only the picked source need be known
        scc = regs.get(SCC)
        pick = None if scc is None else (ops[1] if scc else ops[2])
        if op == "s_cselect_b32":
            st.write(ops[0], None if pick is None else st.read(pick))
        else:
            st.write64(ops[0], None if pick is None else st.read64(pick))
        return True
    table = SOP2 if op in SOP2 else SOP1 if op in SOP1 else None
    if table is not None:  # the shared semantics; unknown inputs give an unknown result
        ddw, sdw, fn = table[op]
        widths = sdw if isinstance(sdw, tuple) else (sdw,) * (2 if table is SOP2 else 1)
        args = [st.read(o) if w == 1 else st.read64(o) for o, w in zip(ops[1:], widths)]
        uses_scc = op in _READS_SCC
        write = st.write if ddw == 1 else st.write64
        if None in args or (uses_scc and regs.get(SCC) is None):
            write(ops[0], None)
            if fn(*(0 for _ in args), 0)[1] is not None:  # an op that writes SCC: now unknown
                regs[SCC] = None
            return True
        value, scc = fn(*args, regs.get(SCC) or 0)
        write(ops[0], value)
        if scc is not None:
            regs[SCC] = scc
        return True
    if op == "s_cmov_b32":
        if regs.get(SCC) is None:
            st.write(ops[0], None)
        elif regs[SCC]:
            st.write(ops[0], st.read(ops[1]))
        return True
    if op in SOPK:
        cur, k, scc = st.read(ops[0]), st.read(ops[1]), regs.get(SCC)
        needs_cur = op != "s_movk_i32" and not (op == "s_cmovk_i32" and scc)
        if k is None or (needs_cur and cur is None) or (op == "s_cmovk_i32" and scc is None):
            st.write(ops[0], None)
            if op == "s_addk_i32":
                regs[SCC] = None
            return True
        value, new_scc = SOPK[op](cur if cur is not None else 0, sext16(k), scc or 0)
        st.write(ops[0], value)
        if new_scc is not None:
            regs[SCC] = new_scc
        return True
    m = re.match(r"^s_cmpk?_(eq|lg|gt|ge|lt|le)_([iu])(32|64)$", op)
    if m:
        if m.group(3) == "64":
            a, b = st.read64(ops[0]), st.read64(ops[1])
        else:
            a, b = st.read(ops[0]), st.read(ops[1])
        if a is None or b is None:
            regs[SCC] = None
            return True
        if m.group(2) == "i" and m.group(3) == "32":
            a, b = s32(a), s32(b)
        regs[SCC] = int(SCMP[m.group(1)](a, b))
        return True
    if op in ("s_bitcmp1_b32", "s_bitcmp0_b32"):
        a, b = st.read(ops[0]), st.read(ops[1])
        regs[SCC] = None if a is None or b is None else int(((a >> (b & 31)) & 1) == (op == "s_bitcmp1_b32"))
        return True
    m = re.match(r"^s_(and|or|xor|andn2|orn2|nand|nor|xnor)_saveexec_b64$", op)
    if m:
        src, old = st.read64(ops[1]), st.read64("exec")
        st.write64(ops[0], old)
        entry = SOP2.get(f"s_{m.group(1)}_b64")
        value = None if src is None or old is None or entry is None else entry[2](src, old, 0)[0] & M64
        st.write64("exec", value)
        regs[SCC] = None if value is None else int(value != 0)
        return True
    if op == "s_getpc_b64":
        st.write64(ops[0], None)
        return True
    return False


# -- SMEM ----------------------------------------------------------------------------------------
_SLOAD = re.compile(r"^s_(?:buffer_)?load_dword(x(\d+))?$")


def _exec_smem(op: str, ops: tuple[str, ...], st: State) -> None:
    m = _SLOAD.match(op)
    if not m:
        return
    count = int(m.group(2) or 1)
    dst = ops[0]
    base = st.read64(ops[1])
    offset = st.read(ops[2]) if len(ops) > 2 else 0
    first = int(_SPAIR.match(dst).group(1)) if _SPAIR.match(dst) else int(_SREG.match(dst).group(1))
    for i in range(count):
        value = None
        if base is not None and offset is not None:
            addr = base + s32(offset) + 4 * i - KERNARG_BASE
            if 0 <= addr and addr + 4 <= len(st.kernarg):
                value = struct.unpack_from("<I", st.kernarg, addr)[0]
        st.regs[first + i] = value


# -- lane-0 VALU ---------------------------------------------------------------------------------
def _f(fn):
    """f32 op on bit patterns (computed in double, rounded once to f32 by f2u)."""
    return lambda *xs: f2u(fn(*[u2f(x) for x in xs]))


def _rcp(x):
    return float("inf") if x == 0 else 1.0 / x


_V = {  # base opcode -> (number of sources, function of the source values)
    "v_mov_b32": (1, _u),
    "v_lshrrev_b32": (2, lambda a, b: b >> (a & 31)),
    "v_lshlrev_b32": (2, lambda a, b: (b << (a & 31)) & M32),
    "v_ashrrev_i32": (2, lambda a, b: (s32(b) >> (a & 31)) & M32),
    "v_and_b32": (2, lambda a, b: a & b),
    "v_or_b32": (2, lambda a, b: a | b),
    "v_xor_b32": (2, lambda a, b: a ^ b),
    "v_add_u32": (2, lambda a, b: (a + b) & M32),
    "v_add_i32": (2, lambda a, b: (a + b) & M32),
    "v_sub_u32": (2, lambda a, b: (a - b) & M32),
    "v_sub_i32": (2, lambda a, b: (a - b) & M32),
    "v_subrev_u32": (2, lambda a, b: (b - a) & M32),
    "v_mul_lo_u32": (2, lambda a, b: (a * b) & M32),
    "v_mul_hi_u32": (2, lambda a, b: ((a * b) >> 32) & M32),
    "v_mul_u32_u24": (2, lambda a, b: ((a & 0xFFFFFF) * (b & 0xFFFFFF)) & M32),
    "v_mul_i32_i24": (2, lambda a, b: (_sx24(a) * _sx24(b)) & M32),
    "v_lshl_add_u32": (3, lambda a, b, c: ((a << (b & 31)) + c) & M32),
    "v_add_lshl_u32": (3, lambda a, b, c: ((a + b) << (c & 31)) & M32),
    "v_mad_u32_u24": (3, lambda a, b, c: ((a & 0xFFFFFF) * (b & 0xFFFFFF) + c) & M32),
    "v_cvt_f32_u32": (1, lambda a: f2u(float(a))),
    "v_cvt_f32_i32": (1, lambda a: f2u(float(s32(a)))),
    "v_cvt_u32_f32": (1, lambda a: max(0, min(M32, int(u2f(a)))) if u2f(a) == u2f(a) else 0),
    "v_cvt_i32_f32": (1, lambda a: int(u2f(a)) & M32 if u2f(a) == u2f(a) else 0),
    "v_rcp_iflag_f32": (1, _f(_rcp)),
    "v_rcp_f32": (1, _f(_rcp)),
    "v_mul_f32": (2, _f(lambda a, b: a * b)),
    "v_add_f32": (2, _f(lambda a, b: a + b)),
    "v_sub_f32": (2, _f(lambda a, b: a - b)),
    "v_fma_f32": (3, _f(lambda a, b, c: a * b + c)),
    "v_max_f32": (2, _f(max)),
    "v_min_f32": (2, _f(min)),
}


def _sx24(v: int) -> int:
    v &= 0xFFFFFF
    return v - (1 << 24) if v & 0x800000 else v


_VCMP = re.compile(r"^v_cmp_(eq|ne|lg|gt|ge|lt|le)_([iuf])32$")


def _exec_valu_lane0(base: str, ops: tuple[str, ...], st: State) -> bool:
    """Lane 0 of a uniform VALU op; False if not modelled (destination becomes unknown)."""
    if base == "v_readfirstlane_b32":
        st.write(ops[0], st.read(ops[1]))
        return True
    if base in ("v_writelane_b32", "v_readlane_b32"):
        lane = st.read(ops[2])
        vreg = ops[0] if base == "v_writelane_b32" else ops[1]
        is_reg, key = _parse_operand(vreg)
        if lane is None or not is_reg:
            st.write(ops[0], None)
            return True
        lane &= 63
        if base == "v_writelane_b32":  # SGPR spill slots: per-lane values of one VGPR
            value = st.read(ops[1])
            if lane == 0:
                st.regs[key] = value
            else:
                st.regs[("lane", key, lane)] = value
                st.laned.add(key)
        else:
            st.write(ops[0], st.regs.get(key) if lane == 0 else st.regs.get(("lane", key, lane)))
        return True
    if base in _V:
        n, fn = _V[base]
        srcs = [st.read(o.strip("|").lstrip("-")) for o in ops[1:1 + n]]
        if len(srcs) != n or any(s is None for s in srcs) or any(o.startswith(("-", "|")) for o in ops[1:1 + n]):
            st.write(ops[0], None)
            return True
        st.write(ops[0], fn(*srcs))
        return True
    if base == "v_cndmask_b32":
        a, b = st.read(ops[1]), st.read(ops[2])
        mask = st.read64(ops[3]) if len(ops) > 3 else st.read64("vcc")
        st.write(ops[0], None if None in (a, b, mask) else (b if mask & 1 else a))
        return True
    m = _VCMP.match(base)
    if m and len(ops) == 3:
        a, b = st.read(ops[1]), st.read(ops[2])
        if a is None or b is None:
            st.write64(ops[0], None)
            return True
        if m.group(2) == "i":
            a, b = s32(a), s32(b)
        elif m.group(2) == "f":
            a, b = u2f(a), u2f(b)
        cmp = {"ne": "lg"}.get(m.group(1), m.group(1))
        st.write64(ops[0], 0xFFFFFFFFFFFFFFFF if SCMP[cmp](a, b) else 0)
        return True
    return False


# -- dispatch --------------------------------------------------------------------------------------
# The cycle model executes the scalar side of every simulated instruction: the closures below are
# _exec_salu / State.forget_vector with the operand parsing and table lookups done once per
# instruction instead of once per execution (same results; _exec_salu stays the reference and
# serves every other case).
_SCMP32 = re.compile(r"^s_cmpk?_(eq|lg|gt|ge|lt|le)_([iu])32$")


def _fast_salu(op: str, ops: tuple[str, ...]) -> Optional[Callable[[State], None]]:
    """Executor of a 32-bit SOP1/SOP2 op or s_cmp*_32 whose destination is a register; None for
    anything else."""
    m = _SCMP32.match(op)
    if m and len(ops) == 2:
        relation, signed = SCMP[m.group(1)], m.group(2) == "i"
        (a_reg, a_key), (b_reg, b_key) = _parse_operand(ops[0]), _parse_operand(ops[1])

        def run_cmp(st: State) -> None:
            regs = st.regs
            a = regs.get(a_key) if a_reg else a_key
            b = regs.get(b_key) if b_reg else b_key
            if a is None or b is None:
                regs[SCC] = None
                return
            if signed:
                a, b = s32(a), s32(b)
            regs[SCC] = int(relation(a, b))
        return run_cmp
    table = SOP2 if op in SOP2 else SOP1 if op in SOP1 else None
    if table is None or op in ("s_cselect_b32", "s_cselect_b64"):
        return None
    ddw, sdw, fn = table[op]
    widths = sdw if isinstance(sdw, tuple) else (sdw,) * (2 if table is SOP2 else 1)
    if ddw != 1 or any(w != 1 for w in widths) or len(ops) != 1 + len(widths):
        return None
    is_reg, dst = _parse_operand(ops[0])
    if not is_reg:
        return None
    srcs = tuple(_parse_operand(o) for o in ops[1:])
    uses_scc = op in _READS_SCC

    def run_salu(st: State) -> None:
        regs = st.regs
        args = [regs.get(key) if reg else key for reg, key in srcs]
        if None in args or (uses_scc and regs.get(SCC) is None):
            regs[dst] = None
            if fn(*(0 for _ in args), 0)[1] is not None:  # an op that writes SCC: now unknown
                regs[SCC] = None
            return
        value, scc = fn(*args, regs.get(SCC) or 0)
        regs[dst] = value & M32
        if scc is not None:
            regs[SCC] = scc
    return run_salu


def _forgetter(keys: tuple[int, ...]) -> Callable[[State], None]:
    """``st.forget_vector(keys)`` with the register-dict keys worked out once."""
    unknown = dict.fromkeys(VECTOR_KEY0 - k if k < SGPR_BASE else k - SGPR_BASE for k in keys)
    vector = tuple(VECTOR_KEY0 - k for k in keys if k < SGPR_BASE)

    def forget(st: State) -> None:
        st.regs.update(unknown)
        if st.laned:
            for key in vector:
                st.clear_lanes(key)
    forget.forgets = tuple(unknown)  # what it does, for an analysis of a run of executors (the cycle model's replay)
    return forget


def _fast_valu(base: str, ops: tuple[str, ...]) -> Callable[[State], None]:
    """Lane-0 evaluator of a plain ``_V`` op with operands parsed once (the hot path)."""
    fn = _V[base][1]
    is_reg, dst = _parse_operand(ops[0])
    srcs = tuple(_parse_operand(o) for o in ops[1:])
    if not is_reg:
        raise ValueError(f"{base}: destination {ops[0]!r} is not a register")

    def run_v(st: State) -> None:
        regs = st.regs
        values = []
        for reg, key in srcs:
            value = regs.get(key) if reg else key
            if value is None:
                regs[dst] = None
                if st.laned:
                    st.clear_lanes(dst)
                return
            values.append(value)
        regs[dst] = fn(*values) & M32
        if st.laned:
            st.clear_lanes(dst)
    # what it does: dst becomes None (its lanes cleared) when a register source is None
    run_v.lane0 = (dst, tuple(key for reg, key in srcs if reg))
    return run_v


def executor(inst: Instruction) -> Optional[Callable[[State], None]]:
    """A function applying ``inst``'s functional effect to a wave's State (``None`` if it has
    none: MFMA, LDS, VMEM, waits, ...). Branches are decided by :func:`branch_taken`."""
    op, ops, unit = inst.opcode, inst.operands, inst.unit
    base = inst.base
    if unit == "SALU":
        fast = _fast_salu(op, ops)
        if fast is not None:
            return fast

        def run(st: State) -> None:
            if not _exec_salu(op, ops, st):
                st.forget_vector(inst.defs)
                st.regs[SCC] = None
        return run
    if unit == "SMEM":
        return lambda st: _exec_smem(op, ops, st)
    if unit in ("VALU", "TRANS"):
        if not (base in _V or base in ("v_readfirstlane_b32", "v_cndmask_b32", "v_writelane_b32", "v_readlane_b32")
                or _VCMP.match(base)):
            return _forgetter(inst.defs) if inst.defs else None

        if base in _V and len(ops) == _V[base][0] + 1 and not any(o.startswith(("-", "|")) for o in ops[1:]):
            return _fast_valu(base, ops)

        def run_v(st: State) -> None:
            if not _exec_valu_lane0(base, ops, st):
                st.forget_vector(inst.defs)
        return run_v
    if inst.defs and unit in ("MFMA", "LDS", "VMEM"):
        return _forgetter(inst.defs)
    return None


UNKNOWN_BRANCH_POLICIES = ("taken", "not-taken")


def condition(inst: Instruction, st: State) -> Optional[bool]:
    """Whether a branch jumps; ``None`` when its condition depends on an unknown value."""
    op = inst.opcode
    if op == "s_branch":
        return True
    cond = op.removeprefix("s_cbranch_")
    if cond in ("scc0", "scc1"):
        scc = st.regs.get(SCC)
        return None if scc is None else bool(scc) == (cond == "scc1")
    if cond in ("vccz", "vccnz", "execz", "execnz"):
        value = st.read64("vcc" if cond.startswith("vcc") else "exec")
        if value is None:
            return None
        return value != 0 if cond.endswith("nz") else value == 0
    raise ScalarUnknown(f"pc 0x{inst.pc:x}: branch {op!r} is not modelled")


def branch_taken(inst: Instruction, st: State, unknown: Optional[str] = None) -> bool:
    """Whether a branch instruction jumps. A condition on values the model does not compute
    (vector data, memory) is decided by the ``unknown`` policy (``"taken"``/``"not-taken"``);
    without one it raises :class:`ScalarUnknown`."""
    decided = condition(inst, st)
    if decided is not None:
        return decided
    if unknown is None:
        raise ScalarUnknown(f"pc 0x{inst.pc:x} {inst.text!r}: the branch condition is unknown (it depends on "
                            "memory or vector values the cycle model does not compute); choose a policy "
                            f"from {UNKNOWN_BRANCH_POLICIES}")
    if unknown not in UNKNOWN_BRANCH_POLICIES:
        raise ValueError(f"unknown-branch policy must be one of {UNKNOWN_BRANCH_POLICIES}, got {unknown!r}")
    return unknown == "taken"
