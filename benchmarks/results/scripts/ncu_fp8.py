"""One launch each of the FP8 and BF16 kernels (fixed configs, argv: block_m num_warps num_stages)
at b1 h32 s16k d128 causal, for ncu."""

import sys

import torch
from zyfa.cli.bench_main import Inputs
from zyfa.kernels.triton._common import TileConfig
from zyfa.kernels.triton.attn_bf16 import attention_bf16
from zyfa.kernels.triton.attn_fp8 import attention_fp8
from zyfa.shapes import AttnShape

shape = AttnShape(batch=1, heads=32, heads_k=32, seqlen_q=16384, seqlen_k=16384, headdim=128, headdim_v=128,
                  causal=True, dtype="bf16")
x = Inputs(shape)
c = TileConfig(*(int(a) for a in sys.argv[1:4]))
attention_fp8(x.q8, x.k8, x.v8, x.scale, True, x.dq, x.dk, x.dv, config=c)
attention_bf16(x.q, x.k, x.v, x.scale, True, config=c)
torch.cuda.synchronize()
