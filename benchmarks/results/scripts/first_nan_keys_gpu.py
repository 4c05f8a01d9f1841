"""Lead's H200 check: first_nan_keys' kernel == its old torch form on the GPU, and both timed."""
import statistics
import sys
import torch
sys.path.insert(0, "tests/kernels/triton")
from triton_interp_cases import first_nan_keys_torch  # noqa: E402
from zyfa.kernels.triton.attn_fp8 import first_nan_keys  # noqa: E402
from zyfa.timing import elapsed_s  # noqa: E402

g = torch.Generator(device="cuda").manual_seed(0)
for s, hk, density in ((16384, 8, 0.0), (16384, 8, 1e-7), (16384, 32, 1e-6), (8192, 32, 0.0), (4097, 4, 1e-5)):
    k, v = (torch.randn(1, s, hk, 128, generator=g, device="cuda").to(torch.float8_e4m3fn) for _ in range(2))
    for x in (k, v):
        u = x.view(torch.uint8)
        hit = torch.rand(u.shape, generator=g, device="cuda") < density
        u[hit] = 0xFF
    got, want = first_nan_keys(k, v), first_nan_keys_torch(k, v)
    equal = all(torch.equal(a, b) for a, b in zip(got, want))
    t_new = statistics.median(1e3 * elapsed_s(lambda: first_nan_keys(k, v), 20, True) / 20 for _ in range(5))
    t_old = statistics.median(1e3 * elapsed_s(lambda: first_nan_keys_torch(k, v), 20, True) / 20 for _ in range(5))
    print(f"s{s} hk{hk} d128 NaN density {density:g}: equal {equal}, NaN columns {int((want[1] < 2**30).sum())}, "
          f"kernel {t_new:.4f} ms, torch form {t_old:.4f} ms, torch/kernel {t_old / t_new:.1f}x, "
          f"kernel reads {2 * k.numel() / t_new / 1e6:.0f} GB/s", flush=True)
