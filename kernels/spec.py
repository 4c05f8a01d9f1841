"""What a kernel is, as data: its facts, how to build it, and one launch of it on a shape.

The bottom of :mod:`zyfa.kernels`: the kernel providers (:mod:`zyfa.kernels.gfx950`,
:mod:`zyfa.kernels.triton.aot`, :mod:`zyfa.kernels.aiter`) describe their kernels with these
records and :mod:`zyfa.kernels.registry` resolves names into a :class:`LaunchDescription`, which
tracers consume. A kernel's facts (dtype, causality, head dims, generator variant) live in its
:class:`KernelSpec`, never in its name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from zyfa.shapes import AttnShape


@dataclass(frozen=True)
class KernelBuild:
    """A kernel ready for a tracer: assembly text and/or a code-object file."""

    name: str
    asm: Optional[str] = None  # llvm-mc syntax, as our generator emits or llvm-objdump prints
    code_object: Optional[Path] = None  # .co / .hsaco (or a .s file given by path)
    symbol: Optional[str] = None  # kernel symbol inside the code object
    meta: dict = field(default_factory=dict)  # e.g. the schedule clusters, tile sizes


@dataclass(frozen=True)
class KernelSpec:
    """How to build one kernel and launch it for a shape, and the facts that say what it computes.

    ``kernargs(shape)`` returns the packed kernel-argument segment (bytes) the kernel reads
    through ``s_load`` from its kernarg pointer; ``grid(shape)`` returns workgroups (x, y, z);
    ``workgroup_size`` is threads per workgroup.

    Facts: ``dtype`` (``"fp8"`` / ``"bf16"``: the inputs it takes); ``causal`` (True/False when
    the mask is compiled in, None when the kernel takes either from its arguments);
    ``headdim``/``headdim_v`` (the head dims it is built for; None: any the build accepts);
    ``variant``: the gfx950 generator configuration (:class:`zyfa.kernels.gfx950.KernelConfig`)
    it is generated from, or None for kernels that are not generator variants.
    """

    name: str
    description: str
    build: Callable[[AttnShape], KernelBuild]
    kernargs: Callable[[AttnShape], bytes]
    grid: Callable[[AttnShape], tuple[int, int, int]]
    workgroup_size: int
    dtype: str = "fp8"
    causal: Optional[bool] = None
    headdim: Optional[int] = None
    headdim_v: Optional[int] = None
    variant: Any = None
    arch: str = "gfx950"

    def fit(self, shape: AttnShape, dtype: bool = True) -> AttnShape:
        """``shape`` with this kernel's fixed facts: its dtype (when ``dtype``) and its mask
        when compiled in. Head dims are not changed: :meth:`check` reports a mismatch."""
        changes = {"dtype": self.dtype} if dtype else {}
        if self.causal is not None:
            changes["causal"] = self.causal
        return shape.with_(**changes) if changes else shape

    def check(self, shape: AttnShape) -> None:
        """ValueError naming the fact when ``shape`` is not a problem this kernel computes."""
        if not isinstance(shape, AttnShape):
            raise TypeError(f"shape must be a zyfa.shapes.AttnShape, got {type(shape).__name__}")
        if shape.dtype != self.dtype:
            raise ValueError(f"kernel {self.name} takes dtype {self.dtype!r}, the shape has dtype={shape.dtype!r}")
        if self.headdim is not None and shape.headdim != self.headdim:
            raise ValueError(f"kernel {self.name} needs headdim {self.headdim}, shape has {shape.headdim} "
                             "(use --headdim)")
        if self.headdim_v is not None and shape.headdim_v != self.headdim_v:
            raise ValueError(f"kernel {self.name} needs headdim_v {self.headdim_v}, shape has {shape.headdim_v} "
                             "(use --headdim-v)")
        if self.causal is not None and shape.causal != self.causal:
            raise ValueError(f"kernel {self.name} is {'causal' if self.causal else 'non-causal'}, "
                             f"shape causal={shape.causal}")


@dataclass(frozen=True)
class LaunchDescription:
    """One kernel on one shape, as a tracer needs it: the code, the kernel arguments, the grid.

    ``name``: what the trace is called (the kernel's name; ``kernel[param=value,...]`` for a
    generator variant with overrides); ``origin``: ``registry``, ``aiter``, ``file`` or ``config``;
    ``spec``: the kernel's facts (None for a bare code-object file)."""

    name: str
    build: KernelBuild
    kernargs: bytes
    grid: tuple
    workgroup_size: int
    shape: AttnShape
    origin: str
    spec: Optional[KernelSpec] = None
