"""Kernels that tracers can run, and their resolution into a launch (``--kernel NAME``).

Names: our generated gfx950 kernels (``zyfa-fp8``, ``zyfa-fp8-v1``, ``zyfa-fp8-valu-rowsum``,
``zyfa-fp8-exact``, ``aiter-like-fp8``, ``zyfa-bf16``: :mod:`zyfa.kernels.gfx950`), Triton AOT
builds (``triton-fp8``, ``triton-bf16``: the optional plugin :mod:`zyfa.kernels.triton.aot`, which needs Triton), ``aiter:NAME``
(AITER's code objects: :mod:`zyfa.kernels.aiter`) and a path to a ``.co``/``.hsaco``/``.s``
file. :func:`resolve` turns any of them -- or a gfx950 generator configuration, with or without
parameter overrides -- into a :class:`~zyfa.kernels.spec.LaunchDescription` (code, kernel
arguments, grid, facts) that a tracer runs. A kernel's facts come from its
:class:`~zyfa.kernels.spec.KernelSpec`, never from its name.
"""

from __future__ import annotations

import importlib
import re
import warnings
from dataclasses import fields, replace
from pathlib import Path
from typing import Mapping, Optional

from zyfa.gfx950.isa import load_program
from zyfa.kernels import aiter, gfx950
from zyfa.kernels.gfx950 import KernelConfig
from zyfa.kernels.spec import KernelBuild, KernelSpec, LaunchDescription
from zyfa.shapes import AttnShape

__all__ = ["KernelBuild", "KernelSpec", "LaunchDescription", "register_kernel", "kernels", "get_kernel", "spec_of",
           "resolve", "list_kernels", "DEFAULT_KERNEL"]

# optional providers: modules with a SPECS tuple whose import needs an optional dependency
_PLUGINS = ("zyfa.kernels.triton.aot",)
DEFAULT_KERNEL = "zyfa-fp8"  # zyfa-trace kernel's default: the generator's flagship, always registered
CODE_SUFFIXES = (".co", ".hsaco", ".s")

_KERNELS: dict[str, KernelSpec] = {spec.name: spec for spec in gfx950.SPECS}
_loaded = False


def register_kernel(spec: KernelSpec) -> None:
    if not isinstance(spec, KernelSpec):
        raise TypeError(f"register_kernel: expected a KernelSpec, got {type(spec).__name__}")
    _KERNELS[spec.name] = spec


def _load_plugins() -> None:
    """Import the optional providers once; one that fails to import is reported with a warning
    naming it and its error (its kernels are then missing from :func:`kernels`)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in _PLUGINS:
        try:
            provider = importlib.import_module(module)
        except ImportError as exc:
            warnings.warn(f"kernel provider {module} not loaded: {type(exc).__name__}: {exc}", RuntimeWarning,
                          stacklevel=3)
            continue
        for spec in provider.SPECS:
            register_kernel(spec)


def kernels() -> dict[str, KernelSpec]:
    """All registered kernels by name."""
    _load_plugins()
    return dict(_KERNELS)


def get_kernel(name: str) -> KernelSpec:
    if name in _KERNELS:  # built-in (gfx950) kernels need no plugin: importing Triton's costs ~1 s of start-up
        return _KERNELS[name]
    registered = kernels()
    if name not in registered:
        known = ", ".join(sorted(registered)) or "(none registered)"
        raise ValueError(f"unknown kernel {name!r}; registered kernels: {known}; "
                         "also accepted: aiter:NAME and a path to a .co/.hsaco/.s file")
    return registered[name]


def _is_path(name: str) -> bool:
    return Path(name).suffix in CODE_SUFFIXES and Path(name).exists()


def spec_of(name: str) -> Optional[KernelSpec]:
    """The facts of kernel ``name``: a registered name, ``aiter:NAME`` or an AITER code object's
    path; None for any other code-object file (nothing is known about it)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"kernel name must be a non-empty string, got {name!r}")
    if name.startswith("aiter:"):
        return aiter.spec(name)
    if _is_path(name):
        program = load_program(name)
        return aiter.spec(name) if aiter.is_aiter_fwd(program) else None
    return get_kernel(name)


def _config_name(base: str, overrides: Mapping) -> str:
    return base + "[" + ",".join(f"{k}={overrides[k]}" for k in sorted(overrides)) + "]"


def _generator_launch(config: KernelConfig, shape: AttnShape, name: str, origin: str) -> LaunchDescription:
    if config.dtype != shape.dtype:
        raise ValueError(f"kernel {name} takes dtype {config.dtype!r}, the shape has dtype={shape.dtype!r}")
    return LaunchDescription(name=name, build=gfx950.build_config(config), kernargs=gfx950.kernargs.pack(shape),
                             grid=gfx950.grid(shape, config), workgroup_size=gfx950.WORKGROUP_SIZE, shape=shape,
                             origin=origin)


def _with_overrides(spec: KernelSpec, shape: AttnShape, overrides: Mapping) -> LaunchDescription:
    if not isinstance(spec.variant, KernelConfig):
        generated = ", ".join(sorted(n for n, s in kernels().items() if isinstance(s.variant, KernelConfig)))
        raise ValueError(f"generator parameters apply to gfx950 generator kernels ({generated}), not {spec.name!r}")
    settable = sorted(f.name for f in fields(KernelConfig) if f.name not in ("name", "headdim", "headdim_v"))
    unknown = sorted(k for k in overrides if k not in settable)
    if unknown:
        raise ValueError(f"unknown generator parameter(s) {unknown}; settable: {settable}")
    name = _config_name(spec.name, overrides)
    # KernelConfig validates the values
    config = gfx950.configure(spec.variant, shape, overrides, re.sub(r"[^A-Za-z0-9_-]", "_", name))
    return _generator_launch(config, shape, name, "registry")


def resolve(kernel, shape: AttnShape, overrides: Optional[Mapping] = None) -> LaunchDescription:
    """The launch of ``kernel`` on ``shape``.

    ``kernel``: a registered name, ``aiter:NAME``, a ``.co``/``.hsaco``/``.s`` path, or a gfx950
    generator :class:`KernelConfig` (sweeps); ``overrides``: generator parameters (fields of
    :class:`KernelConfig`) applied to a generator kernel's own configuration. The shape must be
    one the kernel computes (:meth:`KernelSpec.check`); a bare code-object file runs with zeroed
    kernel arguments on one workgroup."""
    if not isinstance(shape, AttnShape):
        raise TypeError(f"shape must be a zyfa.shapes.AttnShape, got {type(shape).__name__}")
    overrides = dict(overrides or {})
    if isinstance(kernel, KernelConfig):
        config = replace(kernel, **overrides) if overrides else kernel
        return _generator_launch(config, shape, config.name, "config")
    spec = spec_of(kernel)
    if overrides:
        if spec is None:
            raise ValueError(f"generator parameters apply to gfx950 generator kernels, not the file {kernel!r}")
        return _with_overrides(spec, shape, overrides)
    if spec is None:  # a code-object file nothing is known about
        program = load_program(kernel)
        return LaunchDescription(
            name=Path(kernel).name, build=KernelBuild(name=Path(kernel).name, code_object=Path(kernel),
                                                      meta={"path": str(Path(kernel).resolve()),
                                                            "note": "no kernel arguments known: zero-filled; one workgroup"}),
            kernargs=bytes(program.descriptor.kernarg_size), grid=(1, 1, 1),
            workgroup_size=program.descriptor.workgroup_size or 64, shape=shape, origin="file")
    spec.check(shape)
    origin = "aiter" if isinstance(kernel, str) and (kernel.startswith("aiter:") or _is_path(kernel)) else "registry"
    return LaunchDescription(name=spec.name, build=spec.build(shape), kernargs=bytes(spec.kernargs(shape)),
                             grid=tuple(int(g) for g in spec.grid(shape)), workgroup_size=spec.workgroup_size,
                             shape=shape, origin=origin, spec=spec)


def list_kernels() -> list[tuple[str, str]]:
    """(name, description) of every kernel ``--kernel`` accepts here."""
    out = [(name, spec.description) for name, spec in sorted(kernels().items())]
    try:
        out += [(f"aiter:{name}", aiter.spec(f"aiter:{name}").description) for name in aiter.available()]
    except aiter.AiterUnavailable as exc:
        out.append(("aiter:NAME", f"unavailable here: {exc}"))
    out.append(("PATH.co|.hsaco|.s", "any gfx950 code object or llvm-mc assembly file"))
    return out
