"""Scalar ALU, scalar memory and program-flow semantics (SOP1/SOP2/SOPC/SOPK/SOPP/SMEM).

Scalar values are Python ints (uint32 per SGPR). SCC follows the CDNA4 ISA guide per opcode:
carry/borrow for unsigned add/sub, signed overflow for ``s_add_i32``/``s_sub_i32``, ``result
!= 0`` for bitwise ops and shifts, the comparison for ``s_cmp*`` and ``s_min/max``.
"""

from __future__ import annotations

import re

import numpy as np

from zyfa.gfx950.scalar import M64, SCMP, SOP1, SOP2, SOPK, s32, s64, sext16
from zyfa.trace.emu.errors import EmulationError
from zyfa.trace.emu.operands import parse_operand, scalar_u32, scalar_u64, write_scalar

M32 = 0xFFFFFFFF




def _conv(value: int, signed: bool, dwords: int) -> int:
    if not signed:
        return value
    return s32(value) if dwords == 1 else s64(value)


def compile_scalar(inst, labels: dict):
    """Returns fn(w, g) -> next instruction index (or None = fall through), or None if unknown."""
    op = inst.opcode
    operands = [o for o in inst.operands]
    if op in SOP2:
        ddw, sdw, fn = SOP2[op]
        sdw = sdw if isinstance(sdw, tuple) else (sdw, sdw)
        dst, a, b = (parse_operand(o) for o in operands)
        ra = scalar_u64 if sdw[0] == 2 else scalar_u32
        rb = scalar_u64 if sdw[1] == 2 else scalar_u32

        def run(w, g):
            res, scc = fn(ra(w, a), rb(w, b), w.scc)
            write_scalar(w, dst, res, ddw)
            if scc is not None:
                w.scc = scc
        return run
    if op in SOP1:
        ddw, sdw, fn = SOP1[op]
        dst, a = (parse_operand(o) for o in operands)
        ra = scalar_u64 if sdw == 2 else scalar_u32

        def run(w, g):
            res, scc = fn(ra(w, a), w.scc)
            write_scalar(w, dst, res, ddw)
            if scc is not None:
                w.scc = scc
        return run
    m = re.match(r"^s_(and|or|xor|andn2|orn2|nand|nor|xnor)_saveexec_b64$", op)
    if m:
        return _saveexec(m.group(1), *(parse_operand(o) for o in operands))
    m = re.match(r"^s_cmpk?_(eq|lg|gt|ge|lt|le)_(i32|u32|u64)$", op)
    if m:
        cmp, signed, dwords = SCMP[m.group(1)], m.group(2)[0] == "i", 2 if m.group(2) == "u64" else 1
        a, b = (parse_operand(o) for o in operands)
        imm16 = op.startswith("s_cmpk")

        def run(w, g):
            x = scalar_u64(w, a) if dwords == 2 else scalar_u32(w, a)
            y = b.value & 0xFFFF if imm16 else (scalar_u64(w, b) if dwords == 2 else scalar_u32(w, b))
            if imm16 and signed:
                y = sext16(y)
            w.scc = int(cmp(_conv(x, signed, dwords), y if imm16 else _conv(y, signed, dwords)))
        return run
    if op in SOPK:
        dst, k = (parse_operand(o) for o in operands)
        imm, fn = sext16(k.value), SOPK[op]

        def run(w, g):
            w.s[dst.index], scc = fn(w.s[dst.index], imm, w.scc)
            if scc is not None:
                w.scc = scc
        return run
    if op == "s_cmov_b32" or op == "s_cmov_b64":
        dst, a = (parse_operand(o) for o in operands)
        dw = 2 if op.endswith("64") else 1

        def run(w, g):
            if w.scc:
                write_scalar(w, dst, scalar_u64(w, a) if dw == 2 else scalar_u32(w, a), dw)
        return run
    m = re.match(r"^s_bitcmp([01])_b(32|64)$", op)
    if m:
        want, width = int(m.group(1)), int(m.group(2))
        a, b = (parse_operand(o) for o in operands)

        def run(w, g):
            x = scalar_u64(w, a) if width == 64 else scalar_u32(w, a)
            w.scc = int((x >> (scalar_u32(w, b) & (width - 1)) & 1) == want)
        return run
    m = re.match(r"^s_(load|buffer_load)_dword(x(\d+))?$", op)
    if m:
        return _smem_load(inst, m.group(1) == "buffer_load", int(m.group(3) or 1))
    return _compile_flow(inst, labels)


def _saveexec(kind, dst, src):
    fns = {"and": lambda s, e: s & e, "or": lambda s, e: s | e, "xor": lambda s, e: s ^ e,
           "andn2": lambda s, e: s & ~e, "orn2": lambda s, e: s | ~e,
           "nand": lambda s, e: ~(s & e), "nor": lambda s, e: ~(s | e),
           "xnor": lambda s, e: ~(s ^ e)}
    fn = fns[kind]

    def run(w, g):
        old = w.exec
        new = fn(scalar_u64(w, src), old) & M64
        w.set_s64(dst.index, old)
        w.exec = new
        w.scc = int(new != 0)
    return run


def _smem_load(inst, buffered: bool, dwords: int):
    dst, base, off = (parse_operand(o) for o in inst.operands[:3])
    extra = int(inst.mod("offset", "0"), 0)

    def run(w, g):
        if buffered:
            addr = w.s[base.index] | ((w.s[base.index + 1] & 0xFFFF) << 32)
        else:
            addr = w.get_s64(base.index)
        offset = (scalar_u32(w, off) + extra) & ~3
        raw = g.memory.get(addr + offset, 4 * dwords).view(np.uint32)
        for i in range(dwords):
            w.s[dst.index + i] = int(raw[i])
    return run


_NOPS = {"s_nop", "s_setprio", "s_sleep", "s_dcache_wb", "s_dcache_inv",
         "s_icache_inv", "s_sched_barrier", "s_sched_group_barrier", "s_set_vgpr_msb",
         "s_waitcnt_vscnt", "s_ttracedata", "s_setreg_imm32_b32", "s_setreg_b32"}
_BRANCH = {"s_branch": lambda w: True, "s_cbranch_scc0": lambda w: w.scc == 0,
           "s_cbranch_scc1": lambda w: w.scc == 1,
           "s_cbranch_vccz": lambda w: w.get_s64(106) == 0,
           "s_cbranch_vccnz": lambda w: w.get_s64(106) != 0,
           "s_cbranch_execz": lambda w: w.exec == 0,
           "s_cbranch_execnz": lambda w: w.exec != 0}

ENDPGM = -1
BARRIER = -2


def _compile_flow(inst, labels):
    op = inst.opcode
    if op in _NOPS:
        return lambda w, g: None
    if op == "s_endpgm":
        def run(w, g):
            w.wait_vm(0)
            return ENDPGM
        return run
    if op == "s_waitcnt":
        vmcnt = int(inst.mod("vmcnt", "-1"))
        if vmcnt < 0:
            return lambda w, g: None
        return lambda w, g: w.wait_vm(vmcnt)
    if op == "s_barrier":
        return lambda w, g: BARRIER
    if op in _BRANCH:
        target = inst.operands[0] if inst.operands else ""
        if target not in labels:
            raise EmulationError(f"branch target {target!r} is not a label (instruction "
                                 f"{inst.index}, line {inst.line}: {inst.text})")
        dest, cond = labels[target], _BRANCH[op]
        return lambda w, g: dest if cond(w) else None
    if op in ("s_memtime", "s_memrealtime"):
        dst = parse_operand(inst.operands[0])

        def run(w, g):
            write_scalar(w, dst, w.executed, 2)
        return run
    return None
