"""Every AITER gfx950 forward code object through the cycle model.

Two kinds of test:
- small code objects assembled here (llvm-mc-22 / ld.lld-22) with the *same kernel-argument
  metadata* as AITER's FP8 v3 objects (``ptr_q``, ``s_seq_len``, descales; 16-byte slots) and as
  the v4 object (one raw 656-byte block), in a folder laid out like a ROCm/aiter checkout and
  found through ``ZYFA_AITER_DIR``: the host-code packing (1-byte FP8 strides, 2-byte output
  strides, descales, s_opt, grid, group-mode seqstart arrays) is checked on the bytes and on
  what the kernel's scalar code reads back;
- the real objects (every one the resolver finds: the amd-aiter wheel's BF16 set, plus the FP8
  and v4 objects when ``ZYFA_AITER_DIR`` names a ROCm/aiter checkout), which skip with the
  reason when absent: each runs, and on a non-causal shape its attention MFMA work equals the
  shape's FLOPs within 2%.
"""

import struct

import pytest

from zyfa.gfx950.isa import mfma_flops
from zyfa.kernels import aiter
from zyfa.kernels.registry import list_kernels
from zyfa.shapes import AttnShape
from zyfa.trace.cdna4.launch import prepare as resolve
from zyfa.trace.cdna4.sim import CUSim

V3_CSV_HEADER = "dtype,hdim_q,hdim_v,mask,mode,bf16_cvt,ts_qo,ts_kv,knl_name,co_name\n"
V4_CSV_HEADER = ("q_format,k_format,v_format,o_format,q_scale_mode,k_scale_mode,v_scale_mode,o_scale_mode,"
                 "hdim_q,hdim_v,mask,mode,ts_qo,ts_kv,knl_name,co_name\n")


def _metadata(symbol: str, fields, kernarg_size: int) -> str:
    """``.amdgpu_metadata`` whose ``.args`` are ``fields`` ((name, offset, size)) plus pads."""
    args = []
    for name, offset, size in fields:
        kind = "global_buffer" if size == 8 and name.startswith("ptr_") else "by_value"
        space = "\n        .address_space:  global" if kind == "global_buffer" else ""
        args.append(f"      - .name:           {name}\n        .offset:         {offset}\n"
                    f"        .size:           {size}\n        .value_kind:     {kind}{space}")
    return f""".amdgpu_metadata
---
amdhsa.kernels:
  - .args:
{chr(10).join(args)}
    .group_segment_fixed_size: 0
    .kernarg_segment_align: 8
    .kernarg_segment_size: {kernarg_size}
    .max_flat_workgroup_size: 512
    .name:           {symbol}
    .private_segment_fixed_size: 0
    .sgpr_count:     32
    .symbol:         {symbol}.kd
    .vgpr_count:     40
    .wavefront_size: 64
amdhsa.target:   amdgcn-amd-amdhsa--gfx950
amdhsa.version:
  - 1
  - 2
...
.end_amdgpu_metadata
"""


def _kernel(symbol: str, body: str, fields, kernarg_size: int) -> str:
    return f""".amdgcn_target "amdgcn-amd-amdhsa--gfx950"
.text
.globl {symbol}
.p2align 8
.type {symbol},@function
{symbol}:
{body}
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel {symbol}
  .amdhsa_next_free_vgpr 40
  .amdhsa_next_free_sgpr 32
  .amdhsa_accum_offset 40
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_system_sgpr_workgroup_id_x 1
  .amdhsa_system_sgpr_workgroup_id_y 1
  .amdhsa_system_sgpr_workgroup_id_z 1
.end_amdhsa_kernel
{_metadata(symbol, fields, kernarg_size)}"""


FIELDS = aiter.V4_FIELDS  # the FP8 v3 struct has the same fields in the same 16-byte slots
OFF = {name: 16 * i for i, name in enumerate(FIELDS)}


def _v3_fp8_fields(extra=()):
    out = []
    for name in FIELDS:
        out.append((name, OFF[name], 8 if name.startswith("ptr_") else 4))
    return out + list(extra)


# One MFMA per 256 query rows of s_seq_len (batch mode), or per 256 rows of this batch's
# seqstart[b+1] - seqstart[b] (group mode, batch index = workgroup_id_y): proves the kernel read
# the values the packer wrote, at the offsets the metadata gives.
LOOP = """
  s_mov_b32 s5, 0
.Lloop:
  v_mfma_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[0:15]
  s_add_u32 s5, s5, 1
  s_cmp_lt_u32 s5, s4
  s_cbranch_scc1 .Lloop"""
BATCH_BODY = f"""  s_load_dword s4, s[0:1], {OFF['s_seq_len']:#x}
  s_waitcnt lgkmcnt(0)
  s_lshr_b32 s4, s4, 8
""" + LOOP
GROUP_BODY = f"""  s_load_dwordx2 s[6:7], s[0:1], {OFF['ptr_qseq']:#x}
  s_waitcnt lgkmcnt(0)
  s_lshl_b32 s8, s3, 2
  s_add_u32 s6, s6, s8
  s_addc_u32 s7, s7, 0
  s_load_dwordx2 s[10:11], s[6:7], 0x0
  s_waitcnt lgkmcnt(0)
  s_sub_u32 s4, s11, s10
  s_lshr_b32 s4, s4, 8
""" + LOOP


@pytest.fixture
def fake_aiter(assemble, tmp_path, monkeypatch):
    """A ROCm/aiter-like folder with small FP8 v3 (batch, causal, group) and v4 objects."""
    v3 = tmp_path / "hsa/gfx950/fmha_v3_fwd"
    v4 = tmp_path / "hsa/gfx950/fmha_v4_fwd"
    v3.mkdir(parents=True)
    v4.mkdir(parents=True)
    size = 16 * len(FIELDS)
    objects = {
        v3 / "fwd_hd128_fp8.co": ("k_fp8", BATCH_BODY, _v3_fp8_fields()),
        v3 / "fwd_hd128_fp8_causal.co": ("k_fp8_causal", BATCH_BODY, _v3_fp8_fields()),
        v3 / "fwd_hd128_fp8_group.co": ("k_fp8_group", GROUP_BODY, _v3_fp8_fields()),
        v3 / "fwd_hd128_fp8_odd.co": ("k_fp8_odd", BATCH_BODY, _v3_fp8_fields([("s_mystery", size, 4)])),
        v4 / "fwd_hd128_fp8.co": ("k_v4", BATCH_BODY, [("_kernarg_raw", 0, aiter.V4_STRUCT_BYTES)]),
    }
    for path, (symbol, body, fields) in objects.items():
        ksize = max(off + sz for _, off, sz in fields)
        path.write_bytes(assemble(_kernel(symbol, body, fields, ksize)).read_bytes())
    (v3 / "fmha_fwd.csv").write_text(V3_CSV_HEADER + "".join(
        f"fp8bf16,128,128,{mask},{mode},0,256,128,{sym},{co}\n" for mask, mode, sym, co in (
            (0, 0, "k_fp8", "fwd_hd128_fp8.co"), (2, 0, "k_fp8_causal", "fwd_hd128_fp8_causal.co"),
            (0, 1, "k_fp8_group", "fwd_hd128_fp8_group.co"), (0, 0, "k_fp8_odd", "fwd_hd128_fp8_odd.co"))))
    (v4 / "fmha_v4_fwd.csv").write_text(V4_CSV_HEADER + "3,3,3,2,1,1,1,0,128,128,0,0,256,128,k_v4,fwd_hd128_fp8.co\n"
                                        "9,9,9,2,5,5,5,0,128,128,0,0,256,128,k_f4,fwd_hd128_f4f4.co\n")
    monkeypatch.setenv(aiter.ENV_DIR, str(tmp_path))
    return tmp_path


SHAPE = AttnShape(batch=2, heads=8, heads_k=2, seqlen_q=4096, seqlen_k=4096, headdim=128, dtype="fp8", causal=False)


def _u32(raw: bytes, name: str) -> int:
    return struct.unpack_from("<I", raw, OFF[name])[0]


def _u64(raw: bytes, name: str) -> int:
    return struct.unpack_from("<Q", raw, OFF[name])[0]


def test_fp8_v3_kernargs_packed_as_aiter_host_code(fake_aiter):
    launch = resolve("aiter:fwd_hd128_fp8", SHAPE)
    raw = launch.kernargs
    h, hk, d, s = 8, 2, 128, 4096
    # init_fmha_fwd_v3_args: fp8bf16 inputs are 1 byte per element, the bf16 output 2
    assert (_u32(raw, "s_Seqs"), _u32(raw, "s_Hs"), _u32(raw, "s_Bs")) == (h * d, d, s * h * d)
    assert _u32(raw, "s_Ts") == 256 * h * d
    assert (_u32(raw, "s_k_Seqs"), _u32(raw, "s_k_Bs"), _u32(raw, "s_v_Seqs")) == (hk * d, s * hk * d, hk * d)
    assert (_u32(raw, "s_o_Seqs"), _u32(raw, "s_o_Hs"), _u32(raw, "s_o_Bs")) == (h * d * 2, d * 2, s * h * d * 2)
    assert (_u32(raw, "s_gqa"), _u32(raw, "s_opt"), _u32(raw, "s_lse"), _u32(raw, "s_lse_Hs")) == (4, 5, 1, s * 4)
    assert struct.unpack("<f", raw[OFF["scalar"]:OFF["scalar"] + 4])[0] == pytest.approx(128 ** -0.5)
    # per-tensor descales: pointers set, strides 0; batch mode: no seqstart pointers
    assert all(_u64(raw, f"ptr_{t}_descale") for t in "qkv")
    assert all(_u32(raw, f"s_descale_{t}_{a}") == 0 for t in "qkv" for a in ("Bs", "Hs"))
    assert _u64(raw, "ptr_qseq") == _u64(raw, "ptr_kseq") == 0
    assert launch.grid == (16, 8, 2) and launch.workgroup_size == 512
    # the kernel's scalar code read s_seq_len back: one MFMA per 256 query rows
    result = CUSim(launch.program, raw, [(0, 0, 0)], 64).run()
    assert sum(result.counts[i] for i, inst in enumerate(launch.program.instructions) if inst.unit == "MFMA") == 16


def test_fp8_v3_causal_grid_and_s_opt(fake_aiter):
    causal = SHAPE.with_(causal=True)
    launch = resolve("aiter:fwd_hd128_fp8_causal", causal)
    assert launch.grid == (8, 8, 2)  # tg_div 2: pairs of 256-row query tiles
    assert _u32(launch.kernargs, "s_opt") == 5
    big = resolve("aiter:fwd_hd128_fp8_causal", causal.with_(seqlen_q=32768, seqlen_k=32768))
    assert _u32(big.kernargs, "s_opt") == 3  # causal and seqlen_q > 16384: tune_opt - 2
    odd_heads = resolve("aiter:fwd_hd128_fp8_causal", causal.with_(heads=6, heads_k=2))
    assert _u32(odd_heads.kernargs, "s_opt") == 3  # causal and heads % 8 != 0
    with pytest.raises(ValueError, match="is causal"):
        resolve("aiter:fwd_hd128_fp8_causal", SHAPE)


def test_group_mode_seqstart_arrays_are_read_by_the_kernel(fake_aiter):
    launch = resolve("aiter:fwd_hd128_fp8_group", SHAPE)
    assert launch.grid == (8, 2, 16)  # group mode: (heads, batch, query tiles)
    assert launch.meta["work_axis"] == 2
    ptr = _u64(launch.kernargs, "ptr_qseq")
    assert ptr and ptr == _u64(launch.kernargs, "ptr_qseq_padding")
    # asm_mha_varlen_fwd.cu: packed (total, heads, dim) tensors, batch strides 0, lse (heads, total_q)
    assert all(_u32(launch.kernargs, f) == 0 for f in ("s_Bs", "s_k_Bs", "s_v_Bs", "s_o_Bs"))
    assert _u32(launch.kernargs, "s_lse_Hs") == 2 * 4096 * 4
    result = CUSim(launch.program, launch.kernargs, [(0, 1, 0)], 64).run()  # batch 1: rows 4096..8192
    assert sum(result.counts[i] for i, inst in enumerate(launch.program.instructions) if inst.unit == "MFMA") == 16


def test_v4_raw_block_split_into_fmha_v4_kernarg_slots(fake_aiter):
    mha = SHAPE.with_(heads_k=8)
    launch = resolve("aiter:fmha_v4_fwd/fwd_hd128_fp8", mha)
    raw = launch.kernargs
    assert len(raw) >= aiter.V4_STRUCT_BYTES and launch.grid == (16, 8, 2)
    # asm_mha_v4_fwd.cu: strides in 1-byte FP8 elements, output x 2, s_gqa 1, s_opt 5, no LSE
    assert (_u32(raw, "s_Seqs"), _u32(raw, "s_o_Seqs")) == (8 * 128, 8 * 128 * 2)
    assert (_u32(raw, "s_gqa"), _u32(raw, "s_opt"), _u32(raw, "s_lse")) == (1, 5, 0)
    assert OFF["ptr_q_descale"] == 0x200 and _u64(raw, "ptr_q_descale")  # static_assert offsets
    result = CUSim(launch.program, raw, [(0, 0, 0)], 64).run()
    assert sum(result.counts[i] for i, inst in enumerate(launch.program.instructions) if inst.unit == "MFMA") == 16
    with pytest.raises(ValueError, match="MHA only"):
        resolve("aiter:fmha_v4_fwd/fwd_hd128_fp8", SHAPE)


def test_unknown_layout_is_an_error_naming_the_fields(fake_aiter):
    with pytest.raises(ValueError, match="s_mystery"):
        resolve("aiter:fwd_hd128_fp8_odd", SHAPE)


def test_list_shows_the_objects_and_leaves_out_formats_the_model_does_not_run(fake_aiter):
    names = [name for name, _ in list_kernels()]
    for name in ("aiter:fwd_hd128_fp8", "aiter:fwd_hd128_fp8_causal", "aiter:fwd_hd128_fp8_group",
                 "aiter:fmha_v4_fwd/fwd_hd128_fp8"):
        assert name in names
    assert "aiter:fmha_v4_fwd/fwd_hd128_f4f4" not in names  # FP4 row: not a format the model runs
    described = dict(list_kernels())["aiter:fwd_hd128_fp8_causal"]
    assert "fp8" in described and "causal" in described and aiter.ENV_DIR in described


def test_missing_aiter_dir_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv(aiter.ENV_DIR, str(tmp_path / "nope"))
    with pytest.raises(aiter.AiterUnavailable, match="nope"):
        aiter.catalog(download=False)


# -- the real objects ------------------------------------------------------------------------------------
def _real_catalog():
    try:
        return aiter.catalog(download=False)
    except aiter.AiterUnavailable:
        return {}


REAL = _real_catalog()


def _attention_mfma_flops(launch, result) -> float:
    """FLOPs of the MFMAs in the kernel's own input format (QK^T and PV; v4's row sums by
    v_smfmac and bf16 helpers are not attention FLOPs)."""
    mark = "f8f6f4" if launch.shape.dtype == "fp8" else "bf16"
    return sum(n * mfma_flops(inst.opcode) for inst, n in zip(launch.program.instructions, result.counts)
               if n and inst.unit == "MFMA" and mark in inst.base and not inst.base.startswith("v_smfmac"))


@pytest.mark.parametrize("name", sorted(REAL) or ["<none>"])
def test_real_object_runs_and_does_the_shapes_work(name, llvm_tools):
    if name == "<none>":
        pytest.skip("no AITER code objects here (no aiter package, no ZYFA_AITER_DIR, no amd-aiter wheel)")
    k = REAL[name]
    heads_k = 8 if k.family == "fmha_v4_fwd" else 2
    shape = AttnShape(batch=1, heads=8, heads_k=heads_k, seqlen_q=1024, seqlen_k=1024, headdim=k.hdim_q,
                      headdim_v=k.hdim_v, dtype=k.dtype, causal=False)
    if k.causal:
        shape = shape.with_(causal=True)
    launch = resolve(f"aiter:{name}", shape)
    workgroups = launch.grid[0] * launch.grid[1] * launch.grid[2]
    if k.causal:  # every query-tile pair does the same work (tile i pairs with tiles-1-i)
        result = CUSim(launch.program, launch.kernargs, [(0, 0, 0)], launch.workgroup_size).run()
        ratio = _attention_mfma_flops(launch, result) * workgroups / shape.flops
        tiles = -(-shape.seqlen_q // k.ts_qo)
        # at most the diagonal query tile computed in full: (tiles + 1) / tiles of the halved FLOPs
        assert 1.0 <= ratio <= (tiles + 1) / tiles * 1.02, f"{name}: causal MFMA work {ratio:.4f} x the shape's FLOPs"
        return
    result = CUSim(launch.program, launch.kernargs, [(0, 0, 0)], launch.workgroup_size).run()
    ratio = _attention_mfma_flops(launch, result) * workgroups / shape.flops
    assert ratio == pytest.approx(1.0, rel=0.02), f"{name}: attention MFMA work {ratio:.4f} x the shape's FLOPs"
