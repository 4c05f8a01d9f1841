"""zyfa: FP8/BF16 causal prefill flash attention for AMD CDNA4 (gfx950), and a trace-driven
pipeline-analysis workbench (cycle model, hardware tracers, analyzer, schedule explorer).

Public API: :func:`flash_attn_func` (FlashAttention-2/3 compatible) and
:func:`available_backends`. FP8 quantisation and Hadamard helpers live in :mod:`zyfa.numerics`.
Both are imported on first use, so tools that never touch tensors (``zyfa-trace kernel`` on the
cycle model) do not pay for importing torch.
"""

import importlib

__version__ = "0.1.0"
__all__ = ["flash_attn_func", "available_backends", "__version__"]

_LAZY = {"flash_attn_func": "zyfa.interface", "available_backends": "zyfa.backends"}


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'zyfa' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_LAZY])
