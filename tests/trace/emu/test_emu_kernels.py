"""Our generated gfx950 kernels, emulated, against the numerics emulator (docs/numerics.md).

Bounds: the folded Lean P, Lean P and exact-exp block-scaled kernels (``zyfa-fp8``,
``zyfa-fp8-valu-rowsum``, ``zyfa-fp8-v1``, ``zyfa-fp8-v2`` (spec v2), ``zyfa-fp8-exact``) must match ``zyfa.numerics`` bit for bit (out and lse): their fp32 work is exact or single-rounded in
the same order as the spec. The exact-softmax kernels (``aiter-like-fp8``, ``zyfa-bf16``) sum
unrounded probabilities and accumulate P @ V in fp32 in their own order: each output element may
differ from the reference by one bf16 ulp plus the fp32 summation-order bound
``seqlen_k * 2^-24 * max|v|`` (visible only where P @ V cancels to nearly zero), lse by at most
2 fp32 ulps, and at least 99.9% of the outputs are bit-identical.
"""

from dataclasses import replace

import pytest
import torch

from zyfa.kernels import gfx950, registry
from zyfa.shapes import AttnShape
from zyfa.trace.emu import emulate_kernel, make_inputs

pytest.importorskip("zyfa.kernels.gfx950")


BIT_EXACT = ("zyfa-fp8", "zyfa-fp8-v1", "zyfa-fp8-v2", "zyfa-fp8-valu-rowsum", "zyfa-fp8-exact")


def _shape(kernel, seqlen, heads=2, heads_k=None, batch=1):
    return AttnShape(batch=batch, heads=heads, heads_k=heads_k or heads, seqlen_q=seqlen,
                     seqlen_k=seqlen, headdim=128, headdim_v=128, causal=True,
                     dtype="bf16" if kernel.endswith("bf16") else "fp8")


def _bf16_ulp(a, b):
    mag = torch.maximum(a.abs(), b.abs()).clamp(min=2.0**-126)
    return torch.exp2(torch.floor(torch.log2(mag)) - 7)


def _check(result):
    out, ref = result.out.float(), result.ref_out.float()
    assert torch.isfinite(out).all()
    if result.kernel in BIT_EXACT:
        assert torch.equal(result.out.view(torch.int16), result.ref_out.view(torch.int16))
        assert torch.equal(result.lse, result.ref_lse)
    else:
        v = result.inputs["v"].float()
        if "v_descale" in result.inputs:
            v = v * result.inputs["v_descale"][:, None, :, None]
        order_bound = result.shape.seqlen_k * 2.0**-24 * v.abs().max()
        assert ((out - ref).abs() <= _bf16_ulp(out, ref) + order_bound).all()
        assert result.bitwise_fraction >= 0.999
        lse_ulp = 2.0**-23 * result.ref_lse.abs().clamp(min=1.0)
        assert ((result.lse - result.ref_lse).abs() <= 2 * lse_ulp).all()


@pytest.mark.parametrize("kernel", ["zyfa-fp8", "zyfa-fp8-v1", "zyfa-fp8-v2", "zyfa-fp8-valu-rowsum", "zyfa-fp8-exact", "aiter-like-fp8", "zyfa-bf16"])
def test_generated_kernel_s256(kernel):
    result = emulate_kernel(kernel, _shape(kernel, 256))
    _check(result)
    # the causal mask is real: row 0 attends to key 0 only, so out[0] = v[0] exactly
    v0 = result.inputs["v"][0, 0].float()
    if kernel.endswith("bf16"):
        expect = v0
    else:
        expect = v0 * result.inputs["v_descale"][0][:, None]
    assert torch.allclose(result.out[0, 0].float(), expect.to(torch.bfloat16).float())


@pytest.mark.parametrize("kernel", ["zyfa-fp8", "zyfa-fp8-v1", "zyfa-fp8-v2", "zyfa-fp8-valu-rowsum", "aiter-like-fp8"])
def test_zyfa_fp8_race_free_across_wave_orders(kernel):
    # run-to-barrier and round-robin interleaving must give identical bits
    shape = _shape(kernel, 256, heads=1)
    a = emulate_kernel(kernel, shape, quantum=1)
    b = emulate_kernel(kernel, shape, quantum=None)
    assert torch.equal(a.out.view(torch.int16), b.out.view(torch.int16))
    assert torch.equal(a.lse, b.lse)


def test_aiter_schedule_race_free_over_many_tiles():
    """aiter-like-fp8's six-interval schedule stores K_j+1 / V_j in interval 1 of both wave groups
    (schedule.aiter_schedule): over 8 key tiles, run-to-barrier and round-robin interleaving give
    identical bits, so no wave reads an LDS buffer another is overwriting."""
    shape = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=1024, seqlen_k=1024, headdim=128, headdim_v=128,
                      causal=False, dtype="fp8")
    a = emulate_kernel("aiter-like-fp8", shape, quantum=1)
    b = emulate_kernel("aiter-like-fp8", shape, quantum=None)
    assert torch.equal(a.out.view(torch.int16), b.out.view(torch.int16)) and torch.equal(a.lse, b.lse)
    _check(a)


@pytest.mark.parametrize("kernel", ["zyfa-fp8", "zyfa-fp8-v1", "zyfa-fp8-v2", "zyfa-fp8-valu-rowsum"])
def test_masked_mfmas_are_skipped(kernel):
    """b1 h1 s256 causal, one workgroup: wave w (rows 32w..32w+31) runs the QK MFMAs of the
    w + 1 S tiles of 32 keys it needs (2 head-dim chunks each) and, per 64-key P block it needs,
    4 PV MFMAs + 1 row sum (zyfa-fp8-valu-rowsum: none); PV of tile -1 (zero P) and every fully masked S tile / P block
    are branched over. Bit-exact all the same."""
    result = emulate_kernel(kernel, _shape(kernel, 256, heads=1))
    _check(result)
    rowsum = {"zyfa-fp8-valu-rowsum": lambda b: False}.get(kernel, lambda b: True)
    qk = sum(2 * (w + 1) for w in range(8))
    pv = sum(4 + rowsum(b) for w in range(8) for b in range(-(-(32 * w + 32) // 64)))
    executed = sum(n for op, n in result.stats.executed.items() if op.startswith("v_mfma"))
    assert qk == 72 and executed == qk + pv


def _plain_and_grown(kernel):
    """``kernel`` at b1 h1 s512 on Gaussian inputs and on the same inputs with keys 256.. copied from
    the queries (each row 256 + i meets its own |q|^2, a much larger score, on its diagonal tile),
    both checked against zyfa.numerics: (plain result, grown result, the grown inputs)."""
    shape = _shape(kernel, 512, heads=1)
    plain = emulate_kernel(kernel, shape)
    _check(plain)
    inputs = make_inputs(shape)
    inputs["k"][:, 256:] = inputs["q"][:, 256:]
    grown = emulate_kernel(kernel, shape, inputs=inputs)
    _check(grown)
    return plain, grown, inputs


def test_folded_fixup_path_bit_exact_when_the_row_max_grows_mid_sequence():
    """zyfa-fp8's out-of-line fix-up runs on the first tile (every row leaves the initial
    reference) and again where a later tile's scores overflow the e4m3 code: keys 256.. are
    copies of the queries 256.., so each row 256 + i meets its own |q|^2, a much larger score,
    on its diagonal tile.
    Both the kernel and zyfa.numerics move the reference there; they agree bit for bit."""
    plain, grown, _ = _plain_and_grown("zyfa-fp8")
    # v_ceil_f32 runs only in the fix-up (d = ceil((M - FOLD_FIX_BIAS) / 8)): more fix-ups with the copies
    assert 0 < plain.stats.executed["v_ceil_f32"] < grown.stats.executed["v_ceil_f32"]


def test_epilogue_division_fast_and_exact_paths_both_bit_exact():
    """One IEEE division per row + Markstein correction when every element is in range; the
    per-element IEEE sequence (out of line) for a wave holding a zero element or an empty row.
    Both equal the numerics emulator's IEEE division bit for bit."""
    shape = _shape("zyfa-fp8", 256, heads=1)
    waves = 8  # one workgroup
    fast = emulate_kernel("zyfa-fp8", shape)
    _check(fast)
    assert fast.stats.executed["v_div_scale_f32"] == 2 * waves  # the per-row reciprocal only
    inputs = make_inputs(shape)
    inputs["v"][..., 5] = torch.zeros((), dtype=inputs["v"].dtype)  # head dim 5 of O is exactly 0
    slow = emulate_kernel("zyfa-fp8", shape, inputs=inputs)
    _check(slow)
    assert slow.stats.executed["v_div_scale_f32"] == 2 * 64 * waves  # every element, every wave
    # seqlen_q > seqlen_k, bottom-right causal: the first rows see no key (den = inf) -> exact path there
    empty = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=256, seqlen_k=200, headdim=128, headdim_v=128,
                      causal=True, dtype="fp8")
    result = emulate_kernel("zyfa-fp8", empty)
    _check(result)
    assert 2 * waves < result.stats.executed["v_div_scale_f32"] < 2 * 64 * waves


def test_paired_query_blocks_bit_exact():
    """zyfa-fp8 pairs query blocks (KernelConfig.pair_query_blocks): at s600 (3 blocks of 256 rows)
    workgroup 0 runs blocks 0 and 2, workgroup 1 only the middle block 1; every row is computed
    once and bit-exact. The second block re-runs the whole program from the prologue, after a
    barrier: two workgroups of 8 waves end, three prologues run per wave slot (2 kernarg loads each)."""
    shape = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=600, seqlen_k=600, headdim=128, headdim_v=128,
                      causal=True, dtype="fp8")
    spec = registry.get_kernel("zyfa-fp8")  # pairing forced: 3 workgroups fit the CUs, the host would not pair
    config = spec.variant
    spec = replace(spec, kernargs=lambda shape: gfx950.kernargs.pack(shape, pair=True),
                   grid=lambda shape: gfx950.grid(shape, config, pair=True))
    result = emulate_kernel(spec, shape)
    _check(result)
    waves = 8
    assert spec.grid(shape) == (2, 1, 1) and registry.get_kernel("zyfa-fp8").grid(shape) == (3, 1, 1)
    assert result.stats.executed["s_endpgm"] == 2 * waves
    assert result.stats.executed["s_load_dwordx16"] == 2 * 3 * waves


def test_zyfa_fp8_seqlen_not_multiple_of_tile():
    _check(emulate_kernel("zyfa-fp8", _shape("zyfa-fp8", 300, heads=1)))


def test_zyfa_fp8_split_rowsum_bit_exact():
    """rowsum="split" (block 0's sum by its MFMA, block 1's on the VALU, carried into l one tile
    later) is no registered variant since zyfa-fp8 took rowsum="mfma", but stays selectable with
    the claim that it gives the same bits (kernels/gfx950/README.md): this keeps the claim tested."""
    spec = registry.get_kernel("zyfa-fp8")
    config = gfx950.configure(spec.variant, _shape("zyfa-fp8", 300), {"rowsum": "split"}, "zyfa-fp8-split")
    build = gfx950.build_config(config)
    assert "rowsum_carry_j" in set(build.meta["instruction_clusters"])  # the split form is what runs
    _check(emulate_kernel(replace(spec, build=lambda shape: build), _shape("zyfa-fp8", 300)))


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["zyfa-fp8", "zyfa-fp8-v1", "zyfa-fp8-v2", "zyfa-fp8-valu-rowsum", "zyfa-fp8-exact", "aiter-like-fp8", "zyfa-bf16"])
@pytest.mark.parametrize("seqlen", [300, 512])
def test_generated_kernel_more_shapes(kernel, seqlen):
    _check(emulate_kernel(kernel, _shape(kernel, seqlen)))


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["zyfa-fp8", "zyfa-fp8-v1", "zyfa-fp8-v2", "zyfa-fp8-valu-rowsum"])
def test_zyfa_fp8_gqa(kernel):
    _check(emulate_kernel(kernel, _shape(kernel, 256, heads=4, heads_k=2)))


def test_zyfa_fp8_folded_mla_192_128():
    """MLA 192/128 (head dims of Q/K 192, V 128) with GQA 4/2: three QK chunks chained into y
    (zyfa-fp8 sums P on the VALU at this head dim: gfx950.config_for)."""
    shape = AttnShape(batch=1, heads=4, heads_k=2, seqlen_q=300, seqlen_k=300, headdim=192, headdim_v=128,
                      causal=True, dtype="fp8")
    _check(emulate_kernel("zyfa-fp8", shape))


@pytest.mark.slow
@pytest.mark.parametrize("sq,sk", [(200, 333), (333, 200)])
def test_zyfa_fp8_folded_seqlen_q_ne_seqlen_k(sq, sk):
    shape = AttnShape(batch=1, heads=2, heads_k=2, seqlen_q=sq, seqlen_k=sk, headdim=128, headdim_v=128,
                      causal=True, dtype="fp8")
    _check(emulate_kernel("zyfa-fp8", shape))


@pytest.mark.parametrize("shape", [
    AttnShape(batch=1, heads=4, heads_k=2, seqlen_q=300, seqlen_k=300, headdim=192, headdim_v=128, causal=True,
              dtype="fp8"),
    AttnShape(batch=1, heads=2, heads_k=2, seqlen_q=200, seqlen_k=333, causal=True, dtype="fp8"),
    AttnShape(batch=1, heads=2, heads_k=2, seqlen_q=333, seqlen_k=200, causal=True, dtype="fp8"),
    AttnShape(batch=1, heads=2, heads_k=2, seqlen_q=256, seqlen_k=256, causal=False, dtype="fp8"),
], ids=["mla192-gqa", "sq<sk", "sq>sk", "non-causal"])
def test_zyfa_fp8_v2_shapes(shape):
    """Spec v2 kernel (MLA 192/128 with three QK chunks, bottom-right causal both ways, no mask)."""
    _check(emulate_kernel("zyfa-fp8-v2", shape))


def test_zyfa_fp8_v2_alpha_path_bit_exact_when_the_row_max_grows_mid_sequence():
    """zyfa-fp8-v2's out-of-line rescale (spec v2's alpha FMA sequence, O and L multiplied) runs on
    the first tile of every row (alpha = 0) and wherever a tile raises a row's fp32 running max:
    with keys 256.. copied from the queries, rows 256.. meet a much larger score on their diagonal
    tile (alpha far from a power of two). Out and lse equal zyfa.numerics bit for bit."""
    plain, grown, inputs = _plain_and_grown("zyfa-fp8-v2")
    # v_ldexp_f32 runs only in the alpha path (one per lane-row and rescale): taken more with the copies
    assert 0 < plain.stats.executed["v_ldexp_f32"] < grown.stats.executed["v_ldexp_f32"]
    v1 = emulate_kernel("zyfa-fp8-v1", grown.shape, inputs=inputs)  # the recipes differ: the variant reaches the code
    assert not torch.equal(v1.out.view(torch.int16), grown.out.view(torch.int16))


def test_inputs_are_deterministic():
    a = make_inputs(_shape("zyfa-fp8", 64), seed=5)
    b = make_inputs(_shape("zyfa-fp8", 64), seed=5)
    assert torch.equal(a["q"].view(torch.uint8), b["q"].view(torch.uint8))


def test_bad_shape_argument():
    with pytest.raises(TypeError, match="AttnShape"):
        emulate_kernel("zyfa-fp8", (1, 2, 256, 128))
    with pytest.raises(ValueError, match="dtype"):
        emulate_kernel("zyfa-bf16", _shape("zyfa-fp8", 256))
