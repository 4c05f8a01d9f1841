"""zyfa: FP8/BF16 causal prefill flash attention for AMD CDNA4 (gfx950), and a trace-driven
pipeline-analysis workbench (cycle model, hardware tracers, analyzer, schedule explorer).

Public API: :func:`flash_attn_func` (FlashAttention-2/3 compatible) and
:func:`available_backends`. FP8 quantisation and Hadamard helpers live in :mod:`zyfa.numerics`.
"""

from zyfa.backends import available_backends
from zyfa.interface import flash_attn_func

__version__ = "0.1.0"
__all__ = ["flash_attn_func", "available_backends", "__version__"]
