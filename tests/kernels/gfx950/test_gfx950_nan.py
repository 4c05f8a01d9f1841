"""NaN rule of docs/numerics.md ("Non-finite inputs") on the generated gfx950 FP8 and BF16 kernels, run in
the functional emulator. A NaN in q or in an allowed key of k makes the row NaN through the
kernel's per-row NaN flag (NaN-propagating v_maximum3 block maxima). A NaN in v[j, c] makes
out[i, c] NaN exactly for the rows i that allow key j: on diagonal tiles the kernel zeroes V's
NaN codes before the MFMA (0 x NaN would reach masked rows) and marks the columns in the
epilogue (generator.mask_v_nan). Rows that read no NaN keep their bits. BF16 also has +-Inf:
zyfa-bf16 keeps the first +Inf and -Inf key per column apart and adds +-Inf in the epilogue, so
out[i, c] is what zyfa.reference.masked_pv gives (Inf, -Inf, or NaN for Inf - Inf)."""

from collections import Counter
from dataclasses import replace

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


@pytest.mark.parametrize("kernel", ["zyfa-fp8", "zyfa-fp8-valu-rowsum"])
@pytest.mark.parametrize("slot,index", [("q", (0, 200, 0, 3)), ("k", (0, 100, 0, 5)), ("v", (0, 100, 0, 7))])
def test_zyfa_fp8_nan_pattern_equals_the_reference(kernel, slot, index):
    _check_against_clean(kernel, SHAPE, _poisoned(SHAPE, slot, index))


@pytest.mark.parametrize("kernel", ["zyfa-fp8", "zyfa-fp8-valu-rowsum", "zyfa-fp8-exact", "aiter-like-fp8"])
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


def _v_nan_path_counts(kernel):
    """Instruction classes of the out-of-line diagonal V check: (test, slow path), the asm lines
    and the index of its label."""
    lines = [line.strip() for line in generate(VARIANTS[kernel]).asm.splitlines()]
    start = lines.index(".L_vnan_g00:")
    fast, slow = Counter(), Counter()
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
    return fast, slow, lines, start


@pytest.mark.parametrize("kernel,test_valu,slow", [
    ("zyfa-fp8", 22, {"VALU": 92, "SALU": 1, "WAIT": 3, "LDS": 3}),
    # bf16: 16 V dwords; three first-key classes (NaN, +Inf, -Inf), then the zeroing pass
    ("zyfa-bf16", 42, {"VALU": 688, "SALU": 1, "WAIT": 9, "LDS": 7})])
def test_v_nan_path_costs_what_the_readme_says(kernel, test_valu, slow):
    """Steady loop: no VALU added (a scalar compare and a not-taken branch); per diagonal tile an
    out-of-line test (fp8 22 VALU, bf16 42), and the slow path only when a lane holds a NaN (Inf) code."""
    fast, slow_counts, lines, start = _v_nan_path_counts(kernel)
    assert fast == Counter({"VALU": test_valu, "BRANCH": 1})
    assert slow_counts == Counter(slow)
    jump = [k for k, line in enumerate(lines) if line.startswith("s_cbranch_scc1 .L_vnan_g00")]
    assert len(jump) == 1 and lines[jump[0] - 1].startswith("s_cmp_ge_u32") and jump[0] < start


# -- BF16 (zyfa-bf16): NaN and +-Inf --------------------------------------------------------------

BF16_LONG = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=320, seqlen_k=320, headdim=128, headdim_v=128, dtype="bf16")
INF = float("inf")


def _bf16_poisoned(shape, slot, values):
    inputs = make_inputs(shape, 0)
    poisoned = inputs[slot].clone()
    for index, value in values.items():
        poisoned[index] = value
    inputs[slot] = poisoned
    return inputs


def _same_nonfinite_as_reference(r):
    out, ref = r.out.float(), r.ref_out.float()
    for kind in (torch.isnan, lambda x: x == INF, lambda x: x == -INF):
        assert torch.equal(kind(out), kind(ref))
    assert torch.equal(torch.isnan(r.lse), torch.isnan(r.ref_lse))


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("slot,index", [("q", (0, 200, 0, 3)), ("k", (0, 100, 0, 5)), ("v", (0, 100, 0, 7))])
def test_zyfa_bf16_nan_pattern_equals_the_reference(slot, index, causal):
    shape = replace(BF16_LONG, causal=causal)
    r = emulate_kernel("zyfa-bf16", shape, inputs=_bf16_poisoned(shape, slot, {index: float("nan")}))
    assert torch.isnan(r.ref_out.float()).any()
    _same_nonfinite_as_reference(r)


@pytest.mark.parametrize("causal", [True, False])
def test_bf16_v_nan_and_inf_reach_exactly_the_reading_rows_and_leave_the_others_bitwise(causal):
    # column 7: +Inf at key 40, -Inf at 60 (rows >= 60 read both: NaN), NaN at 300; column 9: -NaN
    # at 41; column 64: -Inf at 130 (full tile of workgroup 1, diagonal of workgroup 0); column 127:
    # NaN at 50, +Inf at the last key 319; column 100: +Inf at 10 and 200 (both diagonal tiles)
    values = {(0, 40, 0, 7): INF, (0, 60, 0, 7): -INF, (0, 300, 0, 7): float("nan"), (0, 41, 0, 9): -float("nan"),
              (0, 130, 0, 64): -INF, (0, 50, 0, 127): float("nan"), (0, 319, 0, 127): INF,
              (0, 10, 0, 100): INF, (0, 200, 0, 100): INF}
    shape = replace(BF16_LONG, causal=causal)
    r = emulate_kernel("zyfa-bf16", shape, inputs=_bf16_poisoned(shape, "v", values))
    _same_nonfinite_as_reference(r)
    out = r.out.float()[0, :, 0, :]
    rows = torch.arange(shape.seqlen_q)[:, None]
    if causal:  # spot checks of the expected pattern itself
        assert torch.equal(out[:, 7] == INF, (rows[:, 0] >= 40) & (rows[:, 0] < 60))
        assert torch.isnan(out[60:, 7]).all() and torch.isfinite(out[:40, 7]).all()
        assert torch.equal(out[:, 100] == INF, rows[:, 0] >= 10) and torch.isfinite(out[:10, 100]).all()
    else:
        assert torch.isnan(out[:, [7, 9, 127]]).all() and (out[:, 64] == -INF).all() and (out[:, 100] == INF).all()
    clean = emulate_kernel("zyfa-bf16", shape, inputs=make_inputs(shape, 0))
    same = torch.isfinite(out)
    assert torch.equal(out[same], clean.out.float()[0, :, 0, :][same])
    assert torch.equal(r.lse, clean.lse)

