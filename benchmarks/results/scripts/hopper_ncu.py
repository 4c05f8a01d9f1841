"""Two calls of the CuTe DSL FP8 kernel at b1 h32 s16k d128 causal, for ``ncu --launch-skip 1``."""

import torch

from zyfa.cli.bench_main import Inputs
from zyfa.kernels.hopper.attn_fp8_sm90 import attention_fp8_sm90
from zyfa.shapes import AttnShape

x = Inputs(AttnShape(batch=1, heads=32, heads_k=32, seqlen_q=16384, seqlen_k=16384, headdim=128,
                     headdim_v=128, causal=True, dtype="bf16"))
for _ in range(2):
    attention_fp8_sm90(x.q8, x.k8, x.v8, x.scale, True, x.dq, x.dk, x.dv)
torch.cuda.synchronize()
