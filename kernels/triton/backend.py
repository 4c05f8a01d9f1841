"""Registers ``flash_attn_func(..., backend="triton")``: the Triton kernels on CUDA or ROCm GPUs.

FP8 (float8_e4m3fn) inputs run the ZYFA-numerics kernel (:mod:`.attn_fp8`), bf16/fp16 inputs the
plain online-softmax kernel (:mod:`.attn_bf16`). ``unsupported`` names the reason whenever the
inputs cannot run here (no GPU, no Triton, features the kernels do not implement).
"""

from __future__ import annotations

import importlib.util
from typing import Optional

import torch

from zyfa.backends import AttentionArgs, Backend, register_backend, unimplemented_features
from zyfa.numerics import TRITON_RECIPES

PRIORITY = 10
_DTYPES = (torch.float8_e4m3fn, torch.bfloat16, torch.float16)


def unsupported(args: AttentionArgs) -> Optional[str]:
    """Why the Triton kernels cannot run ``args``, or None when they can."""
    if importlib.util.find_spec("triton") is None:
        return "the triton package is not installed (pip install triton)"
    if not args.q.is_cuda:
        return (f"inputs are on {args.q.device}; the Triton kernels need a CUDA or ROCm GPU "
                "(use backend='reference' on CPU)")
    if args.q.dtype not in _DTYPES:
        return f"dtype {args.q.dtype} is not supported (float8_e4m3fn, bfloat16, float16)"
    return unimplemented_features(args)


def forward(args: AttentionArgs) -> tuple[torch.Tensor, torch.Tensor]:
    if args.is_fp8:
        # lazy: the kernel modules import triton, which a CPU-only install lacks; the backend itself
        # registers (and reports itself unavailable) without it
        from zyfa.kernels.triton.attn_fp8 import attention_fp8
        return attention_fp8(args.q, args.k, args.v, args.softmax_scale, args.causal,
                             args.q_descale, args.k_descale, args.v_descale, recipe=args.recipe)
    from zyfa.kernels.triton.attn_bf16 import attention_bf16  # lazy: as above
    return attention_bf16(args.q, args.k, args.v, args.softmax_scale, args.causal)


register_backend(Backend(
    name="triton",
    forward=forward,
    unsupported=unsupported,
    priority=PRIORITY,
    description="Triton kernels (FP8 with ZYFA numerics, BF16/FP16) on CUDA/ROCm GPUs",
    recipes=TRITON_RECIPES,
))
