"""NaN in -> NaN out, only in the rows (and columns) that read the bad value; masked keys
contribute exactly nothing; logits beyond the FP8 spec's range are refused, not garbled."""

import math

import pytest
import torch

import zyfa
from zyfa import numerics
from zyfa.reference import key_window, masked_pv

SQ, SK, H, HK, D = 96, 160, 2, 1, 64   # three 64-key blocks, ragged tail, GQA


def _fp8_inputs(seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(1, SQ, H, D, generator=gen)
    k = torch.randn(1, SK, HK, D, generator=gen)
    v = torch.randn(1, SK, HK, D, generator=gen)
    (q8, dq), (k8, dk), (v8, dv) = numerics.quantize_fp8(q, nheads_k=HK), numerics.quantize_fp8(k), numerics.quantize_fp8(v)
    return [q8, k8, v8], dict(q_descale=dq, k_descale=dk, v_descale=dv)


def _poison(t, index):
    """A copy of the fp8 tensor ``t`` with e4m3 NaN (0x7f) at ``index``."""
    t = t.clone()
    t.view(torch.uint8)[index] = numerics.E4M3_NAN_CODE
    return t


BACKENDS = ["emulator", "reference", "oracle"]
# (tensor, index into (b, s, h, d)), chosen so the causal mask hides the bad key from early rows
POISON = [("q", (0, 40, 1, 3)), ("k", (0, 100, 0, 5)), ("k", (0, 159, 0, 0)), ("v", (0, 100, 0, 7)),
          ("v", (0, 0, 0, 0)), ("v", (0, 159, 0, 63)), ("k", (0, 10, 0, 1)), ("q", (0, 0, 0, 0))]


def _expected(which, index, causal):
    """(nan rows (h, sq), nan (row, column) of out (sq, h, d)) from the mask: who reads what."""
    allowed = key_window(SQ, SK, causal, (-1, -1), "cpu")  # (sq, sk)
    rows = torch.zeros(H, SQ, dtype=torch.bool)
    cols = torch.zeros(SQ, H, D, dtype=torch.bool)
    _, s, h, d = index
    if which == "q":
        rows[h, s] = bool(allowed[s].any())
    elif which == "k":
        rows[:, :] = allowed[:, s][None, :]
    else:
        cols[:, :, d] = allowed[:, s][:, None]
    cols |= rows.T[:, :, None]
    return rows, cols


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("which,index", POISON)
def test_nan_reaches_exactly_the_rows_that_read_it(backend, causal, which, index):
    tensors, descales = _fp8_inputs()
    slot = "qkv".index(which)
    tensors[slot] = _poison(tensors[slot], index)
    out, lse, _ = zyfa.flash_attn_func(*tensors, causal=causal, backend=backend, return_attn_probs=True, **descales)
    rows, cols = _expected(which, index, causal)
    assert torch.equal(torch.isnan(out[0]), cols)
    assert torch.equal(torch.isnan(lse[0]), rows)
    # the other rows are untouched: bit for bit what the clean inputs give
    clean, clean_lse, _ = zyfa.flash_attn_func(*_fp8_inputs()[0], causal=causal, backend=backend,
                                               return_attn_probs=True, **descales)
    assert torch.equal(out[0][~cols], clean[0][~cols])
    assert torch.equal(lse[0][~rows], clean_lse[0][~rows])


@pytest.mark.parametrize("variant", numerics.VARIANTS)
def test_every_emulator_variant_propagates_nan_of_q(variant):
    tensors, descales = _fp8_inputs()
    tensors[0] = _poison(tensors[0], (0, 70, 0, 0))
    out, lse = numerics.zyfa_fp8_attention(*tensors, **descales, causal=True, variant=variant)
    assert torch.isnan(out[0, 70, 0]).all() and torch.isnan(lse[0, 0, 70])
    assert not torch.isnan(out[0, 69]).any() and not torch.isnan(out[0, 70, 1]).any()


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_reference_masked_non_finite_v_leaks_nowhere(bad):
    q, k, v = (torch.randn(1, 8, 1, 8) for _ in range(3))
    v[0, 5, 0, 2] = bad
    out = zyfa.flash_attn_func(q, k, v, causal=True, backend="reference")
    assert torch.isfinite(out[0, :5]).all()          # rows 0..4 never see key 5
    assert not torch.isfinite(out[0, 5:, 0, 2]).any() and torch.isfinite(out[0, 5:, 0, [0, 1, 3]]).all()


def test_masked_pv_ieee_cases():
    p = torch.tensor([[0.5, 0.5], [1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    allowed = torch.tensor([[True, True], [True, True], [True, False]])
    v = torch.tensor([[math.inf, 1.0, -math.inf], [-math.inf, math.nan, 2.0]], dtype=torch.float64)
    out = masked_pv(p, allowed, v)
    # row 0 reads +inf and -inf in column 0 (NaN), NaN in column 1, -inf and finite in column 2
    assert math.isnan(out[0, 0]) and math.isnan(out[0, 1]) and out[0, 2] == -math.inf
    # row 1: p = 0 at an allowed key holding -inf / NaN gives NaN (0 * inf), +inf stays +inf
    assert out[1, 0].isnan() and out[1, 1].isnan() and out[1, 2] == -math.inf
    # row 2: its only allowed key has p = 0 (0 * inf = NaN); the disallowed key adds nothing
    assert out[2, 0].isnan() and out[2, 1] == 0.0 and out[2, 2].isnan()
    finite = torch.randn(2, 3, dtype=torch.float64)
    assert torch.equal(masked_pv(p, allowed, finite), p @ finite)


def test_huge_logits_refused_by_emulator_not_garbled():
    tensors, descales = _fp8_inputs()
    big = {name: d * 3e3 for name, d in descales.items()}  # t scales by 9e6: |t s| ~ 1e7 > 2^18
    with pytest.raises(ValueError, match=r"outside the ZYFA FP8 range \|t \* s\| <= 2\^18"):
        zyfa.flash_attn_func(*tensors, causal=True, **big)
    ref = zyfa.flash_attn_func(*tensors, causal=True, backend="reference", **big)
    assert torch.isfinite(ref).all()   # the reference handles any finite size


def test_largest_logits_inside_the_range_match_the_reference():
    tensors, descales = _fp8_inputs()
    q, k = (x.float() for x in tensors[:2])
    s_max = float(torch.einsum("bshd,bthd->bhst", q[:, :, :1], k).abs().max())
    scale = 2.0**17 / (s_max * numerics.LOG2E_F32)   # |t s| up to 2^17
    emu = zyfa.flash_attn_func(*tensors, causal=True, softmax_scale=scale)
    ref = zyfa.flash_attn_func(*tensors, causal=True, softmax_scale=scale, backend="oracle")
    # near one-hot rows: the FP8 output is the argmax key's v, to bf16 and P rounding
    assert ((emu.double() - ref).abs().max() / ref.abs().max()) < 0.05
