"""MFMA semantics: register layouts of A, B, C/D and the E8M0-scaled f8f6f4 variants.

Layouts (CDNA4 ISA guide, "Matrix fused multiply-add" register layout tables; lane ``l``,
``G = 64 / M`` lane groups, ``E`` elements per lane):
- A (M x K): lane ``l`` holds row ``i = l % M``; its elements ``e = 0..E-1`` are
  ``k = (l // M) * E + e`` (packed low element first in each VGPR).
- B (K x N): lane ``l`` holds column ``j = l % N`` with the same ``k`` mapping.
- C/D 32x32: VGPR ``r`` of lane ``l`` is ``D[8*(r//4) + 4*(l//32) + r%4, l % 32]``;
  16x16: VGPR ``r`` of lane ``l`` is ``D[4*(l//16) + r, l % 16]``.
- Scaled variants: lane ``l`` of the scale-A VGPR gives the E8M0 scale of row ``l % M`` for the
  32-element K block ``l // M`` (B: column ``l % N``); ``op_sel[i] + 2*op_sel_hi[i]`` picks the
  byte. ``cbsz``/``blgp`` select the A/B format: 0 e4m3, 1 e5m2, 2 e2m3, 3 e3m2, 4 e2m1.

Numerics: products of the narrow inputs are exact in float64; the K-sum and the addition of C
are done in float64 and rounded once to fp32. Hardware accumulates in fp32 in an internal order,
so results can differ in the last bits when terms cancel; tests state their tolerance.
EXEC is ignored (MFMAs run on all 64 lanes; our reading of the ISA guide, not validated by a
kernel that issues an MFMA under a partial EXEC).
"""

from __future__ import annotations

import re

import numpy as np

from zyfa.trace.emu import formats as F
from zyfa.trace.emu.errors import EmulationError
from zyfa.trace.emu.operands import parse_operand, read_u32
from zyfa.trace.emu.state import LANE, LANES
from zyfa.trace.emu.valu import _bits

_PATTERN = re.compile(r"^v_mfma_(scale_)?f32_(\d+)x(\d+)x(\d+)_(\w+)$")
_SIMPLE_TYPES = {"bf16": ("bf16", 16), "f16": ("f16", 16), "fp8_fp8": ("e4m3", 8),
                 "bf8_bf8": ("e5m2", 8), "fp8_bf8": ("e4m3/e5m2", 8), "bf8_fp8": ("e5m2/e4m3", 8),
                 "xf32": ("f32", 32), "f32": ("f32", 32)}


def _elements(regs: np.ndarray, bits: int) -> np.ndarray:
    """(nregs, 64) uint32 -> (64, nregs*32/bits) raw element codes, low element first."""
    raw = np.ascontiguousarray(regs.T)
    if bits == 32:
        return raw
    if bits == 16:
        return raw.view(np.uint16)
    if bits == 8:
        return raw.view(np.uint8)
    if bits == 4:
        b = raw.view(np.uint8)
        return np.stack([b & 0xF, b >> 4], axis=2).reshape(LANES, -1)
    if bits == 6:  # 6-bit elements packed back to back, little-endian
        words = raw.astype(np.uint64)
        total = np.zeros(LANES, dtype=object)
        for r in range(raw.shape[1]):
            total = total + (words[:, r].astype(object) << (32 * r))
        count = raw.shape[1] * 32 // 6
        return np.array([[(int(t) >> (6 * e)) & 0x3F for e in range(count)] for t in total])
    raise AssertionError(bits)


def _decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    if fmt == "bf16":
        return F.bf16_bits_to_f32(codes).astype(np.float64)
    if fmt == "f16":
        return codes.astype(np.uint16).view(np.float16).astype(np.float64)
    if fmt == "f32":
        return codes.astype(np.uint32).view(np.float32).astype(np.float64)
    table = {"e4m3": F.E4M3, "e5m2": F.E5M2, "e2m3": F.E2M3, "e3m2": F.E3M2, "e2m1": F.E2M1}[fmt]
    return F.decode(table, codes).astype(np.float64)


_F8F6F4 = {0: ("e4m3", 8), 1: ("e5m2", 8), 2: ("e2m3", 6), 3: ("e3m2", 6), 4: ("e2m1", 4)}


def _operand_matrix(regs, bits, fmt, rows, k, lanes_per_group):
    """A as (rows, K) or B^T as (cols, K) from the operand registers."""
    elems = _decode(_elements(regs, bits), fmt)  # (64, E)
    per_lane = elems.shape[1]
    groups = LANES // lanes_per_group
    if per_lane * groups != k:
        raise EmulationError(f"operand holds {per_lane} elements per lane, expected {k // groups}")
    # lane l = g * rows + i ; element e -> k = g * E + e
    mat = elems.reshape(groups, rows, per_lane).transpose(1, 0, 2)  # (rows, g, E)
    if bits == 8 and per_lane == 32:
        # 8-bit operands of the K=64/128 f8f6f4 shapes: two 16-element halves,
        # k = (e // 16) * 16 * groups + g * 16 + e % 16
        mat = mat.reshape(rows, groups, 2, 16).transpose(0, 2, 1, 3)
    return mat.reshape(rows, k)


def _c_index(m: int):
    """(nregs, 64) -> flat D index i * N + j for each (register, lane)."""
    regs = np.arange(m * m // LANES)[:, None]
    lane = LANE[None, :]
    if m == 32:
        i = 8 * (regs // 4) + 4 * (lane // 32) + regs % 4
        return i * 32 + lane % 32
    if m == 16:
        i = 4 * (lane // 16) + regs
        return i * 16 + lane % 16
    raise AssertionError(m)


_C_INDEX = {32: _c_index(32), 16: _c_index(16)}


def compile_mfma(inst):
    m = _PATTERN.match(inst.opcode)
    if not m:
        return None
    scaled, M, N, K, kind = bool(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)), \
        m.group(5)
    if M != N or M not in (16, 32):
        raise EmulationError(f"MFMA shape {M}x{N}x{K} not implemented: {inst.text}")
    ops = [parse_operand(o) for o in inst.operands]
    dst, a_op, b_op, c_op = ops[:4]
    if int(inst.mod("abid", "0"), 0) or (kind != "f8f6f4" and int(inst.mod("cbsz", "0"), 0)):
        raise EmulationError(f"MFMA broadcast (cbsz/abid) not implemented: {inst.text}")
    if kind == "f8f6f4":
        fa, bits_a = _F8F6F4[int(inst.mod("cbsz", "0"), 0)]
        fb, bits_b = _F8F6F4[int(inst.mod("blgp", "0"), 0)]
    elif kind in _SIMPLE_TYPES:
        fmt, bits = _SIMPLE_TYPES[kind]
        fa, fb = (fmt.split("/") * 2)[:2] if "/" in fmt else (fmt, fmt)
        bits_a = bits_b = bits
    else:
        raise EmulationError(f"MFMA input type {kind!r} not implemented: {inst.text}")
    nregs_a = K * M // LANES * bits_a // 32
    nregs_b = K * N // LANES * bits_b // 32
    nregs_d = M * N // LANES
    if scaled:
        sa_op, sb_op = ops[4], ops[5]
        opsel = _bits(inst.mod("op_sel"), 3, 0)
        opsel_hi = _bits(inst.mod("op_sel_hi"), 3, 0)  # llvm-mc: omitted = [0,0,0]
        byte_a, byte_b = opsel[0] + 2 * opsel_hi[0], opsel[1] + 2 * opsel_hi[1]
    cidx = _C_INDEX[M]

    def run(w, g):
        a_regs = np.stack([read_u32(w, a_op, r) for r in range(nregs_a)])
        b_regs = np.stack([read_u32(w, b_op, r) for r in range(nregs_b)])
        A = _operand_matrix(a_regs, bits_a, fa, M, K, M)
        Bt = _operand_matrix(b_regs, bits_b, fb, N, K, N)
        if scaled:
            blocks = K // 32
            sa = (read_u32(w, sa_op) >> np.uint32(8 * byte_a)) & np.uint32(0xFF)
            sb = (read_u32(w, sb_op) >> np.uint32(8 * byte_b)) & np.uint32(0xFF)
            sa = F.e8m0_to_f32(sa.reshape(blocks, M).T)  # (M, blocks)
            sb = F.e8m0_to_f32(sb.reshape(blocks, N).T)
            A = A * np.repeat(sa, 32, axis=1)
            Bt = Bt * np.repeat(sb, 32, axis=1)
        prod = A @ Bt.T  # (M, N) float64
        if c_op.kind == "k":
            c = np.full(nregs_d * LANES, np.float32(read_u32(w, c_op)[0].view(np.float32)),
                        np.float64)
            acc = prod.reshape(-1)[cidx] + c.reshape(cidx.shape)
        else:
            c = np.stack([read_u32(w, c_op, r) for r in range(nregs_d)]).view(np.float32)
            acc = prod.reshape(-1)[cidx] + c.astype(np.float64)
        out = acc.astype(np.float32).view(np.uint32)
        for r in range(nregs_d):
            w.v[dst.index + r] = out[r]
        return None

    return run

