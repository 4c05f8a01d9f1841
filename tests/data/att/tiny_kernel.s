.amdgcn_target "amdgcn-amd-amdhsa--gfx950"
.text
.globl tiny
.p2align 8
.type tiny,@function
tiny:
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_mfma_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[0:15]
  v_exp_f32_e32 v32, v33
  s_nop 7
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel tiny
  .amdhsa_next_free_vgpr 40
  .amdhsa_next_free_sgpr 8
  .amdhsa_accum_offset 40
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
.end_amdhsa_kernel
