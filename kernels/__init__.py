"""Shipped kernels: Triton (BF16, FP8 Lean P) and the gfx950 assembly generator (``zyfa.kernels``)."""
