"""Triton kernels in the CPU interpreter on tiny, odd shapes (GQA, causal both ways, padded headdim).

The FP8 kernel must follow docs/numerics.md (v1, magic rounding): its fp32 output (before the bf16
cast) is compared with a per-block transcription of the spec; the only freedom is the fp32
accumulation order of QK^T and PV, hence the bound 1e-6 (measured: <= 1e-8). The interpreter's
fp32 -> bf16 cast is not round-to-nearest (measured up to ~2 bf16 ulps), so bf16 outputs are
bounded by 3 ulps of the fp32 ones, and the BF16 kernel by 4x the error of rounding the fp64
result to bf16 itself. Spec v2 (``recipe="zyfa-v2"``) is compared with the bit-exact emulator
(``zyfa.numerics``): bit for bit on inputs whose every fp32 partial sum is exact, within 1e-6 on
Gaussian inputs (measured 3.4e-9).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def results():
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, str(HERE / "triton_interp_cases.py")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


FP8_CASES = ["fp8_full_gqa", "fp8_causal_sk_gt_sq", "fp8_causal_sq_gt_sk", "fp8_mla_like_padded",
             "fp8_scaled_pv", "fp8_rowsum_acc_in_dot"]
BF16_CASES = ["bf16_full_gqa", "bf16_causal_sk_gt_sq", "bf16_causal_sq_gt_sk"]


@pytest.mark.parametrize("case", FP8_CASES)
def test_fp8_kernel_follows_spec(results, case):
    r = results[case]
    assert r["fp32_vs_spec_rel_l2"] <= 1e-6
    assert r["lse_vs_spec_max_abs"] <= 1e-5
    assert r["lse_inf_match"]  # rows with no allowed key: lse = +inf exactly where the spec says
    assert r["empty_rows_zero"]
    assert r["bf16_vs_fp32_max_ulps"] <= 3.0
    assert r["out_dtype"] == "torch.bfloat16"


@pytest.mark.parametrize("case", FP8_CASES)
def test_fp8_kernel_error_vs_fp64_is_fp8_sized(results, case):
    # e4m3 inputs and P: a few percent (design notes: FA3 fp8 4.8e-2 on Gaussian inputs), not more
    assert 1e-3 < results[case]["vs_fp64_rel_l2"] < 6e-2


@pytest.mark.parametrize("case", BF16_CASES)
def test_bf16_kernel_vs_fp64(results, case):
    r = results[case]
    assert r["vs_fp64_rel_l2"] <= 4 * r["bf16_rounding_rel_l2"]
    assert r["lse_max_abs"] <= 1e-5
    assert r["lse_inf_match"]
    assert r["out_dtype"] == "torch.bfloat16"


V2_EXACT = ["v2_exact_causal_gqa", "v2_exact_sq_gt_sk", "v2_exact_full"]


@pytest.mark.parametrize("case", V2_EXACT)
def test_fp8_v2_equals_emulator_bit_for_bit_with_exact_accumulation(results, case):
    # integer Q, K and V in {-1, 0, 1}: every partial sum exact, so the fp32 outputs must be identical
    r = results[case]
    assert r["fp32_bitwise_equal"]
    # lse = (M + log2 l) ln 2: log2 in fp32 here, float64 rounded once in the emulator (M and l identical)
    assert r["lse_vs_emulator_max_ulps"] <= 2.0
    assert r["lse_inf_match"]
    assert r["v1_differs"]  # the recipe switch reaches the kernel


def test_fp8_v2_gaussian_within_accumulation_order(results):
    r = results["v2_gaussian_causal"]
    assert r["fp32_vs_emulator_rel_l2"] <= 1e-6
    assert r["lse_vs_emulator_max_abs"] <= 1e-5


NAN_CASES = [f"nan_{name}_{mask}" for name in ("q_row", "k_masked_early", "v_masked_early", "v_tail", "k_all")
             for mask in ("causal", "full")]


@pytest.mark.parametrize("case", NAN_CASES)
def test_nan_reaches_exactly_the_rows_that_read_it(results, case):
    """Both kernels (FP8: both recipes): the NaN pattern of out and lse is the reads rule's
    (emulator / reference)."""
    r = results[case]
    assert r["fp8_out_nan_match"] and r["fp8_lse_nan_match"] and r["fp8_nan_count"] > 0, r
    assert r["fp8_v2_nan_match"], r
    assert r["bf16_out_nan_match"] and r["bf16_lse_nan_match"] and r["bf16_nan_count"] > 0, r


@pytest.mark.parametrize("dtype", ["fp8", "bf16"])
def test_nan_checks_switch_changes_nothing_on_finite_input(results, dtype):
    """benchmarks/bench_nan_checks.py times ``nan_checks=False`` against the shipped kernel: same
    bits on finite input, and without the checks the NaN rule is broken as expected (BF16: a NaN
    in V reaches the rows that mask it; FP8: a NaN code in q leaves its row finite in the
    interpreter), so the switch removes the work it is meant to measure."""
    r = results[f"nan_checks_off_{dtype}"]
    assert r["same_bits"], r
    if dtype == "bf16":
        assert r["nan_with"] == 0 and r["nan_without"] > 0, r
    else:
        assert r["nan_with"] == 32 and r["nan_without"] == 0, r


@pytest.mark.parametrize("case", ["gqa", "mla", "one_key", "clean"])
def test_first_nan_keys_kernel_equals_torch_form(results, case):
    """The FP8 NaN rule's first-NaN words come from one kernel now; the torch form it replaced is the
    reference (several NaN codes per column, not-contiguous K and V)."""
    r = results[f"first_nan_keys_{case}"]
    assert r["equal"], r
    assert not r["contiguous"] or case == "one_key", r  # one key: the views are contiguous anyway
    assert (r["nan_columns"] > 0) == (case != "clean"), r


HADAMARD_CASES = [f"{c}_{g}" for c in ("hadamard_gqa_d64_fp32", "hadamard_d128_bf16", "hadamard_d256_fp16",
                                         "hadamard_tiny") for g in ("head", "token")]
# the same kernel with rotate=False (the quantisation alone) against quantize_fp8(x)
HADAMARD_CASES += [f"quantise_only_{c}_{g}" for c in ("hadamard_gqa_d64_fp32", "hadamard_d128_bf16", "hadamard_d256_fp16")
                   for g in ("head", "token")]


# RoPE + Hadamard + quantise and RoPE + quantise in one pass against quantize_fp8([hadamard](rope(x)))
HADAMARD_CASES += [f"rope_{r}_{c}_{g}" for r in ("hadamard", "quantise", "hadamard_tables_x", "hadamard_lean",
                                                  "hadamard_run25")
                   for c in ("hadamard_gqa_d64_fp32", "hadamard_d128_bf16", "hadamard_d256_fp16") for g in ("head", "token")]
# variants "rows" and "pairs" (their own kernels): with and without RoPE, rotated or not, tiny rows / groups
HADAMARD_CASES += [f"{v}_{r}_{c}_{g}" for v in ("rows", "pairs")
                   for r in ("hadamard", "quantise", "rope_hadamard", "rope_quantise")
                   for c in ("hadamard_gqa_d64_fp32", "hadamard_d128_bf16", "hadamard_d256_fp16") for g in ("head", "token")]
HADAMARD_CASES += [f"{v}_hadamard_tiny_{g}" for v in ("rows", "pairs") for g in ("head", "token")]


@pytest.mark.parametrize("case", HADAMARD_CASES)
def test_fused_hadamard_quantise_equals_torch_path(results, case):
    # the kernel's rotation, amax and division; the fp32 -> e4m3 convert runs on the host here (the
    # interpreter's is not RNE): benchmarks/h200_numerics.py checks the GPU's convert bit for bit
    r = results[case]
    assert r["codes_equal"] and r["descale_equal"], r
    assert r["dtype"] == "torch.float8_e4m3fn"
    if "hadamard_tiny" in case:  # the case reaches the kernel's div_rn branch
        assert r["min_descale"] < 2.0 ** -100, r


@pytest.mark.parametrize("case", ["hadamard_gqa_d64_fp32", "hadamard_d128_bf16", "hadamard_d256_fp16"])
def test_rope_pass_equals_torch_path(results, case):
    # the RoPE-only kernel (the pass a model runs anyway; the fused kernel's baseline) keeps x's dtype
    # and equals numerics.rope rounded once to it (the cast on the host here, as above)
    assert results[f"rope_only_{case}"] == {"equal": True, "dtype_kept": True}
    assert results[f"rope_only_tables_x_{case}"] == {"equal": True, "dtype_kept": True}  # tables in x's layout
    assert results[f"rope_only_rows_{case}"] == {"equal": True, "dtype_kept": True}  # the "rows" form


def test_sweep_launches_equal_torch_path(results):
    # benchmarks/fused_rope_quant.py --sweep (H200 run 33): every launch it times gives the torch path's bits
    equal = results["sweep_launches"]
    assert len(equal) >= 20 and all(equal.values()), [k for k, v in equal.items() if not v]


@pytest.mark.parametrize("case", [f"hadamard_nonfinite_{g}_{k}" for g in ("head", "token") for k in ("nan", "inf")]
                         + [f"{v}_hadamard_nonfinite_{g}_{k}" for v in ("rows", "pairs") for g in ("head", "token")
                            for k in ("nan", "inf")])
def test_fused_hadamard_quantise_rejects_non_finite(results, case):
    # one NaN / inf in the last token of the last head: seen through that row's (group's) descale
    assert "non-finite" in results[case]["raised"], results[case]


@pytest.mark.parametrize("case", ["fixed_config_fp8_v1", "fixed_config_fp8_v2", "fixed_config_bf16"])
def test_fixed_config_mode_gives_the_default_bits(results, case):
    # ZYFA_TRITON_FIXED_CONFIG=1 (FlashAttention's upstream tests through examples/fa_shim) launches
    # the length-agnostic twin of the kernel with a fixed config: same code, same results
    assert results[case] == {"out_equal": True, "lse_equal": True}


def test_default_launch_reuses_the_winner_of_a_tuned_length_bucket(results):
    # _common.BucketedAutotune: 100 x 120 keys after 70 x 90 (both in bucket 128 x 128) tune nothing new
    assert results["bucketed_reuse_fp8"] == {"new_buckets": 0, "out_equal": True, "lse_equal": True}
