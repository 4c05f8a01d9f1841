"""Before/after on the same GPU: run 10's fused Hadamard+FP8 kernel (main 80c1e42, rows x D layout,
isfinite pass over x, torch descale) vs the current one, Q+K at b1 s16384 h32 d128 bf16."""
import importlib.util, sys
import torch, triton
from zyfa.kernels.triton.hadamard_fp8 import hadamard_quantize_fp8 as new
spec = importlib.util.spec_from_file_location("had_old", sys.argv[1])
old_mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(old_mod)
g = torch.Generator(device="cuda").manual_seed(0)
x = [torch.randn(1, 16384, 32, 128, generator=g, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
for gran in ("head", "token"):
    t_old = sum(triton.testing.do_bench(lambda t=t: old_mod.hadamard_quantize_fp8(t, gran, 32)) for t in x)
    t_new = sum(triton.testing.do_bench(lambda t=t: new(t, gran, 32)) for t in x)
    same = all(torch.equal(old_mod.hadamard_quantize_fp8(t, gran, 32)[0].view(torch.uint8), new(t, gran, 32)[0].view(torch.uint8)) for t in x)
    print(f"per {gran}: run-10 kernel {t_old:.3f} ms, current {t_new:.3f} ms, speed-up {t_old / t_new:.2f}x; codes equal: {same}", flush=True)
