"""zyfa-grouped (docs/numerics.md, "Grouped running-max Lean P"): zyfa-runmax inside groups of G blocks
(aligned to key 0), each finished group merged into O like one v1 block. Here: the two ends of the
family (G = 1 is v1 with the same block, G >= the key blocks is zyfa-runmax), a transcription of the
text, and what the groups are for: a block far below an earlier group's max is kept."""

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

SHAPES = [(1, 300, 300, 2, 1, True), (1, 140, 700, 2, 2, False), (1, 700, 260, 4, 2, True),
          (1, 520, 900, 2, 1, True)]


def _run(ops8, causal, variant, block=128, **kw):
    return N.zyfa_fp8_attention(*ops8, causal=causal, variant=variant, rounding="magic", block=block,
                                out_dtype=torch.float32, **kw)


@pytest.mark.parametrize("b,sq,sk,h,hk,causal", SHAPES)
def test_group_of_one_block_is_v1_bit_for_bit(b, sq, sk, h, hk, causal):
    _, ops8 = quantised(b, sq, sk, h, hk, 128, 128, seed=7, outliers=True)
    v1, v1_lse = _run(ops8, causal, "zyfa-v1")
    g1, g1_lse = _run(ops8, causal, "zyfa-grouped", group=1)
    assert torch.equal(g1, v1) and torch.equal(g1_lse, v1_lse)


@pytest.mark.parametrize("b,sq,sk,h,hk,causal", SHAPES)
def test_one_group_over_all_keys_is_runmax(b, sq, sk, h, hk, causal):
    # out: the same bits; lse: (m + log2(2^-8 l)) vs (m - 8 + log2 l), one fp32 rounding apart
    _, ops8 = quantised(b, sq, sk, h, hk, 128, 128, seed=8, outliers=True)
    rm, rm_lse = _run(ops8, causal, "zyfa-runmax")
    g, g_lse = _run(ops8, causal, "zyfa-grouped", group=-(-sk // 128))
    assert torch.equal(g, rm)
    fin = torch.isfinite(rm_lse)
    assert torch.equal(fin, torch.isfinite(g_lse))
    assert float((g_lse[fin] - rm_lse[fin]).abs().max()) <= 4e-6


def _transcription(q8, k8, v8, dq, dk, dv, causal, scale, block, group):
    """docs/numerics.md "Grouped running-max Lean P", row by row in float64 (magic rounding)."""
    b, sq, h, d = q8.shape
    sk, hk, d_v = k8.shape[1], k8.shape[2], v8.shape[3]
    out = torch.zeros(b, sq, h, d_v, dtype=torch.float64)
    lse = torch.zeros(b, h, sq, dtype=torch.float64)
    span = block * group
    for bi in range(b):
        for hi in range(h):
            kv = hi // (h // hk)
            t = torch.tensor(scale, dtype=torch.float32) * torch.tensor(N.LOG2E_F32, dtype=torch.float32)
            t = t * (dq[bi, kv] * dk[bi, kv])
            s_all = (q8[bi, :, hi].double() @ k8[bi, :, kv].double().T).float()
            for i in range(sq):
                end = min(i + sk - sq + 1 if causal else sk, sk)
                m, l, acc = -math.inf, 0.0, torch.zeros(d_v, dtype=torch.float64)
                for g0 in range(0, max(end, 0), span):
                    mg, lg, accg = -math.inf, 0.0, torch.zeros(d_v, dtype=torch.float64)
                    for j0 in range(g0, min(g0 + span, end), block):  # zyfa-runmax inside the group
                        s = s_all[i, j0:min(j0 + block, end)]
                        mg_new = max(mg, float(torch.ceil(t * s.max())))
                        p = N.lean_p_code(s, 8 * t, mg_new, "magic").view(torch.float8_e4m3fn).double()
                        f = 1.0 if mg_new == mg else (2.0 ** (mg - mg_new) if mg - mg_new >= -126 else 0.0)
                        accg = accg * f + p @ v8[bi, j0:j0 + len(s), kv].double()
                        lg = lg * f + float(p.sum())
                        mg = mg_new
                    m_new = max(m, mg)  # the group merged as one v1 block with bm = mg
                    e = mg - 8 - m_new
                    acc = acc * 2.0 ** (m - m_new) if m > -math.inf else acc
                    l = l * 2.0 ** (m - m_new) if m > -math.inf else l
                    if e >= N.E8M0_MIN_EXP:
                        acc, l = acc + accg * 2.0**e, l + lg * 2.0**e
                    m = m_new
                if l > 0:
                    out[bi, i, hi] = acc / l * float(dv[bi, kv])
                    lse[bi, hi, i] = (m + math.log2(l)) * math.log(2.0)
                else:
                    lse[bi, hi, i] = math.inf
    return out, lse


@pytest.mark.parametrize("b,sq,sk,h,hk,causal,group", [(1, 300, 600, 2, 1, True, 2), (1, 140, 700, 2, 2, False, 3),
                                                       (1, 400, 260, 2, 1, True, 2)])
def test_emulator_matches_a_transcription_of_the_text(b, sq, sk, h, hk, causal, group):
    _, (q8, k8, v8, dq, dk, dv) = quantised(b, sq, sk, h, hk, 64, 64, seed=9, outliers=True)
    out, lse = N.zyfa_fp8_attention(q8, k8, v8, dq, dk, dv, causal=causal, variant="zyfa-grouped", rounding="magic",
                                    block=128, group=group, out_dtype=torch.float32)
    ref, ref_lse = _transcription(q8, k8, v8, dq, dk, dv, causal, 64 ** -0.5, 128, group)
    _inputs.assert_matches_transcription(out, lse, ref, ref_lse)


def test_a_block_far_below_an_earlier_groups_max_is_kept():
    # blocks of 128 keys: block 0 scores 0, blocks 1-3 t*s ~ -16.3 (16 doublings below). zyfa-runmax
    # flushes blocks 1-3 (every code of them < 0); with groups of 2 blocks, block 1 shares block 0's
    # group and is flushed there too, but blocks 2-3 form their own group, with their own max: kept.
    d = 32
    q = torch.zeros(1, 1, 1, d)
    q[..., 0] = 8.0
    k = torch.zeros(1, 512, 1, d)
    k[:, 128:, :, 0] = -8.0
    v = randn(1, 512, 1, d, seed=5).clamp(-4, 4)
    q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
    one = torch.ones(1, 1)

    def run(variant, keys, **kw):
        return N.zyfa_fp8_attention(q8, k8[:, :keys], v8[:, :keys], one, one, one, causal=False, variant=variant,
                                    rounding="magic", block=128, out_dtype=torch.float32, **kw)
    assert torch.equal(run("zyfa-runmax", 512)[0], run("zyfa-runmax", 128)[0])
    g2_256, g2_512 = run("zyfa-grouped", 256, group=2), run("zyfa-grouped", 512, group=2)
    assert torch.equal(g2_256[0], run("zyfa-runmax", 128)[0])  # block 1 flushed inside group 0
    # group 1 (blocks 2-3) kept at its own scale: ~256 keys x 2^-16.3 against block 0's 128 keys x 1
    kept = float(g2_512[1].squeeze() - g2_256[1].squeeze())
    assert 0.5 * 2 * 2.0**-16.3 < kept < 2 * 2 * 2.0**-16.3


def test_group_is_checked():
    _, ops8 = quantised(1, 64, 64, 1, 1, 32, 32, seed=1)
    with pytest.raises(ValueError, match="group=2 applies to variant 'zyfa-grouped' only"):
        N.zyfa_fp8_attention(*ops8, variant="zyfa-v1", group=2)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="group must be a positive int"):
            N.zyfa_fp8_attention(*ops8, variant="zyfa-grouped", group=bad)
