"""The emulator against code a mature compiler produced: Triton AOT builds for gfx950.

Each kernel is compiled on the CPU (cached per session), run in the emulator and compared with
torch. Bounds: integer/copy math exact; GEMMs within the fp32 rounding of the MFMA chain,
``|out - ref| <= n_mfma * 2^-24 * (|A| @ |B|)`` with ``ref`` the float64 product; attention
error at most twice that of torch's own bf16 attention (plus 1e-3).
"""

import numpy as np
import pytest
import torch

from zyfa.trace.emu import triton_refs as T
from zyfa.trace.emu.launch import launch
from zyfa.trace.emu.validate import run_scaled_gemm


def _bf16(t):
    return t.to(torch.bfloat16).view(torch.uint16).numpy()


def test_vector_add_exact():
    b = T.vector_add_build()
    rng = np.random.RandomState(0)
    n = 1000  # not a multiple of the block: the tail is masked
    x, y = rng.randn(2, n).astype(np.float32)
    out = launch(b.asm, (-(-n // 256), 1, 1), (64 * b.num_warps, 1, 1),
                 [x, y, np.full(n + 24, -1, np.float32)[:n].copy(), n]).arrays[2]
    np.testing.assert_array_equal(out, x + y)


@pytest.mark.parametrize("num_warps", [1, 4])
def test_row_softmax_cross_lane_reductions(num_warps):
    # tl.max / tl.sum lower to DPP row_shr + v_readlane (and LDS across waves for 4 warps)
    b = T.softmax_build(256, num_warps)
    assert "row_shr" in b.asm and "v_readlane_b32" in b.asm
    x = np.random.RandomState(4).randn(5, 200).astype(np.float32)
    out = launch(b.asm, (5, 1, 1), (64 * num_warps, 1, 1), [x, np.zeros_like(x), 200]).arrays[1]
    ref = torch.softmax(torch.from_numpy(x).double(), -1).numpy()
    assert (np.abs(out - ref) <= 1e-6 * ref).all()  # a few fp32 roundings (exp2, sum, div)


@pytest.mark.parametrize("tile", [32, 16])  # v_mfma_f32_{32x32,16x16}_*
@pytest.mark.parametrize("dtype,bk", [("bf16", 64), ("fp8e4nv", 128)])
def test_gemm_matches_torch(dtype, bk, tile):
    b = T.gemm_build(dtype, bm=tile, bn=tile, bk=bk)
    torch.manual_seed(1)
    m, n, k = 64, 64, 2 * bk
    tdt = torch.bfloat16 if dtype == "bf16" else torch.float8_e4m3fn
    a, bb = torch.randn(m, k).to(tdt), torch.randn(k, n).to(tdt)
    view = torch.uint16 if dtype == "bf16" else torch.uint8
    c = launch(b.asm, (m // tile, n // tile, 1), (64 * b.num_warps, 1, 1),
               [a.view(view).numpy(), bb.view(view).numpy(), np.zeros((m, n), np.float32),
                m, n, k, k, n, n]).arrays[2]
    ref = (a.double() @ bb.double()).numpy()
    n_mfma = k // 16  # bound for the longest chain (16x16x32 bf16 steps K by 32)
    bound = n_mfma * 2.0**-24 * (a.double().abs() @ bb.double().abs()).numpy()
    assert (np.abs(c - ref) <= bound).all()
    if dtype == "fp8e4nv":  # fp8 products and 64-term sums are exact: only the chain rounds
        assert (c == ref.astype(np.float32)).mean() > 0.9


@pytest.mark.parametrize("tile", [32, 16])  # v_mfma_scale_f32_{32x32x64,16x16x128}_f8f6f4
@pytest.mark.parametrize("fmt", ["e4m3", "e2m1"])
def test_dot_scaled_matches_reference(fmt, tile):
    b = T.gemm_scaled_build(fmt, bm=tile, bn=tile)
    rng = np.random.RandomState(2)
    m = n = tile
    k = 256
    c, ref, bound = run_scaled_gemm(b, fmt, m, n, k, rng)
    assert (np.abs(c - ref) <= bound).all()


def _attention(bh, s, d, causal, block_m=64, block_n=32):
    b = T.attn_build(s, d, block_m, block_n, causal)
    torch.manual_seed(3)
    q, k, v = (torch.randn(bh, s, d).to(torch.bfloat16) for _ in range(3))
    sm = d ** -0.5
    strides = [s * d, d] * 4
    res = launch(b.asm, (s // block_m, bh, 1), (64 * b.num_warps, 1, 1),
                 [_bf16(q), _bf16(k), _bf16(v), sm, np.zeros((bh, s), np.float32),
                  np.zeros((bh, s, d), np.uint16), *strides])
    out = torch.from_numpy(res.arrays[4].view(np.int16)).view(torch.bfloat16).double()
    ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                           is_causal=causal, scale=sm)
    same_prec = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                 scale=sm).double()
    err, torch_err = (out - ref).abs().max().item(), (same_prec - ref).abs().max().item()
    scores = (q.double() @ k.double().transpose(-1, -2)) * sm
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(s, s, dtype=torch.bool), 1), -np.inf)
    lse2 = (torch.logsumexp(scores, -1) / np.log(2)).numpy()
    return err, torch_err, np.abs(res.arrays[3] - lse2).max()


def test_flash_attention_tutorial06_causal():
    err, torch_err, lse_err = _attention(2, 128, 64, causal=True)
    assert err <= 2 * torch_err + 1e-3
    assert lse_err < 1e-5


@pytest.mark.slow
def test_flash_attention_tutorial06_hd128_noncausal():
    err, torch_err, lse_err = _attention(1, 256, 128, causal=False, block_m=128, block_n=64)
    assert err <= 2 * torch_err + 1e-3
    assert lse_err < 1e-5


def test_bad_format_argument():
    with pytest.raises(ValueError, match="fmt must be"):
        T.gemm_scaled_build("e3m4")
