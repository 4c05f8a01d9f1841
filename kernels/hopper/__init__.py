"""Hopper (sm_90a) kernels in CuTe DSL (``pip install zyfa[hopper]``).

``attn_fp8_sm90`` imports the DSL (``nvidia-cutlass-dsl``) at module top; ``layout`` and ``backend``
do not, so ``import zyfa`` and CPU-only CI never need it.
"""
