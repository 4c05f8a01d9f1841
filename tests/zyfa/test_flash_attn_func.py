"""flash_attn_func: reference backend vs the fp64 oracle and torch SDPA, and input validation."""

import math

import pytest
import torch
import torch.nn.functional as F

import zyfa
from zyfa.reference import key_window

# Odd lengths on purpose (FA3's test grid): masks and tails must not assume multiples of a tile.
SHAPES = [  # (seqlen_q, seqlen_k)
    (1, 1), (113, 203), (128, 128), (239, 113), (256, 512), (799, 799),
]


def rel_l2(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-300)).item()


def make_qkv(b, sq, sk, h, hk, d, dv=None, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, sq, h, d, generator=gen).to(dtype)
    k = torch.randn(b, sk, hk, d, generator=gen).to(dtype)
    v = torch.randn(b, sk, hk, dv or d, generator=gen).to(dtype)
    return q, k, v


@pytest.mark.parametrize("seqlen_q,seqlen_k", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("h,hk,d,dv", [(4, 4, 64, 64), (6, 2, 128, 128), (4, 1, 192, 128)])
def test_reference_matches_oracle(seqlen_q, seqlen_k, causal, h, hk, d, dv):
    q, k, v = make_qkv(2, seqlen_q, seqlen_k, h, hk, d, dv)
    out, lse, probs = zyfa.flash_attn_func(q, k, v, causal=causal, backend="reference", return_attn_probs=True)
    ref, ref_lse, _ = zyfa.flash_attn_func(q, k, v, causal=causal, backend="oracle", return_attn_probs=True)
    assert probs is None
    assert out.shape == (2, seqlen_q, h, dv) and out.dtype == torch.float32
    assert lse.shape == (2, h, seqlen_q) and lse.dtype == torch.float32
    assert ref.dtype == torch.float64
    if ref.abs().sum() > 0:
        assert rel_l2(out, ref) < 1e-5
    finite = torch.isfinite(ref_lse)
    assert torch.equal(finite, torch.isfinite(lse))
    assert torch.allclose(lse[finite].double(), ref_lse[finite].double(), atol=1e-5)


@pytest.mark.parametrize("seqlen_q,seqlen_k", [(128, 128), (239, 113), (113, 203)])
@pytest.mark.parametrize("causal", [False, True])
def test_reference_matches_torch_sdpa(seqlen_q, seqlen_k, causal):
    q, k, v = make_qkv(1, seqlen_q, seqlen_k, 6, 2, 64)
    out = zyfa.flash_attn_func(q, k, v, causal=causal, backend="reference")
    mask = key_window(seqlen_q, seqlen_k, causal, (-1, -1), q.device)
    sdpa = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask, enable_gqa=True
    ).transpose(1, 2)
    rows = mask.any(dim=-1)  # SDPA returns NaN for rows with no key; FA convention is 0
    assert torch.all(out[:, ~rows] == 0)
    assert rel_l2(out[:, rows], sdpa[:, rows]) < 1e-5


def test_bottom_right_causal_mask_picture():
    # The docstring's pictures, checked.
    assert key_window(2, 5, True, (-1, -1), "cpu").int().tolist() == [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    assert key_window(5, 2, True, (-1, -1), "cpu").int().tolist() == [[0, 0], [0, 0], [0, 0], [1, 0], [1, 1]]


def test_empty_rows_give_zero_and_inf_lse():
    q, k, v = make_qkv(1, 5, 2, 2, 2, 64)
    out, lse, _ = zyfa.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    assert torch.all(out[:, :3] == 0)
    assert torch.all(lse[:, :, :3] == math.inf)
    assert torch.isfinite(lse[:, :, 3:]).all()


def test_window_softcap_alibi_match_oracle():
    q, k, v = make_qkv(2, 97, 131, 4, 2, 64)
    slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625])
    kw = dict(causal=True, window_size=(17, 0), softcap=30.0, alibi_slopes=slopes)
    out = zyfa.flash_attn_func(q, k, v, backend="reference", **kw)
    ref = zyfa.flash_attn_func(q, k, v, backend="oracle", **kw)
    assert rel_l2(out, ref) < 1e-5
    # A window of 0 to the left with causal: each query sees exactly its own key.
    only_self = zyfa.flash_attn_func(q, k, v, causal=True, window_size=(0, 0), backend="oracle")
    group = v.repeat_interleave(2, dim=2)[:, 131 - 97:]
    assert torch.allclose(only_self, group.double(), atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_output_dtype_and_error(dtype):
    q, k, v = make_qkv(1, 256, 256, 4, 4, 128, dtype=dtype)
    out = zyfa.flash_attn_func(q, k, v, causal=True)
    ref = zyfa.flash_attn_func(q, k, v, causal=True, backend="oracle")
    assert out.dtype == dtype
    assert rel_l2(out, ref) < 1e-2


def test_fp8_inputs_with_descales():
    q, k, v = make_qkv(2, 64, 64, 4, 2, 64)
    descale = torch.tensor([[0.5, 2.0], [1.0, 0.25]])
    q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
    kw = dict(causal=True, q_descale=descale, k_descale=descale, v_descale=descale)
    out = zyfa.flash_attn_func(q8, k8, v8, backend="reference", **kw)
    assert out.dtype == torch.bfloat16
    # Same thing computed by hand from the dequantised values.
    q_descale = descale.repeat_interleave(2, dim=1)  # q heads 0,1 share k/v head 0's scale
    deq = [q8.float() * q_descale[:, None, :, None]] + [x.float() * descale[:, None, :, None] for x in (k8, v8)]
    ref = zyfa.flash_attn_func(*deq, causal=True, backend="oracle")
    assert rel_l2(out, ref) < 1e-2
    # "auto" on a CPU runs FP8 inputs through the ZYFA numerics emulator (P rounded to e4m3,
    # Lean P codes), so its error against the dequantised inputs is larger, but bounded.
    assert zyfa.backends.select_backend("auto", zyfa.interface._validate(
        q8, k8, v8, 0.0, None, True, (-1, -1), 0.0, None, descale, descale, descale)).name == "emulator"
    emulated = zyfa.flash_attn_func(q8, k8, v8, **kw)
    assert emulated.dtype == torch.bfloat16 and rel_l2(emulated, ref) < 3e-2


def test_default_softmax_scale_is_inverse_sqrt_headdim():
    q, k, v = make_qkv(1, 32, 32, 2, 2, 64)
    a = zyfa.flash_attn_func(q, k, v)
    b = zyfa.flash_attn_func(q, k, v, softmax_scale=1 / 8)
    assert torch.equal(a, b)


def test_deterministic_bits():
    q, k, v = make_qkv(1, 300, 300, 4, 2, 128, dtype=torch.bfloat16)
    first = zyfa.flash_attn_func(q, k, v, causal=True)
    for _ in range(3):
        assert torch.equal(first, zyfa.flash_attn_func(q, k, v, causal=True))


# --- validation: each bad input names the argument -------------------------------------------

def _ok():
    return make_qkv(1, 16, 16, 4, 2, 64)


BAD_CASES = [
    ("rank", lambda q, k, v: (q[0], k, v), {}, ValueError, "q must have 4 dimensions"),
    ("not tensor", lambda q, k, v: (q.numpy(), k, v), {}, TypeError, "q must be a torch.Tensor"),
    ("batch", lambda q, k, v: (q, torch.cat([k, k]), v), {}, ValueError, "batch sizes differ"),
    ("headdim", lambda q, k, v: (q, k[..., :32], v), {}, ValueError, "same headdim"),
    ("heads", lambda q, k, v: (q[:, :, :3], k, v), {}, ValueError, "multiple of nheads"),
    ("kv seqlen", lambda q, k, v: (q, k, v[:, :8]), {}, ValueError, "same seqlen"),
    ("dtype mix", lambda q, k, v: (q, k.bfloat16(), v), {}, TypeError, "share one dtype"),
    ("dtype", lambda q, k, v: (q.double(), k.double(), v.double()), {}, TypeError, "has dtype torch.float64"),
    ("e5m2", lambda q, k, v: tuple(x.to(torch.float8_e5m2) for x in (q, k, v)), {}, TypeError, "float8_e5m2"),
    ("headdim unsupported", lambda q, k, v: (q[..., :60], k[..., :60], v), {}, ValueError, "unsupported headdim 60"),
    ("headdim too big", lambda q, k, v: tuple(torch.zeros(1, 4, 2, 264) for _ in range(3)), {}, ValueError, "unsupported headdim 264"),
    ("non-contiguous", lambda q, k, v: (q.transpose(1, 3).contiguous().transpose(1, 3), k, v), {}, ValueError, "contiguous last dimension"),
    ("dropout", lambda q, k, v: (q, k, v), {"dropout_p": 0.1}, ValueError, "inference"),
    ("scale", lambda q, k, v: (q, k, v), {"softmax_scale": float("nan")}, ValueError, "softmax_scale"),
    ("window", lambda q, k, v: (q, k, v), {"window_size": (-2, 0)}, ValueError, "window_size"),
    ("softcap", lambda q, k, v: (q, k, v), {"softcap": -1.0}, ValueError, "softcap"),
    ("alibi shape", lambda q, k, v: (q, k, v), {"alibi_slopes": torch.ones(3)}, ValueError, "alibi_slopes"),
    ("descale on bf16", lambda q, k, v: (q, k, v), {"q_descale": torch.ones(1, 2)}, ValueError, "only meaningful for float8"),
    ("backend", lambda q, k, v: (q, k, v), {"backend": "nope"}, ValueError, "unknown backend 'nope'"),
]


@pytest.mark.parametrize("name,mutate,kwargs,exc,message", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_inputs_raise_clear_errors(name, mutate, kwargs, exc, message):
    q, k, v = mutate(*_ok())
    with pytest.raises(exc, match=message):
        zyfa.flash_attn_func(q, k, v, **kwargs)


@pytest.mark.parametrize(
    "descale,message",
    [
        (torch.tensor([[1.0, float("nan")]]), "non-finite"),
        (torch.tensor([[1.0, float("inf")]]), "non-finite"),
        (torch.tensor([[1.0, 0.0]]), "must be positive"),
        (torch.tensor([[1.0, -2.0]]), "must be positive"),
        (torch.ones(1, 4), r"shape \(batch, nheads_k\)"),
        (torch.ones(1, 2, dtype=torch.float64), "must be float32"),
    ],
)
def test_bad_descales(descale, message):
    q, k, v = (x.to(torch.float8_e4m3fn) for x in _ok())
    with pytest.raises((ValueError, TypeError), match=message):
        zyfa.flash_attn_func(q, k, v, k_descale=descale)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a second device")
def test_device_mismatch():
    q, k, v = _ok()
    with pytest.raises(ValueError, match="one device"):
        zyfa.flash_attn_func(q.cuda(), k, v)


def test_device_mismatch_meta():
    # The meta device exists everywhere, so the check is exercised on CPU machines too.
    q, k, v = _ok()
    with pytest.raises(ValueError, match="one device"):
        zyfa.flash_attn_func(q.to("meta"), k, v)


def test_help_and_backends_listed():
    assert "bottom right" in zyfa.flash_attn_func.__doc__
    backends = zyfa.available_backends()
    assert {"reference", "oracle"} <= set(backends)
