"""Per-warpgroup timeline of the CuTe DSL FP8 kernel (b1 h32 s16k d128 causal) from clock64 stamps.

Usage: python3 hopper_timeline.py OUT_DIR [n128 | runmax | t128 | g4 | g8]. With ``n128`` the kernel
variant with 128-key S tiles (a stamp column per 128-key tile); ``runmax``, ``t128``: n128 with that flag
of ``attention_fp8_sm90``; ``g4``, ``g8``: n128 with ``grouped=4`` / ``8`` (tile j's event 1, "S ready",
is stamped after its turn: its S GEMM was issued and waited for in tile j-1). Since removed variants ran here too, and stay in history: ``lag`` (runs 22-23,
f5401d3), ``bfirst`` (run 24's script, 1f21526), ``late`` / ``split`` (t128 with ``late_merge`` /
``split_pv``, runs 29-30, 1aff593 / 91e39ae).
For ping-pong on and off: runs the stamped kernel, checks
its output equals the plain kernel's bit for bit, times both (stamp overhead), writes the trace of
two CTAs (the heaviest query tile of head 0 and a middle one) as ``cute_timeline_{pp,nopp}.parquet``
(+ .json, trace schema v1, source ``cute-clock``) and prints the Proton metrics on it.
"""

import dataclasses
import sys
from pathlib import Path

import torch
import triton

from zyfa.cli.bench_main import Inputs, NvmlSampler
from zyfa.kernels.hopper.attn_fp8_sm90 import attention_fp8_sm90
from zyfa.shapes import AttnShape
from zyfa.trace.cute_clock import trace_from_stamps
from zyfa.trace.proton import phase_cycles, tensor_core_overlap, tensor_core_phase_busy

out_dir = Path(sys.argv[1])
FLAGS = {"runmax": dict(runmax=True), "t128": dict(t128=True), "g4": dict(grouped=4), "g8": dict(grouped=8)}
flag = sys.argv[2] if len(sys.argv) == 3 and sys.argv[2] in FLAGS else None
opts = FLAGS[flag] if flag else {}
n128 = flag is not None or sys.argv[2:] == ["n128"]
shape = AttnShape(batch=1, heads=32, heads_k=32, seqlen_q=16384, seqlen_k=16384, headdim=128, headdim_v=128,
                  causal=True, dtype="fp8")
x = Inputs(shape)
grid_m = triton.cdiv(shape.seqlen_q, 128)
ctas, n_blocks = grid_m * shape.heads * shape.batch, triton.cdiv(shape.seqlen_k, 64)
chosen = [grid_m - 1, grid_m // 2]  # head 0: the last (heaviest) query tile and a middle one
for pingpong in (True, False):
    tag = ("pp" if pingpong else "nopp") + ("_n128" if n128 else "") + (f"_{flag}" if flag else "")
    stamps = torch.zeros(ctas, 2, n_blocks + 2, 4, dtype=torch.int64, device="cuda")

    def plain():
        return attention_fp8_sm90(x.q8, x.k8, x.v8, x.scale, True, x.dq, x.dk, x.dv, pingpong=pingpong, n128=n128,
                                  **opts)[0]

    def stamped():
        return attention_fp8_sm90(x.q8, x.k8, x.v8, x.scale, True, x.dq, x.dk, x.dv, pingpong=pingpong,
                                  timeline=stamps, n128=n128, **opts)[0]
    same = torch.equal(plain(), stamped())
    ms_plain = triton.testing.do_bench(plain, warmup=50, rep=200, return_mode="median")
    ms_stamped = triton.testing.do_bench(stamped, warmup=50, rep=200, return_mode="median")
    stamps.zero_()
    with NvmlSampler() as nv:
        stamped()
        torch.cuda.synchronize()
    mhz = nv.means()[0]
    trace = trace_from_stamps(stamps.cpu().numpy(), chosen,
                              dict(kernel=f"zyfa-cute-fp8 ({tag})", arch="sm_90", shape=dataclasses.asdict(shape),
                                   grid=(grid_m, shape.heads, shape.batch), workgroup_size=384,
                                   extra=dict(ctas=chosen, pingpong=pingpong, n128=n128, **opts)),
                              clock_mhz=mhz if mhz == mhz else None)
    trace.save(out_dir / f"cute_timeline_{tag}.parquet")
    print(f"== ping-pong {pingpong}: stamped output bit-identical {same}; median {ms_plain:.3f} ms plain, "
          f"{ms_stamped:.3f} ms stamped ({100 * (ms_stamped / ms_plain - 1):+.1f} %); CTAs {chosen}")
    print(phase_cycles(trace).to_string(index=False))
    print(tensor_core_phase_busy(trace).to_string(index=False))
    print(tensor_core_overlap(trace).to_string(index=False))
