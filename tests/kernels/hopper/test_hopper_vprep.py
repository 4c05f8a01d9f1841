"""The one-pass Triton V' kernel equals the torch reference, byte for byte (Triton interpreter, CPU)."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")

CASE = """
import torch
from zyfa.kernels.hopper.layout import prepare_v
from zyfa.kernels.hopper.vprep import prepare_v_triton
g = torch.Generator().manual_seed(0)
for shape in ((1, 100, 2, 128), (2, 64, 1, 64), (1, 130, 3, 96)):
    v = (torch.randn(*shape, generator=g) * 8).to(torch.float8_e4m3fn)
    a, b = prepare_v(v).view(torch.uint8), prepare_v_triton(v).view(torch.uint8)
    assert a.shape == b.shape and torch.equal(a, b), shape
print("ok")
"""


def test_triton_prepare_v_equals_torch_reference():
    proc = subprocess.run([sys.executable, "-P", "-c", CASE], env=dict(os.environ, TRITON_INTERPRET="1"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")
