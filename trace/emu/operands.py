"""Operand decoding: an operand string becomes a reader/writer pair bound once per instruction.

Registers ``v7``, ``v[0:3]``, ``a[0:15]``, ``s4``, ``s[0:1]``, ``vcc``, ``exec``, ``m0``,
``scc``; inline constants (integers -16..64, the floats 0.5, 1.0, 2.0, 4.0, their negatives and
1/(2*pi)); 32-bit literals; ``-x``, ``|x|``, ``-|x|``, ``neg(x)``/``abs(x)`` float modifiers.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

import numpy as np

from zyfa.trace.emu.errors import EmulationError
from zyfa.trace.emu.state import AGPR_BASE, EXEC, LANES, M0, VCC, Wave

_INLINE_FLOATS = {"0.5": 0.5, "1.0": 1.0, "2.0": 2.0, "4.0": 4.0, "0.15915494": 0.15915494309189535}
_NAMED = {"vcc": (VCC, 2), "vcc_lo": (VCC, 1), "vcc_hi": (VCC + 1, 1), "exec": (EXEC, 2),
          "exec_lo": (EXEC, 1), "exec_hi": (EXEC + 1, 1), "m0": (M0, 1),
          "flat_scratch": (102, 2), "flat_scratch_lo": (102, 1), "flat_scratch_hi": (103, 1),
          "xnack_mask": (104, 2)}


@dataclass(frozen=True)
class Operand:
    """kind: 'v' (VGPR/AGPR row), 's' (SGPR index), 'k' (constant), 'scc', 'off'."""

    kind: str
    index: int = 0
    count: int = 1
    value: int = 0  # 'k': 32-bit pattern (int constants sign-extended to 64 bits in value64)
    value64: int = 0  # 'k': 64-bit pattern used by 64-bit operations
    neg: bool = False
    abs: bool = False
    text: str = ""


def _float_bits(x: float) -> tuple[int, int]:
    return (struct.unpack("<I", struct.pack("<f", x))[0], struct.unpack("<Q", struct.pack("<d", x))[0])


def parse_operand(text: str) -> Operand:
    raw = text
    t = text.strip()
    neg = absm = False
    m = re.match(r"^neg\((.*)\)$", t)
    if m:
        neg, t = True, m.group(1)
    if t.startswith("-") and (t[1:2] in "|vsa" or t[1:4] in ("abs", "vcc")):
        neg, t = not neg, t[1:]
    m = re.match(r"^\|(.*)\|$", t) or re.match(r"^abs\((.*)\)$", t)
    if m:
        absm, t = True, m.group(1)
    m = re.match(r"^([vsa])(\d+)$", t) or re.match(r"^([vsa])\[(\d+)(?::(\d+))?\]$", t)
    if m:
        lo = int(m.group(2))
        hi = int(m.group(3)) if m.lastindex and m.lastindex >= 3 and m.group(3) else lo
        kind = m.group(1)
        if kind == "a":
            return Operand("v", AGPR_BASE + lo, hi - lo + 1, neg=neg, abs=absm, text=raw)
        return Operand(kind, lo, hi - lo + 1, neg=neg, abs=absm, text=raw)
    if t in _NAMED:
        index, count = _NAMED[t]
        return Operand("s", index, count, neg=neg, abs=absm, text=raw)
    if t == "scc":
        return Operand("scc", text=raw)
    if t == "off":
        return Operand("off", text=raw)
    m = re.match(r"^(-?)(0x[0-9a-fA-F]+|\d+)$", t)
    if m:
        value = int(m.group(2), 0) * (-1 if m.group(1) else 1)
        if value < -(1 << 31) or value >= (1 << 32):
            raise EmulationError(f"constant {raw!r} does not fit in 32 bits")
        signed64 = value if not (m.group(2).startswith("0x") and value >= 1 << 31) else value
        return Operand("k", value=value & 0xFFFFFFFF, value64=signed64 & (2**64 - 1),
                       neg=neg, abs=absm, text=raw)
    m = re.match(r"^(-?)(\d+\.\d+(?:[eE][-+]?\d+)?)$", t)
    if m:
        x = float(m.group(2)) * (-1.0 if m.group(1) else 1.0)
        if m.group(2) in _INLINE_FLOATS:
            x = _INLINE_FLOATS[m.group(2)] * (-1.0 if m.group(1) else 1.0)
        b32, b64 = _float_bits(x)
        return Operand("k", value=b32, value64=b64, neg=neg, abs=absm, text=raw)
    raise EmulationError(f"unknown operand {raw!r}")


# -- readers ----
def read_u32(w: Wave, op: Operand, offset: int = 0) -> np.ndarray:
    """32-bit value per lane (register ``offset`` dwords into the operand), raw bits."""
    if op.kind == "v":
        return w.v[op.index + offset]
    if op.kind == "s":
        return np.full(LANES, w.s[op.index + offset], dtype=np.uint32)
    if op.kind == "k":
        value = op.value if offset == 0 else (op.value64 >> 32 if offset == 1 else 0)
        return np.full(LANES, value & 0xFFFFFFFF, dtype=np.uint32)
    if op.kind == "scc":
        return np.full(LANES, w.scc, dtype=np.uint32)
    raise EmulationError(f"operand {op.text!r} cannot be read as a 32-bit value")


def read_u64(w: Wave, op: Operand) -> np.ndarray:
    if op.kind == "k":
        return np.full(LANES, op.value64, dtype=np.uint64)
    lo = read_u32(w, op, 0).astype(np.uint64)
    hi = read_u32(w, op, 1).astype(np.uint64)
    return lo | (hi << np.uint64(32))


def read_f32(w: Wave, op: Operand, offset: int = 0) -> np.ndarray:
    x = read_u32(w, op, offset).view(np.float32)
    if op.abs:
        x = np.abs(x)
    if op.neg:
        x = -x
    return x


def read_f64(w: Wave, op: Operand) -> np.ndarray:
    if op.kind == "k":
        x = np.full(LANES, op.value64, dtype=np.uint64).view(np.float64)
    else:
        x = read_u64(w, op).view(np.float64)
    if op.abs:
        x = np.abs(x)
    if op.neg:
        x = -x
    return x


def read_lanemask(w: Wave, op: Operand) -> int:
    if op.kind == "s":
        return w.get_s64(op.index) if op.count >= 2 or op.index in (VCC, EXEC) else w.s[op.index]
    if op.kind == "k":
        return op.value64
    raise EmulationError(f"operand {op.text!r} is not a lane mask")


def scalar_u32(w: Wave, op: Operand) -> int:
    if op.kind == "s":
        return w.s[op.index]
    if op.kind == "k":
        return op.value
    if op.kind == "scc":
        return w.scc
    raise EmulationError(f"operand {op.text!r} is not a scalar source")


def scalar_u64(w: Wave, op: Operand) -> int:
    if op.kind == "s":
        return w.get_s64(op.index)
    if op.kind == "k":
        return op.value64
    raise EmulationError(f"operand {op.text!r} is not a 64-bit scalar source")


# -- writers ----
def write_u32(w: Wave, op: Operand, values: np.ndarray, mask: np.ndarray, offset: int = 0) -> None:
    if op.kind != "v":
        raise EmulationError(f"VALU destination {op.text!r} must be a VGPR/AGPR")
    np.copyto(w.v[op.index + offset], np.asarray(values).astype(np.uint32, copy=False),
              where=mask)


def write_u64(w: Wave, op: Operand, values: np.ndarray, mask: np.ndarray) -> None:
    values = np.asarray(values, dtype=np.uint64)
    write_u32(w, op, (values & np.uint64(0xFFFFFFFF)).astype(np.uint32), mask, 0)
    write_u32(w, op, (values >> np.uint64(32)).astype(np.uint32), mask, 1)


def write_scalar(w: Wave, op: Operand, value: int, dwords: int = 1) -> None:
    if op.kind != "s":
        raise EmulationError(f"scalar destination {op.text!r} must be an SGPR")
    for i in range(dwords):
        w.s[op.index + i] = (value >> (32 * i)) & 0xFFFFFFFF
