"""Front end: llvm-mc text and llvm-objdump-22 disassembly of the same code agree."""

import pytest

from zyfa.gfx950.isa import (AGPR_BASE, SGPR_BASE, Instruction, KernelDescriptor, Program, classify, disassemble,
                                  parse_asm, parse_objdump, register_keys)

SNIPPET = """
.amdgcn_target "amdgcn-amd-amdhsa--gfx950"
.text
.globl k
.p2align 8
.type k,@function
k:
  s_load_dwordx4 s[4:7], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  s_mov_b32 s8, 0
  v_mov_b32 v0, 0x12345678
.Lloop:
  v_mfma_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[0:15]
  v_mfma_f32_32x32x16_bf16 a[0:15], v[16:19], v[24:27], a[0:15]
  v_exp_f32 v40, v41
  v_pk_fma_f32 v[42:43], v[44:45], v[46:47], v[42:43]
  ds_read_b128 v[50:53], v1 offset:128
  buffer_load_dwordx4 v[54:57], v2, s[4:7], 0 offen
  ds_write_b64 v3, v[58:59]
  s_setprio 1
  s_nop 3
  s_barrier
  s_waitcnt vmcnt(0) lgkmcnt(0)
  s_add_u32 s8, s8, 1
  s_cmp_lt_u32 s8, 4
  s_cbranch_scc1 .Lloop
  v_mfma_scale_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[0:15], v32, v33 op_sel_hi:[0,0,0]
  s_endpgm
.Lfunc_end0:
.size k, .Lfunc_end0-k

.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_next_free_vgpr 128
  .amdhsa_next_free_sgpr 16
  .amdhsa_accum_offset 64
  .amdhsa_group_segment_fixed_size 65536
  .amdhsa_kernarg_size 64
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_system_sgpr_workgroup_id_x 1
  .amdhsa_system_sgpr_workgroup_id_y 1
.end_amdhsa_kernel
"""


def test_objdump_matches_asm_text(assemble):
    co = assemble(SNIPPET)
    dis = disassemble(co)
    src = parse_asm(SNIPPET)
    assert dis.name == src.name == "k"
    assert [i.opcode for i in dis.instructions] == [
        "s_load_dwordx4", "s_waitcnt", "s_mov_b32", "v_mov_b32_e32", "v_mfma_f32_32x32x64_f8f6f4",
        "v_mfma_f32_32x32x16_bf16", "v_exp_f32_e32", "v_pk_fma_f32", "ds_read_b128", "buffer_load_dwordx4",
        "ds_write_b64", "s_setprio", "s_nop", "s_barrier", "s_waitcnt", "s_add_u32", "s_cmp_lt_u32",
        "s_cbranch_scc1", "v_mfma_scale_f32_32x32x64_f8f6f4", "s_endpgm"]
    # the .s parser names the same instructions (modulo llvm's explicit _e32 suffix) at the same offsets
    assert [i.base for i in src.instructions] == [i.base for i in dis.instructions]
    base = dis.instructions[0].pc
    assert [i.pc - base for i in dis.instructions] == [i.pc for i in src.instructions]
    # sizes: literal 0x12345678 -> 8 bytes, the scaled MFMA (ld_scale prefix) -> 16 bytes
    assert dis.instructions[3].size == 8 and dis.instructions[18].size == 16 and dis.instructions[1].size == 4
    # the backward branch resolves to the loop head in both
    assert dis.branch_targets == {17: 4} == src.branch_targets
    # operands and modifiers
    ds = dis.instructions[8]
    assert ds.operands == ("v[50:53]", "v1") and ds.modifiers == ("offset:128",)
    assert dis.instructions[14].operands == ("vmcnt(0) lgkmcnt(0)",)


def test_sizes_from_the_disassembly_give_the_encoded_program(assemble):
    # parse_asm(sizes=...) (the generator's path: sizes read off the assembled code object's
    # disassembly) lays the program out exactly as parse_asm's own llvm-mc encoding does
    dis = disassemble(assemble(SNIPPET))
    encoded = parse_asm(SNIPPET)
    given = parse_asm(SNIPPET, sizes=[i.size for i in dis.instructions])
    assert given == encoded and [i.size for i in given.instructions] == [i.size for i in encoded.instructions]
    with pytest.raises(ValueError, match="3 sizes given for 20 instructions"):
        parse_asm(SNIPPET, sizes=[4, 4, 4])


def test_descriptor_from_code_object_and_text(assemble):
    co = assemble(SNIPPET)
    for desc in (disassemble(co).descriptor, parse_asm(SNIPPET).descriptor):
        assert desc.total_vgprs == 128 and desc.vgpr_count == 64 and desc.agpr_count == 64
        assert desc.lds_bytes == 65536 and desc.kernarg_size == 64
        assert desc.sgpr_layout() == {"kernarg_segment_ptr": 0, "workgroup_id_x": 2, "workgroup_id_y": 3}


def test_units_and_register_keys():
    p = parse_asm(SNIPPET, encode=False)
    assert [i.unit for i in p.instructions] == [
        "SMEM", "WAIT", "SALU", "VALU", "MFMA", "MFMA", "TRANS", "VALU", "LDS", "VMEM", "LDS", "MISC", "WAIT",
        "BARRIER", "WAIT", "SALU", "SALU", "BRANCH", "MFMA", "MISC"]
    mfma = p.instructions[5]
    assert mfma.defs == tuple(range(AGPR_BASE, AGPR_BASE + 16))
    assert set(mfma.uses) == set(range(16, 20)) | set(range(24, 28)) | set(range(AGPR_BASE, AGPR_BASE + 16))
    store = p.instructions[10]  # ds_write: no destination, reads address and data
    assert store.defs == () and set(store.uses) == {3, 58, 59}
    assert register_keys("s[4:7]") == tuple(SGPR_BASE + n for n in range(4, 8))
    assert classify("v_rcp_iflag_f32_e32") == "TRANS" and classify("v_smfmac_f32_32x32x64_fp8_fp8") == "MFMA"


def test_parse_objdump_numeric_branch_and_labels():
    text = """
0000000000001300 <k>:
	s_mov_b32 s8, 0                                            // 000000001300: BE880080
	s_add_u32 s8, s8, 1                                        // 000000001304: 80088108
	s_cbranch_scc1 65534                                       // 000000001308: BF85FFFE <k+0x4>
	s_branch label_end                                         // 00000000130C: BF820000

0000000000001310 <label_end>:
	s_endpgm                                                   // 000000001310: BF810000
"""
    p = parse_objdump(text)
    assert p.branch_targets == {2: 1, 3: 4}
    assert p.labels["label_end"] == 4


def test_bad_inputs():
    with pytest.raises(TypeError, match="text must be str"):
        parse_asm(b"s_endpgm")
    with pytest.raises(ValueError, match="no instructions"):
        parse_asm("k:\n")
    with pytest.raises(ValueError, match="size"):
        Instruction(pc=0, opcode="s_nop", size=5)
    with pytest.raises(ValueError, match="opcode"):
        classify("")
    with pytest.raises(ValueError, match="unknown label"):
        parse_asm("k:\n s_branch .Lnowhere\n s_endpgm\n", encode=False)
    with pytest.raises(ValueError, match="workgroup_size"):
        KernelDescriptor(workgroup_size=2048)
    with pytest.raises(FileNotFoundError):
        disassemble("/nonexistent/k.co")
    with pytest.raises(ValueError, match="no instructions"):
        Program(name="empty", instructions=())
