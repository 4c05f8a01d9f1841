"""Backend registry for :func:`zyfa.flash_attn_func`.

A backend is one implementation of the forward pass. Each declares which inputs it can run
(:meth:`Backend.unsupported` returns a reason string, or ``None`` when it can run them) and a
priority for ``backend="auto"``. Kernel packages register themselves on import; the registry
itself knows nothing about Triton or gfx950.
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass
from typing import Callable, Optional

import torch

# Modules that register backends when imported. Missing optional dependencies (no triton, no ROCm)
# are not errors: the backend simply does not appear.
_PLUGIN_MODULES = (
    "zyfa.reference",
    "zyfa.numerics",
    "zyfa.kernels.triton.backend",
    "zyfa.kernels.gfx950.backend",
    "zyfa.kernels.hopper.backend",
)


@dataclass(frozen=True)
class AttentionArgs:
    """Validated, normalised arguments of one forward call (what backends receive)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    softmax_scale: float
    causal: bool
    window_size: tuple[int, int]
    softcap: float
    alibi_slopes: Optional[torch.Tensor]
    q_descale: Optional[torch.Tensor]
    k_descale: Optional[torch.Tensor]
    v_descale: Optional[torch.Tensor]
    recipe: str = "zyfa-v2"  # FP8 numerics (docs/numerics.md): "zyfa-v2" or "zyfa-v1"

    @property
    def is_fp8(self) -> bool:
        return self.q.dtype == torch.float8_e4m3fn

    @property
    def batch(self) -> int:
        return self.q.shape[0]

    @property
    def seqlen_q(self) -> int:
        return self.q.shape[1]

    @property
    def seqlen_k(self) -> int:
        return self.k.shape[1]

    @property
    def nheads(self) -> int:
        return self.q.shape[2]

    @property
    def nheads_k(self) -> int:
        return self.k.shape[2]

    @property
    def headdim(self) -> int:
        return self.q.shape[3]

    @property
    def headdim_v(self) -> int:
        return self.v.shape[3]

    @property
    def is_local(self) -> bool:
        return self.window_size != (-1, -1)


def unimplemented_features(args: AttentionArgs) -> Optional[str]:
    """The reason a plain dense-attention kernel cannot run ``args`` (sliding window, softcap,
    ALiBi, non-unit headdim stride), or None."""
    if args.is_local:
        return f"sliding-window attention (window_size={args.window_size}) is not implemented"
    if args.softcap != 0.0:
        return f"softcap={args.softcap} is not implemented"
    if args.alibi_slopes is not None:
        return "ALiBi slopes are not implemented"
    for name, x in (("q", args.q), ("k", args.k), ("v", args.v)):
        if x.stride(-1) != 1:
            return f"{name} needs a unit stride along headdim"
    return None


ForwardFn = Callable[[AttentionArgs], tuple[torch.Tensor, torch.Tensor]]
UnsupportedFn = Callable[[AttentionArgs], Optional[str]]


def default_out_dtype(dtype: torch.dtype) -> torch.dtype:
    """The output dtype of most backends: the input dtype; bfloat16 for float8_e4m3fn inputs."""
    return torch.bfloat16 if dtype == torch.float8_e4m3fn else dtype


@dataclass(frozen=True)
class Backend:
    """One forward implementation.

    ``forward(args) -> (out, softmax_lse)`` with ``out`` of shape (batch, seqlen_q, nheads,
    headdim_v) and ``softmax_lse`` float32 (batch, nheads, seqlen_q). ``unsupported(args)``
    returns why these inputs cannot run here, or None. ``priority``: higher wins under "auto".
    ``differentiable``: ``forward`` is built from autograd-aware torch ops (otherwise the
    interface makes a backward through it fail with "forward only"). ``out_dtype``: the dtype of
    ``out`` for an input dtype (what the ``zyfa::fwd`` fake implementation reports to
    ``torch.compile``; the op checks that ``forward`` keeps to it).
    ``recipes``: the FP8 numerics recipes it implements; FP8 calls with another recipe skip it
    (``None``: exact maths on the dequantised inputs, no recipe, e.g. the reference backends).
    """

    name: str
    forward: ForwardFn
    unsupported: UnsupportedFn
    priority: int = 0
    description: str = ""
    differentiable: bool = False
    out_dtype: Callable[[torch.dtype], torch.dtype] = default_out_dtype
    recipes: Optional[tuple[str, ...]] = ("zyfa-v1",)

    def refusal(self, args: AttentionArgs) -> Optional[str]:
        """``unsupported(args)``, else the FP8 recipe this backend lacks, else None."""
        reason = self.unsupported(args)
        if reason is None and args.is_fp8 and self.recipes is not None and args.recipe not in self.recipes:
            reason = f"implements FP8 recipe(s) {', '.join(self.recipes)}, not {args.recipe!r} (pass recipe=...)"
        return reason


_REGISTRY: dict[str, Backend] = {}
_plugins_loaded = False


def register_backend(backend: Backend) -> None:
    if backend.name == "auto":
        raise ValueError('"auto" is reserved for automatic backend selection')
    _REGISTRY[backend.name] = backend


def _load_plugins() -> None:
    """Import the kernel backends once; one that fails to import is reported with a warning
    naming it and its error (its backend is then missing from :func:`available_backends`)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for module in _PLUGIN_MODULES:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            warnings.warn(f"backend plugin {module} not loaded: {type(exc).__name__}: {exc}", RuntimeWarning,
                          stacklevel=3)


def available_backends() -> dict[str, Backend]:
    """All registered backends by name (loading kernel plugins on first use)."""
    _load_plugins()
    return dict(_REGISTRY)


def select_backend(name: str, args: AttentionArgs) -> Backend:
    """Resolves ``name`` ("auto" or a registered name) to a backend that can run ``args``."""
    backends = available_backends()
    if name == "auto":
        reasons = []
        for backend in sorted(backends.values(), key=lambda b: -b.priority):
            reason = backend.refusal(args)
            if reason is None:
                return backend
            reasons.append(f"{backend.name}: {reason}")
        raise NotImplementedError("no backend can run these inputs:\n  " + "\n  ".join(reasons))
    if name not in backends:
        known = ", ".join(sorted(["auto", *backends]))
        raise ValueError(f"unknown backend {name!r}; known backends: {known}")
    backend = backends[name]
    reason = backend.refusal(args)
    if reason is not None:
        raise NotImplementedError(f"backend {name!r} cannot run these inputs: {reason}")
    return backend
