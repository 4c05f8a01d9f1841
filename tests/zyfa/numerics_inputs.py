"""Seeded inputs and a comparison shared by the numerics tests (test_numerics*.py): loaded by path,
since pytest's importlib mode puts no test folder on sys.path."""

import torch

from zyfa import numerics as N


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def quantised(b, sq, sk, h, hk, d, dv, seed=0, outliers=False):
    """fp32 q, k, v (K channels 0-3 x8 with ``outliers``) and their per-(batch, kv-head) FP8 quantisation."""
    q, k, v = randn(b, sq, h, d, seed=seed), randn(b, sk, hk, d, seed=seed + 1), randn(b, sk, hk, dv, seed=seed + 2)
    if outliers:
        k[..., :4] *= 8
    (q8, dq), (k8, dk), (v8, dvs) = (N.quantize_fp8(x, nheads_k=hk) for x in (q, k, v))
    return (q, k, v), (q8, k8, v8, dq, dk, dvs)


def assert_matches_transcription(out, lse, ref, ref_lse):
    """The emulator's fp32 ``out``/``lse`` against a float64 transcription of the spec text: it rounds
    PV and the sums to fp32 per block (and group), the transcription does not; rows with no allowed
    key are +inf in both."""
    assert float((out.double() - ref).norm() / ref.norm()) < 1e-6
    fin = torch.isfinite(ref_lse)
    assert torch.equal(torch.isinf(lse), ~fin)
    assert float((lse.double()[fin] - ref_lse[fin]).abs().max()) < 1e-5
