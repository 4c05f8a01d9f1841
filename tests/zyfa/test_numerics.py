"""zyfa.numerics: the ZYFA FP8 numerics emulator pinned against hand-computed values, torch's
float8 casts, an independent dense implementation of docs/numerics.md, and fp64."""

import importlib.util
import math
from pathlib import Path

import pytest
import torch

import zyfa
from zyfa import numerics as N

_spec = importlib.util.spec_from_file_location("numerics_inputs", Path(__file__).with_name("numerics_inputs.py"))
_inputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_inputs)
randn, quantised = _inputs.randn, _inputs.quantised

F8 = torch.float8_e4m3fn


def rel_l2(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


# -- e4m3 format ---------------------------------------------------------------------------------

def test_decode_all_256_codes_matches_torch():
    codes = torch.arange(256, dtype=torch.uint8)
    ours = N.decode_e4m3(codes)
    theirs = codes.view(F8).float()
    assert torch.equal(torch.isnan(ours), torch.isnan(theirs))
    assert torch.isnan(ours).sum() == 2  # 0x7f and 0xff
    ok = ~torch.isnan(ours)
    assert torch.equal(ours[ok], theirs[ok])


@pytest.mark.parametrize("code,value", [
    (0x00, 0.0), (0x01, 2.0**-9), (0x07, 7 * 2.0**-9), (0x08, 2.0**-6), (0x38, 1.0), (0x3C, 1.5),
    (0x70, 128.0), (0x74, 192.0), (0x77, 240.0), (0x78, 256.0), (0x7E, 448.0), (0xB8, -1.0), (0x80, -0.0),
])
def test_decode_hand_values(code, value):
    assert N.decode_e4m3(torch.tensor([code], dtype=torch.uint8)).item() == value


def test_encode_matches_torch_cast_random_and_ties():
    x = randn(200_000) * torch.exp2(torch.randint(-14, 10, (200_000,), generator=torch.Generator().manual_seed(1)).float())
    x = x.clamp(-448, 448)
    values = N.decode_e4m3(torch.arange(0, 0x7F, dtype=torch.uint8))
    midpoints = (values[:-1] + values[1:]) / 2  # exact ties: RNE must pick the even code
    for t in (x, midpoints, -midpoints, values, torch.tensor([0.0, -0.0, 2.0**-10, 2.0**-10 + 2.0**-20])):
        assert torch.equal(N.encode_e4m3(t), t.to(F8).view(torch.uint8))


def test_round_e4m3_equals_format_encoder():
    x = torch.cat([randn(100_000) * 40, torch.tensor([500.0, -1e9, 2.0**-11, 3 * 2.0**-11, 0.0])])
    assert torch.equal(N.round_e4m3(x), N.decode_e4m3(N.encode_e4m3(x)))


def test_encode_saturates_and_maps_nan():
    x = torch.tensor([448.0, 449.0, 464.0, 1e30, math.inf, -1e30, -math.inf, math.nan])
    assert N.encode_e4m3(x).tolist() == [0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0xFE, 0x7F]


def test_fma_single_rounding_hand_cases():
    # exact a*b + c = 1 + 2^-23 + 2^-24 - 2^-70: just below an fp32 tie. float64 first rounds it
    # onto the tie (1 + 2^-23 + 2^-24), which then rounds to even 1 + 2^-22: wrong by one ulp.
    a = torch.tensor(2.0**-24 * (1 + 2.0**-23))
    b = torch.tensor(1 - 2.0**-23)
    c = torch.tensor(1 + 2.0**-23)
    assert N.fma_f32(a, b, c).item() == 1 + 2.0**-23
    assert (a.double() * b.double() + c.double()).float().item() == 1 + 2.0**-22
    # an exact tie stays a tie: 1 + 2^-23 + 2^-24 -> even 1 + 2^-22; just above it rounds up
    assert N.fma_f32(2.0**-24, 1.0, 1 + 2.0**-23).item() == 1 + 2.0**-22
    assert N.fma_f32(2.0**-24 * (1 - 2.0**-23), 1 + 2.0**-22, 1.0).item() == 1 + 2.0**-23
    # (1 + 2^-23)(1 - 2^-23) - 1 = -2^-46: cancelled to 0 without fusion
    assert N.fma_f32(1 + 2.0**-23, 1 - 2.0**-23, -1.0).item() == -(2.0**-46)


def test_fma_agrees_with_exact_rational_arithmetic():
    from fractions import Fraction
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(400, generator=g), torch.randn(400, generator=g)
    c = -(a.double() * b.double()).float() * (1 + torch.randn(400, generator=g) * 1e-6)  # heavy cancellation
    ours = N.fma_f32(a, b, c)
    for ai, bi, ci, oi in zip(a.tolist(), b.tolist(), c.tolist(), ours.tolist()):
        exact = Fraction(ai) * Fraction(bi) + Fraction(ci)
        # the correctly rounded fp32 value: nearest, ties to even; check via neighbours
        lo, hi = (torch.nextafter(torch.tensor(oi), torch.tensor(d)).item() for d in (-math.inf, math.inf))
        assert abs(Fraction(oi) - exact) <= abs(Fraction(lo) - exact)
        assert abs(Fraction(oi) - exact) <= abs(Fraction(hi) - exact)


# -- Lean P ----------------------------------------------------------------------------------------

# t = 1 (T8 = 8), bm = 0: y = 8 s + 120.5, code = trunc(y); e4m3 code 8x + 56 is 2^x (x integer).
@pytest.mark.parametrize("s,code", [
    (0.0, 120),        # y = 120.5 -> 0x78 = 2^8 = 256 (the block max lands in (128, 256])
    (-1.0, 112),       # 112.5 -> 0x70 = 2^7
    (-0.5, 116),       # 116.5 -> 0x74 = 192 (2^7.5 = 181.02: +6.1%)
    (-0.0625, 120),    # 120.0 exactly -> 120
    (-0.0703125, 119), # 119.9375 -> 0x77 = 240
    (-14.9375, 1),     # 1.0 -> smallest subnormal 2^-9
    (-15.0, 0),        # 0.5 -> 0
    (-16.0, 0),        # y < 0 -> 0
    (0.5, 124),        # beyond the block max (not reachable in attention): 124.5 -> 124
    (2.0, 126),        # 136.5 -> clamp at 126 (448)
    (math.nan, 0),     # not (y >= 0) -> 0
])
def test_lean_p_trunc_codes_by_hand(s, code):
    assert N.lean_p_code(torch.tensor([s]), 8.0, 0.0).item() == code


def test_lean_p_with_scale_and_block_max():
    # t = 0.5 (T8 = 4), bm = 3: c = 120.5 - 24 = 96.5; s = 6 -> t*s = bm -> 120 (2^8); s = 4 -> 112.5 -> 112
    assert N.lean_p_code(torch.tensor([6.0, 4.0, 5.0]), 4.0, 3.0).tolist() == [120, 112, 116]


def test_lean_p_magic_rounds_half_even():
    # 8*s + 120: s = -0.1875 -> 118.5 (tie): magic (RNE) 118, trunc(119.0) = 119 (half up)
    s = torch.tensor([-0.1875, -0.0625, -0.5, -15.0, -16.0, -1.0])
    assert N.lean_p_code(s, 8.0, 0.0, "magic").tolist() == [118, 120, 116, 0, 0, 112]
    assert N.lean_p_code(s, 8.0, 0.0, "trunc").tolist() == [119, 120, 116, 0, 0, 112]


def test_lean_p_error_vs_exp2():
    """Measured over x = t*s - bm in [-7, 0] (2^18 + 1 points): relative error of the decoded
    Lean P value vs 2^(x + 8): max 10.76%, mean +4.04% (the bias rounded-sum cancels);
    correctly rounded e4m3 of 2^(x+8): max 5.88%, mean -0.07%."""
    x = torch.linspace(-7, 0, 2**18 + 1, dtype=torch.float32)
    exact = torch.exp2(x.double() + 8)
    for rounding in N.ROUNDINGS:
        rel = (N.decode_e4m3(N.lean_p_code(x, 8.0, 0.0, rounding)).double() - exact) / exact
        assert 0.1075 < rel.abs().max() < 0.1077
        assert 0.0403 < rel.mean() < 0.0405
    rne = (N.round_e4m3(torch.exp2(x + 8)).double() - exact) / exact
    assert 0.0588 < rne.abs().max() < 0.0589 and abs(rne.mean()) < 1e-3


# -- quantisation ----------------------------------------------------------------------------------

def test_quantize_head_matches_torch_cast_and_groups_q_heads():
    x = randn(2, 37, 6, 64) * torch.tensor([1.0, 3.0, 0.1, 10.0, 1.0, 2.0])[None, None, :, None]
    x8, descale = N.quantize_fp8(x, nheads_k=2)
    assert x8.dtype == F8 and descale.shape == (2, 2) and descale.dtype == torch.float32
    amax = x.abs().reshape(2, 37, 2, 3 * 64).amax(dim=(1, 3))  # q heads 0-2 -> kv head 0, 3-5 -> 1
    assert torch.equal(descale, amax / 448)
    scaled = x / descale.repeat_interleave(3, dim=1)[:, None, :, None]
    assert torch.equal(x8.view(torch.uint8), scaled.clamp(-448, 448).to(F8).view(torch.uint8))
    assert x8.float().abs().amax() == 448  # the amax element lands on the largest finite value


def test_quantize_tensor_granularity_and_zero_group():
    x = randn(2, 8, 4, 32)
    x[1] = 0
    x8, descale = N.quantize_fp8(x, granularity="tensor")
    assert torch.equal(descale, torch.full((2, 4), x.abs().max().item() / 448))
    _, descale = N.quantize_fp8(x)
    assert torch.equal(descale[1], torch.ones(4))  # an all-zero group gets descale 1, codes 0
    assert not torch.isnan(x8.float()).any()


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("granularity", ["head", "token", "tensor"])
def test_descale_is_the_correctly_rounded_quotient_on_every_device(device, granularity):
    """descale = fp32(amax / 448), IEEE, on CPU and GPU alike. torch on CUDA computes a division by a
    Python scalar as a multiplication by fp32(1/448), one ulp off for about half of all amax values
    (checked here on the inputs: the test would not catch it otherwise); the fused Hadamard kernel
    divides (div_rn), so that is what the spec and the torch path must do (H200 run 10's per-token
    mismatch)."""
    x = randn(2, 64, 4, 32) * 3
    x8, descale = N.quantize_fp8(x.to(device), granularity=granularity)
    amax = {"head": x.abs().amax(dim=(1, 3)), "token": x.abs().amax(dim=3),
            "tensor": x.abs().amax().expand(2, 4)}[granularity]
    exact = (amax.double() / 448).float()  # fp64 quotient of fp32 values rounds to fp32 correctly
    by_reciprocal = amax * torch.tensor(1 / 448, dtype=torch.float32)
    assert not torch.equal(by_reciprocal, exact) or granularity == "tensor"  # the inputs tell the two apart
    assert torch.equal(descale.cpu(), exact.contiguous())


@pytest.mark.parametrize("call,exc,message", [
    (lambda: N.quantize_fp8(torch.zeros(2, 3)), ValueError, "4 dimensions"),
    (lambda: N.quantize_fp8(torch.zeros(1, 2, 4, 8), granularity="row"), ValueError, "granularity"),
    (lambda: N.quantize_fp8(torch.zeros(1, 2, 4, 8), nheads_k=3), ValueError, "nheads_k"),
    (lambda: N.quantize_fp8(torch.zeros(1, 2, 4, 8, dtype=torch.int32)), TypeError, "floating-point"),
    (lambda: N.quantize_fp8(torch.full((1, 2, 4, 8), math.nan)), ValueError, "non-finite"),
    (lambda: N.decode_e4m3(torch.zeros(3)), TypeError, "uint8"),
    (lambda: N.encode_e4m3(torch.zeros(3, dtype=torch.int64)), TypeError, "floating-point"),
    (lambda: N.lean_p_code(torch.zeros(3), 8.0, 0.0, "floor"), ValueError, "rounding"),
    (lambda: N.hadamard([1.0, 2.0]), TypeError, "floating-point"),
    (lambda: N.rotate_qk(torch.zeros(1, 2, 2, 64), torch.zeros(1, 2, 2, 32)), ValueError, "same headdim"),
])
def test_bad_inputs_raise_clear_errors(call, exc, message):
    with pytest.raises(exc, match=message):
        call()


# -- Hadamard --------------------------------------------------------------------------------------

def test_hadamard_hand_values():
    assert torch.allclose(N.hadamard(torch.tensor([1.0, 0.0])), torch.tensor([1.0, 1.0]) / math.sqrt(2))
    h4 = torch.tensor([[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]], dtype=torch.float32) / 2
    assert torch.equal(N.hadamard(torch.eye(4)), h4)  # Sylvester order, 1/sqrt(4) = 1/2 exact


@pytest.mark.parametrize("d,block", [(64, 64), (128, 128), (256, 256), (192, 64), (96, 32)])
def test_hadamard_orthonormal_and_block_policy(d, block):
    assert N.hadamard_block(d) == block
    x = randn(3, 5, d).double()
    y = N.hadamard(x)
    assert torch.allclose(N.hadamard(y), x, atol=1e-12)          # H symmetric, H H = I
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-12)
    spike = torch.zeros(d, dtype=torch.float64)
    spike[0] = 1
    spread = N.hadamard(spike)  # an outlier channel spreads over its block only
    assert torch.allclose(spread[:block].abs(), torch.full((block,), block**-0.5, dtype=torch.float64))
    assert torch.all(spread[block:] == 0)


def test_hadamard_rounds_between_stages_so_no_single_dot_product_reproduces_it():
    """Why the fused kernel keeps the butterflies instead of one MMA with a +-1 matrix (H_128 as
    H_8 (x) H_16): the reference rounds every stage to fp32, and on bf16 inputs that is not exact. Row
    (1, 2^-24, 2^-24, 0, ...): the butterflies give 1 + 2^-24 -> 1 (a tie, to even) and then 1 again,
    the exact sum 1 + 2^-23 is an fp32 number, so an accumulation more exact than the stage order
    differs in the last bit; one that truncates instead of rounding would differ on other rows. Only
    when a row's values span at most 9 binades is every partial sum of 128 bf16 values exact (8 + 9 + 7
    bits <= 24), and then the order does not matter."""
    x = torch.zeros(16, dtype=torch.bfloat16)
    x[0], x[1], x[2] = 1.0, 2.0 ** -24, 2.0 ** -24
    h = N.hadamard(x)  # fp32, 1/sqrt(16) = 1/4 exact
    exact = (torch.ones(16, 16, dtype=torch.float64) @ x.double()) / 4  # row 0 of H_16: all ones
    assert float(h[0]) == 0.25 and float(exact[0]) == 0.25 * (1 + 2.0 ** -23) == float(exact[0].float())
    # rows whose values span at most 9 binades: every partial sum is exact (d16: 1/sqrt(16) exact too),
    # so the butterflies equal the fp64 transform rounded once
    narrow = randn(500, 16, seed=9).abs().clamp(2.0 ** -4, 2.0 ** 5 - 1) * torch.sign(randn(500, 16, seed=10))
    narrow = narrow.bfloat16()
    assert torch.equal(N.hadamard(narrow), N.hadamard(narrow.double()).float())


def test_rope_is_a_relative_rotation():
    """RoPE turns scores into functions of the position difference: q_i . k_j after RoPE at positions
    (i, j) equals the same pair at (i + 500, j + 500) (fp64 tables, to rounding), and the rotation
    keeps every pair's norm. Half-split pairing: channel f goes with f + d/2 (rotate_half)."""
    d, s = 64, 40
    q, k = randn(1, s, 1, d, seed=3).double(), randn(1, s, 1, d, seed=4).double()
    at0 = N.rope_tables(s, d, dtype=torch.float64)
    at500 = N.rope_tables(s, d, dtype=torch.float64, offset=500)
    s0 = torch.einsum("bqhd,bkhd->qk", N.rope(q, *at0), N.rope(k, *at0))
    s500 = torch.einsum("bqhd,bkhd->qk", N.rope(q, *at500), N.rope(k, *at500))
    assert torch.allclose(s0, s500, atol=1e-9) and not torch.allclose(s0, torch.einsum("bqhd,bkhd->qk", q, k))
    r = N.rope(q, *at500)
    pair = lambda t: t[..., : d // 2] ** 2 + t[..., d // 2:] ** 2  # noqa: E731
    assert torch.allclose(pair(r), pair(q), rtol=1e-12)
    cos, sin = N.rope_tables(1, 4, offset=1)  # position 1, frequencies 1 and 1/100
    x = torch.tensor([1.0, 0.0, 0.0, 0.0]).reshape(1, 1, 1, 4)
    y = N.rope(x, cos, sin).flatten()  # (cos 1, 0, sin 1, 0): channel 0 rotated into channel 2
    assert torch.equal(y, torch.tensor([cos[0, 0].item(), 0.0, sin[0, 0].item(), 0.0]))
    assert N.rope(x.half(), cos, sin).dtype == torch.float32


def test_rope_bad_tables():
    x = torch.zeros(1, 5, 2, 8)
    with pytest.raises(ValueError, match="cos must be a tensor of shape"):
        N.rope(x, *N.rope_tables(4, 8))
    with pytest.raises(ValueError, match="headdim must be even"):
        N.rope_tables(5, 7)


@pytest.mark.parametrize("d", [64, 128, 192])
def test_rotate_qk_preserves_scores_to_fp32_rounding(d):
    q, k = randn(1, 96, 2, d, seed=1), randn(1, 80, 2, d, seed=2)
    k[..., :4] *= 8
    qr, kr = N.rotate_qk(q, k)
    assert qr.dtype == torch.float32 and qr.shape == q.shape
    exact = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double())
    rotated = torch.einsum("bqhd,bkhd->bhqk", qr.double(), kr.double())
    # fp32 rounding of the rotated inputs: error <= a few ulp of |q| |k|
    qn, kn = q.double().norm(dim=-1).transpose(1, 2), k.double().norm(dim=-1).transpose(1, 2)  # (b, h, s)
    bound = 8 * 2.0**-24 * math.log2(d) * qn[..., :, None] * kn[..., None, :]
    assert torch.all((rotated - exact).abs() <= bound)
    assert (rotated - exact).abs().max() > 0  # rotation happened in fp32, not exactly


# -- attention: hand case, dense spec reference, masks, GQA, MLA -----------------------------------

def _hand_inputs():
    q8 = torch.zeros(1, 1, 1, 16).to(F8)
    q8[0, 0, 0, 0] = 1.0
    k8 = torch.zeros(1, 2, 1, 16)
    k8[0, 0, 0, 0] = 3.0   # s = [3, 0]
    v8 = torch.zeros(1, 2, 1, 16)
    v8[0, 0, 0, 0], v8[0, 1, 0, 0] = 1.0, -2.0
    return q8, k8.to(F8), v8.to(F8)


def test_zyfa_hand_case():
    # softmax_scale = 0.5 / LOG2E -> t = 0.5 (to an ulp), T8 = 4; s = [3, 0]: bm = ceil(1.5) = 2,
    # y = 4 s + 104.5 = [116.5, 104.5] -> codes [116, 104] = P [192, 64] (2^7.5 ~ 181, 2^6 = 64).
    # out = (192 * 1 + 64 * -2) / 256 = 0.25; l = 256 * 2^(2 - 8 - 2) = 1, lse = (2 + 0) ln 2.
    q8, k8, v8 = _hand_inputs()
    out, lse = N.zyfa_fp8_attention(q8, k8, v8, causal=False, softmax_scale=0.5 / N.LOG2E_F32)
    assert out.dtype == torch.bfloat16 and out.shape == (1, 1, 1, 16)
    assert out[0, 0, 0, 0].item() == 0.25 and torch.all(out[0, 0, 0, 1:] == 0)
    assert lse.shape == (1, 1, 1) and lse.item() == float(torch.tensor(2.0) * N.LN2_F32)


def test_naive_hand_case():
    # x = t s = [1.5, 0]: m = 1.5, p = [1, 2^-1.5 = 0.35355]; e4m3: 0.35355 -> 11 * 2^-5 = 0.34375;
    # l = 1.35355 (unrounded); out = (1 - 2 * 0.34375) / 1.35355 = 0.23087; lse = ln(2^1.5 + 1).
    q8, k8, v8 = _hand_inputs()
    out, lse = N.zyfa_fp8_attention(q8, k8, v8, causal=False, softmax_scale=0.5 / N.LOG2E_F32, variant="naive")
    expected = (1 - 2 * 0.34375) / (1 + 2**-1.5)
    assert out[0, 0, 0, 0].item() == torch.tensor(expected).bfloat16().item()
    assert abs(lse.item() - math.log(2**1.5 + 1)) < 1e-6


def dense_spec(q8, k8, v8, dq, dk, dv, causal, variant, rounding="trunc", block=64, weights=False):
    """docs/numerics.md evaluated densely in float64 (no online rescaling): block max exponents
    bm, P per block, then every block weighted by 2^(bm - max bm) at once."""
    b, sq, h, d = q8.shape
    sk, hk = k8.shape[1], k8.shape[2]
    g = h // hk
    t = (torch.tensor(d**-0.5, dtype=torch.float32) * N.LOG2E_F32) * (dq * dk)   # (b, hk)
    t = t.repeat_interleave(g, 1)[:, :, None, None]
    q = q8.double().transpose(1, 2)
    k = k8.double().transpose(1, 2).repeat_interleave(g, 1)
    v = v8.double().transpose(1, 2).repeat_interleave(g, 1)
    s = (q @ k.transpose(-1, -2)).float()
    allowed = zyfa.reference.key_window(sq, sk, causal, (-1, -1), "cpu")
    nblk = -(-sk // block)
    P = torch.zeros_like(s, dtype=torch.float64)
    scale_exp = torch.full((b, h, sq, nblk), -math.inf, dtype=torch.float64)
    for j in range(nblk):
        cols = slice(j * block, (j + 1) * block)
        sj, aj = s[..., cols], allowed[:, cols]
        has = aj.any(-1)
        mx = sj.masked_fill(~aj, -math.inf).amax(-1, keepdim=True)
        if variant == "naive":
            continue
        bm = torch.ceil(t * mx)
        bm = torch.where(torch.isfinite(bm), bm, 0.0)
        if variant == "zyfa":
            pj = N.decode_e4m3(N.lean_p_code(sj, 8 * t, bm, rounding)).double()
        else:
            pj = N.round_e4m3(torch.exp2((t * sj) - (bm - 8))).double()
        P[..., cols] = pj.masked_fill(~aj, 0.0)
        scale_exp[..., j] = torch.where(has, (bm - 8)[..., 0].double(), -math.inf)
    w = torch.exp2(scale_exp - scale_exp.amax(-1, keepdim=True)).repeat_interleave(block, -1)[..., :sk]
    Pw = P * w
    if weights:
        return Pw / Pw.sum(-1, keepdim=True)  # (b, h, sq, sk) attention weights actually applied
    out = (Pw @ v) / Pw.sum(-1, keepdim=True) * dv.repeat_interleave(g, 1)[:, :, None, None].double()
    return out.transpose(1, 2)


SHAPES = [  # (b, sq, sk, h, hk, d, dv, causal): odd lengths, GQA, MLA 192/128, sq != sk
    (1, 113, 203, 4, 2, 64, 64, True),
    (2, 239, 113, 2, 1, 128, 128, True),
    (1, 130, 130, 3, 3, 192, 128, True),
    (1, 77, 150, 2, 2, 64, 64, False),
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("variant", ["zyfa", "roundedsum"])
def test_emulator_matches_dense_spec(shape, variant):
    b, sq, sk, h, hk, d, dv, causal = shape
    _, (q8, k8, v8, dq, dk, dvs) = quantised(b, sq, sk, h, hk, d, dv, outliers=True)
    out, lse = N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dvs, causal=causal, variant=variant)
    ref = dense_spec(q8, k8, v8, dq, dk, dvs, causal, variant)
    rows = zyfa.reference.key_window(sq, sk, causal, (-1, -1), "cpu").any(-1)
    assert out.shape == (b, sq, h, dv) and lse.shape == (b, h, sq)
    assert torch.all(out[:, ~rows] == 0) and torch.all(lse[..., ~rows] == math.inf)
    # bf16 output rounding (2^-9 relative) plus fp32 accumulation
    err = (out[:, rows].double() - ref[:, rows]).abs()
    assert torch.all(err <= 2.0**-8 * ref[:, rows].abs() + 1e-6 * ref[:, rows].abs().amax())


@pytest.mark.parametrize("variant", N.VARIANTS)
def test_every_variant_close_to_fp64_of_dequantised_inputs(variant):
    _, (q8, k8, v8, dq, dk, dvs) = quantised(1, 200, 200, 4, 2, 64, 64)
    out, lse = N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dvs, causal=True, variant=variant)
    deq = lambda x8, ds: x8.float() * ds.repeat_interleave(x8.shape[2] // ds.shape[1], 1)[:, None, :, None]
    ref, ref_lse, _ = zyfa.flash_attn_func(deq(q8, dq), deq(k8, dk), deq(v8, dvs), causal=True,
                                           backend="oracle", return_attn_probs=True)
    assert rel_l2(out, ref) < 0.05        # P rounding only (inputs identical)
    assert (lse - ref_lse).abs().max() < 0.12  # Lean P overestimates by up to 10.8% (0.10 nat)


def test_zyfa_and_leanp_are_the_same_kernel():
    _, (q8, k8, v8, dq, dk, dvs) = quantised(1, 128, 128, 2, 2, 64, 64)
    a = N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dvs, variant="zyfa")
    b = N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dvs, variant="leanp")
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_magic_differs_from_trunc_only_at_ties_or_one_ulp_below_them():
    # exact ties 8 s + 120 = n + 0.5: trunc rounds half up (n + 1), magic half to even
    ties = -(torch.arange(0, 120, dtype=torch.float32) / 8 + 1 / 16)
    n = (8 * ties.double() + 120 - 0.5).round().long()
    assert N.lean_p_code(ties, 8.0, 0.0).long().tolist() == (n + 1).tolist()
    assert N.lean_p_code(ties, 8.0, 0.0, "magic").long().tolist() == (n + n % 2).tolist()
    # elsewhere they agree, except where the fp32 FMA result of trunc rounds up onto an integer
    g = torch.Generator().manual_seed(5)
    s = -torch.rand(200_000, generator=g) * 15
    T8 = torch.tensor(8.0) * (1 + torch.rand(1, generator=g) * 2.0**-10)
    trunc, magic = N.lean_p_code(s, T8, 0.0), N.lean_p_code(s, T8, 0.0, "magic")
    v = s.double() * T8.double() + 120.0  # exact
    frac = v - v.floor()
    differ = trunc != magic
    assert torch.all((frac[differ] >= 0.5 - 2.0**-16) & (frac[differ] <= 0.5))
    assert torch.all((trunc.int() - magic.int()).abs() <= 1)


def test_block_underflow_drops_e8m0():
    # Two blocks: block 0 has score -1000 relative to block 1's max: e = bm0 - 8 - m < -127, dropped.
    q8 = torch.zeros(1, 1, 1, 16)
    q8[..., 0] = 1.0
    k8 = torch.zeros(1, 128, 1, 16)
    k8[0, :64, 0, 0] = -448.0
    k8[0, 64:, 0, 0] = 448.0
    v8 = torch.ones(1, 128, 1, 16)
    v8[0, :64] = -1.0
    out, _ = N.zyfa_fp8_attention(q8.to(F8), k8.to(F8), v8.to(F8), causal=False, softmax_scale=1.0)
    assert torch.all(out == 1.0)  # block 0's -1 values contribute nothing


# -- determinism, backend, BF16 ---------------------------------------------------------------------

def test_deterministic_across_runs_and_thread_counts():
    _, (q8, k8, v8, dq, dk, dvs) = quantised(1, 300, 300, 4, 2, 128, 128, outliers=True)
    threads = torch.get_num_threads()
    try:
        results = []
        for n in (1, 2, 1, 3):
            torch.set_num_threads(n)
            for variant in ("zyfa", "naive"):
                results.append((variant, N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dvs, variant=variant)))
    finally:
        torch.set_num_threads(threads)
    for variant in ("zyfa", "naive"):
        runs = [r for v, r in results if v == variant]
        for out, lse in runs[1:]:
            assert torch.equal(out, runs[0][0]) and torch.equal(lse, runs[0][1])


def test_backend_emulator_is_auto_for_fp8():
    _, (q8, k8, v8, dq, dk, dvs) = quantised(1, 100, 100, 4, 2, 64, 64)
    out, lse, _ = zyfa.flash_attn_func(q8, k8, v8, causal=True, q_descale=dq, k_descale=dk, v_descale=dvs,
                                       return_attn_probs=True)
    ref = N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dvs, causal=True, variant="zyfa-v2")  # the default recipe
    assert torch.equal(out, ref[0]) and torch.equal(lse, ref[1])
    backend = zyfa.available_backends()["emulator"]
    assert backend.priority == 5
    # no descales = 1.0; recipe="zyfa-v1" is the v1 emulator
    assert torch.equal(zyfa.flash_attn_func(q8, k8, v8, backend="emulator", recipe="zyfa-v1"),
                       N.zyfa_fp8_attention(q8, k8, v8, causal=False)[0])


@pytest.mark.parametrize("kwargs,reason", [
    ({"window_size": (8, 0)}, "sliding-window"),
    ({"softcap": 5.0}, "softcap"),
    ({"alibi_slopes": torch.ones(4)}, "ALiBi"),
])
def test_backend_rejects_features_outside_the_spec(kwargs, reason):
    _, (q8, k8, v8, *_), = quantised(1, 16, 16, 4, 2, 64, 64)
    with pytest.raises(NotImplementedError, match=reason):
        zyfa.flash_attn_func(q8, k8, v8, backend="emulator", **kwargs)


def test_backend_rejects_non_fp8():
    q = randn(1, 16, 2, 64)
    with pytest.raises(NotImplementedError, match="float8_e4m3fn inputs only"):
        zyfa.flash_attn_func(q, q, q, backend="emulator")


@pytest.mark.parametrize("kwargs,exc,message", [
    ({"variant": "fast"}, ValueError, "variant"),
    ({"rounding": "up"}, ValueError, "rounding"),
    ({"block": 48}, ValueError, "power of two"),
    ({"softmax_scale": -1.0}, ValueError, "softmax_scale"),
    ({"q_descale": torch.ones(1, 3)}, ValueError, "q_descale"),
    ({"k_descale": torch.zeros(1, 2)}, ValueError, "positive"),
])
def test_emulator_bad_arguments(kwargs, exc, message):
    _, (q8, k8, v8, *_), = quantised(1, 16, 16, 4, 2, 64, 64)
    with pytest.raises(exc, match=message):
        N.zyfa_fp8_attention(q8, k8, v8, **kwargs)


def test_emulator_rejects_non_fp8_tensors():
    q = randn(1, 16, 2, 64)
    with pytest.raises(TypeError, match="q8 must be float8_e4m3fn"):
        N.zyfa_fp8_attention(q, q, q)


def test_bf16_path_matches_reference_error_level():
    q, k, v = randn(1, 256, 2, 64), randn(1, 256, 2, 64, seed=1), randn(1, 256, 2, 64, seed=2)
    out, lse = N.bf16_attention(q, k, v, causal=True)
    ref, ref_lse, _ = zyfa.flash_attn_func(q, k, v, causal=True, backend="oracle", return_attn_probs=True)
    assert out.dtype == torch.bfloat16
    assert 1e-3 < rel_l2(out, ref) < 1e-2  # bf16 inputs and P: ~2^-9 relative
    assert (lse - ref_lse).abs().max() < 5e-2


def test_row_kl_matches_dense_definition():
    (q, k, v), (q8, k8, v8, dq, dk, dvs) = quantised(1, 150, 150, 2, 1, 64, 64)
    kl = N.attention_row_kl(q, k, v, q8, k8, v8, dq, dk, dvs, causal=True, variant="zyfa")
    p = dense_spec(q8, k8, v8, dq, dk, dvs, True, "zyfa", weights=True)
    kk = k.double().transpose(1, 2).repeat_interleave(2, 1)
    scores = (q.double().transpose(1, 2) @ kk.transpose(-1, -2)) * 64**-0.5
    allowed = zyfa.reference.key_window(150, 150, True, (-1, -1), "cpu")
    r = scores.masked_fill(~allowed, -math.inf).softmax(-1)
    term = torch.where(p > 0, p * torch.log(p / r), 0.0) - p + r
    assert abs(kl - term.sum(-1).mean().item()) <= 1e-6 * kl  # l is an fp32 sum in the emulator


def test_row_kl_zero_for_exact_and_positive_for_fp8():
    (q, k, v), (q8, k8, v8, dq, dk, dvs) = quantised(1, 128, 128, 2, 2, 64, 64)
    kl_zyfa = N.attention_row_kl(q, k, v, q8, k8, v8, dq, dk, dvs, variant="zyfa")
    kl_bf16 = N.attention_row_kl(q, k, v, None, None, None, variant="bf16")
    assert 0 < kl_bf16 < kl_zyfa < 0.05
