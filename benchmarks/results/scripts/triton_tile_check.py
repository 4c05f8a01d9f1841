"""Run 10's open question: the Triton FP8 kernel took 15.05 ms at b1 h32 s16384 d128 causal with the
fixed tile 64/4/3 (benchmarks/h200_numerics.py) vs 4.27 ms autotuned in zyfa-bench (run 8). Times, in
one process on the same inputs, the autotuned call (and the config the autotuner picked), every sm_90
FP8 candidate fixed, for recipes zyfa-v1 and zyfa-v2 (triton.testing.do_bench, median ms).
Then the autotuned and 64/4/3 calls on h200_numerics.py's K outlier channels, and per compiled
variant its registers, spills and wgmma / mma.sync counts in the PTX. On the H200 after sourcing
h200_setup.sh: python3 -P triton_tile_check.py [quick] (quick: autotuned v1 and 64/4/3 v1 only).
"""
import sys

import torch
import triton

from zyfa import numerics
from zyfa.kernels.triton._common import AUTOTUNE_CONFIGS, TileConfig
from zyfa.kernels.triton.attn_fp8 import _attn_fwd_fp8, attention_fp8

g = torch.Generator(device="cuda").manual_seed(0)
x = {n: torch.randn(1, 16384, 32, 128, generator=g, device="cuda", dtype=torch.bfloat16) for n in "qkv"}
(q8, dq), (k8, dk), (v8, dv) = (numerics.quantize_fp8(x[n], nheads_k=32) for n in "qkv")
flops = 4 * 32 * 16384 * 16384 * 128 / 2
print(torch.cuda.get_device_name(), "triton", triton.__version__, flush=True)
runs = [("autotuned", None)] + [(f"{c.block_m}/{c.num_warps}/{c.num_stages}", c)
                                 for c in AUTOTUNE_CONFIGS[("sm_90", "fp8")][256]]
quick = sys.argv[1:] == ["quick"]
for recipe in ("zyfa-v1",) if quick else ("zyfa-v1", "zyfa-v2"):
    for name, cfg in runs[:2] if quick else runs:
        kw = {"recipe": recipe} if cfg is None else {"recipe": recipe, "config": cfg}
        ms = triton.testing.do_bench(lambda: attention_fp8(q8, k8, v8, 128 ** -0.5, True, dq, dk, dv, **kw))
        extra = f"  (autotuner picked {_attn_fwd_fp8.best_config})" if cfg is None else ""
        print(f"{recipe} {name}: {ms:.3f} ms  {flops / ms / 1e9:.1f} TFLOP/s{extra}", flush=True)
try:  # Triton's JIT internals (3.6 on the H200): the compiled variants of the kernel
    for cache in _attn_fwd_fp8.fn.device_caches.values():
        for kernel in cache[0].values():
            ptx = kernel.asm.get("ptx", "")
            print(f"compiled {kernel.name}: {kernel.n_regs} registers, {kernel.n_spills} spills, "
                  f"{ptx.count('wgmma.mma_async')} wgmma, {ptx.count('mma.sync')} mma.sync, "
                  f"shared {kernel.metadata.shared} B, target {kernel.metadata.target}", flush=True)
except (AttributeError, IndexError, KeyError, TypeError) as e:
    print(f"no compiled-kernel details from this Triton: {e!r}", flush=True)
if quick:
    sys.exit(0)
# h200_numerics.py's inputs differ in one way: K has outlier channels (x["k"][..., :4] *= 8)
x["k"][..., :4] *= 8
(k8, dk) = numerics.quantize_fp8(x["k"], nheads_k=32)
for name, cfg in runs[:2]:
    kw = {} if cfg is None else {"config": cfg}
    ms = triton.testing.do_bench(lambda: attention_fp8(q8, k8, v8, 128 ** -0.5, True, dq, dk, dv, **kw))
    print(f"K outliers x8, zyfa-v1 {name}: {ms:.3f} ms  {flops / ms / 1e9:.1f} TFLOP/s", flush=True)
