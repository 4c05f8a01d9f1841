"""The CuTe DSL kernel compiles for sm_90a on a machine without a GPU (ptxas included).

Skipped where the DSL is not installed (CPU CI installs no ``zyfa[hopper]``). ``CUTE_DSL_ARCH``
names the target, since there is no GPU to detect it from.
"""

import os

import pytest

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
pytest.importorskip("cutlass", reason="needs the CuTe DSL (pip install 'zyfa[hopper]')")

from zyfa.kernels.hopper.attn_fp8_sm90 import compile_without_gpu  # noqa: E402


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
    (192, 128, False, dict(n128=True, t128=True, pingpong=False, exact=True))])
def test_kernel_compiles_for_sm90a(d, dv, causal, variant):
    assert compile_without_gpu(d, dv, causal, **variant) is not None
