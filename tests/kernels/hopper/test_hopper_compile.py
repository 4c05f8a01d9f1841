"""The CuTe DSL kernel compiles for sm_90a on a machine without a GPU (ptxas included).

Skipped where the DSL is not installed (CPU CI installs no ``zyfa[hopper]``). ``CUTE_DSL_ARCH``
names the target, since there is no GPU to detect it from.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
pytest.importorskip("cutlass", reason="needs the CuTe DSL (pip install 'zyfa[hopper]')")

from zyfa.kernels.hopper.attn_fp8_sm90 import LeanPAttentionSm90, compile_without_gpu  # noqa: E402


@pytest.mark.parametrize("d,dv,causal,variant", [
    (128, 128, True, dict(pingpong=True)), (128, 128, False, dict(pingpong=False)),
    (192, 128, True, dict(pingpong=True)), (64, 64, True, dict(pingpong=False)),
    (128, 128, True, dict(timeline=True)),
    (128, 128, True, dict(n128=True)), (192, 128, False, dict(n128=True, pingpong=False)),
    (128, 128, True, dict(n128=True, timeline=True, lpt=False)), (128, 128, True, dict(exact=True)),
    (128, 128, False, dict(exact=True, n128=True)),
    (128, 128, True, dict(n128=True, pingpong=False, kv_stages=3)),
    (128, 128, True, dict(n128=True, runmax=True)), (192, 128, False, dict(n128=True, runmax=True, pingpong=False)),
    (128, 128, True, dict(n128=True, runmax=True, exact=True)),
    (128, 128, True, dict(n128=True, runmax=True, timeline=True)),
    (128, 128, True, dict(n128=True, t128=True)),
    (192, 128, False, dict(n128=True, t128=True, pingpong=False, exact=True)),
    (128, 128, True, dict(n128=True, grouped=4)), (192, 128, False, dict(n128=True, grouped=8, pingpong=False)),
    (128, 128, True, dict(n128=True, grouped=4, exact=True)), (64, 64, True, dict(n128=True, grouped=2, timeline=True))])
def test_kernel_compiles_for_sm90a(d, dv, causal, variant):
    assert compile_without_gpu(d, dv, causal, **variant) is not None


@pytest.mark.parametrize("variant", [dict(n128=True, grouped=-1), dict(n128=True, grouped=True), dict(grouped=4),
                                     dict(n128=True, t128=True, grouped=4), dict(n128=True, runmax=True, grouped=4)])
def test_grouped_options_are_checked(variant):
    with pytest.raises(ValueError, match="grouped"):
        LeanPAttentionSm90(128, 128, True, **variant)


def test_grouped_kernel_fits_the_register_budget_without_spills(tmp_path):
    # the consumer warpgroups run with setmaxnreg 240 (LeanPAttentionSm90.mma_regs): ptxas spills (LDL/STL
    # in the SASS) what does not fit; tools/hopper_sass.py compiles in its own process (it sets the DSL's
    # cubin dump before the DSL is imported)
    tool = Path(__file__).parents[3] / "tools" / "hopper_sass.py"
    names = ["grouped4_pp", "grouped8_nopp"]
    subprocess.run([sys.executable, str(tool), str(tmp_path), "--only", *names], check=True, capture_output=True)
    for name in names:
        sass = (tmp_path / f"{name}.sass").read_text()
        top = max(int(r) for r in re.findall(r"\bR(\d+)\b", sass))
        print(f"\n{name}: highest register R{top}")
        assert not re.search(r"\b(LDL|STL)\b", sass), name
        assert top < 240, name
