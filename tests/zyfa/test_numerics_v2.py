"""Spec v2 of the ZYFA FP8 numerics (docs/numerics.md): the unbiased FMA constant, the hybrid phi
block offset against an independent dense transcription, the per-token Q scale, and the recipe
choice of the public API."""

import importlib.util
import math
from pathlib import Path

import pytest
import torch

import zyfa
from zyfa.reference import key_window
from zyfa import numerics as N
from zyfa.backends import AttentionArgs, Backend

_spec = importlib.util.spec_from_file_location("numerics_inputs", Path(__file__).with_name("numerics_inputs.py"))
_inputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_inputs)
randn, quantised = _inputs.randn, _inputs.quantised

F8 = torch.float8_e4m3fn


# -- the FMA constant ---------------------------------------------------------------------------

def _mean_ratio_measured(bias: float) -> float:
    """Mean decoded / exact probability of ``trunc(fma(x, 8, bias))`` over x uniform in [-7, 0)."""
    x = -(torch.arange(2**18, dtype=torch.float64) + 0.5) / 2**18 * 7  # 7 binades, fine grid
    y = (8 * x + bias).float()  # exact: x is a multiple of 2^-18 * 7 / 2 ... rounded once to fp32
    code = torch.where(y >= 0, torch.trunc(y), 0.0).to(torch.uint8)
    return float((code.view(F8).double() / torch.exp2(x + 8)).mean())


def test_unbiased_offset_closed_form_matches_measurement():
    delta = N.unbiased_leanp_offset()
    assert abs(delta - 0.043348) < 1e-6
    assert N.LEANP_BIAS_V2 == float(torch.tensor(120 + delta, dtype=torch.float32))
    # the closed form E[R] against the decoded codes themselves
    for bias in (120.5, N.LEANP_BIAS_V2, 120.047):
        assert abs(_mean_ratio_measured(bias) - N.leanp_mean_ratio(bias - 120)) < 2e-5
    assert abs(math.log(_mean_ratio_measured(120.5)) - 0.0396) < 5e-4  # v1: +0.04 nats
    assert abs(math.log(_mean_ratio_measured(N.LEANP_BIAS_V2))) < 2e-5


# -- hybrid phi offset ----------------------------------------------------------------------------

def test_v2_hand_case_row_max_is_exactly_256():
    # t = 0.5 (softmax_scale = 0.5 / LOG2E), s = [3, 0] in one block: M = x_b = 1.5, phi = 0.5,
    # n = ceil(1.5 - 0.5) = 1, bm' = 1.5: the max probability is 2^8 = 256 exactly (code 120;
    # v1's bm = 2 gives 192). y = 4 s + c - 8 * 1.5 = [c, c - 12] -> codes [120, 108] = P [256, 96]
    # (2^(8 - 1.5) = 90.5 -> 96). out = (256 - 2 * 96) / 352; lse = (1.5 + log2(352 / 256)) ln 2.
    q8 = torch.zeros(1, 1, 1, 16)
    q8[..., 0] = 1.0
    k8 = torch.zeros(1, 2, 1, 16)
    k8[0, 0, 0, 0] = 3.0
    v8 = torch.zeros(1, 2, 1, 16)
    v8[0, 0, 0, 0], v8[0, 1, 0, 0] = 1.0, -2.0
    out, lse = N.zyfa_fp8_attention(q8.to(F8), k8.to(F8), v8.to(F8), causal=False,
                                    softmax_scale=0.5 / N.LOG2E_F32, variant="zyfa-v2")
    assert out[0, 0, 0, 0].item() == torch.tensor((256 - 2 * 96) / 352).bfloat16().item()
    assert abs(lse.item() - (1.5 + math.log2(352 / 256)) * math.log(2)) < 1e-6


def dense_v2(q8, k8, v8, dq, dk, dv, causal, block=64, tile=128):
    """Spec v2 evaluated densely in float64 for the weights: per 128-key tile the running max M (max
    over the blocks of tiles <= this one of fp32(t * block max)), phi, and per 64-key block n and P
    from the fp32 FMA; every block weighted by 2^(n + phi - 8) at once (no online rescaling, so no
    alpha). Per-head or per-token ``dq``."""
    b, sq, h, d = q8.shape
    sk, hk = k8.shape[1], k8.shape[2]
    g = h // hk
    c = torch.tensor(d**-0.5, dtype=torch.float32) * N.LOG2E_F32
    if dq.dim() == 3:
        t = c * (dq.transpose(1, 2) * dk.repeat_interleave(g, 1)[:, :, None])[..., None]  # (b, h, sq, 1)
    else:
        t = (c * (dq * dk)).repeat_interleave(g, 1)[:, :, None, None]
    q = q8.double().transpose(1, 2)
    k = k8.double().transpose(1, 2).repeat_interleave(g, 1)
    v = v8.double().transpose(1, 2).repeat_interleave(g, 1)
    s = (q @ k.transpose(-1, -2)).float()
    allowed = key_window(sq, sk, causal, (-1, -1), "cpu")
    Pw = torch.zeros_like(s, dtype=torch.float64)
    M = torch.full((b, h, sq, 1), -math.inf)
    for k0 in range(0, sk, tile):
        xs = {}
        for j0 in range(k0, min(k0 + tile, sk), block):
            sj, aj = s[..., j0:j0 + block], allowed[:, j0:j0 + block]
            xs[j0] = t * sj.masked_fill(~aj, -math.inf).amax(-1, keepdim=True)
            M = torch.maximum(M, xs[j0])
        for j0, x_b in xs.items():
            cols = slice(j0, j0 + block)
            sj, aj = s[..., cols], allowed[:, cols]
            has = torch.isfinite(x_b)
            phi = torch.where(has, M - torch.floor(M), 0.0)
            n = torch.where(has, torch.ceil(x_b - phi), 0.0)
            y = N.fma_f32(sj, 8 * t, (N.LEANP_BIAS_V2 - 8 * phi) - 8 * n)
            P = N.decode_e4m3(torch.where(y >= 0, torch.trunc(y).clamp(max=126), 0.0).to(torch.uint8)).double()
            Pw[..., cols] = (P * torch.exp2(n.double() + phi.double() - 8)).masked_fill(~aj, 0.0)
    out = (Pw @ v) / Pw.sum(-1, keepdim=True) * dv.repeat_interleave(g, 1)[:, :, None, None].double()
    return out.transpose(1, 2)


# -- alpha: the FMA sequence every backend runs ---------------------------------------------------

def test_alpha_v2_accuracy():
    """The fp32 Horner evaluation of 2^f on every f = k 2^-22 in [0, 1): within 1.07 ulp of the
    exact value, correctly rounded for most; whole exponents exact (alpha(0) = 1 keeps a row
    whose max did not grow bit for bit); 0 below 2^-126 and at -inf (first tile)."""
    f = -(torch.arange(2**22, dtype=torch.float64) / 2**22).to(torch.float32)  # d in (-1, 0]
    got = N.alpha_v2(f).double()
    exact = torch.exp2(f.double())
    rounded = exact.float()
    ulp = torch.nextafter(rounded, torch.tensor(math.inf)).double() - rounded.double()
    err = ((got - exact).abs() / ulp).max().item()
    assert err < 1.1
    assert 0.85 < (got == rounded.double()).double().mean().item() < 1.0
    whole = torch.arange(0, -127, -1, dtype=torch.float32)
    assert torch.equal(N.alpha_v2(whole), torch.exp2(whole))
    g = f[::4][:4096]  # multiples of 2^-20: g - 5 is exact, same fraction, exponent 5 lower
    assert torch.equal(N.alpha_v2(g - 5.0), N.alpha_v2(g) * 2.0**-5)
    assert torch.equal(N.alpha_v2(torch.tensor([-126.5, -1000.0, -math.inf])), torch.zeros(3))
    assert N.alpha_v2(torch.tensor([-126.0])).item() == 2.0**-126


SHAPES = [(1, 113, 203, 4, 2, 64, 64, True), (2, 239, 113, 2, 1, 128, 128, True),
          (1, 130, 130, 3, 3, 192, 128, True), (1, 77, 150, 2, 2, 64, 64, False)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_v2_emulator_matches_dense_transcription(shape):
    b, sq, sk, h, hk, d, dv, causal = shape
    _, (q8, k8, v8, dq, dk, dvs) = quantised(b, sq, sk, h, hk, d, dv, outliers=True)
    out, lse = N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dvs, causal=causal, variant="zyfa-v2")
    ref = dense_v2(q8, k8, v8, dq, dk, dvs, causal)
    rows = key_window(sq, sk, causal, (-1, -1), "cpu").any(-1)
    assert torch.all(out[:, ~rows] == 0) and torch.all(lse[..., ~rows] == math.inf)
    err = (out[:, rows].double() - ref[:, rows]).abs()
    assert torch.all(err <= 2.0**-8 * ref[:, rows].abs() + 1e-6 * ref[:, rows].abs().amax())


def test_v2_rejects_magic_rounding():
    _, (q8, k8, v8, dq, dk, dvs) = quantised(1, 16, 16, 1, 1, 16, 16)
    with pytest.raises(ValueError, match="trunc"):
        N.zyfa_fp8_attention(q8, k8, v8, variant="zyfa-v2", rounding="magic")


def test_v2_lse_unbiased_v1_biased():
    # kernel-only LSE error (same FP8 inputs, fp64 softmax): v1's 120.5 biases by ~+0.04 nats
    _, (q8, k8, v8, dq, dk, dvs) = quantised(1, 512, 512, 4, 2, 64, 64, seed=4)
    _, ref_lse, _ = zyfa.flash_attn_func(q8, k8, v8, causal=True, q_descale=dq, k_descale=dk, v_descale=dvs,
                                         backend="oracle", return_attn_probs=True)
    bias = {}
    for variant in ("zyfa-v1", "zyfa-v2"):
        _, lse = N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dvs, causal=True, variant=variant)
        bias[variant] = float((lse.double() - ref_lse)[..., 64:].mean())  # rows with >= 65 keys
    print(f"\nLSE mean bias: {bias}")
    assert 0.025 < bias["zyfa-v1"] < 0.05
    assert abs(bias["zyfa-v2"]) <= 0.005


# -- per-token Q scale ------------------------------------------------------------------------------

def test_per_token_q_scale_folds_into_the_row_constant():
    (q, _, _), (q8, k8, v8, dq, dk, dvs) = quantised(1, 150, 150, 4, 2, 64, 64, outliers=True)
    # the per-head scale spelled per token: bit-identical results
    dq_tok = dq.repeat_interleave(2, 1)[:, None, :].expand(1, 150, 4).contiguous()
    for variant in ("zyfa-v2", "zyfa-v1", "naive"):
        a = N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dvs, variant=variant)
        b = N.zyfa_fp8_attention(q8, k8, v8, dq_tok, dk, dvs, variant=variant)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    # true per-token scales: matches the dense transcription
    q8t, dqt = N.quantize_fp8(q, "token")
    assert dqt.shape == (1, 150, 4)
    assert torch.equal(dqt, q.abs().amax(-1) / 448)
    out, _ = N.zyfa_fp8_attention(q8t, k8, v8, dqt, dk, dvs, variant="zyfa-v2")
    ref = dense_v2(q8t, k8, v8, dqt, dk, dvs, True)
    assert torch.all((out.double() - ref).abs() <= 2.0**-8 * ref.abs() + 1e-6 * ref.abs().amax())


# -- recipe choice ------------------------------------------------------------------------------------

def test_flash_attn_func_recipe_keyword():
    _, (q8, k8, v8, dq, dk, dvs) = quantised(1, 100, 100, 2, 2, 64, 64)
    kw = dict(causal=True, q_descale=dq, k_descale=dk, v_descale=dvs, backend="emulator")
    assert torch.equal(zyfa.flash_attn_func(q8, k8, v8, **kw),
                       N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dvs, variant="zyfa-v2")[0])
    assert torch.equal(zyfa.flash_attn_func(q8, k8, v8, recipe="zyfa-v1", **kw),
                       N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dvs, variant="zyfa-v1")[0])
    assert torch.equal(zyfa.flash_attn_func(q8, k8, v8, recipe="zyfa-folded", **kw),
                       N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dvs, variant="zyfa-folded")[0])
    with pytest.raises(ValueError, match="recipe must be one of"):
        zyfa.flash_attn_func(q8, k8, v8, recipe="zyfa-v3", **kw)


def test_folded_recipe_is_gfx950_and_emulator_only():
    """zyfa-folded (the gfx950 kernel zyfa-fp8) is a public recipe; the Triton and Hopper kernels do
    not implement it and say so by name, so "auto" never runs another recipe in its place."""
    q8 = torch.zeros(1, 8, 1, 16, dtype=F8)
    args = AttentionArgs(q8, q8, q8, 0.25, True, (-1, -1), 0.0, None, None, None, None, recipe="zyfa-folded")
    backends = zyfa.available_backends()
    assert backends["emulator"].refusal(args) is None
    assert "zyfa-folded" in backends["gfx950"].recipes
    for name in ("triton", "hopper"):
        assert "zyfa-folded" not in backends[name].recipes


def test_backend_without_the_recipe_is_refused():
    q8 = torch.zeros(1, 8, 1, 16, dtype=F8)
    args = AttentionArgs(q8, q8, q8, 0.25, True, (-1, -1), 0.0, None, None, None, None, recipe="zyfa-v2")
    v1_only = Backend("v1-only", forward=None, unsupported=lambda a: None)
    assert "zyfa-v1, not 'zyfa-v2'" in v1_only.refusal(args)
    assert Backend("exact", forward=None, unsupported=lambda a: None, recipes=None).refusal(args) is None
    assert zyfa.available_backends()["emulator"].refusal(args) is None
