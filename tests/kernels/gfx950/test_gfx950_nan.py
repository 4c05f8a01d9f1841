"""NaN rule of docs/numerics.md ("Non-finite inputs") on the generated gfx950 kernel, run in the
functional emulator. A NaN in q or in an allowed key of k makes the row NaN through the kernel's
per-row NaN flag (NaN-propagating v_maximum3 block maxima). A NaN in v still reaches causally
masked rows (strict xfail, so that a fix flips it)."""

import pytest
import torch

from zyfa.shapes import AttnShape
from zyfa.trace.emu.attention import emulate_kernel
from zyfa.trace.emu.result import make_inputs

SHAPE = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=256, seqlen_k=256, headdim=128, headdim_v=128, dtype="fp8")


V_MASKED = pytest.mark.xfail(strict=True, reason="a NaN in V reaches causally masked rows: their P is 0 and the "
                                                "MFMA's 0 x NaN is NaN; the kernel has no per-row V mask")


@pytest.mark.parametrize("slot,index", [("q", (0, 200, 0, 3)), ("k", (0, 100, 0, 5)),
                                        pytest.param("v", (0, 100, 0, 7), marks=V_MASKED)])
def test_zyfa_fp8_nan_pattern_equals_the_reference(slot, index):
    inputs = make_inputs(SHAPE, 0)
    poisoned = inputs[slot].clone()
    poisoned.view(torch.uint8)[index] = 0x7F  # e4m3fn NaN
    inputs[slot] = poisoned
    r = emulate_kernel("zyfa-fp8", SHAPE, inputs=inputs)
    assert torch.isnan(r.ref_out.float()).any()  # the reference does propagate it
    assert torch.equal(torch.isnan(r.out.float()), torch.isnan(r.ref_out.float()))
    assert torch.equal(torch.isnan(r.lse), torch.isnan(r.ref_lse))
