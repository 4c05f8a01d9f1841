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

Sparse MFMA (``v_smfmac_f32_16x16x128_{fp8,bf8}_{fp8,bf8}``, gfx950; AITER v4's row sum):
``D = A B + D`` with A 16 x 128 2:4 structured-sparse, stored compressed (16 values per lane),
the third source the compression index (``vdst`` is also the accumulator). A lane's compressed
element ``c`` stands for its logical element ``e = 4 * (c // 2) + idx(c)``, ``idx(c)`` = bits
``[2c+1:2c]`` of the lane's index VGPR (AMD's matrix instruction calculator,
ROCm/amd_matrix_instruction_calculator, for CDNA3's ``v_smfmac_f32_16x16x64_fp8_fp8``: two
2-bit positions per group of four); on gfx950 the 8-bit shapes use all 32 index bits and have
no index-set selection (LLVM PR #193541 "Correct gfx950 smfmac sparse index verifier", from the
CDNA4 ISA's layout tables), so ``cbsz``/``abid`` other than 0 are refused. Logical element ``e``
of lane ``l`` is ``A[l % 16][32 * (l // 16) + e]``: contiguous, as CDNA3's table has it with 16
per lane, unlike the dense f8f6f4 two-halves rule; B has the dense 16x16x128 layout. The
contiguous rule is what AITER v4's row sum needs to be a row sum: its A (1.0 in compressed
elements 0-7 of rows with ``i & 4 == 0``, 8-15 otherwise; positions 0-1 or 2-3) must pick, for
output lanes ``j`` and ``j + 16``, exactly the keys of B's lanes ``{j, j + 32}`` and
``{j + 16, j + 48}``; with the two-halves rule the output is 30-50% off the reference (measured).
The other sparse shapes are not implemented (no kernel here uses them).
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
_SPARSE = re.compile(r"^v_smfmac_f32_16x16x128_(fp8|bf8)_(fp8|bf8)$")
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



def compile_smfmac(inst):
    """Semantics of ``v_smfmac_f32_16x16x128_*`` (module docstring)."""
    m = _SPARSE.match(inst.opcode)
    if not m:
        if inst.opcode.startswith("v_smfmac"):
            raise EmulationError(f"sparse MFMA {inst.opcode} not implemented (only the gfx950 8-bit "
                                 f"16x16x128 shapes): {inst.text}")
        return None
    M, K = 16, 128
    fa, fb = ({"fp8": "e4m3", "bf8": "e5m2"}[t] for t in (m.group(1), m.group(2)))
    if int(inst.mod("abid", "0"), 0) or int(inst.mod("cbsz", "0"), 0):
        raise EmulationError(f"sparse MFMA index-set selection (cbsz/abid) does not exist for gfx950's 8-bit "
                             f"shapes (LLVM PR #193541): {inst.text}")
    dst, a_op, b_op, idx_op = (parse_operand(o) for o in inst.operands[:4])
    per_lane = K * M // LANES  # 32 logical A elements per lane, 16 of them stored
    group_start = np.arange(per_lane // 2) // 2 * 4  # first logical element of compressed element c's group
    shifts = (2 * np.arange(per_lane // 2)).astype(np.uint32)
    lanes = np.broadcast_to(np.arange(LANES)[:, None], (LANES, per_lane // 2))
    cidx = _C_INDEX[M]

    def run(w, g):
        a_regs = np.stack([read_u32(w, a_op, r) for r in range(4)])
        b_regs = np.stack([read_u32(w, b_op, r) for r in range(8)])
        index = read_u32(w, idx_op)
        pos = group_start[None, :] + ((index[:, None] >> shifts[None, :]) & np.uint32(3)).astype(np.int64)
        logical = np.zeros((LANES, per_lane), np.float64)
        np.add.at(logical, (lanes, pos), _decode(_elements(a_regs, 8), fa))  # a repeated position adds
        A = logical.reshape(LANES // M, M, per_lane).transpose(1, 0, 2).reshape(M, K)  # k = 32 * (l // 16) + e
        Bt = _operand_matrix(b_regs, 8, fb, M, K, M)
        c = np.stack([w.v[dst.index + r] for r in range(M * M // LANES)]).view(np.float32)
        out = ((A @ Bt.T).reshape(-1)[cidx] + c.astype(np.float64)).astype(np.float32).view(np.uint32)
        for r in range(out.shape[0]):
            w.v[dst.index + r] = out[r]
        return None

    return run
