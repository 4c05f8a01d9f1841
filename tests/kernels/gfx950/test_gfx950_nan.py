"""NaN rule of docs/numerics.md ("Non-finite inputs") on the generated gfx950 FP8 kernels, run in
the functional emulator. A NaN in q or in an allowed key of k makes the row NaN through the
kernel's per-row NaN flag (NaN-propagating v_maximum3 block maxima). A NaN in v[j, c] makes
out[i, c] NaN exactly for the rows i that allow key j: on diagonal tiles the kernel zeroes V's
NaN codes before the MFMA (0 x NaN would reach masked rows) and marks the columns in the
epilogue (generator.mask_v_nan). Rows that read no NaN keep their bits."""

from collections import Counter

import pytest
import torch

from zyfa.gfx950.isa import classify
from zyfa.kernels.gfx950.generator import generate
from zyfa.kernels.gfx950.schedule import VARIANTS
from zyfa.shapes import AttnShape
from zyfa.trace.emu.attention import emulate_kernel
from zyfa.trace.emu.result import make_inputs

SHAPE = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=256, seqlen_k=256, headdim=128, headdim_v=128, dtype="fp8")
# 320 rows: two workgroups; the second one's tiles 0 and 1 are full (no mask), tile 2 is diagonal
# and cut by seqlen_k (V^T zero-padded to 384 keys)
LONG = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=320, seqlen_k=320, headdim=128, headdim_v=128, dtype="fp8")


def _poisoned(shape, slot, *indices):
    inputs = make_inputs(shape, 0)
    poisoned = inputs[slot].clone()
    for index in indices:
        poisoned.view(torch.uint8)[index] = 0x7F  # e4m3fn NaN
    inputs[slot] = poisoned
    return inputs


def _check_against_clean(kernel, shape, inputs):
    r = emulate_kernel(kernel, shape, inputs=inputs)
    assert torch.isnan(r.ref_out.float()).any()  # the reference does propagate it
    assert torch.equal(torch.isnan(r.out.float()), torch.isnan(r.ref_out.float()))
    assert torch.equal(torch.isnan(r.lse), torch.isnan(r.ref_lse))
    return r


@pytest.mark.parametrize("kernel", ["zyfa-fp8", "zyfa-fp8-folded"])
@pytest.mark.parametrize("slot,index", [("q", (0, 200, 0, 3)), ("k", (0, 100, 0, 5)), ("v", (0, 100, 0, 7))])
def test_zyfa_fp8_nan_pattern_equals_the_reference(kernel, slot, index):
    _check_against_clean(kernel, SHAPE, _poisoned(SHAPE, slot, index))


@pytest.mark.parametrize("kernel", ["zyfa-fp8", "zyfa-fp8-folded", "zyfa-fp8-exact", "aiter-like-fp8"])
def test_v_nan_reaches_exactly_the_reading_rows_and_leaves_the_others_bitwise(kernel):
    # keys 40 and 300 of column 7 (diagonal tiles of workgroups 0 and 1), key 130 of column 64 (a
    # full tile of workgroup 1, a diagonal one of workgroup 0), the last key 319 of column 127
    nans = [(0, 40, 0, 7), (0, 300, 0, 7), (0, 130, 0, 64), (0, 319, 0, 127)]
    inputs = _poisoned(LONG, "v", *nans)
    r = _check_against_clean(kernel, LONG, inputs)
    nan_rows = {7: 40, 64: 130, 127: 319}  # column -> first NaN key: rows >= it read it (causal)
    isnan = torch.isnan(r.out.float())[0, :, 0, :]
    for col in range(128):
        first = nan_rows.get(col)
        expected = torch.zeros(LONG.seqlen_q, dtype=torch.bool) if first is None else torch.arange(LONG.seqlen_q) >= first
        assert torch.equal(isnan[:, col], expected), col
    clean = emulate_kernel(kernel, LONG, inputs=make_inputs(LONG, 0))
    same = ~isnan
    assert torch.equal(r.out.float()[0, :, 0, :][same], clean.out.float()[0, :, 0, :][same])
    assert torch.equal(r.lse, clean.lse)


def test_v_nan_path_costs_what_the_readme_says():
    """Steady loop: no VALU added (a scalar compare and a not-taken branch); per diagonal tile an
    out-of-line test of 22 VALU, and 92 VALU more only when a lane holds a NaN code."""
    gen = generate(VARIANTS["zyfa-fp8"])
    lines = [line.strip() for line in gen.asm.splitlines()]
    start = lines.index(".L_vnan_g00:")
    fast, slow, phase = Counter(), Counter(), None
    phase = fast
    for line in lines[start + 1:]:
        if not line or line.startswith(";"):
            continue
        op = line.split()[0]
        if op == "s_branch":
            break
        phase[classify(op)] += 1
        if op == "s_cbranch_vccz":
            phase = slow
    assert fast == Counter({"VALU": 22, "BRANCH": 1})
    assert slow == Counter({"VALU": 92, "SALU": 1, "WAIT": 3, "LDS": 3})
    jump = [k for k, line in enumerate(lines) if line.startswith("s_cbranch_scc1 .L_vnan_g00")]
    assert len(jump) == 1 and lines[jump[0] - 1].startswith("s_cmp_ge_u32") and jump[0] < start
