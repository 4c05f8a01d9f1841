"""Instruction semantics on hand-written snippets, each expected value computed by hand."""

import numpy as np
import pytest
import torch

from zyfa.trace.emu import formats as F
from zyfa.trace.emu.errors import EmulationError
from zyfa.trace.emu.machine import run_snippet
from zyfa.trace.emu.state import AGPR_BASE, Lds, Memory

LANE = np.arange(64)


def f32(w, reg):
    return w.v[reg].view(np.float32)


# -- fp32 ----
def test_fma_single_rounding():
    # a = b = 1 + 2^-23: a*b = 1 + 2^-22 + 2^-46 exactly; with c = -1 the fma keeps the 2^-46
    # term, while mul-then-add rounds the product to 1 + 2^-22 first and gives 2^-22.
    a = b = np.float32(1 + 2**-23)
    w, _ = run_snippet("v_fma_f32 v3, v0, v1, v2\nv_mul_f32_e32 v4, v0, v1\nv_add_f32_e32 v4, v4, v2",
                       vgprs={0: a, 1: b, 2: np.float32(-1.0)})
    assert f32(w, 3)[0] == np.float32(2**-22 + 2**-46)
    assert f32(w, 4)[0] == np.float32(2**-22)


def test_fma_exact_against_fractions():
    from fractions import Fraction
    rng = np.random.RandomState(3)
    a, b = rng.randn(2, 2000).astype(np.float32)
    c = (-(a.astype(np.float64) * b)).astype(np.float32)  # heavy cancellation
    got = F.fma_f32(a, b, c)
    for x, y, z, g in zip(a[:300], b[:300], c[:300], got[:300]):
        exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        lo = np.float32(float(exact))
        cands = [np.nextafter(lo, np.float32(-np.inf)), lo, np.nextafter(lo, np.float32(np.inf))]
        best = min(cands, key=lambda v: (abs(Fraction(float(v)) - exact), int(v.view(np.uint32)) & 1))
        assert g == best


def test_max3_and_exec_mask():
    w, _ = run_snippet("v_max3_f32 v2, v0, v1, 2.0", vgprs={0: LANE * 1.0, 1: 0.5, 2: -7.0},
                       exec_mask=0xF)
    assert f32(w, 2)[:4].tolist() == [2.0, 2.0, 2.0, 3.0]
    assert (f32(w, 2)[4:] == -7.0).all()  # inactive lanes keep their value


def test_cvt_u32_f32_truncates_and_saturates():
    vals = np.array([-3.5, 0.0, 7.99, 120.5, np.nan, 5e9] + [1.0] * 58, np.float32)
    w, _ = run_snippet("v_cvt_u32_f32_e32 v1, v0", vgprs={0: vals})
    assert w.v[1][:6].tolist() == [0, 0, 7, 120, 0, 2**32 - 1]


def test_int_to_float_conversions():
    w, _ = run_snippet("v_cvt_f32_u32 v1, s3\nv_cvt_f32_i32_e32 v2, v0",
                       vgprs={0: -5}, sgprs={3: 7})
    assert f32(w, 1)[0] == 7.0 and f32(w, 2)[0] == -5.0


def test_exp_log_rcp_correctly_rounded():
    x = np.array([-1.0, 0.5, 3.0, -126.0], np.float32)
    w, _ = run_snippet("v_exp_f32_e32 v1, v0\nv_rcp_f32_e32 v2, v0",
                       vgprs={0: np.resize(x, 64)})
    assert f32(w, 1)[:4].tolist() == [0.5, np.float32(2 ** 0.5), 8.0, np.float32(2.0 ** -126)]
    assert f32(w, 2)[:3].tolist() == [-1.0, 2.0, np.float32(1 / 3)]


def test_cvt_pk_fp8_and_bf16():
    vals = np.resize(np.array([1.0, -0.3, 500.0, 2.0 ** -9], np.float32), 64)
    w, _ = run_snippet("v_cvt_pk_fp8_f32 v2, v0, v1\nv_cvt_pk_bf16_f32 v3, v0, v1",
                       vgprs={0: vals, 1: 1.0, 2: 0xAABB0000})
    # 1.0 = 0x38, -0.3 -> -0.3125 = 0xAA (RNE), 500 -> NaN 0x7F (no clamp), 2^-9 = subnormal 0x01
    assert [int(x) & 0xFF for x in w.v[2][:4]] == [0x38, 0xAA, 0x7F, 0x01]
    assert int(w.v[2][0]) == 0xAABB3838  # high word preserved, S1 (1.0) in byte 1
    assert int(w.v[3][0]) == 0x3F803F80
    t = torch.tensor([500.0, -0.3]).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert int(w.v[3][2]) & 0xFFFF == t[0] and int(w.v[3][1]) & 0xFFFF == t[1]


def test_cvt_pk_f32_fp8_source_overlapping_destination():
    # AITER v4's Q prescale: v_cvt_pk_f32_fp8 v[186:187], v186 reads both bytes before writing
    # (the emulator wrote v186 first and decoded the second byte from the new value)
    w, _ = run_snippet("v_cvt_pk_f32_fp8_e32 v[0:1], v0", vgprs={0: np.full(64, 0x3840, np.uint32)})
    assert (f32(w, 0) == 2.0).all() and (f32(w, 1) == 1.0).all()


def test_pk_fma_op_sel_hi():
    # op_sel_hi:[0,1,1]: the high result takes src0's LOW dword
    w, _ = run_snippet("v_pk_fma_f32 v[4:5], v[0:1], v[2:3], v[2:3] op_sel_hi:[0,1,1]",
                       vgprs={0: 2.0, 1: 10.0, 2: 3.0, 3: 5.0})
    assert f32(w, 4)[0] == 2.0 * 3.0 + 3.0 and f32(w, 5)[0] == 2.0 * 5.0 + 5.0


# -- integer / lane ----
def test_integer_ops():
    w, _ = run_snippet("\n".join([
        "v_lshl_add_u32 v2, v0, 4, v1",
        "v_bfe_u32 v3, v0, 2, 3",
        "v_perm_b32 v4, v0, v1, 0x0c050400",
        "v_bitop3_b32 v5, v0, v1, 0xff bitop3:0x80",  # a & b & c
        "v_mul_hi_u32 v6, v0, v1",
        "v_ashrrev_i32_e32 v7, 4, v8"]),
        vgprs={0: 0x12345678, 1: 0xF0F0F0F0, 8: 0x80000000})
    assert int(w.v[2][0]) == (0x12345678 << 4 & 0xFFFFFFFF) + 0xF0F0F0F0 & 0xFFFFFFFF
    assert int(w.v[3][0]) == (0x12345678 >> 2) & 7
    # selector bytes 00,04,05,0c: byte0 of S1, byte0 of S0, byte1 of S0, zero
    assert int(w.v[4][0]) == 0xF0 | 0x78 << 8 | 0x56 << 16 | 0x00 << 24
    assert int(w.v[5][0]) == 0x12345678 & 0xF0F0F0F0 & 0xFF
    assert int(w.v[6][0]) == (0x12345678 * 0xF0F0F0F0) >> 32
    assert int(w.v[7][0]) == 0xF8000000


def test_carry_chain_and_cmp_cndmask():
    w, _ = run_snippet("\n".join([
        "v_add_co_u32_e32 v2, vcc, v0, v1",
        "v_addc_co_u32_e32 v3, vcc, 0, 0, vcc",
        "v_cmp_gt_i32_e64 s[4:5], 32, v10",
        "v_cndmask_b32_e64 v11, 7, 9, s[4:5]"]),
        vgprs={0: 0xFFFFFFFF, 1: LANE % 2, 10: LANE})
    assert w.v[2][:2].tolist() == [0xFFFFFFFF, 0]
    assert w.v[3][:2].tolist() == [0, 1]
    assert w.s[4] == 0xFFFFFFFF and w.s[5] == 0
    assert w.v[11][31] == 9 and w.v[11][32] == 7


def test_readfirstlane_permlane32_swap_dpp():
    w, _ = run_snippet("\n".join([
        "v_readfirstlane_b32 s3, v0",
        "v_permlane32_swap_b32_e32 v1, v2",
        "v_mov_b32_dpp v3, v0 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:0",
        "v_mbcnt_lo_u32_b32 v4, -1, 0",
        "v_mbcnt_hi_u32_b32 v4, -1, v4"]),
        vgprs={0: LANE, 1: LANE + 100, 2: LANE + 200}, exec_mask=(2**64 - 1) ^ 0b111)
    assert w.s[3] == 3  # first active lane
    assert w.v[1][40] == 208 and w.v[2][3] == 135  # v1 hi half <- v2 lo half, v2 lo <- v1 hi
    assert w.v[3][17] == 16 and w.v[3][16] == 0  # row_shr:1, row start reads 0 (bound_ctrl)
    assert w.v[4][63] == 63 and w.v[4][10] == 10


# -- scalar ----
def test_scalar_alu_scc():
    w, _ = run_snippet("\n".join([
        "s_add_u32 s2, s0, s1",
        "s_addc_u32 s3, 0, 0",
        "s_cmp_lt_i32 s4, 0",
        "s_cselect_b32 s5, 11, 22",
        "s_lshl2_add_u32 s6, s1, 3",
        "s_bfe_u32 s7, s8, 0x40004",
        "s_movk_i32 s9, 0xfff0"]),
        sgprs={0: 0xFFFFFFFF, 1: 2, 4: 0xFFFFFFFE, 8: 0xABCD})
    assert (w.s[2], w.s[3], w.s[5], w.s[6], w.s[7], w.s[9]) == \
        (1, 1, 11, 11, (0xABCD >> 4) & 0xF, 0xFFFFFFF0)


def test_branch_outcomes_are_counted_per_instruction():
    # a three-trip loop: the back-edge (instruction 3) runs 3 times and jumps twice
    _, group = run_snippet("s_mov_b32 s0, 3\nloop:\ns_sub_u32 s0, s0, 1\ns_cmp_lg_u32 s0, 0\ns_cbranch_scc1 loop")
    assert dict(group.stats.branch_runs) == {3: 3} and dict(group.stats.branch_taken) == {3: 2}


def test_saveexec_and_branch_skips_when_exec_zero():
    w, _ = run_snippet("\n".join([
        "v_cmp_gt_u32_e32 vcc, 0, v0",  # never true
        "s_and_saveexec_b64 s[2:3], vcc",
        "s_cbranch_execz .Lskip",
        "v_mov_b32_e32 v1, 5",
        ".Lskip:",
        "s_or_b64 exec, exec, s[2:3]",
        "v_add_u32_e32 v2, 1, v0"]), vgprs={0: LANE})
    assert (w.v[1] == 0).all() and w.v[2][5] == 6 and w.exec == 2**64 - 1
    assert w.get_s64(2) == 2**64 - 1


def test_smem_load_from_memory():
    mem = Memory()
    addr = mem.put(np.array([7, 8, 9, 10], np.uint32))
    w, _ = run_snippet("s_load_dwordx2 s[4:5], s[0:1], 0x8", sgprs={0: addr & 0xFFFFFFFF,
                       1: addr >> 32}, memory=mem)
    assert (w.s[4], w.s[5]) == (9, 10)


# -- memory ----
def test_global_load_store_masked():
    mem = Memory()
    src = mem.put(np.arange(64, dtype=np.float32) * 2)
    dst = mem.put(np.full(64, -1, np.float32))
    w, _ = run_snippet("\n".join([
        "global_load_dword v4, v0, s[0:1] offset:4",
        "global_store_dword v0, v4, s[2:3]"]),
        vgprs={0: LANE * 4}, sgprs={0: src & 0xFFFFFFFF, 1: src >> 32, 2: dst & 0xFFFFFFFF,
                                    3: dst >> 32}, exec_mask=2**63 - 1, memory=mem)
    out = mem.get(dst, 256).view(np.float32)
    assert out[:63].tolist() == (np.arange(1, 64) * 2.0).tolist() and out[63] == -1.0


def test_global_out_of_bounds_raises():
    with pytest.raises(EmulationError, match="outside allocated memory"):
        run_snippet("global_load_dword v1, v[2:3], off", vgprs={2: 16, 3: 0})


def test_buffer_load_range_check_returns_zero():
    mem = Memory()
    base = mem.put(np.arange(64, dtype=np.uint32) + 1)
    # num_records = 40 bytes: lanes whose dword starts at >= 37 read 0
    w, _ = run_snippet("buffer_load_dword v1, v0, s[4:7], 0 offen",
                       vgprs={0: LANE * 4}, sgprs={4: base & 0xFFFFFFFF, 5: base >> 32, 6: 40,
                                                   7: 0x00020000}, memory=mem)
    assert w.v[1][:10].tolist() == list(range(1, 11)) and (w.v[1][10:] == 0).all()


def test_lds_roundtrip_and_bank_conflicts():
    w, g = run_snippet("\n".join([
        "ds_write_b32 v0, v1",
        "ds_read_b32 v2, v3 offset:8",
        "ds_read_b128 v[4:7], v8"]),
        vgprs={0: LANE * 4, 1: LANE * 10, 3: LANE * 4, 8: LANE * 16})
    assert w.v[2][:3].tolist() == [20, 30, 40] and w.v[2][62] == 0
    # b32 at stride 4 bytes: 64 distinct banks, no conflict
    assert g.stats.lds_conflict_cycles[0] == 0
    # b128 at stride 16 bytes: 16 lanes per phase touch 64 distinct dwords -> no conflict
    assert g.stats.lds_conflict_cycles[2] == 0
    _, g2 = run_snippet("ds_read_b32 v2, v0", vgprs={0: LANE * 256})
    assert g2.stats.lds_conflict_cycles[0] == 63  # all 64 lanes in bank 0, distinct dwords


def test_conflict_model_broadcast():
    assert Lds.conflict_cycles(np.zeros(64, np.int64), 4) == 0  # one dword, broadcast
    assert Lds.conflict_cycles(np.arange(64) * 8, 4) == 1  # stride 2 dwords: 2-way


def test_ds_read_tr_b16_rule():
    # lane L writes its 4 bf16 elements (L*4 + e); after the transpose read lane d holds
    # element d%4 of lanes e*4 + (d%16)//4 within its 16-lane block
    lds = (np.arange(256, dtype=np.uint16)).view(np.uint8)
    w, _ = run_snippet("ds_read_b64_tr_b16 v[2:3], v0", vgprs={0: LANE * 8}, lds=lds)
    got = np.stack([w.v[2], w.v[3]], 1).copy().view(np.uint16)  # (64, 4)
    for d in (0, 5, 17, 63):
        block = d // 16 * 16
        expect = [(block + e * 4 + (d % 16) // 4) * 4 + d % 4 for e in range(4)]
        assert got[d].tolist() == expect


# -- MFMA ----
def _mfma(op, a_regs, b_regs, bits, mods=""):
    vg = {}
    for r, val in enumerate(a_regs):
        vg[r] = val
    for r, val in enumerate(b_regs):
        vg[16 + r] = val
    na, nb = len(a_regs), len(b_regs)
    text = f"{op} a[0:15], v[0:{na - 1}], v[16:{16 + nb - 1}], 0 {mods}"
    w, _ = run_snippet(text, vgprs=vg)
    return w.v[AGPR_BASE: AGPR_BASE + 16].view(np.float32)


def test_mfma_32x32x16_bf16_layout():
    # A[i, k] = i (row index) for k == 0 only; B[k, j] = j+1 for k == 0 only -> D[i, j] = i*(j+1)
    one_hot = np.where(LANE < 32, 1, 0)
    row = (LANE % 32).astype(np.float32)
    a_lo = F.f32_to_bf16_bits(row * one_hot).astype(np.uint32)  # element 0 of lanes 0..31
    b_lo = F.f32_to_bf16_bits(((LANE % 32) + 1).astype(np.float32) * one_hot).astype(np.uint32)
    d = _mfma("v_mfma_f32_32x32x16_bf16", [a_lo, 0, 0, 0], [b_lo, 0, 0, 0], 16)
    i = 8 * (np.arange(16)[:, None] // 4) + 4 * (LANE[None, :] // 32) + np.arange(16)[:, None] % 4
    j = LANE[None, :] % 32
    assert (d == i * (j + 1)).all()


def test_mfma_scale_f8f6f4_block_scales():
    # all A and B = 1.0 (e4m3 0x38): D = sum over 2 K-blocks of 32 * 2^(sa_blk + sb_blk)
    ones = np.full(64, 0x38383838, np.uint32)
    sa = np.where(LANE < 32, 127, 128)  # block 0 scale 1, block 1 scale 2 for every row
    vg = {r: ones for r in range(8)} | {16 + r: ones for r in range(8)}
    vg[30], vg[31] = sa, 127
    w, _ = run_snippet("v_mfma_scale_f32_32x32x64_f8f6f4 a[0:15], v[0:7], v[16:23], 0, v30, v31 "
                       "op_sel_hi:[0,0,0]", vgprs=vg)
    assert (w.v[AGPR_BASE: AGPR_BASE + 16].view(np.float32) == 32 * 1 + 32 * 2).all()


def _b_regs_16x16x128(b_codes):
    """B (128 x 16 e4m3 codes) in the dense 16x16x128 f8f6f4 layout: B[k][j] is byte
    16 * (k // 64) + k % 16 of lane 16 * ((k % 64) // 16) + j."""
    b = np.zeros((64, 32), np.uint8)
    for k in range(128):
        for j in range(16):
            b[16 * ((k % 64) // 16) + j, 16 * (k // 64) + k % 16] = b_codes[k, j]
    return {8 + r: b.view(np.uint32)[:, r].copy() for r in range(8)}


def _d_16x16(w, reg):
    return np.array([[w.v[reg + i % 4][16 * (i // 4) + j].view(np.float32) for j in range(16)] for i in range(16)])


def _smfmac_16x16x128(a_dense_codes, b_codes, c):
    """Run v_smfmac_f32_16x16x128_fp8_fp8 on a 2:4-sparse A (16 x 128 e4m3 codes), packed element by
    element: A[i][k] lives in lane 16 * (k // 32) + i as logical element e = k % 32; compressed
    element 2 * (e // 4) + slot holds the group's first (slot 0) or second non-zero, whose position
    e % 4 sits in index bits [2c+1:2c] (trace/emu/mfma.py's docstring gives the sources)."""
    a = np.zeros((64, 16), np.uint8)
    index = np.zeros(64, np.uint32)
    for i in range(16):
        for start in range(0, 128, 4):
            nonzero = [k for k in range(start, start + 4) if a_dense_codes[i, k]]
            assert len(nonzero) <= 2
            for slot, k in enumerate(nonzero):
                lane, e = 16 * (k // 32) + i, k % 32
                a[lane, 2 * (e // 4) + slot] = a_dense_codes[i, k]
                index[lane] |= np.uint32((e % 4) << (2 * (2 * (e // 4) + slot)))
    vg = {r: a.view(np.uint32)[:, r].copy() for r in range(4)} | _b_regs_16x16x128(b_codes) | {20: index}
    vg |= {24 + r: c[r].view(np.uint32) for r in range(4)}
    w, _ = run_snippet("v_smfmac_f32_16x16x128_fp8_fp8 v[24:27], v[0:3], v[8:15], v20", vgprs=vg)
    return _d_16x16(w, 24)


def test_smfmac_16x16x128_fp8_against_dense_numpy():
    rng = np.random.default_rng(0)
    codes = rng.integers(1, 0x7F, size=(16, 128)).astype(np.uint8)  # finite (0x7F is NaN), non-zero e4m3
    keep = np.zeros((16, 128), bool)
    for i in range(16):
        for start in range(0, 128, 4):
            keep[i, start + rng.choice(4, size=rng.integers(0, 3), replace=False)] = True
    a_codes = np.where(keep, codes, 0).astype(np.uint8)
    b_codes = (rng.integers(0, 0x7F, size=(128, 16)) & 0x77).astype(np.uint8)
    c = rng.standard_normal((4, 64)).astype(np.float32)
    d = _smfmac_16x16x128(a_codes, b_codes, c)
    A, B = F.decode(F.E4M3, a_codes).astype(np.float64), F.decode(F.E4M3, b_codes).astype(np.float64)
    c_mat = np.array([[c[i % 4, 16 * (i // 4) + j] for j in range(16)] for i in range(16)], np.float64)
    assert np.allclose(d, (A @ B + c_mat).astype(np.float32), rtol=1e-6, atol=1e-6)


def test_smfmac_aiter_v4_row_sum_pattern():
    """AITER v4's prologue (instructions 467-480 of fmha_v4_fwd/fwd_hd128_fp8.co): A = 1.0 (e4m3 0x38)
    in registers 0-1 of lanes with lane & 4 == 0, 2-3 otherwise, only where lane % 4 < 2; index
    0x44444444 (positions 0, 1) or, where lane % 4 == 1, 0xeeeeeeee (2, 3). D rows 0 + 1 must then
    sum the B bytes of lanes j and j + 32, rows 4 + 5 those of lanes j + 16 and j + 48: the two
    query rows a 32x32x64 P operand keeps in output lane j's column (the kernel divides O by
    D[4g] + D[4g + 1] in lane 16g + j)."""
    rng = np.random.default_rng(1)
    b_codes = (rng.integers(0, 0x7F, size=(128, 16)) & 0x77).astype(np.uint8)
    ones = np.where(LANE % 4 < 2, 0x38383838, 0).astype(np.uint32)
    low = (LANE & 4) == 0
    vg = {0: np.where(low, ones, 0), 1: np.where(low, ones, 0), 2: np.where(low, 0, ones),
          3: np.where(low, 0, ones), 20: np.where(LANE % 4 == 1, 0xEEEEEEEE, 0x44444444).astype(np.uint32)}
    vg |= _b_regs_16x16x128(b_codes) | {24 + r: np.zeros(64, np.uint32) for r in range(4)}
    w, _ = run_snippet("v_smfmac_f32_16x16x128_fp8_fp8 v[24:27], v[0:3], v[8:15], v20", vgprs=vg)
    d = _d_16x16(w, 24)
    B = F.decode(F.E4M3, b_codes).astype(np.float64)
    lane_group = (np.arange(128) % 64) // 16  # which lane group 16g + j holds B[k][j]
    assert np.allclose(d[0] + d[1], B[np.isin(lane_group, (0, 2))].sum(axis=0), rtol=1e-6)
    assert np.allclose(d[4] + d[5], B[np.isin(lane_group, (1, 3))].sum(axis=0), rtol=1e-6)
    assert (d[[2, 3, 6, 7]] == 0).all() and (d[8:] == d[:8]).all()


def test_smfmac_refuses_index_set_selection():
    with pytest.raises(EmulationError, match="cbsz/abid"):
        run_snippet("v_smfmac_f32_16x16x128_fp8_fp8 v[24:27], v[0:3], v[8:15], v20 abid:1")


def test_unknown_opcode_names_instruction():
    with pytest.raises(EmulationError, match="v_frobnicate_b32"):
        run_snippet("v_frobnicate_b32 v0, v1")


def test_unknown_operand():
    with pytest.raises(EmulationError, match="unknown operand"):
        run_snippet("v_mov_b32_e32 v0, q7")


def test_buffer_load_to_lds_lands_at_waitcnt():
    mem = Memory()
    base = mem.put(np.arange(64, dtype=np.uint32) + 1000)
    w, _ = run_snippet("\n".join([
        "buffer_load_dword v0, s[4:7], 0 offen lds",
        "ds_read_b32 v1, v2",  # before the wait: old LDS contents (zeros)
        "s_waitcnt vmcnt(0)",
        "ds_read_b32 v3, v2"]),
        vgprs={0: LANE * 4, 2: LANE * 4}, sgprs={4: base & 0xFFFFFFFF, 5: base >> 32, 6: 256,
                                                 7: 0x00020000, 124: 0}, memory=mem)
    assert (w.v[1] == 0).all()
    assert w.v[3].tolist() == list(range(1000, 1064))
