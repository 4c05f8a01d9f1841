"""Functional scalar side: SALU/SMEM results, lane-0 VALU feeding v_readfirstlane, SGPR spills."""

import struct

import pytest

from zyfa.gfx950 import scalar
from zyfa.gfx950.isa import parse_asm


def run(body: str, kernarg: bytes = b"") -> scalar.State:
    program = parse_asm(f"k:\n{body}\n", encode=False)
    st = scalar.State(kernarg)
    st.regs[0], st.regs[1] = scalar.KERNARG_BASE & scalar.M32, scalar.KERNARG_BASE >> 32
    for inst in program.instructions:
        fn = scalar.executor(inst)
        if fn is not None:
            fn(st)
    return st


def test_salu_and_kernel_arguments():
    st = run("""
 s_load_dwordx2 s[4:5], s[0:1], 0x4
 s_sub_i32 s6, s4, s5
 s_abs_i32 s7, s6
 s_bfe_i32 s8, 0xf0, 0x40004
 s_lshl_b64 s[10:11], s[4:5], 4
 s_cmp_lt_i32 s6, 0
 s_cselect_b32 s12, 1, 2
 s_addk_i32 s7, 0xfffe
""", kernarg=struct.pack("<III", 99, 5, 12))
    assert (st.regs[4], st.regs[5]) == (5, 12)
    assert scalar.s32(st.regs[6]) == -7 and st.regs[7] == 7 - 2
    assert scalar.s32(st.regs[8]) == -1  # bits 4..7 of 0xf0 = 0b1111, sign-extended from 4 bits
    assert st.regs[10] | st.regs[11] << 32 == (5 | 12 << 32) << 4
    assert st.regs[12] == 1


def test_lane0_division_like_aiter_and_readfirstlane():
    # AITER computes s60 / s61 with v_rcp_iflag_f32 and corrections, then v_readfirstlane
    st = run("""
 s_mov_b32 s60, 63
 s_mov_b32 s61, 8
 v_cvt_f32_u32 v12, s61
 s_sub_i32 s40, 0, s61
 v_rcp_iflag_f32 v12, v12
 v_mul_f32 v12, 0x4f7ffffe, v12
 v_cvt_u32_f32 v12, v12
 v_mul_lo_u32 v13, s40, v12
 v_mul_hi_u32 v13, v12, v13
 v_add_u32 v12, v12, v13
 v_mul_hi_u32 v12, s60, v12
 v_mul_lo_u32 v13, v12, s61
 v_sub_u32 v15, s60, v13
 v_add_u32 v14, 1, v12
 v_cmp_le_u32 vcc, s61, v15
 v_subrev_u32 v13, s61, v15
 v_cndmask_b32 v12, v12, v14, vcc
 v_cndmask_b32 v15, v15, v13, vcc
 v_add_u32 v13, 1, v12
 v_cmp_le_u32 vcc, s61, v15
 v_cndmask_b32 v15, v12, v13, vcc
 v_readfirstlane_b32 s62, v15
""")
    assert st.regs[62] == 63 // 8


def test_sgpr_spill_lanes_and_unknown_vectors():
    st = run("""
 s_mov_b32 s4, 17
 s_mov_b32 s5, 23
 v_writelane_b32 v255, s4, 0
 v_writelane_b32 v255, s5, 6
 v_readlane_b32 s6, v255, 6
 v_readlane_b32 s7, v255, 0
 v_mfma_f32_32x32x16_bf16 v[0:15], v[16:19], v[20:23], v[0:15]
 v_readfirstlane_b32 s8, v3
""")
    assert (st.regs[6], st.regs[7]) == (23, 17)
    assert st.regs[8] is None  # MFMA results are timed, not computed
    st = run(" v_writelane_b32 v9, s4, 6\n v_mov_b32 v9, 0\n v_readlane_b32 s6, v9, 6")
    assert st.regs[6] is None  # a full write of the VGPR drops stale spill lanes


def test_branch_policy_validation():
    inst = parse_asm("k:\n s_cbranch_scc1 k\n", encode=False).instructions[0]
    st = scalar.State(b"")
    assert scalar.condition(inst, st) is None
    with pytest.raises(ValueError, match="policy must be one of"):
        scalar.branch_taken(inst, st, "sometimes")
    st.regs[scalar.SCC] = 1
    assert scalar.branch_taken(inst, st) is True
