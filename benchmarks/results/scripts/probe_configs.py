"""Times the FP8 and BF16 kernels at b1 h32 s16k d128 causal under fixed tile configs (variants:
warp specialisation, P row sum on the tensor cores, accumulator inside the PV product, BLOCK_N);
prints ms, TFLOP/s and the relative L2 error vs fp64 (first KV head), or the compile error."""

import sys

import triton
from zyfa.cli.bench_main import Inputs, reference_fp64
from zyfa.kernels.triton._common import TileConfig
from zyfa.kernels.triton.attn_bf16 import attention_bf16
from zyfa.kernels.triton.attn_fp8 import attention_fp8
from zyfa.shapes import AttnShape

seqlen = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
shape = AttnShape(batch=1, heads=32, heads_k=32, seqlen_q=seqlen, seqlen_k=seqlen, headdim=128, headdim_v=128,
                  causal=True, dtype="bf16")
x = Inputs(shape)
ref, nh = reference_fp64(x, 1)
T = TileConfig
fp8 = [T(64, 4, 3), T(64, 4, 4), T(64, 4, 2), T(128, 8, 3), T(128, 8, 4), T(64, 4, 3, acc_in_dot=True),
       T(128, 8, 3, acc_in_dot=True), T(128, 8, 4, acc_in_dot=True), T(64, 4, 3, True), T(128, 8, 3, precise_acc=True)]
bf16 = [T(128, 8, 3, block_n=128), T(128, 8, 4, block_n=128), T(64, 4, 3, block_n=128), T(64, 4, 3),
        T(128, 8, 3, True, block_n=128)]
runs = [("fp8", c, lambda c: attention_fp8(x.q8, x.k8, x.v8, x.scale, True, x.dq, x.dk, x.dv, config=c)) for c in fp8]
runs += [("bf16", c, lambda c: attention_bf16(x.q, x.k, x.v, x.scale, True, config=c)) for c in bf16]
for name, c, fn in runs:
    try:
        out = fn(c)[0]
        rel = float((out[:, :, :nh].double() - ref).norm() / ref.norm())
        ms = triton.testing.do_bench(lambda: fn(c), warmup=50, rep=200, return_mode="median")
        print(f"PROBE {name} s{seqlen} {c} {ms:.3f} ms {shape.tflops(ms * 1e-3):.1f} TFLOP/s relL2 {rel:.3e}", flush=True)
    except Exception as exc:
        msg = str(exc).strip().splitlines()
        print(f"PROBE {name} s{seqlen} {c} FAILED {type(exc).__name__}: {msg[-1][:200] if msg else ''}", flush=True)
ms_t = triton.testing.do_bench(lambda: x.v8.permute(0, 2, 3, 1).contiguous(), warmup=50, rep=200, return_mode="median")
print(f"PROBE fp8 s{seqlen} V transpose copy (part of every FP8 call above) {ms_t:.4f} ms", flush=True)
