"""The CuTe DSL kernel compiles for sm_90a on a machine without a GPU (ptxas included).

Skipped where the DSL is not installed (CPU CI installs no ``zyfa[hopper]``). ``CUTE_DSL_ARCH``
names the target, since there is no GPU to detect it from.
"""

import os

import pytest
import torch

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
pytest.importorskip("cutlass", reason="needs the CuTe DSL (pip install 'zyfa[hopper]')")

import cuda.bindings.driver as cuda  # noqa: E402
import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402

from zyfa.kernels.hopper.attn_fp8_sm90 import LeanPAttentionSm90, _cute_tensor  # noqa: E402
from zyfa.kernels.hopper.layout import ONES_ROWS  # noqa: E402


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
    b, s, h, hk = 1, 256, 4, 2
    q = torch.zeros(b, s, h, d, dtype=torch.uint8)
    k = torch.zeros(b, s, hk, d, dtype=torch.uint8)
    vt = torch.zeros(b, hk, dv + ONES_ROWS, s, dtype=torch.uint8)
    o = torch.zeros(b, s, h, dv, dtype=torch.bfloat16)
    lse, t, dvs = torch.zeros(b, h, s), torch.ones(b, hk), torch.ones(b, hk)
    tl = torch.zeros(2 * h * b, 2, s // 64 + 2, 4, dtype=torch.int64)
    f8 = cutlass.Float8E4M3FN
    args = (_cute_tensor(q.permute(1, 3, 2, 0), 1, f8), _cute_tensor(k.permute(1, 3, 2, 0), 1, f8),
            _cute_tensor(vt.permute(2, 3, 1, 0), 1, f8), _cute_tensor(o.permute(1, 3, 2, 0), 1),
            _cute_tensor(lse.permute(2, 1, 0), 0), _cute_tensor(t.permute(1, 0), 0),
            _cute_tensor(dvs.permute(1, 0), 0), _cute_tensor(tl.permute(3, 2, 1, 0), 0),
            cutlass.Int32(s), cutlass.Int32(s), cuda.CUstream(0))
    compiled = cute.compile(LeanPAttentionSm90(d, dv, causal, **variant), *args)
    assert compiled is not None
