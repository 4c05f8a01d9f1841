"""Vector ALU semantics (VOP1/VOP2/VOP3/VOP3P/VOPC, SDWA and DPP forms), vectorised over lanes.

Each table row maps a base opcode (encoding suffix ``_e32``/``_e64``/``_sdwa``/``_dpp``
stripped) to (source count, source type, function). fp32 arithmetic is IEEE with denormals
(the ``.amdhsa_float_denorm_mode_32 3`` every kernel here sets); ``v_fma_f32``/``v_fmac_f32``
round once (:func:`formats.fma_f32`). Transcendentals: see ``_TRANS_NOTE``.
"""

from __future__ import annotations

import re

import numpy as np

from zyfa.trace.emu import formats as F
from zyfa.trace.emu.errors import EmulationError
from zyfa.trace.emu.operands import (Operand, parse_operand, read_f32, read_f64, read_lanemask,
                                     read_u32, read_u64, write_u32, write_u64)
from zyfa.trace.emu.state import LANE, LANES, Wave, int_to_mask, mask_to_int

_TRANS_NOTE = ("v_exp_f32, v_log_f32, v_rcp_f32, v_rsq_f32, v_sqrt_f32 are emulated correctly "
               "rounded (float64 evaluation, one rounding to fp32); the CDNA4 ISA guide specifies "
               "1 ULP for them, so emulated and hardware results may differ by at most 1 ULP.")

U32 = np.uint32
M32 = np.uint64(0xFFFFFFFF)


def _i32(x):
    return x.view(np.int32)


def _u(x):
    return np.asarray(x).astype(np.int64).astype(np.uint32)


def _shift(x):
    return (x & U32(31)).astype(np.uint32)


def _trans(fn):
    def run(x):
        with np.errstate(all="ignore"):
            return fn(x.astype(np.float64)).astype(np.float32)
    return run


def _cvt_f32_int(x, signed):
    """Float -> int conversion: truncate toward zero, saturate, NaN -> 0 (V_CVT_I32/U32_F32)."""
    x64 = np.nan_to_num(x.astype(np.float64), nan=0.0)
    if signed:
        return np.clip(np.trunc(x64), -2**31, 2**31 - 1).astype(np.int64).astype(np.uint32)
    return np.clip(np.trunc(x64), 0, 2**32 - 1).astype(np.uint64).astype(np.uint32)


def _perm(s0, s1, sel):
    combined = (s0.astype(np.uint64) << np.uint64(32)) | s1.astype(np.uint64)
    out = np.zeros(LANES, dtype=np.uint64)
    for byte in range(4):
        sb = ((sel >> U32(8 * byte)) & U32(0xFF)).astype(np.uint64)
        picked = (combined >> (np.minimum(sb, 7) * np.uint64(8))) & np.uint64(0xFF)
        sign_src = (combined >> (((sb - np.uint64(8)) * np.uint64(2) + np.uint64(1)) % np.uint64(8)
                                 * np.uint64(8) + np.uint64(7))) & np.uint64(1)
        val = np.where(sb < 8, picked, np.where(sb < 12, sign_src * np.uint64(0xFF),
                                                np.where(sb == 12, 0, 0xFF)))
        out |= val.astype(np.uint64) << np.uint64(8 * byte)
    return out.astype(np.uint32)


def _bfe(x, off, width, signed):
    off = (off & U32(31)).astype(np.int64)
    width = (width & U32(31)).astype(np.int64)
    val = (x.astype(np.int64) >> off) & ((np.int64(1) << width) - 1)
    if signed:
        sign = (val >> np.maximum(width - 1, 0)) & 1
        val = np.where((width > 0) & (sign == 1), val - (np.int64(1) << width), val)
    return np.where(width == 0, 0, val).astype(np.int64).astype(np.uint32)


def _bitop3_table(table: int, a, b, c):
    out = np.zeros_like(a)
    for bit in range(8):
        if table >> bit & 1:
            ta = a if bit & 4 else ~a
            tb = b if bit & 2 else ~b
            tc = c if bit & 1 else ~c
            out |= ta & tb & tc
    return out


def _med3(a, b, c):
    return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


def _mbcnt(mask32, base, hi):
    bits = ((mask32[:, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(np.int64)
    lane = LANE - 32 if hi else LANE
    below = np.clip(lane, 0, 32)
    cum = np.concatenate([np.zeros((LANES, 1), np.int64), np.cumsum(bits, axis=1)], axis=1)
    return (base.astype(np.int64) + cum[LANE, below]).astype(np.uint32)


# (nsrc, source type, fn). Types: f = fp32 (neg/abs applied), u = uint32 bits, d = uint64,
# g = float64. fp32 results are float32 arrays, integer results uint32/uint64 arrays.
VALU_OPS = {
    # fp32 arithmetic
    "v_add_f32": (2, "f", lambda a, b: a + b),
    "v_sub_f32": (2, "f", lambda a, b: a - b),
    "v_subrev_f32": (2, "f", lambda a, b: b - a),
    "v_mul_f32": (2, "f", lambda a, b: a * b),
    "v_fma_f32": (3, "f", F.fma_f32),
    "v_max_f32": (2, "f", np.fmax),
    "v_min_f32": (2, "f", np.fmin),
    "v_max3_f32": (3, "f", lambda a, b, c: np.fmax(np.fmax(a, b), c)),
    "v_min3_f32": (3, "f", lambda a, b, c: np.fmin(np.fmin(a, b), c)),
    # gfx950 IEEE 754-2019 maximum/minimum of three: a NaN operand gives NaN (max3/min3 drop it)
    "v_maximum3_f32": (3, "f", lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_minimum3_f32": (3, "f", lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_med3_f32": (3, "f", _med3),
    "v_exp_f32": (1, "f", _trans(np.exp2)),
    "v_log_f32": (1, "f", _trans(np.log2)),
    "v_rcp_f32": (1, "f", _trans(lambda x: 1.0 / x)),
    "v_rcp_iflag_f32": (1, "f", _trans(lambda x: 1.0 / x)),
    "v_rsq_f32": (1, "f", _trans(lambda x: 1.0 / np.sqrt(x))),
    "v_sqrt_f32": (1, "f", _trans(np.sqrt)),
    "v_floor_f32": (1, "f", np.floor),
    "v_ceil_f32": (1, "f", np.ceil),
    "v_trunc_f32": (1, "f", np.trunc),
    "v_rndne_f32": (1, "f", np.rint),
    "v_fract_f32": (1, "f", lambda a: np.minimum(a - np.floor(a), np.float32(0.99999994))),
    "v_ldexp_f32": (2, "fu", lambda a, e: np.ldexp(a, np.clip(_i32(e), -400, 400)).astype(np.float32)),
    "v_cvt_f32_i32": (1, "u", lambda a: _i32(a).astype(np.float32)),
    "v_cvt_f32_u32": (1, "u", lambda a: a.astype(np.float32)),
    "v_cvt_i32_f32": (1, "f", lambda a: _cvt_f32_int(a, True)),
    "v_cvt_u32_f32": (1, "f", lambda a: _cvt_f32_int(a, False)),
    "v_cvt_pk_bf16_f32": (2, "f", lambda a, b: F.f32_to_bf16_bits(a).astype(np.uint32)
                          | (F.f32_to_bf16_bits(b).astype(np.uint32) << U32(16))),
    "v_cvt_f32_bf16": (1, "u", lambda a: F.bf16_bits_to_f32(a & U32(0xFFFF))),
    "v_cvt_f32_f16": (1, "u", lambda a: (a & U32(0xFFFF)).astype(np.uint16).view(np.float16)
                      .astype(np.float32)),
    # fp64 (address arithmetic is integer; these are rare)
    "v_add_f64": (2, "g", lambda a, b: a + b),
    "v_mul_f64": (2, "g", lambda a, b: a * b),
    # integer
    "v_add_u32": (2, "u", lambda a, b: a + b),
    "v_sub_u32": (2, "u", lambda a, b: a - b),
    "v_add_i32": (2, "u", lambda a, b: a + b),
    "v_sub_i32": (2, "u", lambda a, b: a - b),
    "v_subrev_u32": (2, "u", lambda a, b: b - a),
    "v_mul_lo_u32": (2, "u", lambda a, b: a * b),
    "v_mul_hi_u32": (2, "u", lambda a, b: ((a.astype(np.uint64) * b.astype(np.uint64))
                                           >> np.uint64(32)).astype(np.uint32)),
    "v_mul_hi_i32": (2, "u", lambda a, b: _u((_i32(a).astype(np.int64) * _i32(b)) >> 32)),
    "v_mul_u32_u24": (2, "u", lambda a, b: (a & U32(0xFFFFFF)) * (b & U32(0xFFFFFF))),
    "v_mul_i32_i24": (2, "u", lambda a, b: _u(((_i32(a) << 8) >> 8).astype(np.int64)
                                              * ((_i32(b) << 8) >> 8))),
    "v_mad_u32_u24": (3, "u", lambda a, b, c: (a & U32(0xFFFFFF)) * (b & U32(0xFFFFFF)) + c),
    "v_lshlrev_b32": (2, "u", lambda s, a: a << _shift(s)),
    "v_lshrrev_b32": (2, "u", lambda s, a: a >> _shift(s)),
    "v_ashrrev_i32": (2, "u", lambda s, a: (_i32(a) >> _shift(s).astype(np.int32)).view(np.uint32)),
    "v_lshlrev_b16": (2, "u", lambda s, a: ((a & U32(0xFFFF)) << (s & U32(15))) & U32(0xFFFF)),
    "v_lshrrev_b16": (2, "u", lambda s, a: (a & U32(0xFFFF)) >> (s & U32(15))),
    "v_and_b32": (2, "u", lambda a, b: a & b),
    "v_or_b32": (2, "u", lambda a, b: a | b),
    "v_xor_b32": (2, "u", lambda a, b: a ^ b),
    "v_not_b32": (1, "u", lambda a: ~a),
    "v_bfrev_b32": (1, "u", lambda a: np.array([int(f"{int(x):032b}"[::-1], 2) for x in a],
                                                dtype=np.uint32)),
    "v_and_or_b32": (3, "u", lambda a, b, c: (a & b) | c),
    "v_or3_b32": (3, "u", lambda a, b, c: a | b | c),
    "v_xad_u32": (3, "u", lambda a, b, c: (a ^ b) + c),
    "v_add3_u32": (3, "u", lambda a, b, c: a + b + c),
    "v_lshl_add_u32": (3, "u", lambda a, s, c: (a << _shift(s)) + c),
    "v_add_lshl_u32": (3, "u", lambda a, b, s: (a + b) << _shift(s)),
    "v_lshl_or_b32": (3, "u", lambda a, s, c: (a << _shift(s)) | c),
    "v_bfe_u32": (3, "u", lambda a, o, w: _bfe(a, o, w, False)),
    "v_bfe_i32": (3, "u", lambda a, o, w: _bfe(a, o, w, True)),
    "v_bfi_b32": (3, "u", lambda a, b, c: (a & b) | (~a & c)),
    "v_ffbl_b32": (1, "u", lambda a: np.where(a == 0, U32(0xFFFFFFFF),  # index of the lowest set bit, -1 for 0
                                              np.log2((a & (~a + U32(1))).astype(np.float64)).astype(np.uint32))),
    "v_bfm_b32": (2, "u", lambda w, o: (((np.uint64(1) << (w & U32(31)).astype(np.uint64))
                                        - np.uint64(1)) << (o & U32(31)).astype(np.uint64))
                  .astype(np.uint32)),
    "v_perm_b32": (3, "u", _perm),
    "v_alignbit_b32": (3, "u", lambda a, b, s: (((a.astype(np.uint64) << np.uint64(32)) | b)
                                                >> (s & U32(31)).astype(np.uint64)).astype(np.uint32)),
    "v_alignbyte_b32": (3, "u", lambda a, b, s: (((a.astype(np.uint64) << np.uint64(32)) | b)
                                                 >> ((s & U32(3)) * U32(8)).astype(np.uint64))
                        .astype(np.uint32)),
    "v_max_i32": (2, "u", lambda a, b: np.maximum(_i32(a), _i32(b)).view(np.uint32)),
    "v_min_i32": (2, "u", lambda a, b: np.minimum(_i32(a), _i32(b)).view(np.uint32)),
    "v_max_u32": (2, "u", np.maximum),
    "v_min_u32": (2, "u", np.minimum),
    "v_max3_i32": (3, "u", lambda a, b, c: np.maximum(np.maximum(_i32(a), _i32(b)), _i32(c))
                   .view(np.uint32)),
    "v_min3_i32": (3, "u", lambda a, b, c: np.minimum(np.minimum(_i32(a), _i32(b)), _i32(c))
                   .view(np.uint32)),
    "v_max3_u32": (3, "u", lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_min3_u32": (3, "u", lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_med3_i32": (3, "u", lambda a, b, c: _med3(_i32(a), _i32(b), _i32(c)).view(np.uint32)),
    "v_med3_u32": (3, "u", _med3),
    "v_mov_b32": (1, "u", lambda a: a),
    "v_bcnt_u32_b32": (2, "u", lambda a, b: np.array([bin(int(x)).count("1") for x in a],
                                                     dtype=np.uint32) + b),
    "v_mbcnt_lo_u32_b32": (2, "u", lambda m, b: _mbcnt(m, b, False)),
    "v_mbcnt_hi_u32_b32": (2, "u", lambda m, b: _mbcnt(m, b, True)),
    "v_cvt_pk_u16_u32": (2, "u", lambda a, b: (a & U32(0xFFFF)) | (b << U32(16))),
    "v_pack_b32_f16": (2, "u", lambda a, b: (a & U32(0xFFFF)) | (b << U32(16))),
    # 64-bit integer
    "v_lshlrev_b64": (2, "ud", lambda s, a: a << (s & U32(63)).astype(np.uint64)),
    "v_lshrrev_b64": (2, "ud", lambda s, a: a >> (s & U32(63)).astype(np.uint64)),
    "v_ashrrev_i64": (2, "ud", lambda s, a: (a.view(np.int64) >> (s & U32(63)).astype(np.int64))
                      .view(np.uint64)),
    "v_lshl_add_u64": (3, "dud", lambda a, s, c: (a << (s & U32(7)).astype(np.uint64)) + c),
    "v_mov_b64": (1, "d", lambda a: a),
}

_CMP = {"f": lambda a, b: np.zeros(a.shape, bool), "t": lambda a, b: np.ones(a.shape, bool),
        "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater,
        "lg": lambda a, b: (a < b) | (a > b), "ne": np.not_equal, "ge": np.greater_equal,
        "o": lambda a, b: ~(np.isnan(a) | np.isnan(b)), "u": lambda a, b: np.isnan(a) | np.isnan(b),
        "nge": lambda a, b: ~(a >= b), "nlg": lambda a, b: ~((a < b) | (a > b)),
        "ngt": lambda a, b: ~(a > b), "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b),
        "nlt": lambda a, b: ~(a < b)}

_SDWA_SEL = {"BYTE_0": (0, 8), "BYTE_1": (8, 8), "BYTE_2": (16, 8), "BYTE_3": (24, 8),
             "WORD_0": (0, 16), "WORD_1": (16, 16), "DWORD": (0, 32)}


def split_opcode(opcode: str) -> tuple[str, str]:
    for suffix in ("_e32", "_e64", "_sdwa", "_dpp"):
        if opcode.endswith(suffix):
            return opcode[: -len(suffix)], suffix[1:]
    return opcode, ""


def _read_typed(w: Wave, op: Operand, kind: str):
    if kind == "f":
        return read_f32(w, op)
    if kind == "u":
        return read_u32(w, op)
    if kind == "d":
        return read_u64(w, op)
    if kind == "g":
        return read_f64(w, op)
    raise AssertionError(kind)


def _dpp_source(inst):
    """Lane index each lane reads src0 from under DPP, -1 where the read is invalid."""
    lanes = LANE.copy()
    row = lanes // 16 * 16
    pos = lanes % 16
    src = lanes
    qp = inst.mod("quad_perm")
    if qp:
        perm = [int(x) for x in qp.strip("[]").split(",")]
        src = lanes // 4 * 4 + np.array(perm)[lanes % 4]
    for key, fn in (("row_shl", lambda n: np.where(pos + n < 16, lanes + n, -1)),
                    ("row_shr", lambda n: np.where(pos - n >= 0, lanes - n, -1)),
                    ("row_ror", lambda n: row + (pos - n) % 16),
                    ("wave_shl", lambda n: np.where(lanes + 1 < 64, lanes + 1, -1)),
                    ("wave_shr", lambda n: np.where(lanes - 1 >= 0, lanes - 1, -1)),
                    ("wave_rol", lambda n: (lanes + 1) % 64),
                    ("wave_ror", lambda n: (lanes - 1) % 64)):
        value = inst.mod(key)
        if value is not None:
            src = fn(int(value, 0))
    if inst.mod("row_mirror") is not None:
        src = row + 15 - pos
    if inst.mod("row_half_mirror") is not None:
        src = lanes // 8 * 8 + 7 - lanes % 8
    bcast = inst.mod("row_bcast")
    if bcast == "15":  # lane 15 of each row feeds the next row
        src = np.where(row > 0, row - 1, -1)
    elif bcast == "31":  # lane 31 feeds rows 2 and 3
        src = np.where(lanes >= 32, 31, -1)
    row_mask = int(inst.mod("row_mask", "0xf"), 0)
    bank_mask = int(inst.mod("bank_mask", "0xf"), 0)
    enabled = ((row_mask >> (lanes // 16)) & 1).astype(bool) & \
              ((bank_mask >> (lanes % 4)) & 1).astype(bool)
    return src, enabled, inst.mod("bound_ctrl") is not None


def compile_valu(inst, base: str, enc: str):
    """Returns fn(w, g) for a VALU instruction, or None if ``base`` is not a VALU opcode here."""
    ops = [parse_operand(o) for o in inst.operands]
    if base in VALU_OPS:
        return _compile_table_op(inst, base, enc, ops)
    m = re.match(r"^v_cmpx?_(\w+?)_([fiu])(16|32|64)$", base)
    if m and m.group(1) in _CMP:
        return _compile_cmp(inst, base, ops, m)
    m = re.match(r"^v_cmpx?_class_f32$", base)
    if m:
        return _compile_cmp_class(inst, base, ops)
    handler = _SPECIAL.get(base)
    if handler is not None:
        return handler(inst, ops)
    return None


def _compile_table_op(inst, base, enc, ops):
    nsrc, types, fn = VALU_OPS[base]
    dst, srcs = ops[0], ops[1: 1 + nsrc]
    if len(srcs) != nsrc:
        raise EmulationError(f"{base} expects {nsrc} sources, got {inst.operands}")
    types = (types * nsrc)[:nsrc] if len(types) == 1 else types
    if base == "v_lshl_add_u64":
        types = "dud"
    wide_out = base in ("v_lshlrev_b64", "v_lshrrev_b64", "v_ashrrev_i64", "v_lshl_add_u64",
                        "v_mov_b64") or types == "g" * nsrc
    omod = {"mul:2": 2.0, "mul:4": 4.0, "div:2": 0.5}
    scale = next((v for k, v in omod.items() if inst.mod(k.split(":")[0]) == k.split(":")[1]), None)
    clamp = inst.mod("clamp") is not None
    sdwa = enc == "sdwa"
    dpp = _dpp_source(inst) if enc == "dpp" else None
    sels = [_SDWA_SEL[inst.mod(f"src{i}_sel", "DWORD")] for i in range(nsrc)] if sdwa else None
    dst_sel = _SDWA_SEL[inst.mod("dst_sel", "DWORD")] if sdwa else None
    preserve = inst.mod("dst_unused") == "UNUSED_PRESERVE"

    def run(w: Wave, g):
        mask = w.exec_mask
        args = []
        for i, (op, t) in enumerate(zip(srcs, types)):
            if sdwa and t == "u":
                shift, width = sels[i]
                raw = read_u32(w, op)
                x = (raw >> U32(shift)) & U32((1 << width) - 1) if width < 32 else raw
            elif dpp is not None and i == 0:
                src, enabled, bound0 = dpp
                raw = _read_typed(w, op, t)
                x = np.where(src >= 0, raw[np.clip(src, 0, 63)], 0).astype(raw.dtype)
                if not bound0:
                    mask = mask & (src >= 0)
                mask = mask & enabled
            else:
                x = _read_typed(w, op, t)
            args.append(x)
        with np.errstate(all="ignore"):
            res = np.asarray(fn(*args))
            if res.dtype == np.float32:  # fp32 result: output modifiers, then raw bits
                if scale is not None:
                    res = (res * np.float32(scale)).astype(np.float32)
                if clamp:
                    res = np.clip(res, np.float32(0.0), np.float32(1.0))
                res = res.view(np.uint32)
        if wide_out:
            if types == "g" * nsrc:
                res = np.asarray(res, dtype=np.float64).view(np.uint64)
            write_u64(w, dst, res, mask)
            return None
        res = np.asarray(res).astype(np.uint32, copy=False)
        if sdwa and dst_sel != (0, 32):
            shift, width = dst_sel
            field = (res & U32((1 << width) - 1)) << U32(shift)
            keep = w.v[dst.index] & ~U32(((1 << width) - 1) << shift) if preserve else U32(0)
            res = field | keep
        write_u32(w, dst, res, mask)
        return None

    return run


def _compile_cmp(inst, base, ops, m):
    op_name, t, bits = m.group(1), m.group(2), int(m.group(3))
    if len(ops) == 2:  # VOPC e32 written without vcc
        ops = [parse_operand("vcc")] + ops
    sdst, a, b = ops[0], ops[1], ops[2]
    cmpx = base.startswith("v_cmpx")
    fn = _CMP[op_name]

    def read(w, op):
        if t == "f":
            return read_f32(w, op) if bits == 32 else read_f64(w, op)
        if bits == 64:
            x = read_u64(w, op)
            return x.view(np.int64) if t == "i" else x
        x = read_u32(w, op)
        if bits == 16:
            x = x & U32(0xFFFF)
            return x.astype(np.int16 if t == "i" else np.uint16).astype(np.int32)
        return _i32(x) if t == "i" else x

    def run(w: Wave, g):
        with np.errstate(invalid="ignore"):
            res = fn(read(w, a), read(w, b)) & w.exec_mask
        value = mask_to_int(res)
        if sdst.kind == "s":
            w.set_s64(sdst.index, value)
        if cmpx:
            w.exec = value
        return None

    return run


def _compile_cmp_class(inst, base, ops):
    if len(ops) == 2:
        ops = [parse_operand("vcc")] + ops
    sdst, a, b = ops

    def run(w: Wave, g):
        x = read_f32(w, a)
        cls = read_u32(w, b)
        bits = x.view(np.uint32)
        neg = np.signbit(x)
        quiet = (bits & U32(0x400000)) != 0
        tests = [np.isnan(x) & ~quiet, np.isnan(x) & quiet, np.isneginf(x),
                 neg & np.isfinite(x) & (np.abs(x) >= np.float32(2**-126)),
                 neg & (x != 0) & (np.abs(x) < np.float32(2**-126)), neg & (x == 0),
                 ~neg & (x == 0), ~neg & (x != 0) & (np.abs(x) < np.float32(2**-126)),
                 ~neg & np.isfinite(x) & (x >= np.float32(2**-126)), np.isposinf(x)]
        res = np.zeros(LANES, bool)
        for i, t in enumerate(tests):
            res |= t & (((cls >> U32(i)) & U32(1)) == 1)
        value = mask_to_int(res & w.exec_mask)
        w.set_s64(sdst.index, value)
        if base.startswith("v_cmpx"):
            w.exec = value
        return None

    return run


# -- instructions whose operand layout is not (dst, srcs...) ----
def _cndmask(inst, ops):
    dst, a, b = ops[:3]
    sel = ops[3] if len(ops) > 3 else parse_operand("vcc")
    sdwa = inst.opcode.endswith("_sdwa")
    if sdwa:
        raise EmulationError(f"v_cndmask_b32_sdwa is not implemented: {inst.text}")

    modified = a.neg or a.abs or b.neg or b.abs

    def run(w, g):
        choose = int_to_mask(read_lanemask(w, sel))
        if modified:  # float neg/abs source modifiers
            res = np.where(choose, read_f32(w, b), read_f32(w, a)).astype(np.float32)
            res = res.view(np.uint32)
        else:
            res = np.where(choose, read_u32(w, b), read_u32(w, a))
        write_u32(w, dst, res, w.exec_mask)
        return None
    return run


def _carry_op(kind):
    def build(inst, ops):
        dst, cdst, a, b = ops[:4]
        cin = ops[4] if len(ops) > 4 else None

        def run(w, g):
            x = read_u32(w, a).astype(np.int64)
            y = read_u32(w, b).astype(np.int64)
            c = int_to_mask(read_lanemask(w, cin)).astype(np.int64) if cin is not None else 0
            if kind == "add":
                full = x + y + c
                carry = full > 0xFFFFFFFF
            elif kind == "sub":
                full = x - y - c
                carry = full < 0
            else:  # subrev
                full = y - x - c
                carry = full < 0
            mask = w.exec_mask
            write_u32(w, dst, (full & 0xFFFFFFFF).astype(np.uint32), mask)
            w.set_s64(cdst.index, mask_to_int(carry & mask))
            return None
        return run
    return build


def _mad_u64_u32(inst, ops, signed=False):
    dst, cdst, a, b, c = ops

    def run(w, g):
        x = read_u32(w, a)
        y = read_u32(w, b)
        z = read_u64(w, c)
        if signed:
            prod = (_i32(x).astype(np.int64) * _i32(y).astype(np.int64)).view(np.uint64)
        else:
            prod = x.astype(np.uint64) * y.astype(np.uint64)
        res = prod + z
        write_u64(w, dst, res, w.exec_mask)
        w.set_s64(cdst.index, mask_to_int((res < z) & w.exec_mask))
        return None
    return run


def _pk_f32(fn, nsrc):
    def build(inst, ops):
        dst, srcs = ops[0], ops[1: 1 + nsrc]
        opsel = _bits(inst.mod("op_sel"), nsrc, 0)
        opsel_hi = _bits(inst.mod("op_sel_hi"), nsrc, 1)
        neg_lo = _bits(inst.mod("neg_lo"), nsrc, 0)
        neg_hi = _bits(inst.mod("neg_hi"), nsrc, 0)

        def half(w, op, which, negate):
            if op.kind == "k":
                x = read_u32(w, op).view(np.float32)
            else:
                x = read_u32(w, op, which).view(np.float32)
            return -x if negate else x

        def run(w, g):
            lo = [half(w, op, opsel[i], neg_lo[i]) for i, op in enumerate(srcs)]
            hi = [half(w, op, opsel_hi[i], neg_hi[i]) for i, op in enumerate(srcs)]
            mask = w.exec_mask
            with np.errstate(all="ignore"):
                rlo = np.asarray(fn(*lo), dtype=np.float32)
                rhi = np.asarray(fn(*hi), dtype=np.float32)
            write_u32(w, dst, rlo.view(np.uint32), mask, 0)
            write_u32(w, dst, rhi.view(np.uint32), mask, 1)
            return None
        return run
    return build


def _bits(text, n, default):
    if text is None:
        return [default] * n
    vals = [int(x) for x in text.strip("[]").split(",")]
    return (vals + [default] * n)[:n]


def _pk_mov(inst, ops):
    dst, a, b = ops
    opsel = _bits(inst.mod("op_sel"), 2, 0)

    def run(w, g):
        mask = w.exec_mask
        lo = read_u32(w, a, opsel[0]).copy()
        hi = read_u32(w, b, opsel[1]).copy()
        write_u32(w, dst, lo, mask, 0)
        write_u32(w, dst, hi, mask, 1)
        return None
    return run


def _bitop3(inst, ops):
    dst, a, b, c = ops
    table = int(inst.mod("bitop3", "0"), 0)
    width16 = inst.opcode.startswith("v_bitop3_b16")

    def run(w, g):
        res = _bitop3_table(table, read_u32(w, a), read_u32(w, b), read_u32(w, c))
        if width16:
            res = (w.v[dst.index] & U32(0xFFFF0000)) | (res & U32(0xFFFF))
        write_u32(w, dst, res, w.exec_mask)
        return None
    return run


def _cvt_pk_fp8(table, max_finite):
    def build(inst, ops):
        dst, a, b = ops
        opsel = inst.mod("op_sel")  # llvm-mc prints [src0, src1, dst]: dst picks the word
        hi_word = opsel is not None and int(opsel.strip("[]").split(",")[-1]) == 1
        saturate = inst.mod("clamp") is not None

        def run(w, g):
            lo = F.f32_to_fp8(read_f32(w, a), table, max_finite, saturate).astype(np.uint32)
            hi = F.f32_to_fp8(read_f32(w, b), table, max_finite, saturate).astype(np.uint32)
            word = lo | (hi << U32(8))
            old = w.v[dst.index]
            res = (old & U32(0xFFFF)) | (word << U32(16)) if hi_word else \
                (old & U32(0xFFFF0000)) | word
            write_u32(w, dst, res, w.exec_mask)
            return None
        return run
    return build


def _cvt_f32_fp8(table, packed):
    def build(inst, ops):
        dst, a = ops[:2]
        sel = inst.mod("src0_sel")
        if sel is not None:
            byte = _SDWA_SEL[sel][0] // 8
        else:
            opsel = _bits(inst.mod("op_sel"), 2, 0)
            byte = (opsel[0] * 2 + opsel[1]) if not packed else opsel[0] * 2

        def run(w, g):
            raw = read_u32(w, a).copy()  # a view of the register: the first write may overwrite it (v[2:3] <- v2)
            mask = w.exec_mask
            if packed:
                for i in range(2):
                    code = (raw >> U32(8 * (byte + i))) & U32(0xFF)
                    write_u32(w, dst, F.decode(table, code).view(np.uint32), mask, i)
            else:
                code = (raw >> U32(8 * byte)) & U32(0xFF)
                write_u32(w, dst, F.decode(table, code).view(np.uint32), mask)
            return None
        return run
    return build


def _readfirstlane(inst, ops):
    dst, src = ops

    def run(w, g):
        mask = w.exec_mask
        lane = int(np.argmax(mask)) if mask.any() else 0
        w.s[dst.index] = int(read_u32(w, src)[lane])
        return None
    return run


def _readlane(inst, ops):
    dst, src, lane_op = ops

    def run(w, g):
        lane = (read_u32(w, lane_op)[0]) & 63
        w.s[dst.index] = int(read_u32(w, src)[lane])
        return None
    return run


def _writelane(inst, ops):
    dst, src, lane_op = ops

    def run(w, g):
        lane = int(read_u32(w, lane_op)[0]) & 63
        w.v[dst.index, lane] = read_u32(w, src)[0]
        return None
    return run


def _permlane_swap(half):
    def build(inst, ops):
        vdst, vsrc = ops

        def run(w, g):
            a = w.v[vdst.index].copy()
            b = w.v[vsrc.index].copy()
            mask = w.exec_mask
            if half == 32:
                new_a = np.concatenate([a[:32], b[:32]])
                new_b = np.concatenate([a[32:], b[32:]])
            else:  # permlane16: swap odd rows of vdst with even rows of vsrc
                ra, rb = a.reshape(4, 16).copy(), b.reshape(4, 16).copy()
                ra[[1, 3]], rb[[0, 2]] = b.reshape(4, 16)[[0, 2]], a.reshape(4, 16)[[1, 3]]
                new_a, new_b = ra.reshape(-1), rb.reshape(-1)
            write_u32(w, vdst, new_a, mask)
            write_u32(w, vsrc, new_b, mask)
            return None
        return run
    return build


def _swap(inst, ops):
    a, b = ops

    def run(w, g):
        x, y = w.v[a.index].copy(), w.v[b.index].copy()
        mask = w.exec_mask
        write_u32(w, a, y, mask)
        write_u32(w, b, x, mask)
        return None
    return run


def _accvgpr_move(inst, ops):
    dst, src = ops

    def run(w, g):
        write_u32(w, dst, read_u32(w, src).copy(), w.exec_mask)
        return None
    return run


def _div_scale(inst, ops):
    """V_DIV_SCALE_F32: pre-scaling step of IEEE division. Emulated as the identity with VCC=0,
    exact for operands whose quotient and reciprocal stay in the normal range (the hardware only
    rescales near the exponent limits)."""
    dst, sdst, a, b, c = ops

    def run(w, g):
        write_u32(w, dst, read_f32(w, a).view(np.uint32), w.exec_mask)
        w.set_s64(sdst.index, 0)
        return None
    return run


def _div_fmas(inst, ops):
    """V_DIV_FMAS_F32: fma; the VCC-controlled 2^64 post-scale never applies because
    :func:`_div_scale` leaves VCC clear."""
    dst, a, b, c = ops

    def run(w, g):
        res = F.fma_f32(read_f32(w, a), read_f32(w, b), read_f32(w, c))
        write_u32(w, dst, res.view(np.uint32), w.exec_mask)
        return None
    return run


def _div_fixup(inst, ops):
    """V_DIV_FIXUP_F32 d, q, den, num: special cases (0, inf, NaN) of num/den, else q."""
    dst, q, den, num = ops

    def run(w, g):
        qv, dv, nv = read_f32(w, q), read_f32(w, den), read_f32(w, num)
        with np.errstate(all="ignore"):
            exact = (nv.astype(np.float64) / dv.astype(np.float64)).astype(np.float32)
        special = ~np.isfinite(qv) | (dv == 0) | ~np.isfinite(dv) | ~np.isfinite(nv) | (nv == 0)
        res = np.where(special, exact, qv).astype(np.float32)
        write_u32(w, dst, res.view(np.uint32), w.exec_mask)
        return None
    return run


def _fmac(inst, ops):
    dst, a, b = ops[:3]

    def run(w, g):
        res = F.fma_f32(read_f32(w, a), read_f32(w, b), w.v[dst.index].view(np.float32))
        write_u32(w, dst, res.view(np.uint32), w.exec_mask)
        return None
    return run


def _fmamk(inst, ops, order):
    dst, a, b, k = ops

    def run(w, g):
        x, y, z = read_f32(w, a), read_f32(w, b), read_f32(w, k)
        res = F.fma_f32(x, z, y) if order == "mk" else F.fma_f32(x, y, z)
        write_u32(w, dst, res.view(np.uint32), w.exec_mask)
        return None
    return run


_SPECIAL = {
    "v_cndmask_b32": _cndmask,
    "v_add_co_u32": _carry_op("add"), "v_addc_co_u32": _carry_op("add"),
    "v_sub_co_u32": _carry_op("sub"), "v_subb_co_u32": _carry_op("sub"),
    "v_subrev_co_u32": _carry_op("subrev"), "v_subbrev_co_u32": _carry_op("subrev"),
    "v_mad_u64_u32": _mad_u64_u32,
    "v_mad_i64_i32": lambda inst, ops: _mad_u64_u32(inst, ops, signed=True),
    "v_pk_fma_f32": _pk_f32(F.fma_f32, 3),
    "v_pk_mul_f32": _pk_f32(lambda a, b: a * b, 2),
    "v_pk_add_f32": _pk_f32(lambda a, b: a + b, 2),
    "v_pk_mov_b32": _pk_mov,
    "v_bitop3_b32": _bitop3, "v_bitop3_b16": _bitop3,
    "v_cvt_pk_fp8_f32": _cvt_pk_fp8(F.E4M3, 448.0),
    "v_cvt_pk_bf8_f32": _cvt_pk_fp8(F.E5M2, 57344.0),
    "v_cvt_f32_fp8": _cvt_f32_fp8(F.E4M3, False),
    "v_cvt_f32_bf8": _cvt_f32_fp8(F.E5M2, False),
    "v_cvt_pk_f32_fp8": _cvt_f32_fp8(F.E4M3, True),
    "v_cvt_pk_f32_bf8": _cvt_f32_fp8(F.E5M2, True),
    "v_readfirstlane_b32": _readfirstlane,
    "v_readlane_b32": _readlane,
    "v_writelane_b32": _writelane,
    "v_permlane32_swap_b32": _permlane_swap(32),
    "v_permlane16_swap_b32": _permlane_swap(16),
    "v_swap_b32": _swap,
    "v_accvgpr_read_b32": _accvgpr_move, "v_accvgpr_write_b32": _accvgpr_move,
    "v_accvgpr_mov_b32": _accvgpr_move,
    "v_div_scale_f32": _div_scale,
    "v_div_fmas_f32": _div_fmas,
    "v_div_fixup_f32": _div_fixup,
    "v_fmac_f32": _fmac, "v_mac_f32": _fmac,
    "v_nop": lambda inst, ops: (lambda w, g: None),
    "v_fmamk_f32": lambda inst, ops: _fmamk(inst, ops, "mk"),
    "v_fmaak_f32": lambda inst, ops: _fmamk(inst, ops, "ak"),
}
