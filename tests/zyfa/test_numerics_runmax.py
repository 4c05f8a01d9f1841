"""zyfa-runmax (docs/numerics.md, "Running-max Lean P"): v1's Lean P with every code taken against the
row's running max, one scaling block per 128 keys, so the Hopper kernel's PV GEMM accumulates straight
into O. The kernel (``attention_fp8_sm90(..., n128=True, runmax=True)``) is compared with this
emulator on the H200 (tests/kernels/hopper/test_hopper_gpu.py); here: the code identity the recipe
rests on, a transcription of the text, the flush below the running max, and the accuracy cost; and
how close v1 with 128-key blocks (the kernel's ``t128``, the Hopper backend's schedule) stays to v1."""

import importlib.util
import math
from pathlib import Path

import pytest
import torch

from zyfa import numerics as N

_spec = importlib.util.spec_from_file_location("numerics_inputs", Path(__file__).with_name("numerics_inputs.py"))
_inputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_inputs)
randn, quantised = _inputs.randn, _inputs.quantised


def test_magic_codes_against_a_higher_reference_are_the_block_codes_shifted_down():
    # the identity behind the recipe: subtracting 8k from a (magic-rounded) code is the code against a
    # reference k doublings higher, clamped at 0 -- an exact multiply by 2^-k while the code stays >= 8
    s = randn(4096, seed=1) * 40.0
    T8 = torch.tensor(8 * 0.173, dtype=torch.float32)
    bm = torch.ceil(T8 / 8 * s.max())
    base = N.lean_p_code(s, T8, bm, "magic").to(torch.int32)
    for k in (0, 1, 3, 7, 15, 16, 40):
        shifted = N.lean_p_code(s, T8, bm + k, "magic").to(torch.int32)
        assert torch.equal(shifted, (base - 8 * k).clamp(min=0)), k
        normal = base - 8 * k >= 8  # e4m3 normals: the decoded value is exactly 2^-k times the block's
        dec = N.decode_e4m3(shifted.to(torch.uint8))[normal].double()
        assert torch.equal(dec, N.decode_e4m3(base.to(torch.uint8))[normal].double() * 2.0**-k)


def _transcription(q8, k8, v8, dq, dk, dv, causal, scale):
    """docs/numerics.md "Running-max Lean P", row by row in float64 (magic rounding)."""
    b, sq, h, d = q8.shape
    sk, hk, d_v = k8.shape[1], k8.shape[2], v8.shape[3]
    out = torch.zeros(b, sq, h, d_v, dtype=torch.float64)
    lse = torch.zeros(b, h, sq, dtype=torch.float64)
    for bi in range(b):
        for hi in range(h):
            kv = hi // (h // hk)
            t = torch.tensor(scale, dtype=torch.float32) * torch.tensor(N.LOG2E_F32, dtype=torch.float32)
            t = t * (dq[bi, kv] * dk[bi, kv])
            s_all = (q8[bi, :, hi].double() @ k8[bi, :, kv].double().T).float()
            for i in range(sq):
                last = i + sk - sq if causal else sk - 1
                m, l, acc = -math.inf, 0.0, torch.zeros(d_v, dtype=torch.float64)
                for j0 in range(0, min(last + 1, sk), N.RUNMAX_BLOCK):
                    j1 = min(j0 + N.RUNMAX_BLOCK, last + 1, sk)
                    s = s_all[i, j0:j1]
                    m_new = max(m, float(torch.ceil(t * s.max())))
                    p = N.lean_p_code(s, 8 * t, m_new, "magic").view(torch.float8_e4m3fn).double()
                    f = 2.0 ** (m - m_new) if m_new > m and m - m_new >= -126 else (0.0 if m_new > m else 1.0)
                    acc = acc * f + p @ v8[bi, j0:j1, kv].double()
                    l = l * f + float(p.sum())
                    m = m_new
                if l > 0:
                    out[bi, i, hi] = acc / l * float(dv[bi, kv])
                    lse[bi, hi, i] = (m - 8 + math.log2(l)) * math.log(2.0)
                else:
                    lse[bi, hi, i] = math.inf
    return out, lse


@pytest.mark.parametrize("b,sq,sk,h,hk,causal", [(1, 300, 300, 2, 1, True), (1, 140, 400, 2, 2, False),
                                                 (1, 260, 130, 2, 1, True)])
def test_emulator_matches_a_transcription_of_the_text(b, sq, sk, h, hk, causal):
    (_, _, _), (q8, k8, v8, dq, dk, dv) = quantised(b, sq, sk, h, hk, 64, 64, seed=4, outliers=True)
    out, lse = N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dv, causal=causal, variant="zyfa-runmax", rounding="magic",
                                    block=N.RUNMAX_BLOCK, out_dtype=torch.float32)
    ref, ref_lse = _transcription(q8, k8, v8, dq, dk, dv, causal, 64 ** -0.5)
    _inputs.assert_matches_transcription(out, lse, ref, ref_lse)


def test_a_block_far_below_the_running_max_is_flushed_where_v1_keeps_it():
    # block 0: every score 0; block 1: t*s ~ -16.3 (16 doublings below): v1 keeps block 1 at its own
    # scale (weight ~2^-16.3 per key), zyfa-runmax rounds every code of it to 0 (8 * -16.3 + 120 < 0)
    d = 32
    q = torch.zeros(1, 1, 1, d)
    q[..., 0] = 8.0
    k = torch.zeros(1, 256, 1, d)
    k[:, 128:, :, 0] = -8.0
    v = randn(1, 256, 1, d, seed=5).clamp(-4, 4)
    q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
    one = torch.ones(1, 1)

    def run(variant, keys, block):
        return N.zyfa_fp8_attention(q8, k8[:, :keys], v8[:, :keys], one, one, one, causal=False, variant=variant,
                                    rounding="magic", block=block, out_dtype=torch.float32)
    runmax, runmax_first = run("zyfa-runmax", 256, 128), run("zyfa-runmax", 128, 128)
    assert torch.equal(runmax[0], runmax_first[0]) and torch.equal(runmax[1], runmax_first[1])
    v1, v1_first = run("zyfa", 256, 64), run("zyfa", 128, 64)
    assert not torch.equal(v1[0], v1_first[0])
    # what v1 keeps is what the fp64 softmax has there: ~128 keys x 2^-16.3 against 128 keys x 1
    kept = float((v1[1] - v1_first[1]).squeeze())
    assert 0.5 * 2.0**-16.3 < kept < 2 * 2.0**-16.3


def test_runmax_accuracy_equals_v1_on_gaussian_inputs():
    """Measured on these inputs (2-core CPU box): rel. L2 vs fp64 attention of the unquantised inputs
    4.804e-2 for both (equal to 9 digits: no code of these rows falls ~15 doublings below its running
    max). Asserted: within
    1 % of v1."""
    (q, k, v), (q8, k8, v8, dq, dk, dv) = quantised(1, 512, 512, 2, 2, 128, 128, seed=3)
    ref = torch.softmax((q.double().transpose(1, 2) @ k.double().permute(0, 2, 3, 1)) * 128 ** -0.5
                        + torch.triu(torch.full((512, 512), -math.inf, dtype=torch.float64), 1), -1) \
        @ v.double().transpose(1, 2)
    ref = ref.transpose(1, 2)
    errs = {}
    for variant, block in (("zyfa", N.KEY_BLOCK), ("zyfa-runmax", N.RUNMAX_BLOCK)):
        out, _ = N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dv, causal=True, variant=variant, block=block,
                                      out_dtype=torch.float32)
        errs[variant] = float((out.double() - ref).norm() / ref.norm())
    print(errs)
    assert errs["zyfa-runmax"] <= 1.01 * errs["zyfa"]


@pytest.mark.parametrize("outliers,bound,lse_bound", [(False, 1e-7, 1e-6), (True, 1e-3, 5e-3)])
def test_v1_with_128_key_blocks_is_v1_up_to_fp32_rounding(outliers, bound, lse_bound):
    # the Hopper kernel's t128 runs v1 with block=128: a block's codes are then taken against the tile's
    # bm, i.e. v1's codes shifted down by 8 (bm_tile - bm) (exact while >= 8, as the magic identity test
    # shows), so the two recipes differ only where a code falls below 8 and in how the fp32 sums group.
    # Measured (CPU box): Gaussian, the GPU tests' six shapes: rel. L2 <= 9.1e-9, lse identical; K with
    # outlier channels x8 (wide score range: the two halves of a tile far apart): 8.5e-5 here, lse 5.2e-4.
    # Both far inside the bounds the Hopper backend is held to against v1 (5e-3, lse 0.1).
    (_, _, _), (q8, k8, v8, dq, dk, dv) = quantised(1, 300, 300, 4, 2, 128, 128, seed=6, outliers=outliers)
    a, la = N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dv, variant="zyfa", rounding="magic", out_dtype=torch.float32)
    b, lb = N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dv, variant="zyfa", rounding="magic", block=128,
                                 out_dtype=torch.float32)
    assert float((b.double() - a.double()).norm() / a.double().norm()) < bound
    assert float((lb - la).abs().max()) < lse_bound
