"""AITER's production gfx950 BF16 forward kernel in the emulator vs zyfa.numerics.bf16_attention.

Needs the amd-aiter wheel's code objects already present (installed ``aiter`` package or the
cycle model's cache); the test never downloads. Bound as for our exact-softmax kernels: one bf16
ulp plus the fp32 summation-order bound, lse within 2 fp32 ulps (AITER's own fp32 operation
order differs from the reference, so bit-identity is not expected beyond one query tile).
"""

import pytest
import torch

from zyfa.shapes import AttnShape


def _available():
    try:
        from zyfa.kernels import aiter
        aiter.code_object_dir(download=False)
    except Exception:  # any failure means: no local code objects
        return False
    return True


pytestmark = pytest.mark.skipif(not _available(), reason="no local AITER code objects (amd-aiter "
                                "wheel not installed or cached)")


def _fp8_available():
    from zyfa.kernels import aiter
    if not _available():  # never download: only code objects already here
        return False
    try:
        aiter.resolve("fwd_hd128_fp8_causal")
    except (aiter.AiterUnavailable, ValueError):  # ValueError: the wheel here has no FP8 objects
        return False
    return True


needs_fp8 = pytest.mark.skipif(not _fp8_available(), reason="needs a ROCm/aiter checkout (ZYFA_AITER_DIR): the FP8 "
                               "objects are not in the amd-aiter wheel, whose hd192 causal object differs")


def _check(result, min_bitwise=0.0):
    out, ref = result.out.float(), result.ref_out.float()
    mag = torch.maximum(out.abs(), ref.abs()).clamp(min=2.0**-126)
    ulp = torch.exp2(torch.floor(torch.log2(mag)) - 7)
    order = result.shape.seqlen_k * 2.0**-24 * result.inputs["v"].float().abs().max()
    assert ((out - ref).abs() <= ulp + order).all()
    assert result.bitwise_fraction >= min_bitwise
    assert ((result.lse - result.ref_lse).abs() <= 2 * 2.0**-23 * result.ref_lse.abs().clamp(min=1)).all()


@pytest.mark.parametrize("name,causal,d", [("fwd_hd128_bf16_causal", True, 128), ("fwd_hd128_bf16", False, 128),
                                            ("fwd_hd192_hd128_bf16", False, 192)])
def test_aiter_bf16_one_query_tile(name, causal, d):
    # hd192/128 runs 128-key tiles (ts_kv), hd128 64: the reference's block follows the object
    from zyfa.trace.emu.aiter_fwd import emulate_aiter
    shape = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=256, seqlen_k=256, headdim=d, causal=causal,
                      dtype="bf16")
    _check(emulate_aiter(name, shape), min_bitwise=0.999)


@pytest.mark.slow
@pytest.mark.parametrize("name,seqlen,d", [("fwd_hd128_bf16_causal", 300, 128), ("fwd_hd128_bf16_causal", 512, 128),
                                           pytest.param("fwd_hd192_hd128_bf16_causal", 256, 192, marks=needs_fp8)])
def test_aiter_bf16_causal_two_query_tiles(name, seqlen, d):
    # hd192/128: 128-row query tiles, so s256 is already two tiles per workgroup; its K loads are
    # global_load_lds_dwordx4 (the emulator's global LDS DMA)
    from zyfa.trace.emu.aiter_fwd import emulate_aiter
    shape = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=seqlen, seqlen_k=seqlen, headdim=d, causal=True,
                      dtype="bf16")
    result = emulate_aiter(name, shape)
    # AITER's fp32 operation order differs from the reference beyond one tile: use the
    # flash-attention bar, error vs fp64 at most twice the reference's own error
    q, k, v = (result.inputs[x].double().transpose(1, 2) for x in "qkv")
    oracle = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    oracle = oracle.transpose(1, 2)
    err = (result.out.double() - oracle).abs().max()
    ref_err = (result.ref_out.double() - oracle).abs().max()
    assert err <= 2 * ref_err + 1e-3
    assert ((result.lse - result.ref_lse).abs() <= 1e-5).all()


@pytest.mark.slow
def test_aiter_bf16_noncausal_partial_key_tile():
    # seqlen 300: the kernel reads K/V rows past seqlen_k (zero tail, see aiter_fwd._TAIL_ROWS)
    from zyfa.trace.emu.aiter_fwd import emulate_aiter
    shape = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=300, seqlen_k=300, causal=False,
                      dtype="bf16")
    _check(emulate_aiter("fwd_hd128_bf16", shape), min_bitwise=0.999)


@pytest.mark.slow
def test_aiter_needs_interleaved_waves():
    # run-to-barrier scheduling exposes AITER's timing-dependent LDS reuse (module docstring)
    from zyfa.trace.emu.aiter_fwd import emulate_aiter
    shape = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=512, seqlen_k=512, causal=True,
                      dtype="bf16")
    result = emulate_aiter("fwd_hd128_bf16_causal", shape, quantum=None)
    bad_rows = ((result.out.float() - result.ref_out.float()).abs() > 0.05).any(-1).any(-1)[0]
    assert bad_rows[:192].sum() == 0 and bad_rows[192:256].sum() > 30
    assert torch.allclose(result.lse, result.ref_lse, atol=1e-5)


@needs_fp8
@pytest.mark.parametrize("name,causal,d,min_bitwise", [
    ("fwd_hd128_fp8_causal", True, 128, 1.0), ("fwd_hd128_fp8", False, 128, 1.0),
    ("fwd_hd256_fp8_causal", True, 256, 0.999), ("fwd_hd256_fp8", False, 256, 0.999)])
def test_aiter_fp8_one_query_tile_is_the_naive_numerics(name, causal, d, min_bitwise):
    """AITER's real v3 FP8 forward with the kernel arguments zyfa.kernels.aiter packs (FP8 field
    names, 1-byte strides, one fp32 descale per tensor) computes AITER v3's numerics
    (zyfa.numerics variant 'naive' in blocks of the object's key tile, ts_kv: 128 for hd128,
    every bit equal; 64 for hd256, measured 99.995%) on one query tile."""
    from zyfa.trace.emu.aiter_fwd import emulate_aiter
    shape = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=256, seqlen_k=256, headdim=d, headdim_v=d,
                      causal=causal, dtype="fp8")
    _check(emulate_aiter(name, shape), min_bitwise=min_bitwise)


@needs_fp8
@pytest.mark.slow
@pytest.mark.parametrize("name,kw", [
    ("fwd_hd128_fp8", dict(heads=4, heads_k=2, seqlen_q=512, seqlen_k=512, causal=False)),  # GQA
    ("fwd_hd128_fp8_causal", dict(batch=2, heads=8, heads_k=8, seqlen_q=300, seqlen_k=300, causal=True)),
    ("fwd_hd128_fp8", dict(heads=1, heads_k=1, seqlen_q=256, seqlen_k=640, causal=False)),  # sq != sk
])
def test_aiter_fp8_batch_gqa_and_lengths(name, kw):
    """Batch, head and GQA strides, a partial key tile and seqlen_q != seqlen_k: within one bf16
    ulp plus the summation-order bound of the reference (measured >= 99.88 % identical bits)."""
    from zyfa.trace.emu.aiter_fwd import emulate_aiter
    shape = AttnShape(**{"batch": 1, "headdim": 128, "headdim_v": 128, "dtype": "fp8", **kw})
    _check(emulate_aiter(name, shape), min_bitwise=0.998)


@pytest.mark.slow
@pytest.mark.parametrize("name,causal,dtype", [
    ("fwd_hd128_bf16_group", False, "bf16"), ("fwd_hd128_bf16_causal_group", True, "bf16"),
    pytest.param("fwd_hd128_fp8_group", False, "fp8", marks=needs_fp8),
    pytest.param("fwd_hd128_fp8_causal_group", True, "fp8", marks=needs_fp8)])
def test_aiter_group_mode_two_sequences_two_heads(name, causal, dtype):
    """Group (varlen) mode as AITER's varlen host code packs it (seqstart arrays of b + 1 int32,
    every batch stride 0, lse (heads, total_q)): both sequences and both heads within the bound
    (measured >= 99.95% identical bits; with BSHD batch strides the FP8 objects read the second
    sequence from the wrong rows)."""
    from zyfa.trace.emu.aiter_fwd import emulate_aiter
    shape = AttnShape(batch=2, heads=2, heads_k=2, seqlen_q=256, seqlen_k=256, causal=causal, dtype=dtype)
    _check(emulate_aiter(name, shape), min_bitwise=0.999)


@needs_fp8
def test_aiter_v4_fp8_against_fp64_attention():
    """AITER's v4 FP8 forward (fmha_v4_fwd/fwd_hd128_fp8) runs end to end: its row sum is the
    sparse MFMA v_smfmac_f32_16x16x128_fp8_fp8 and its Q prescale converts in place
    (v_cvt_pk_f32_fp8 v[186:187], v186). v4's P is an exp2 approximation through the fp32 bit
    pattern (v_cvt_u32_f32 of S * 2^23 + bias), coarser than v3's, so there is no bitwise reference
    here: the bound is against fp64 attention of the dequantised inputs. Measured 4.1% relative L2
    at b1 h2 s384 (zyfa's Lean P 3.2%, AITER v3 2.3%); a wrong row-sum layout gave 45%, the in-place
    convert bug 50%."""
    from zyfa.trace.emu.aiter_fwd import emulate_aiter
    shape = AttnShape(batch=1, heads=2, heads_k=2, seqlen_q=384, seqlen_k=384, causal=False, dtype="fp8")
    r = emulate_aiter("fmha_v4_fwd/fwd_hd128_fp8", shape)
    q, k, v = (r.inputs[t].double() * r.inputs[f"{t}_descale"].double().flatten()[0] for t in "qkv")
    p = torch.softmax(torch.einsum("bqhd,bkhd->bhqk", q, k) / 128 ** 0.5, dim=-1)
    ref = torch.einsum("bhqk,bkhd->bqhd", p, v)
    rel = ((r.out.double() - ref).norm() / ref.norm()).item()
    assert rel < 0.05
    # heads x query tiles of 256 x key tiles of 128 x 8 waves x 2 per tile
    assert r.stats.executed["v_smfmac_f32_16x16x128_fp8_fp8"] == 2 * 2 * 3 * 8 * 2


@needs_fp8
def test_aiter_v4_rollback_branches_follow_the_data_path():
    """v4's six `s_cbranch_vccnz label_rollback_overflow_*` (a row maximum past the lazy-rescale
    threshold) on Gaussian inputs: the emulator runs them all and none jumps, so the measured policy
    is 'not-taken' at every site; handed to the cycle model it overrides --unknown-branch, and the
    opposite direction (a rollback on every tile) costs time, so the measured one is what runs."""
    from zyfa.trace.cdna4.estimate import EstimateConfig
    from zyfa.trace.cdna4.tracer import simulate
    from zyfa.trace.cdna4.launch import prepare
    from zyfa.trace.emu.branches import measured_branch_policy

    shape = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=512, seqlen_k=512, causal=False, dtype="fp8")
    policy, text = measured_branch_policy("aiter:fmha_v4_fwd/fwd_hd128_fp8", shape,
                                          lambda k, s: prepare(k, s).program.instructions)
    assert len(policy) == 6 and set(policy.values()) == {"not-taken"}
    assert "6 vcc/exec branch sites ran 48 times, 0 taken" in text  # 16 waves (2 query tiles x 8), 3 checks each
    measured = simulate("aiter:fmha_v4_fwd/fwd_hd128_fp8", shape,
                        config=EstimateConfig(unknown_branch="taken", branch_policy=tuple(policy.items())))[1]
    taken = simulate("aiter:fmha_v4_fwd/fwd_hd128_fp8", shape, config=EstimateConfig(unknown_branch="taken"))[1]
    default = simulate("aiter:fmha_v4_fwd/fwd_hd128_fp8", shape)[1]
    assert measured.cycles == default.cycles < taken.cycles
    with pytest.raises(ValueError, match="branch_policy"):
        EstimateConfig(branch_policy=((1, "maybe"),))
