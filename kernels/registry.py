"""Registry of kernels that tracers can run (``zyfa-trace kernel --kernel NAME``).

A :class:`KernelSpec` says how to obtain a kernel's gfx950 code (assembly text or a code object),
how to lay out its kernel arguments for a problem shape, and its launch grid. Kernel packages
(``zyfa.kernels.gfx950``, ``zyfa.kernels.triton``) register their entries when imported; the
cycle model and the functional emulator consume them. Names: our generated kernels
(``zyfa-fp8``, ``zyfa-fp8-exact``, ``aiter-like-fp8``, ``zyfa-bf16``), Triton AOT builds
(``triton-fp8``, ``triton-bf16``), ``aiter:NAME`` (resolved by the tracer from an AITER package)
and plain code-object paths.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from zyfa.shapes import AttnShape

_PROVIDERS = ("zyfa.kernels.gfx950", "zyfa.kernels.triton.aot")


@dataclass(frozen=True)
class KernelBuild:
    """A kernel ready for a tracer: assembly text and/or a code-object file."""

    name: str
    asm: Optional[str] = None  # llvm-mc syntax, as our generator emits or llvm-objdump prints
    code_object: Optional[Path] = None  # .co / .hsaco
    symbol: Optional[str] = None  # kernel symbol inside the code object
    meta: dict = field(default_factory=dict)  # e.g. the schedule clusters, tile sizes


@dataclass(frozen=True)
class KernelSpec:
    """How to build one kernel and launch it for a shape.

    ``kernargs(shape)`` returns the packed kernel-argument segment (bytes) the kernel reads
    through ``s_load`` from its kernarg pointer; ``grid(shape)`` returns workgroups (x, y, z);
    ``workgroup_size`` is threads per workgroup.
    """

    name: str
    description: str
    build: Callable[[AttnShape], KernelBuild]
    kernargs: Callable[[AttnShape], bytes]
    grid: Callable[[AttnShape], tuple[int, int, int]]
    workgroup_size: int
    dtype: str = "fp8"
    arch: str = "gfx950"


_KERNELS: dict[str, KernelSpec] = {}
_loaded = False


def register_kernel(spec: KernelSpec) -> None:
    _KERNELS[spec.name] = spec


def _load_providers() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in _PROVIDERS:
        try:
            importlib.import_module(module)
        except ImportError:
            continue


def kernels() -> dict[str, KernelSpec]:
    """All registered kernels by name."""
    _load_providers()
    return dict(_KERNELS)


def get_kernel(name: str) -> KernelSpec:
    registered = kernels()
    if name not in registered:
        known = ", ".join(sorted(registered)) or "(none registered)"
        raise ValueError(f"unknown kernel {name!r}; registered kernels: {known}; "
                         "also accepted: aiter:NAME and a path to a .co/.hsaco/.s file")
    return registered[name]
