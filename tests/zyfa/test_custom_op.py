"""``zyfa::fwd``: the custom op under flash_attn_func, its fake implementation and torch.compile.

The fake implementation must report exactly what the real call returns (shape, strides, dtype)
for every backend and input class, or a compiled graph would carry wrong metadata; opcheck runs
torch's own consistency tests of the registration (schema, fake, autograd, AOT dispatch).
"""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import zyfa
from zyfa.interface import _validate
from zyfa.numerics import quantize_fp8

GEN = torch.Generator().manual_seed(0)


def randn(*shape):
    return torch.randn(*shape, generator=GEN)


def inputs(kind, b=2, sq=24, sk=40, h=4, hk=2, d=64, dv=64):
    q, k, v = randn(b, sq, h, d), randn(b, sk, hk, d), randn(b, sk, hk, dv)
    if kind == "fp8":
        (q8, dq), (k8, dk), (v8, dvs) = quantize_fp8(q, nheads_k=hk), quantize_fp8(k), quantize_fp8(v)
        return (q8, k8, v8), dict(q_descale=dq, k_descale=dk, v_descale=dvs)
    return tuple(x.to(kind) for x in (q, k, v)), {}


def op_args(qkv, scales, backend, **kw):
    """The positional arguments of torch.ops.zyfa.fwd, as flash_attn_func builds them."""
    args = _validate(*qkv, 0.0, kw.get("softmax_scale"), kw.get("causal", True), kw.get("window_size", (-1, -1)),
                     kw.get("softcap", 0.0), kw.get("alibi_slopes"), scales.get("q_descale"),
                     scales.get("k_descale"), scales.get("v_descale"))
    return (args.q, args.k, args.v, args.softmax_scale, args.causal, *args.window_size, args.softcap,
            args.alibi_slopes, args.q_descale, args.k_descale, args.v_descale, backend)


# (input class, dtype kind, backend, shape overrides, feature keywords)
CASES = [
    ("fp32", torch.float32, "reference", {}, {}),
    ("fp16", torch.float16, "reference", {}, {}),
    ("bf16", torch.bfloat16, "auto", {}, {}),
    ("bf16-oracle", torch.bfloat16, "oracle", {}, {}),
    ("fp8-auto", "fp8", "auto", {}, {}),
    ("fp8-emulator", "fp8", "emulator", {}, {}),
    ("fp8-reference", "fp8", "reference", {}, {}),
    ("mqa", torch.bfloat16, "reference", dict(h=6, hk=1), {}),
    ("mla-192-128", torch.bfloat16, "reference", dict(d=192, dv=128), {}),
    ("mla-fp8", "fp8", "emulator", dict(d=192, dv=128), {}),
    ("sq>sk", torch.float32, "reference", dict(sq=50, sk=20), {}),
    ("window-softcap-alibi", torch.float32, "reference", {},
     dict(window_size=(8, 0), softcap=20.0, alibi_slopes=torch.rand(4))),
    ("non-causal", torch.float32, "reference", {}, dict(causal=False)),
]


@pytest.mark.parametrize("name,kind,backend,shape,kw", CASES, ids=[c[0] for c in CASES])
def test_fake_matches_real_shapes_strides_dtypes(name, kind, backend, shape, kw):
    qkv, scales = inputs(kind, **shape)
    args = op_args(qkv, scales, backend, **kw)
    out, lse = torch.ops.zyfa.fwd(*args)
    with FakeTensorMode() as mode:
        fake_args = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        fake_out, fake_lse = torch.ops.zyfa.fwd(*fake_args)
    for real, fake in ((out, fake_out), (lse, fake_lse)):
        assert (real.shape, real.stride(), real.dtype) == (fake.shape, fake.stride(), fake.dtype)
    b, sq, h, dv = qkv[0].shape[0], qkv[0].shape[1], qkv[0].shape[2], qkv[2].shape[3]
    assert out.shape == (b, sq, h, dv) and lse.shape == (b, h, sq) and lse.dtype == torch.float32
    # and the public function returns what the op returns (return_attn_probs: lse and None)
    pub = zyfa.flash_attn_func(*qkv, backend=backend, return_attn_probs=True, causal=kw.get("causal", True),
                               **{k: v for k, v in kw.items() if k != "causal"}, **scales)
    assert torch.equal(pub[0], out) and torch.equal(pub[1], lse) and pub[2] is None


def test_meta_tensors_give_shapes_without_running_a_backend():
    q, k, v = (torch.empty(1, 8, 4, 64, device="meta", dtype=torch.float8_e4m3fn) for _ in range(3))
    d = torch.empty(1, 4, device="meta")
    out, lse, _ = zyfa.flash_attn_func(q, k, v, causal=True, q_descale=d, k_descale=d, v_descale=d,
                                       return_attn_probs=True)
    assert out.device.type == "meta" and out.dtype == torch.bfloat16 and lse.shape == (1, 4, 8)


@pytest.mark.parametrize("kind,backend", [(torch.float32, "reference"), ("fp8", "emulator")])
def test_opcheck(kind, backend):
    qkv, scales = inputs(kind, b=1, sq=8, sk=8, d=32, dv=32)
    utils = "ALL"
    if kind == "fp8":  # opcheck's schema test multiplies the inputs itself, which CPU fp8 cannot do
        utils = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic")
    torch.library.opcheck(torch.ops.zyfa.fwd, op_args(qkv, scales, backend), test_utils=utils)


def test_opcheck_with_gradients():
    # registration checks with inputs that require grad (opcheck's AOT tests also run the backward,
    # which for zyfa::fwd is the forward-only error: see the tests at the end)
    qkv = [t.requires_grad_(True) for t in inputs(torch.float32, b=1, sq=8, sk=8, d=32, dv=32)[0]]
    torch.library.opcheck(torch.ops.zyfa.fwd, op_args(qkv, {}, "reference"),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


class Block(torch.nn.Module):
    """A projection, zyfa attention and an output projection: the shape of a decoder layer."""

    def __init__(self, fp8: bool, d=64, h=4):
        super().__init__()
        self.qkv = torch.nn.Linear(h * d, 3 * h * d)
        self.o = torch.nn.Linear(h * d, h * d)
        self.fp8, self.d, self.h = fp8, d, h

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.h, self.d).unbind(2)
        if self.fp8:
            (q, dq), (k, dk), (v, dv) = (quantize_fp8(t) for t in (q, k, v))
            y = zyfa.flash_attn_func(q, k, v, causal=True, q_descale=dq, k_descale=dk, v_descale=dv)
        else:
            y = zyfa.flash_attn_func(q, k, v, causal=True, backend="reference")
        return self.o(y.to(x.dtype).reshape(b, s, -1))


@pytest.mark.parametrize("fp8", [False, True], ids=["reference", "fp8-emulator"])
def test_compile_fullgraph_equals_eager(fp8):
    torch._dynamo.reset()
    model = Block(fp8).eval()
    x = randn(2, 33, 256)
    with torch.no_grad():
        eager = model(x)
        explained = torch._dynamo.explain(model)(x)
        assert explained.graph_break_count == 0 and explained.graph_count == 1
        compiled = torch.compile(model, fullgraph=True, backend="aot_eager")(x)
    assert torch.equal(compiled, eager)


def test_compiled_graph_calls_the_op():
    torch._dynamo.reset()
    seen = []

    def capture(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm

    with torch.no_grad():
        torch.compile(Block(False).eval(), fullgraph=True, backend=capture)(randn(1, 16, 256))
    assert "zyfa.fwd.default" in seen


def test_backward_through_compiled_forward_only_backend_says_so():
    torch._dynamo.reset()
    (q8, k8, v8), scales = inputs("fp8", b=1, sq=8, sk=8)
    q8.requires_grad_(True)
    f = torch.compile(lambda q: zyfa.flash_attn_func(q, k8, v8, causal=True, **scales), fullgraph=True,
                      backend="aot_eager")
    with pytest.raises(RuntimeError, match="'emulator' is forward only"):
        f(q8).float().sum().backward()


def test_compiled_graph_with_grad_inputs_traces_and_runs_forward():
    # torch.compile outside no_grad traces the backward ahead: that must not refuse the forward
    torch._dynamo.reset()
    qkv = [t.requires_grad_(True) for t in inputs(torch.float32, b=1, sq=8, sk=8)[0]]
    f = torch.compile(lambda q, k, v: zyfa.flash_attn_func(q, k, v, causal=True, backend="reference"),
                      fullgraph=True, backend="aot_eager")
    out = f(*qkv)
    assert out.requires_grad
    assert torch.allclose(out, zyfa.flash_attn_func(*(t.detach() for t in qkv), causal=True, backend="reference"))
    with pytest.raises(RuntimeError, match="'reference' is forward only.*in eager mode"):
        out.sum().backward()


# GPU backends: fake CUDA tensors need no GPU, so the fake implementation is checked here for the
# Triton backend (what the op reports to torch.compile on a GPU); the real call is compared with it
# on a GPU by test_triton_fake_matches_real.
GPU_CASES = [(torch.bfloat16, 128, 128, 8, 2), (torch.float16, 64, 64, 4, 4), ("fp8", 128, 128, 8, 2),
             (torch.bfloat16, 192, 128, 4, 1), ("fp8", 192, 128, 4, 1)]


def cuda_args(kind, d, dv, h, hk, backend):
    dtype = torch.float8_e4m3fn if kind == "fp8" else kind
    q, k = (torch.empty(2, 100, n, d, device="cuda", dtype=dtype) for n in (h, hk))
    v = torch.empty(2, 100, hk, dv, device="cuda", dtype=dtype)
    scale = [torch.ones(2, hk, device="cuda")] * 3 if kind == "fp8" else [None] * 3
    return (q, k, v, d ** -0.5, True, -1, -1, 0.0, None, *scale, backend, "zyfa-v2")


@pytest.mark.parametrize("kind,d,dv,h,hk", GPU_CASES)
def test_fake_for_the_triton_backend_on_fake_cuda_tensors(kind, d, dv, h, hk):
    pytest.importorskip("triton")
    with FakeTensorMode():
        out, lse = torch.ops.zyfa.fwd(*cuda_args(kind, d, dv, h, hk, "triton"))
    want = torch.bfloat16 if kind == "fp8" else kind
    assert (out.shape, out.dtype, out.device.type) == ((2, 100, h, dv), want, "cuda") and out.is_contiguous()
    assert (lse.shape, lse.dtype) == ((2, h, 100), torch.float32) and lse.is_contiguous()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA/ROCm GPU")
@pytest.mark.parametrize("kind,d,dv,h,hk", GPU_CASES)
def test_triton_fake_matches_real(kind, d, dv, h, hk):
    with FakeTensorMode():
        fake_out, fake_lse = torch.ops.zyfa.fwd(*cuda_args(kind, d, dv, h, hk, "triton"))
    dtype = torch.float8_e4m3fn if kind == "fp8" else kind
    args = list(cuda_args(kind, d, dv, h, hk, "triton"))  # real CUDA tensors outside the mode
    args[:3] = [torch.randn(a.shape, device="cuda").to(dtype) for a in args[:3]]
    out, lse = torch.ops.zyfa.fwd(*args)
    for real, fake in ((out, fake_out), (lse, fake_lse)):
        assert (real.shape, real.stride(), real.dtype) == (fake.shape, fake.stride(), fake.dtype)


@pytest.mark.parametrize("grad", [False, True], ids=["op", "eager-autograd-path"])
def test_descale_values_are_checked_on_both_paths(grad):
    (q8, k8, v8), scales = inputs("fp8", b=1, sq=8, sk=8)
    scales["k_descale"] = scales["k_descale"].clone().fill_(float("nan"))
    q8.requires_grad_(grad)
    with pytest.raises(ValueError, match="k_descale contains non-finite"):
        zyfa.flash_attn_func(q8, k8, v8, causal=True, backend="reference", **scales)


def test_valid_descales_are_checked_in_one_pass(monkeypatch):
    # one combined check (one host sync on a GPU) for valid descales; the per-descale checks, which
    # name the offender, run only when one is bad
    calls = []
    real = zyfa.interface._check_descale_values
    monkeypatch.setattr(zyfa.interface, "_check_descale_values", lambda name, d: (calls.append(name), real(name, d)))
    (q8, k8, v8), scales = inputs("fp8", b=1, sq=8, sk=8)
    zyfa.flash_attn_func(q8, k8, v8, causal=True, backend="reference", **scales)
    assert calls == []
    scales["v_descale"] = -scales["v_descale"]
    with pytest.raises(ValueError, match="v_descale must be positive"):
        zyfa.flash_attn_func(q8, k8, v8, causal=True, backend="reference", **scales)
    assert calls == ["q_descale", "k_descale", "v_descale"]
