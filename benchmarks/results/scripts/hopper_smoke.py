"""One small shape through the CuTe DSL FP8 kernel vs the spec transcription (first look on the H200).

Usage: python3 hopper_smoke.py PINGPONG(0|1) [seqlen]. Prints compile time, rel L2 and lse error.
"""

import importlib.util
import sys
import time
from pathlib import Path

import torch

from zyfa.kernels.hopper.attn_fp8_sm90 import attention_fp8_sm90

root = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("cases", root / "tests/kernels/triton/triton_interp_cases.py")
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

pingpong = bool(int(sys.argv[1]))
s = int(sys.argv[2]) if len(sys.argv) > 2 else 333
g = torch.Generator(device="cuda").manual_seed(0)
q, k, v = (torch.randn(1, s, n, 128, generator=g, device="cuda") for n in (4, 2, 2))
q8, dq = cases.quantise(q, 2)
k8, dk = cases.quantise(k, 2)
v8, dv = cases.quantise(v, 2)
t0 = time.time()
out, lse = attention_fp8_sm90(q8, k8, v8, 128 ** -0.5, True, dq, dk, dv, out_dtype=torch.float32, pingpong=pingpong)
torch.cuda.synchronize()
print(f"pingpong={pingpong} s={s}: first call (compile + run) {time.time() - t0:.1f} s", flush=True)
ref, ref_lse = cases.spec_fp8_magic(q8.cpu(), k8.cpu(), v8.cpu(), dq.cpu(), dk.cpu(), dv.cpu(), 128 ** -0.5, True)
err = float((out.cpu().double() - ref.double()).norm() / ref.double().norm())
fin = torch.isfinite(ref_lse)
print(f"pingpong={pingpong} s={s}: rel_l2 vs spec {err:.3e}, lse max abs {float((lse.cpu()[fin] - ref_lse[fin]).abs().max()):.3e}, "
      f"nan {int(torch.isnan(out).sum())}, inf-pattern equal {torch.equal(torch.isinf(lse.cpu()), torch.isinf(ref_lse))}")
