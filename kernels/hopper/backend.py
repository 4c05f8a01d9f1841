"""Registers ``flash_attn_func(..., backend="hopper")``: the CuTe DSL FP8 kernel on sm_90 GPUs.

``unsupported`` names the reason whenever the inputs cannot run here (no DSL, no Hopper GPU, BF16
inputs, features the kernel does not implement). Its priority is above the Triton backend's: on the
H200 it ran 1.30-1.42x the Triton FP8 kernel at the same error in every measured shape (MHA and GQA
32/8, 16k and 32k; benchmarks/results/h200_run8/bench.csv; 5.0-5.3x in run 11, where the Triton
kernel took 3.3x its run-8 time); it implements recipe zyfa-v1 only, so ``auto`` picks it for FP8
calls with ``recipe="zyfa-v1"`` on sm_90 where the DSL is installed. It runs the kernel's fastest
measured schedule: 128-key S tiles without ping-pong (runs 11-12: 794-845 TFLOP/s vs 738-780 for
the 64-key default, same bits; still 0.90-0.93x FlashAttention-3 FP8, which is not a zyfa backend).
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
                              args.q_descale, args.k_descale, args.v_descale, n128=True, pingpong=False)


register_backend(Backend(
    name="hopper",
    forward=forward,
    unsupported=unsupported,
    priority=PRIORITY,
    description="CuTe DSL FP8 Lean P kernel (TMA, wgmma, ping-pong) on sm_90 GPUs",
))
