"""One launch each of the per-token fused RoPE + Hadamard + quantise kernel in run 25's form (64 rows
per 4 warps, the default), the tables-in-x-layout form without the clamp (128 rows), the "rows" variant
(one row per thread, 128 rows per 4 warps), and the RoPE pass alone in run 25's and the "rows" form,
on zyfa-bench's Q (b1 s16384 h32 d128 bf16), for ncu (H200 run 16; run 32 adds the "rows" launches)."""

import torch
from zyfa import numerics
from zyfa.cli.bench_main import Inputs
from zyfa.kernels.triton.hadamard_fp8 import hadamard_quantize_fp8, rope_rows
from zyfa.shapes import AttnShape

shape = AttnShape(batch=1, heads=32, heads_k=32, seqlen_q=16384, seqlen_k=16384, headdim=128, headdim_v=128,
                  causal=True, dtype="bf16")
x = Inputs(shape)
cos, sin = (t.cuda() for t in numerics.rope_tables(16384, 128))
for variant, rows in (("run25", 64), ("tables_x_noclamp", 128), ("rows", 128)):
    hadamard_quantize_fp8(x.q, "token", 32, block_s=rows, cos=cos, sin=sin, variant=variant, check_finite=False)
rope_rows(x.q, cos, sin)  # the baseline, run 25's table layout, 64 rows
rope_rows(x.q, cos, sin, variant="rows")  # the RoPE pass in the "rows" form
torch.cuda.synchronize()
