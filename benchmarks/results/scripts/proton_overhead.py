"""Runs the FP8 kernel (TileConfig(128, 8, 2), b1 h32 s16k d128 causal) plain, with Proton scopes,
plain, with scopes, all inside one Proton instrumentation session (data="tree"); run under
``ncu --metrics gpu__time_duration.sum`` to get each launch's in-kernel time without Proton's
per-launch host-side work."""

import torch
import triton.profiler as proton
import triton.profiler.language as pl

from zyfa.cli.bench_main import Inputs
from zyfa.kernels.triton._common import TileConfig
from zyfa.kernels.triton.attn_fp8 import attention_fp8
from zyfa.shapes import AttnShape
from zyfa.trace.proton import ProtonConfig

if hasattr(pl, "enable_semantic"):
    pl.enable_semantic("triton")
shape = AttnShape(batch=1, heads=32, heads_k=32, seqlen_q=16384, seqlen_k=16384, headdim=128, headdim_v=128,
                  causal=True, dtype="bf16")
x = Inputs(shape)
cfg = TileConfig(128, 8, 2)


def call(scopes):
    return attention_fp8(x.q8, x.k8, x.v8, x.scale, True, x.dq, x.dk, x.dv, config=cfg, proton_scopes=scopes)


proton.start("/tmp/overhead", data="tree", backend="instrumentation", mode=ProtonConfig().mode)
for scopes in (False, True, False, True):
    call(scopes)
torch.cuda.synchronize()
proton.finalize()
print("order: plain, scoped, plain, scoped")
