"""Triton flash-attention forward kernels (FP8 with the ZYFA numerics, BF16).

Modules: ``attn_fp8`` and ``attn_bf16`` (one kernel each, Triton-tutorial shape), ``backend``
(registers ``flash_attn_func(..., backend="triton")``), ``aot`` (gfx950 builds for the cycle model,
registered as ``triton-fp8`` / ``triton-bf16`` kernels). Importing this package imports none of them.
"""
