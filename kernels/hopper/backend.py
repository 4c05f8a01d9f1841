"""Registers ``flash_attn_func(..., backend="hopper")``: the CuTe DSL FP8 kernel on sm_90 GPUs.

``unsupported`` names the reason whenever the inputs cannot run here (no DSL, no Hopper GPU, BF16
inputs, features the kernel does not implement). Its priority is above the Triton backend's: on the
H200 it ran 1.30-1.42x the Triton FP8 kernel at the same error in every measured shape (MHA and GQA
32/8, 16k and 32k; benchmarks/results/h200_run8/bench.csv; 5.0-5.3x in run 11, where the Triton
kernel took 3.3x its run-8 time); it implements recipe zyfa-v1 only, so ``auto`` picks it for FP8
calls with ``recipe="zyfa-v1"`` on sm_90 where the DSL is installed. It runs the kernel's fastest
measured schedule: ``t128`` without ping-pong, 128-key S tiles with one scaling block per tile (runs
28-30: 1.06-1.15x the former n128 schedule, 0.97-1.03x FlashAttention-3 FP8, which is not a zyfa
backend). That is v1 with ``block=128``: against v1's 64-key blocks it differs only where a code falls
below 8 after the shift to the tile's scale and in the fp32 grouping (CPU box: rel. L2 <= 9e-9 on
Gaussian inputs, 8.5e-5 with outlier channels; tests/zyfa/test_numerics_runmax.py), inside the bound
the backend is held to anyway (Hopper's fp8 accumulation: rel. L2 <= 5e-3, lse <= 0.1). The 64-key
schedule stays available as ``attention_fp8_sm90(..., n128=True)``.
"""

from __future__ import annotations

import importlib.util
from typing import Optional

import torch

from zyfa.backends import AttentionArgs, Backend, register_backend, unimplemented_features

PRIORITY = 15  # > triton's 10: faster on the H200 where measured (see the module docstring)


def unsupported(args: AttentionArgs) -> Optional[str]:
    """Why the Hopper kernel cannot run ``args``, or None when it can."""
    if importlib.util.find_spec("cutlass") is None:
        return "the CuTe DSL is not installed (pip install 'zyfa[hopper]')"
    if not args.q.is_cuda or torch.version.hip is not None:
        return f"inputs are on {args.q.device}; the Hopper kernel needs an NVIDIA sm_90 GPU"
    if torch.cuda.get_device_capability(args.q.device) != (9, 0):
        return f"the Hopper kernel needs compute capability 9.0, got {torch.cuda.get_device_capability(args.q.device)}"
    if not args.is_fp8:
        return f"dtype {args.q.dtype} is not supported (float8_e4m3fn only)"
    if args.headdim % 32 or args.headdim > 256:
        return f"headdim {args.headdim} is not supported (multiples of 32 up to 256)"
    if args.headdim_v % 8 or args.headdim_v > 248:
        return f"headdim_v {args.headdim_v} is not supported (multiples of 8 up to 248)"
    return unimplemented_features(args)


def forward(args: AttentionArgs) -> tuple[torch.Tensor, torch.Tensor]:
    from zyfa.kernels.hopper.attn_fp8_sm90 import attention_fp8_sm90  # lazy: imports the CuTe DSL (optional): only when used
    return attention_fp8_sm90(args.q, args.k, args.v, args.softmax_scale, args.causal,
                              args.q_descale, args.k_descale, args.v_descale, n128=True, t128=True, pingpong=False)


register_backend(Backend(
    name="hopper",
    forward=forward,
    unsupported=unsupported,
    priority=PRIORITY,
    description="CuTe DSL FP8 Lean P kernel (TMA, wgmma, ping-pong) on sm_90 GPUs",
))
