"""The CuTe DSL FP8 kernel on an H200: spec conformance, empty rows, determinism, backend dispatch.

Bounds (the same as the Triton kernel's on Hopper, tests/kernels/triton/test_triton_gpu.py): against
the spec transcription (magic rounding, fp64 accumulation), compared before the bf16 cast
(``out_dtype=float32``), relative L2 <= 5e-3 and softmax_lse max abs <= 0.1, because Hopper's fp8
tensor-core accumulation is not IEEE fp32 (it perturbs QK^T, which flips some P codes at rounding
boundaries; and this kernel accumulates PV over the whole key loop inside the tensor core, as
FlashAttention-3 does). Every test prints its measured value (``pytest -s``).
"""

import importlib.util
import math
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available() or torch.version.hip is not None:
    pytest.skip("needs an NVIDIA GPU", allow_module_level=True)
if torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("needs a Hopper (sm_90) GPU", allow_module_level=True)
pytest.importorskip("cutlass", reason="needs the CuTe DSL (pip install 'zyfa[hopper]')")

from zyfa import flash_attn_func, numerics  # noqa: E402
from zyfa.kernels.hopper.attn_fp8_sm90 import attention_fp8_sm90  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "triton_interp_cases", Path(__file__).parents[1] / "triton" / "triton_interp_cases.py")
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)


fp8_inputs = cases.fp8_inputs


def rel_l2(a, ref):
    return cases.rel_l2(a.cpu(), ref.cpu())


def assert_within_bound(tag, shape, variant, out, lse, ref, ref_lse):
    """The bound of the module docstring (rel. L2 <= 5e-3 before the bf16 cast, lse max abs <= 0.1, the
    same rows without keys); prints the measured values under ``tag``."""
    err = rel_l2(out.cpu(), ref)
    fin = torch.isfinite(ref_lse)
    lse_err = float((lse.cpu()[fin] - ref_lse[fin]).abs().max())
    print(f"\n{tag} {shape} {variant} rel_l2={err:.3e} lse_max_abs={lse_err:.3e}")
    assert err <= 5e-3
    assert torch.equal(torch.isinf(lse.cpu()), torch.isinf(ref_lse))
    assert lse_err <= 0.1


def assert_bit_exact(tag, out, lse, ref, ref_lse, other=""):
    """Exact mode on exact inputs: out (fp32) equal bit for bit, lse within 1e-5; prints under ``tag``."""
    differ = int((out.cpu() != ref).sum())
    fin = torch.isfinite(ref_lse)
    lse_err = float((lse.cpu()[fin] - ref_lse[fin]).abs().max())
    print(f"\n{tag}: exact=True differs in {differ} of {out.numel()}{other}; lse max abs {lse_err:.2e}")
    assert differ == 0
    assert torch.equal(torch.isinf(lse.cpu()), torch.isinf(ref_lse)) and lse_err <= 1e-5


SPEC_SHAPES = [(1, 333, 333, 4, 2, 128, 128, True), (2, 200, 517, 2, 1, 128, 128, True),
               (1, 256, 129, 2, 2, 64, 64, True), (1, 300, 300, 2, 1, 128, 128, False),
               (1, 190, 190, 2, 2, 192, 128, True), (1, 1024, 1024, 4, 4, 128, 128, True)]


VARIANTS = [dict(pingpong=True), dict(pingpong=False), dict(pingpong=True, n128=True), dict(pingpong=False, n128=True)]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(f"{k}={int(x)}" for k, x in v.items()))
@pytest.mark.parametrize("b,sq,sk,h,hk,d,dv,causal", SPEC_SHAPES)
def test_fp8_matches_spec(b, sq, sk, h, hk, d, dv, causal, variant):
    q8, dq, k8, dk, v8, dv_ = fp8_inputs(b, sq, sk, h, hk, d, dv)
    out, lse = attention_fp8_sm90(q8, k8, v8, d ** -0.5, causal, dq, dk, dv_, out_dtype=torch.float32,
                                  **variant)
    ref, ref_lse = cases.spec_fp8_magic(q8.cpu(), k8.cpu(), v8.cpu(), dq.cpu(), dk.cpu(), dv_.cpu(), d ** -0.5, causal)
    assert_within_bound("SPEC", (b, sq, sk, h, hk, d, dv, causal), variant, out, lse, ref, ref_lse)


# recipe zyfa-runmax (codes against the running max, PV into O) and zyfa-v1 with 128-key scaling blocks (t128)
TILE_VARIANTS = [dict(n128=True, runmax=True), dict(n128=True, runmax=True, pingpong=False),
                 dict(n128=True, t128=True), dict(n128=True, t128=True, pingpong=False)]


def tile_emulator(q8, k8, v8, dq, dk, dv, causal, d, runmax):
    """The emulator of the variant's recipe (runmax: zyfa-runmax; else zyfa-v1 with block=128), magic
    rounding, fp32 out."""
    return numerics.zyfa_fp8_attention(q8.cpu(), k8.cpu(), v8.cpu(), dq.cpu(), dk.cpu(), dv.cpu(), causal=causal,
                                       softmax_scale=d ** -0.5, variant="zyfa-runmax" if runmax else "zyfa",
                                       rounding="magic", block=128, out_dtype=torch.float32)


@pytest.mark.parametrize("variant", TILE_VARIANTS, ids=lambda v: "-".join(f"{k}={int(x)}" for k, x in v.items()))
@pytest.mark.parametrize("b,sq,sk,h,hk,d,dv,causal", SPEC_SHAPES)
def test_tile_variants_match_their_emulator(b, sq, sk, h, hk, d, dv, causal, variant):
    # Hopper accumulation (runmax: PV over the whole key loop in the tensor core): the bound of
    # test_fp8_matches_spec
    q8, dq, k8, dk, v8, dv_ = fp8_inputs(b, sq, sk, h, hk, d, dv)
    out, lse = attention_fp8_sm90(q8, k8, v8, d ** -0.5, causal, dq, dk, dv_, out_dtype=torch.float32, **variant)
    ref, ref_lse = tile_emulator(q8, k8, v8, dq, dk, dv_, causal, d, variant.get("runmax", False))
    assert_within_bound("TILE", (b, sq, sk, h, hk, d, dv, causal), variant, out, lse, ref, ref_lse)


@pytest.mark.parametrize("variant", [dict(n128=True), dict(n128=True, pingpong=False), dict(lpt=False)],
                         ids=lambda v: "-".join(f"{k}={int(x)}" for k, x in v.items()))
@pytest.mark.parametrize("b,sq,sk,h,hk,d,dv,causal", SPEC_SHAPES)
def test_schedule_variants_bitwise_equal_default(b, sq, sk, h, hk, d, dv, causal, variant):
    # 128-key S tiles (n128), ping-pong and the launch order (lpt) change the schedule,
    # not the arithmetic: every S element sums the same k-steps, every 64-key block keeps its bm, PV from
    # zero and merge order
    q8, dq, k8, dk, v8, dv_ = fp8_inputs(b, sq, sk, h, hk, d, dv)
    ref, ref_lse = attention_fp8_sm90(q8, k8, v8, d ** -0.5, causal, dq, dk, dv_, out_dtype=torch.float32)
    out, lse = attention_fp8_sm90(q8, k8, v8, d ** -0.5, causal, dq, dk, dv_, out_dtype=torch.float32, **variant)
    differ = int((out != ref).sum())
    print(f"\nSCHEDULE {(b, sq, sk, h, hk, d, dv, causal)} {variant} differing {differ} of {out.numel()}")
    assert differ == 0 and torch.equal(lse, ref_lse)


@pytest.mark.parametrize("n128", [False, True])
@pytest.mark.parametrize("b,sq,sk,h,hk,causal", [
    (1, 333, 333, 4, 2, True), (2, 200, 517, 2, 1, True),
    pytest.param(1, 300, 300, 2, 1, False, marks=pytest.mark.xfail(strict=True, reason=(
        "runs 11-12 (H200): 183 of 600 rows differ (max rel 8e-5), in both accumulation modes; these "
        "inputs' P values span up to 12 binades within a 32-key group (causal cases: <= 5.5) and the "
        "differing rows are those above ~9 (CPU check): the tensor core's own sum of one k=32 wgmma "
        "drops bits there, and fp8 wgmma has no smaller k")))])
def test_exact_mode_equals_numerics_emulator(b, sq, sk, h, hk, causal, n128):
    # exact inputs: every fp32 partial sum is exact, so with every tensor-core k-step summed in IEEE
    # fp32 (exact=True) the fp32 output must equal the emulator's (recipe zyfa-v1, magic rounding)
    q8, dq, k8, dk, v8, dv_ = cases.exact_fp8_inputs(b, sq, sk, h, hk, 128, seed=11)
    ref, ref_lse = numerics.zyfa_fp8_attention(q8, k8, v8, dq, dk, dv_, causal=causal, softmax_scale=128 ** -0.5,
                                               variant="zyfa", rounding="magic", out_dtype=torch.float32)
    gpu = [x.cuda() for x in (q8, k8, v8, dq, dk, dv_)]
    args = (gpu[0], gpu[1], gpu[2], 128 ** -0.5, causal, gpu[3], gpu[4], gpu[5])
    out, lse = attention_fp8_sm90(*args, out_dtype=torch.float32, exact=True, n128=n128)
    hopper, _ = attention_fp8_sm90(*args, out_dtype=torch.float32, n128=n128)
    differ, differ_hopper = int((out.cpu() != ref).sum()), int((hopper.cpu() != ref).sum())
    bad = (out.cpu() != ref).any(-1)  # (b, s_q, h) rows with a differing element
    rel = float(((out.cpu() - ref).abs().max() / ref.abs().max()))
    print(f"\nEXACT rows differing {int(bad.sum())} of {bad.numel()} (query positions {bad.any(0).any(-1).nonzero().flatten()[:8].tolist()}...), "
          f"max |diff| / max |ref| {rel:.2e}, lse differs in {int((lse.cpu() != ref_lse).sum())} rows")
    fin = torch.isfinite(ref_lse)
    lse_err = float((lse.cpu()[fin] - ref_lse[fin]).abs().max())
    print(f"\nEXACT {(b, sq, sk, h, hk, causal)} n128={n128}: exact=True differs in {differ} of {out.numel()}, "
          f"Hopper accumulation in {differ_hopper}; lse max abs {lse_err:.2e}")
    assert differ == 0
    assert torch.equal(torch.isinf(lse.cpu()), torch.isinf(ref_lse)) and lse_err <= 1e-5


@pytest.mark.parametrize("recipe", ["runmax", "t128"])
@pytest.mark.parametrize("b,sq,sk,h,hk,causal", [
    (1, 333, 333, 4, 2, True), (2, 200, 517, 2, 1, True),
    pytest.param(1, 1024, 1024, 2, 1, True, marks=pytest.mark.xfail(strict=True, reason=(
        "run 28 (H200): 384 of 262144 elements differ (lse up to 8.6e-6), the same count for runmax and t128 "
        "and with the n128 kernel's exact mode untested here: presumably the known limit of exact mode (the "
        "k=32 wgmma's own sum; test_exact_mode_equals_numerics_emulator), not checked on these rows")))])
def test_tile_variants_exact_mode_equal_their_emulator(b, sq, sk, h, hk, causal, recipe):
    # exact inputs and exact=True: the variant's recipe bit for bit (out in fp32, lse)
    q8, dq, k8, dk, v8, dv_ = cases.exact_fp8_inputs(b, sq, sk, h, hk, 128, seed=11)
    ref, ref_lse = tile_emulator(q8, k8, v8, dq, dk, dv_, causal, 128, recipe == "runmax")
    gpu = [x.cuda() for x in (q8, k8, v8, dq, dk, dv_)]
    args = (gpu[0], gpu[1], gpu[2], 128 ** -0.5, causal, gpu[3], gpu[4], gpu[5])
    out, lse = attention_fp8_sm90(*args, out_dtype=torch.float32, exact=True, n128=True, **{recipe: True})
    hopper, _ = attention_fp8_sm90(*args, out_dtype=torch.float32, n128=True, **{recipe: True})
    assert_bit_exact(f"TILE-EXACT {recipe} {(b, sq, sk, h, hk, causal)}", out, lse, ref, ref_lse,
                     f", Hopper accumulation in {int((hopper.cpu() != ref).sum())}")


# recipe zyfa-grouped (docs/numerics.md): PV in the tensor core over groups of G tiles, O in shared memory,
# S_{j+1} issued before tile j's softmax. Written on the CPU box (fifth session), not yet run on a GPU.
GROUPED_VARIANTS = [dict(n128=True, grouped=2), dict(n128=True, grouped=2, pingpong=False),
                    dict(n128=True, grouped=4, pingpong=False), dict(n128=True, grouped=8)]


def grouped_emulator(q8, k8, v8, dq, dk, dv, causal, d, group):
    """zyfa-grouped with 128-key blocks and ``group`` tiles per group, magic rounding, fp32 out."""
    return numerics.zyfa_fp8_attention(q8.cpu(), k8.cpu(), v8.cpu(), dq.cpu(), dk.cpu(), dv.cpu(), causal=causal,
                                       softmax_scale=d ** -0.5, variant="zyfa-grouped", rounding="magic", block=128,
                                       group=group, out_dtype=torch.float32)


@pytest.mark.parametrize("variant", GROUPED_VARIANTS, ids=lambda v: "-".join(f"{k}={int(x)}" for k, x in v.items()))
@pytest.mark.parametrize("b,sq,sk,h,hk,d,dv,causal", SPEC_SHAPES)
def test_grouped_matches_its_emulator(b, sq, sk, h, hk, d, dv, causal, variant):
    # Hopper accumulation (PV over up to G tiles in the tensor core): the bound of test_fp8_matches_spec
    q8, dq, k8, dk, v8, dv_ = fp8_inputs(b, sq, sk, h, hk, d, dv)
    out, lse = attention_fp8_sm90(q8, k8, v8, d ** -0.5, causal, dq, dk, dv_, out_dtype=torch.float32, **variant)
    ref, ref_lse = grouped_emulator(q8, k8, v8, dq, dk, dv_, causal, d, variant["grouped"])
    assert_within_bound("GROUPED", (b, sq, sk, h, hk, d, dv, causal), variant, out, lse, ref, ref_lse)


@pytest.mark.parametrize("group", [1, 2, 4])
@pytest.mark.parametrize("b,sq,sk,h,hk,causal", [
    (1, 333, 333, 4, 2, True), (2, 200, 517, 2, 1, True),
    pytest.param(1, 1024, 1024, 2, 1, True, marks=pytest.mark.xfail(strict=False, reason=(
        "expected to differ as runmax and t128 do on this shape (run 28: 384 of 262144 elements; "
        "test_tile_variants_exact_mode_equal_their_emulator); not run yet")))])
def test_grouped_exact_mode_equals_its_emulator(b, sq, sk, h, hk, causal, group):
    # exact inputs and exact=True: the recipe bit for bit (out in fp32, lse)
    q8, dq, k8, dk, v8, dv_ = cases.exact_fp8_inputs(b, sq, sk, h, hk, 128, seed=11)
    ref, ref_lse = grouped_emulator(q8, k8, v8, dq, dk, dv_, causal, 128, group)
    gpu = [x.cuda() for x in (q8, k8, v8, dq, dk, dv_)]
    args = (gpu[0], gpu[1], gpu[2], 128 ** -0.5, causal, gpu[3], gpu[4], gpu[5])
    out, lse = attention_fp8_sm90(*args, out_dtype=torch.float32, exact=True, n128=True, grouped=group)
    assert_bit_exact(f"GROUPED-EXACT G={group} {(b, sq, sk, h, hk, causal)}", out, lse, ref, ref_lse)


def test_grouped_of_one_tile_equals_t128_bitwise():
    # G = 1 is zyfa-v1 with block=128 (the emulators agree bit for bit, tests/zyfa/test_numerics_grouped.py):
    # with exact inputs and exact=True both kernels must give the same bits
    q8, dq, k8, dk, v8, dv_ = cases.exact_fp8_inputs(1, 333, 333, 4, 2, 128, seed=11)
    gpu = [x.cuda() for x in (q8, k8, v8, dq, dk, dv_)]
    args = (gpu[0], gpu[1], gpu[2], 128 ** -0.5, True, gpu[3], gpu[4], gpu[5])
    g1, g1_lse = attention_fp8_sm90(*args, out_dtype=torch.float32, exact=True, n128=True, grouped=1)
    t, t_lse = attention_fp8_sm90(*args, out_dtype=torch.float32, exact=True, n128=True, t128=True)
    print(f"\nGROUPED-1 vs t128: differing {int((g1 != t).sum())} of {t.numel()}")
    assert torch.equal(g1, t) and torch.equal(g1_lse, t_lse)


def test_rows_without_keys_are_zero():
    # causal with seqlen_q > seqlen_k: the first seqlen_q - seqlen_k rows see no key (out 0, lse +inf)
    q8, dq, k8, dk, v8, dv_ = fp8_inputs(1, 300, 100, 2, 2, 128, 128, seed=5)
    for variant in (dict(), dict(n128=True, runmax=True, pingpong=False), dict(n128=True, t128=True, pingpong=False),
                    dict(n128=True, grouped=2, pingpong=False)):
        out, lse = attention_fp8_sm90(q8, k8, v8, 128 ** -0.5, True, dq, dk, dv_, **variant)
        assert torch.all(out[:, :200] == 0) and torch.all(torch.isinf(lse[:, :, :200]))
        assert torch.all(torch.isfinite(lse[:, :, 200:]))


@pytest.mark.parametrize("variant", [dict(), dict(n128=True), dict(n128=True, pingpong=False),
                                     dict(n128=True, pingpong=False, runmax=True),
                                     dict(n128=True, pingpong=False, t128=True), dict(n128=True, grouped=4)],
                         ids=lambda v: "-".join(f"{k}={int(x)}" for k, x in v.items()) or "default")
def test_bitwise_deterministic_over_1000_calls(variant):
    q8, dq, k8, dk, v8, dv_ = fp8_inputs(1, 2048, 2048, 8, 2, 128, 128, seed=7)
    first, lse0 = attention_fp8_sm90(q8, k8, v8, 128 ** -0.5, True, dq, dk, dv_, **variant)
    same = sum(torch.equal(attention_fp8_sm90(q8, k8, v8, 128 ** -0.5, True, dq, dk, dv_, **variant)[0], first)
               for _ in range(1000))
    print(f"\nDETERMINISM {variant} {same}/1000 calls bit-identical")
    assert same == 1000


def test_backend_dispatch():
    q8, dq, k8, dk, v8, dv_ = fp8_inputs(1, 100, 100, 2, 2, 128, 128, seed=2)
    out = flash_attn_func(q8, k8, v8, causal=True, q_descale=dq, k_descale=dk, v_descale=dv_, backend="hopper",
                          recipe="zyfa-v1")
    oracle = flash_attn_func(q8, k8, v8, causal=True, q_descale=dq, k_descale=dk, v_descale=dv_, backend="oracle",
                             recipe="zyfa-v1")
    err = rel_l2(out, oracle)
    print(f"\nDISPATCH rel_l2 vs oracle {err:.3e}")
    assert not math.isnan(err) and err < 6e-2


@pytest.mark.parametrize("b,sq,sk,h,hk,d,dv,causal", SPEC_SHAPES)
def test_backend_holds_recipe_v1_bound(b, sq, sk, h, hk, d, dv, causal):
    # what flash_attn_func(backend="hopper", recipe="zyfa-v1") runs (t128 since 7350f48: v1 with one
    # scaling block per 128-key tile) held to the v1 spec (64-key blocks) with the bound that
    # test_fp8_matches_spec applies to every schedule; the output is bf16, so the spec's output too
    q8, dq, k8, dk, v8, dv_ = fp8_inputs(b, sq, sk, h, hk, d, dv)
    out, lse, _ = flash_attn_func(q8, k8, v8, causal=causal, q_descale=dq, k_descale=dk, v_descale=dv_,
                                  backend="hopper", recipe="zyfa-v1", return_attn_probs=True)
    ref, ref_lse = cases.spec_fp8_magic(q8.cpu(), k8.cpu(), v8.cpu(), dq.cpu(), dk.cpu(), dv_.cpu(), d ** -0.5, causal)
    err = rel_l2(out.float(), ref.to(torch.bfloat16).float())
    fin = torch.isfinite(ref_lse)
    lse_err = float((lse.cpu()[fin] - ref_lse[fin]).abs().max())
    print(f"\nBACKEND-V1 {(b, sq, sk, h, hk, d, dv, causal)} rel_l2={err:.3e} lse_max_abs={lse_err:.3e}")
    assert out.dtype == torch.bfloat16 and err <= 5e-3
    assert torch.equal(torch.isinf(lse.cpu()), torch.isinf(ref_lse)) and lse_err <= 0.1


def test_triton_v_prep_equals_torch_reference_on_gpu():
    from zyfa.kernels.hopper.layout import prepare_v
    from zyfa.kernels.hopper.vprep import prepare_v_triton
    v8 = fp8_inputs(2, 8, 1000, 2, 2, 128, 128, seed=9)[4]
    assert torch.equal(prepare_v_triton(v8).view(torch.uint8), prepare_v(v8).view(torch.uint8))
