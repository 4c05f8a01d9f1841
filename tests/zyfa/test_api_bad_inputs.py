"""flash_attn_func bad-input matrix: every bad argument is one clear exception naming it, and the
edge cases that used to traceback (empty/meta FP8, huge windows) give well-defined results."""

import importlib.util
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

import zyfa
from zyfa import numerics


def _qkv(dtype=torch.float32, b=1, sq=16, sk=16, h=4, hk=2, d=64, device="cpu"):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(b, s, n, d, generator=gen).to(device) for s, n in ((sq, h), (sk, hk), (sk, hk)))
    return tuple(x.to(dtype) for x in (q, k, v))


class _Weird:
    def __float__(self):
        raise RuntimeError("should not be called")


# (id, kwargs, exception, message)
SCALAR_CASES = []
for bad in ["abc", "0.5", b"1", None if False else [], (0.5,), {}, _Weird(), torch.ones(2), 1j]:
    SCALAR_CASES.append((f"softmax_scale={bad!r}", {"softmax_scale": bad}, TypeError, "softmax_scale must be a real number"))
for bad in [0.0, -1.0, math.nan, math.inf, -math.inf, 0, -3]:
    SCALAR_CASES.append((f"softmax_scale={bad!r}", {"softmax_scale": bad}, ValueError, "softmax_scale must be a positive finite"))
for bad in ["abc", "1", [], (1.0,), {}, torch.ones(3), 2j]:
    SCALAR_CASES.append((f"softcap={bad!r}", {"softcap": bad}, TypeError, "softcap must be a real number"))
for bad in [-1.0, -1e-30, math.nan, math.inf, -math.inf]:
    SCALAR_CASES.append((f"softcap={bad!r}", {"softcap": bad}, ValueError, "softcap must be >= 0"))
for bad in ["False", "True", "", "0", 2, -1, 0.5, 1.0, None, [], torch.tensor(True)]:
    SCALAR_CASES.append((f"causal={bad!r}", {"causal": bad}, TypeError, "causal must be a bool"))
for flag in ("return_attn_probs", "deterministic"):
    for bad in ["False", "", 2, 0.0, None, [True]]:
        SCALAR_CASES.append((f"{flag}={bad!r}", {flag: bad}, TypeError, f"{flag} must be a bool"))
for bad in [(1.5, 2), (1, 2.0), (1.0, 1.0), ("1", 2), (True, False), (None, 1), (np.float32(3), 1)]:
    SCALAR_CASES.append((f"window_size={bad!r}", {"window_size": bad}, TypeError, "window_size entries must be ints"))
for bad in [(1,), (1, 2, 3), 5, None, "ab", (), [1]]:
    SCALAR_CASES.append((f"window_size={bad!r}", {"window_size": bad}, ValueError, "window_size must be a pair of ints"))
for bad in [(-2, 0), (0, -2), (-10**20, 0), (-5, -5)]:
    SCALAR_CASES.append((f"window_size={bad!r}", {"window_size": bad}, ValueError, "window_size entries must be >= -1"))
for bad in [0.1, 1.0, -0.5, math.nan, "0.1"]:
    SCALAR_CASES.append((f"dropout_p={bad!r}", {"dropout_p": bad}, ValueError, "dropout_p="))
for bad in ["nope", "Auto", "", "EMULATOR", "reference "]:
    SCALAR_CASES.append((f"backend={bad!r}", {"backend": bad}, ValueError, "unknown backend"))
for bad in [torch.ones(3), torch.ones(1, 3), torch.ones(4, 1), torch.ones(2, 4)]:
    SCALAR_CASES.append((f"alibi shape {tuple(bad.shape)}", {"alibi_slopes": bad}, ValueError, "alibi_slopes must have shape"))
for bad in [torch.ones(4, dtype=torch.float64), torch.ones(4, dtype=torch.int32), [1.0] * 4, np.ones(4, dtype=np.float32)]:
    SCALAR_CASES.append((f"alibi type {type(bad).__name__}", {"alibi_slopes": bad}, TypeError, "alibi_slopes must be a float32 tensor"))


@pytest.mark.parametrize("name,kwargs,exc,message", SCALAR_CASES, ids=[c[0] for c in SCALAR_CASES])
def test_bad_scalar_arguments(name, kwargs, exc, message):
    with pytest.raises(exc, match=message):
        zyfa.flash_attn_func(*_qkv(), **kwargs)


FP8_CASES = [
    ("window", {"window_size": (8, 0)}, "window_size with float8_e4m3fn"),
    ("window wide", {"window_size": (10**20, 10**20)}, "window_size with float8_e4m3fn"),
    ("softcap", {"softcap": 30.0}, "softcap with float8_e4m3fn"),
    ("alibi", {"alibi_slopes": torch.ones(4)}, "alibi_slopes with float8_e4m3fn"),
    ("all three", {"window_size": (8, 0), "softcap": 1.0, "alibi_slopes": torch.ones(4)},
     "window_size, softcap, alibi_slopes with float8_e4m3fn"),
]


@pytest.mark.parametrize("name,kwargs,message", FP8_CASES, ids=[c[0] for c in FP8_CASES])
def test_auto_never_leaves_the_fp8_numerics_silently(name, kwargs, message):
    q, k, v = _qkv(torch.float8_e4m3fn)
    with pytest.raises(NotImplementedError, match=message + ".*backend='reference'"):
        zyfa.flash_attn_func(q, k, v, **kwargs)
    # the explicit choice runs (dequantised, fp32)
    out = zyfa.flash_attn_func(q, k, v, backend="reference", **kwargs)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()


@pytest.mark.parametrize("window", [(10**20, 10**20), (2**63, 0), (0, 10**30), (10**20, -1)])
def test_windows_wider_than_the_problem_mean_unbounded(window):
    q, k, v = _qkv()
    wide = zyfa.flash_attn_func(q, k, v, window_size=window, backend="reference")
    unbounded = tuple(-1 if w > 10**6 else w for w in window)  # same keys as the huge entry
    assert torch.equal(wide, zyfa.flash_attn_func(q, k, v, window_size=unbounded, backend="reference"))


@pytest.mark.parametrize("causal", [False, True, 0, 1, np.int64(1)])
def test_integer_causal_flags_accepted(causal):
    q, k, v = _qkv()
    assert torch.equal(zyfa.flash_attn_func(q, k, v, causal=causal),
                       zyfa.flash_attn_func(q, k, v, causal=bool(causal)))


@pytest.mark.parametrize("b,sq,sk", [(0, 16, 16), (1, 0, 16), (1, 16, 0), (1, 0, 0), (0, 0, 0)])
@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float32, torch.bfloat16])
def test_empty_problems(b, sq, sk, dtype):
    q, k, v = _qkv(dtype, b=b, sq=sq, sk=sk)
    out, lse, _ = zyfa.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    assert out.shape == (b, sq, 4, 64) and lse.shape == (b, 4, sq)
    assert out.dtype == (torch.bfloat16 if dtype == torch.float8_e4m3fn else dtype)
    # no keys: every row is "fully masked" -> out 0, lse +inf (the FlashAttention convention)
    assert (out == 0).all() and (lse == math.inf).all()


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float32])
@pytest.mark.parametrize("with_descale", [False, True])
def test_meta_device_gives_shapes(dtype, with_descale):
    q, k, v = _qkv(dtype, device="meta")
    kw = {}
    if with_descale and dtype == torch.float8_e4m3fn:
        kw = {n: torch.ones(1, 2, device="meta") for n in ("q_descale", "k_descale", "v_descale")}
    out, lse, _ = zyfa.flash_attn_func(q, k, v, causal=True, return_attn_probs=True, **kw)
    assert out.device.type == "meta" and out.shape == (1, 16, 4, 64) and lse.shape == (1, 4, 16)


def test_available_backends_complete_before_first_use():
    names = subprocess.run([sys.executable, "-c", "import zyfa; print(sorted(zyfa.available_backends()))"],
                           capture_output=True, text=True, check=True).stdout
    for name in ("reference", "oracle", "emulator"):
        assert repr(name) in names


@pytest.mark.parametrize("backend", ["auto", "emulator"])
@pytest.mark.parametrize("grad_input", [0, 1, 2])
def test_backward_through_forward_only_backend_says_so(backend, grad_input):
    q, k, v = _qkv(torch.float8_e4m3fn)
    [q, k, v][grad_input].requires_grad_(True)
    out = zyfa.flash_attn_func(q, k, v, causal=True, backend=backend)
    with pytest.raises(RuntimeError, match="'emulator' is forward only"):
        out.float().sum().backward()


def test_backward_through_reference_still_works():
    q, k, v = _qkv()
    q.requires_grad_(True)
    zyfa.flash_attn_func(q, k, v, causal=True, backend="reference").sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_no_grad_inputs_unchanged_output():
    q, k, v = _qkv(torch.float8_e4m3fn)
    out = zyfa.flash_attn_func(q, k, v, causal=True)
    assert not out.requires_grad and out.grad_fn is None


EMU_CASES = [
    ({"variant": "v3"}, ValueError, "variant must be one of"),
    ({"rounding": "up"}, ValueError, "rounding must be one of"),
    ({"block": 48}, ValueError, "block must be a positive power of two"),
    ({"block": 0}, ValueError, "block must be a positive power of two"),
    ({"block": 64.0}, ValueError, "block must be a positive power of two"),
    ({"softmax_scale": "x"}, ValueError, "softmax_scale must be a positive finite"),
    ({"softmax_scale": -1.0}, ValueError, "softmax_scale must be a positive finite"),
    ({"q_descale": torch.ones(1, 3)}, ValueError, r"q_descale must be a float32 tensor of shape"),
    ({"k_descale": torch.zeros(1, 2)}, ValueError, "k_descale must be positive and finite"),
    ({"v_descale": torch.full((1, 2), math.nan)}, ValueError, "v_descale must be positive and finite"),
]


@pytest.mark.parametrize("kwargs,exc,message", EMU_CASES, ids=[str(c[0])[:40] for c in EMU_CASES])
def test_emulator_entry_point_bad_arguments(kwargs, exc, message):
    q, k, v = _qkv(torch.float8_e4m3fn)
    with pytest.raises(exc, match=message):
        numerics.zyfa_fp8_attention(q, k, v, **kwargs)


# -- torch.ops.zyfa.fwd called directly (registered by zyfa.interface): the public checks apply ------------
def _op(q, k, v, **kw):
    from_public = dict(softmax_scale=q.shape[-1] ** -0.5, causal=True, window_left=-1, window_right=-1, softcap=0.0,
                       alibi_slopes=None, q_descale=None, k_descale=None, v_descale=None, backend="auto",
                       recipe="zyfa-v2")
    from_public.update(kw)
    return torch.ops.zyfa.fwd(q, k, v, **from_public)


_F, _E5 = torch.float32, torch.float8_e5m2
OP_CASES = [  # (id, tensor edit, kwargs, exception, message); each used to return an output
    ("scale nan", None, {"softmax_scale": math.nan}, ValueError, "softmax_scale must be a positive finite"),
    ("scale inf", None, {"softmax_scale": math.inf}, ValueError, "softmax_scale must be a positive finite"),
    ("scale negative", None, {"softmax_scale": -1.0}, ValueError, "softmax_scale must be a positive finite"),
    ("window -5", None, {"window_left": -5}, ValueError, "window_size entries must be >= -1"),
    ("softcap nan", None, {"softcap": math.nan}, ValueError, "softcap must be >= 0"),
    ("softcap inf", None, {"softcap": math.inf}, ValueError, "softcap must be >= 0"),
    ("alibi shape", None, {"alibi_slopes": torch.ones(3)}, ValueError, "alibi_slopes must have shape"),
    ("alibi int", None, {"alibi_slopes": torch.ones(4, dtype=torch.int64)}, TypeError, "alibi_slopes must be a float32"),
    ("recipe", None, {"recipe": "nope"}, ValueError, "recipe must be one of"),
    ("backend", None, {"backend": "nope"}, ValueError, "unknown backend 'nope'"),
    ("descale on fp32", None, {"q_descale": torch.ones(1, 2)}, ValueError, "q_descale is only meaningful"),
    ("3-d q", lambda q, k, v: (q[0], k, v), {}, ValueError, "q must have 4 dimensions"),
    ("fp64 k", lambda q, k, v: (q, k.double(), v), {}, TypeError, "k has dtype torch.float64"),
    ("e5m2", lambda q, k, v: tuple(x.to(_E5) for x in (q, k, v)), {}, TypeError, "torch.float8_e5m2"),
    ("fp8 with bf16 v", lambda q, k, v: (q.to(torch.float8_e4m3fn), k.to(torch.float8_e4m3fn), v.bfloat16()), {},
     TypeError, "must share one dtype"),
    ("headdim 60", lambda q, k, v: (q[..., :60], k[..., :60], v), {}, ValueError, "unsupported headdim 60"),
]


@pytest.mark.parametrize("name,edit,kwargs,exc,message", OP_CASES, ids=[c[0] for c in OP_CASES])
def test_custom_op_called_directly_checks_like_the_public_function(name, edit, kwargs, exc, message):
    q, k, v = _qkv(_F)
    if edit is not None:
        q, k, v = edit(q, k, v)
    with pytest.raises(exc, match=message):
        _op(q, k, v, **kwargs)


@pytest.mark.parametrize("cute_installed", [False, True])
def test_hopper_backend_on_cpu_names_the_reason_and_auto_skips_it(monkeypatch, cute_installed):
    """backend='hopper' on CPU inputs is one NotImplementedError naming why (the missing CuTe DSL,
    or, where it is installed, the CPU device), and 'auto' never picks it there (the emulator runs:
    bit-identical to its direct call)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if (name == "cutlass" and cute_installed) else real(name, *a))
    q, k, v = _qkv(torch.float8_e4m3fn)
    reason = "inputs are on cpu" if cute_installed else "the CuTe DSL is not installed"
    with pytest.raises(NotImplementedError, match=f"backend 'hopper' cannot run these inputs: {reason}"):
        zyfa.flash_attn_func(q, k, v, causal=True, backend="hopper")
    auto = zyfa.flash_attn_func(q, k, v, causal=True)
    assert torch.equal(auto, zyfa.flash_attn_func(q, k, v, causal=True, backend="emulator"))
