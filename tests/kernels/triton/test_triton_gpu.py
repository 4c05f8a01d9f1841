"""The Triton kernels on a real GPU: spec conformance, accuracy, determinism, backend dispatch.

Bounds. FP8 vs the spec transcription (magic rounding, fp64 accumulation), compared before the
bf16 cast (``out_dtype=float32``): with ``precise_acc`` (IEEE fp32 accumulation of the fp8 tensor-
core products) relative L2 <= 1e-5; with Hopper's default fp8 accumulation (not IEEE fp32: fewer
mantissa bits, which perturbs QK^T and so flips some P codes at rounding boundaries) <= 5e-3
(measured on the H200: 1.3e-3 to 4.4e-3). softmax_lse: <= 1e-5 precise; with Hopper accumulation
<= 0.1, since one flipped code of a block's largest probability changes l by up to one e4m3
step, 2^(1/8) (ln: 0.087); measured up to 0.046.
Every test prints its measured value (``pytest -s``). BF16 vs fp64: <= 2x the error of torch
SDPA in bf16 on the same inputs + 1e-4.
"""

import importlib.util
import math
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA/ROCm GPU", allow_module_level=True)
pytest.importorskip("triton")

from zyfa import flash_attn_func, numerics  # noqa: E402
from zyfa.kernels.triton._common import TileConfig  # noqa: E402
from zyfa.kernels.triton.attn_bf16 import attention_bf16  # noqa: E402
from zyfa.kernels.triton.attn_fp8 import attention_fp8  # noqa: E402
from zyfa.kernels.triton import hadamard_fp8  # noqa: E402
from zyfa.kernels.triton.hadamard_fp8 import hadamard_quantize_fp8, rope_rows  # noqa: E402

_spec = importlib.util.spec_from_file_location("triton_interp_cases", Path(__file__).with_name("triton_interp_cases.py"))
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)


def rel_l2(a, ref):
    a, ref = a.double().cpu(), ref.double().cpu()
    return float((a - ref).norm() / ref.norm())


def fp8_inputs(b, sq, sk, h, hk, d, dv, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(b, s, n, e, generator=g, device="cuda") for s, n, e in ((sq, h, d), (sk, hk, d), (sk, hk, dv)))
    return [*cases.quantise(q, hk), *cases.quantise(k, hk), *cases.quantise(v, hk)]


SPEC_SHAPES = [(1, 333, 333, 4, 2, 128, 128, True), (2, 200, 517, 2, 1, 128, 128, True),
               (1, 256, 129, 2, 2, 64, 64, True), (1, 300, 300, 2, 1, 128, 128, False),
               (1, 190, 190, 2, 2, 192, 128, True)]


@pytest.mark.parametrize("precise", [True, False], ids=["precise_acc", "hopper_acc"])
@pytest.mark.parametrize("b,sq,sk,h,hk,d,dv,causal", SPEC_SHAPES)
def test_fp8_matches_spec(b, sq, sk, h, hk, d, dv, causal, precise):
    q8, dq, k8, dk, v8, dv_ = fp8_inputs(b, sq, sk, h, hk, d, dv)
    config = TileConfig(128, 8, 3, precise_acc=True) if precise else None
    out, lse = attention_fp8(q8, k8, v8, d ** -0.5, causal, dq, dk, dv_, out_dtype=torch.float32, config=config)
    ref, ref_lse = cases.spec_fp8_magic(q8.cpu(), k8.cpu(), v8.cpu(), dq.cpu(), dk.cpu(), dv_.cpu(), d ** -0.5, causal)
    err = rel_l2(out.cpu(), ref)
    fin = torch.isfinite(ref_lse)
    lse_err = float((lse.cpu()[fin] - ref_lse[fin]).abs().max())
    print(f"\nSPEC {'precise' if precise else 'hopper'} {(b, sq, sk, h, hk, d, dv, causal)} rel_l2={err:.3e} lse_max_abs={lse_err:.3e}")
    assert err <= (1e-5 if precise else 5e-3)
    assert torch.equal(torch.isinf(lse.cpu()), torch.isinf(ref_lse))
    assert lse_err <= (1e-5 if precise else 0.1)


def test_fp8_matches_numerics_emulator():
    numerics = pytest.importorskip("zyfa.numerics")
    q8, dq, k8, dk, v8, dv_ = fp8_inputs(1, 500, 500, 4, 2, 128, 128, seed=3)
    res = numerics.zyfa_fp8_attention(q8, k8, v8, q_descale=dq, k_descale=dk, v_descale=dv_, causal=True,
                                      rounding="magic")
    ref = res[0] if isinstance(res, tuple) else res
    precise, _ = attention_fp8(q8, k8, v8, 128 ** -0.5, True, dq, dk, dv_, config=TileConfig(128, 8, 3, precise_acc=True))
    default, _ = attention_fp8(q8, k8, v8, 128 ** -0.5, True, dq, dk, dv_)
    err_precise, err_default = rel_l2(precise, ref), rel_l2(default, ref)
    print(f"\nEMULATOR bf16 outputs: precise_acc rel_l2={err_precise:.3e} (equal: {torch.equal(precise, ref.to(precise.dtype))}), "
          f"default rel_l2={err_default:.3e}")
    assert err_precise <= 1e-3  # bf16 outputs: only ties/1-ulp cases may differ
    assert err_default <= 5e-3


def test_bf16_vs_fp64_within_2x_sdpa():
    g = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn(1, 777, 4, 128, generator=g, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out, _ = attention_bf16(q, k, v, 128 ** -0.5, True)
    oracle = flash_attn_func(q, k, v, causal=True, backend="oracle")
    sdpa = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=True)
    assert rel_l2(out, oracle) <= 2 * rel_l2(sdpa.transpose(1, 2), oracle) + 1e-4


def test_bitwise_deterministic_over_1000_calls():
    q8, dq, k8, dk, v8, dv_ = fp8_inputs(1, 2048, 2048, 8, 2, 128, 128, seed=7)
    first, lse0 = attention_fp8(q8, k8, v8, 128 ** -0.5, True, dq, dk, dv_)
    same = all(torch.equal(attention_fp8(q8, k8, v8, 128 ** -0.5, True, dq, dk, dv_)[0], first) for _ in range(1000))
    assert same
    qb, kb, vb = (torch.randn(1, 2048, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ob = attention_bf16(qb, kb, vb, 128 ** -0.5, True)[0]
    assert all(torch.equal(attention_bf16(qb, kb, vb, 128 ** -0.5, True)[0], ob) for _ in range(1000))


def test_backend_dispatch_fp8_and_bf16():
    q8, dq, k8, dk, v8, dv_ = fp8_inputs(1, 100, 100, 2, 2, 128, 128, seed=2)
    out, lse, _ = flash_attn_func(q8, k8, v8, causal=True, q_descale=dq, k_descale=dk, v_descale=dv_,
                                  backend="triton", return_attn_probs=True)
    assert out.dtype == torch.bfloat16 and lse.shape == (1, 2, 100)
    oracle = flash_attn_func(q8, k8, v8, causal=True, q_descale=dq, k_descale=dk, v_descale=dv_, backend="oracle")
    assert rel_l2(out, oracle) < 6e-2
    with pytest.raises(NotImplementedError, match="softcap"):
        flash_attn_func(q8, k8, v8, softcap=5.0, q_descale=dq, k_descale=dk, v_descale=dv_, backend="triton")
    assert not math.isnan(rel_l2(out, oracle))


# Every head-dim class the validator accepts (multiples of 8 up to 256; padded to 16/32/64/128/256
# and so to both shared-memory tiers of _common.AUTOTUNE_CONFIGS), d = dv and MLA-style d != dv.
HEAD_DIMS = [(8, 8), (40, 40), (64, 64), (96, 96), (128, 128), (192, 192), (256, 256), (192, 128), (128, 64), (64, 256)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float8_e4m3fn], ids=["fp16", "bf16", "fp8"])
@pytest.mark.parametrize("d,dv", HEAD_DIMS)
def test_every_head_dim_runs(d, dv, dtype):
    # bounds vs fp64: fp16/bf16 as the 2x-SDPA test measures them at d=128 (bf16 ~3e-3), with
    # margin; FP8 as test_backend_dispatch_fp8_and_bf16
    if dtype == torch.float8_e4m3fn:
        q, dq, k, dk, v, dv_ = fp8_inputs(1, 257, 257, 4, 2, d, dv, seed=d + dv)
        scales = dict(q_descale=dq, k_descale=dk, v_descale=dv_)
    else:
        g = torch.Generator(device="cuda").manual_seed(d + dv)
        q, k, v = (torch.randn(1, 257, n, e, generator=g, device="cuda").to(dtype) for n, e in ((4, d), (2, d), (2, dv)))
        scales = {}
    out = flash_attn_func(q, k, v, causal=True, backend="triton", **scales)
    oracle = flash_attn_func(q, k, v, causal=True, backend="oracle", **scales)
    err = rel_l2(out, oracle)
    print(f"\nHEADDIM {dtype} d={d} dv={dv} rel_l2={err:.3e}")
    assert out.shape == (1, 257, 4, dv)
    assert err <= {torch.float16: 2e-3, torch.bfloat16: 1.5e-2, torch.float8_e4m3fn: 6e-2}[dtype]


def test_fp8_v2_equals_emulator_bitwise_with_exact_accumulation():
    # integer Q, K and V in {-1, 0, 1}: every fp32 partial sum of QK^T and PV is exact, so with IEEE
    # fp32 accumulation (precise_acc) the fp32 outputs must equal the emulator's bit for bit
    numerics = pytest.importorskip("zyfa.numerics")
    g = torch.Generator().manual_seed(11)
    q = torch.randint(-8, 9, (1, 333, 4, 128), generator=g).float()
    k = torch.randint(-8, 9, (1, 333, 2, 128), generator=g).float()
    k[..., :2] *= 8
    v = torch.randint(-1, 2, (1, 333, 2, 128), generator=g).float()
    q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
    dq, dk, dv_ = (torch.rand(1, 2, generator=g) * 0.2 + 0.01 for _ in range(3))
    ref, ref_lse = numerics.zyfa_fp8_attention(q8, k8, v8, dq, dk, dv_, causal=True, variant="zyfa-v2",
                                               out_dtype=torch.float32)
    out, lse = attention_fp8(q8.cuda(), k8.cuda(), v8.cuda(), 128 ** -0.5, True, dq.cuda(), dk.cuda(), dv_.cuda(),
                             out_dtype=torch.float32, config=TileConfig(128, 8, 3, precise_acc=True), recipe="zyfa-v2")
    assert torch.equal(out.cpu(), ref)
    assert float((lse.cpu() - ref_lse).abs().max()) <= 1e-5  # the kernel's fp32 log2 vs float64 rounded once


@pytest.mark.parametrize("block_s", [None, 128])
@pytest.mark.parametrize("gran", ["head", "token"])
@pytest.mark.parametrize("variant", list(hadamard_fp8.VARIANTS) + [None])  # None: DEFAULT_ROPE_LAUNCH
def test_fused_rope_hadamard_quantise_equals_torch_path(gran, block_s, variant):
    # on the GPU's fp32 units and its RNE e4m3 convert (the interpreter tests convert on the host),
    # against the torch path on the CPU: codes and descales bit for bit; GQA, a seqlen no block
    # divides, positions from 1000 on, a zero token (RoPE makes -0 there) and outlier channels.
    # block_s=128: run 25's per-head launch (one row per thread), the default since is 64 rows
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 333, 8, 128, generator=g)
    x[..., :3] *= 16
    x[:, 7] = 0.0
    x = x.bfloat16()
    cos, sin = numerics.rope_tables(333, 128, offset=1000)
    ref8, ref_ds = numerics.quantize_fp8(numerics.hadamard(numerics.rope(x, cos, sin)), gran, nheads_k=2)
    x8, ds = hadamard_quantize_fp8(x.cuda(), gran, 2, block_s=block_s, cos=cos.cuda(), sin=sin.cuda(), variant=variant)
    assert torch.equal(x8.cpu().view(torch.uint8), ref8.view(torch.uint8))
    assert torch.equal(ds.cpu(), ref_ds)
    assert torch.equal(rope_rows(x.cuda(), cos.cuda(), sin.cuda(), variant=variant).cpu(),
                       numerics.rope(x, cos, sin).bfloat16())


@pytest.mark.parametrize("variant", ["rows", "pairs"])
@pytest.mark.parametrize("gran", ["head", "token"])
@pytest.mark.parametrize("case", ["tiny_rows", "negative_zeros", "odd_strides", "odd_start", "fp16", "d64_k_heads"])
def test_rows_variant_edge_rows_equal_torch_path(case, gran, variant):
    # variants "rows" and "pairs" (a row in two threads): rows (per head: a group) whose descale is below 2^-100 (the 2^64 scaling branch), -0
    # inputs quantised without rotation (codes 0x80: the negated Markstein keeps the sign), bf16 views
    # with odd strides or an odd start (read as bf16, not as words), fp16, and K-like few heads at d64
    g = torch.Generator().manual_seed(11)
    b, s, h, d = (1, 200, 2, 64) if case == "d64_k_heads" else (1, 150, 4, 128)
    x = torch.randn(b, s, h, d, generator=g)
    if case == "tiny_rows":
        x[:, :40] *= 2.0 ** -118
        x[:, :, 1] *= 2.0 ** -118  # per head: head 1's whole group (nheads_k = h) is tiny
    if case == "negative_zeros":
        x[:, 5:9, :, ::3] = -0.0
    x = x.half() if case == "fp16" else x.bfloat16()
    xd = x.cuda()
    if case == "odd_strides":  # row strides d + 1: odd (sliced on the GPU: .cuda() of a view would compact it)
        xd = torch.randn(b, s, h, d + 1, generator=g).bfloat16().cuda()[..., 1:]
        x = xd.cpu()
        assert xd.stride(2) % 2 == 1
    if case == "odd_start":  # even strides, the rows 2 bytes off a 4-byte boundary: read as bf16, not words
        xd = torch.randn(b, s, h, d + 2, generator=g).bfloat16().cuda()[..., 1:d + 1]
        x = xd.cpu()
        assert xd.data_ptr() % 4 == 2
    rotate = rope = case != "negative_zeros"  # -0 inputs stay -0 without RoPE and rotation
    cos, sin = numerics.rope_tables(s, d, offset=3000)
    r = numerics.rope(x, cos, sin) if rope else x
    ref8, ref_ds = numerics.quantize_fp8(numerics.hadamard(r) if rotate else r, gran)
    tables = dict(cos=cos.cuda(), sin=sin.cuda()) if rope else {}
    x8, ds = hadamard_quantize_fp8(xd, gran, rotate=rotate, variant=variant, **tables)
    assert torch.equal(x8.cpu().view(torch.uint8), ref8.view(torch.uint8))
    assert torch.equal(ds.cpu(), ref_ds)
    if case == "tiny_rows":
        assert float(ref_ds.min()) < 2.0 ** -100  # the case reaches the scaling branch
    if case == "negative_zeros":
        assert int((ref8.view(torch.uint8) == 0x80).sum()) > 0  # -0 codes in rows whose amax is not 0
