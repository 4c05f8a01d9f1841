"""Lead's H200 check of zyfa.timing.elapsed_s's CUDA path against triton.testing.do_bench."""
import statistics
import torch
import triton
from zyfa.timing import elapsed_s

a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
fn = lambda: a @ b  # noqa: E731
elapsed_s(fn, 5, cuda=True)
ours = [1e3 * elapsed_s(fn, 20, cuda=True) / 20 for _ in range(5)]
theirs = [triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") for _ in range(5)]
o, t = statistics.median(ours), statistics.median(theirs)
print(f"bf16 8192^3 matmul: elapsed_s {o:.4f} ms/call (rounds {' '.join(f'{x:.4f}' for x in ours)}), "
      f"do_bench {t:.4f} ms (rounds {' '.join(f'{x:.4f}' for x in theirs)}), ratio {o / t:.4f}, "
      f"{2 * 8192 ** 3 / o / 1e9:.0f} TFLOP/s by elapsed_s")
