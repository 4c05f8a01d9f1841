"""What-if requests: a kernel, a problem shape and schedule-generator parameters to re-simulate.

The page builds a :class:`WhatIf` from its controls and hands it to a simulator, a callable
``WhatIf -> Trace``. The default simulator (:func:`default_simulator`) applies the parameters to
a registered variant of the gfx950 generator (:mod:`zyfa.kernels.gfx950`), builds it and runs it
through the CDNA4 cycle model (:mod:`zyfa.trace.cdna4`); tests may pass another callable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Optional

from zyfa.shapes import AttnShape
from zyfa.trace.schema import Trace

Simulator = Callable[["WhatIf"], Trace]


@dataclass(frozen=True)
class WhatIf:
    """One re-simulation: a registered kernel, a shape, and generator parameter overrides.

    ``params``: ``(name, value)`` pairs, e.g. ``(("schedule", "serial"), ("softmax", "exact"))``;
    names are fields of the generator's kernel configuration, unset ones keep the kernel's value.
    """

    kernel: str = "zyfa-fp8"
    seqlen: int = 1024
    batch: int = 1
    heads: int = 1
    headdim: int = 128
    params: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self):
        if not isinstance(self.kernel, str) or not self.kernel:
            raise ValueError(f"WhatIf.kernel must be a registered kernel name, got {self.kernel!r}")
        for name in ("seqlen", "batch", "heads", "headdim"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"WhatIf.{name} must be a positive int, got {value!r}")
        if isinstance(self.params, Mapping):
            object.__setattr__(self, "params", tuple(self.params.items()))
        try:
            pairs = tuple((str(k), v) for k, v in self.params)
        except (TypeError, ValueError):
            raise TypeError(f"WhatIf.params must be (name, value) pairs or a dict, got {self.params!r}") from None
        names = [k for k, _ in pairs]
        if len(set(names)) != len(names):
            raise ValueError(f"WhatIf.params names a parameter twice: {names}")
        object.__setattr__(self, "params", tuple(sorted(pairs)))

    @property
    def shape(self) -> AttnShape:
        return AttnShape(batch=self.batch, heads=self.heads, heads_k=self.heads, seqlen_q=self.seqlen,
                         seqlen_k=self.seqlen, headdim=self.headdim, headdim_v=self.headdim)

    @property
    def label(self) -> str:
        """``"zyfa-fp8 schedule=serial softmax=exact · b1 h1 s1024 d128"``."""
        parts = [self.kernel] + [f"{k}={v}" for k, v in self.params]
        return " ".join(parts) + f" · b{self.batch} h{self.heads} s{self.seqlen} d{self.headdim}"


def kernel_dtype(kernel: str) -> str:
    """Input dtype of a kernel: the registry's entry, else ``bf16`` if the name says so, else ``fp8``."""
    from zyfa.kernels.registry import kernels

    spec = kernels().get(kernel)
    if spec is not None:
        return spec.dtype
    return "bf16" if "bf16" in kernel else "fp8"


def simulate(request: WhatIf) -> Trace:
    """Re-simulate ``request`` on the CDNA4 cycle model.

    Without parameter overrides the kernel is run as registered (``zyfa.trace.cdna4.tracer.
    run_kernel_trace``; any registered, ``aiter:`` or file kernel). With overrides the kernel must
    be a gfx950 generator variant: its :class:`~zyfa.kernels.gfx950.KernelConfig` gets the new
    values (which validates them), is generated and assembled, and the resulting program is
    launched exactly as the registry would launch the variant.
    """
    if not isinstance(request, WhatIf):
        raise TypeError(f"simulate: request must be a WhatIf, got {type(request).__name__}")
    from zyfa.trace.cdna4.estimate import estimate
    from zyfa.trace.cdna4.tracer import run_kernel_trace, to_trace

    command = f"zyfa-ui what-if: {request.label}"
    if not request.params:
        return run_kernel_trace(request.kernel, request.shape.with_(dtype=kernel_dtype(request.kernel)))[0]
    from zyfa.kernels.gfx950 import VARIANTS, config_for
    from zyfa.trace.cdna4.launch import from_config

    if request.kernel not in VARIANTS:
        raise ValueError(f"what-if parameters apply to gfx950 generator kernels ({', '.join(VARIANTS)}), "
                         f"not {request.kernel!r}")
    shape = request.shape.with_(dtype=VARIANTS[request.kernel].dtype)
    base = config_for(request.kernel, shape)
    fields = set(base.__dataclass_fields__) - {"name"}
    unknown = sorted(k for k, _ in request.params if k not in fields)
    if unknown:
        raise ValueError(f"unknown generator parameter(s) {unknown}; KernelConfig has {sorted(fields)}")
    name = request.kernel + "[" + ",".join(f"{k}={v}" for k, v in request.params) + "]"
    config = replace(base, name=re.sub(r"[^A-Za-z0-9_-]", "_", name), **dict(request.params))
    launch = replace(from_config(config, shape, origin="what-if"), name=name)  # trace named "kernel[param=value]"
    return to_trace(launch, estimate(launch), command=command)


def default_simulator() -> tuple[Optional[Simulator], list[str], str]:
    """``(simulate, kernels the page offers, "")``, or ``(None, [], why not)`` without the cycle model.

    Kernels: every registered one, plus AITER's code objects when already on disk (the page
    never triggers the amd-aiter wheel download; ``zyfa-trace kernel --list`` does).
    """
    try:
        from zyfa.kernels.registry import kernels
        from zyfa.kernels import aiter
        from zyfa.trace.cdna4 import tracer  # noqa: F401  (tracer: simulate's engine must import)
    except ImportError as exc:
        return None, [], f"the CDNA4 cycle model (zyfa.trace.cdna4) is not available: {exc}"
    names = sorted(kernels())
    try:
        names += sorted(f"aiter:{p.stem}" for p in aiter.code_object_dir(download=False).glob("*.co"))
    except aiter.AiterUnavailable:
        pass
    return simulate, names, ""


def generator_parameters() -> dict[str, tuple]:
    """Schedule parameters the page offers, with their choices (empty without the generator)."""
    try:
        from zyfa.kernels.gfx950 import schedule
    except ImportError:
        return {}
    return {"softmax": schedule.SOFTMAX, "scaling": schedule.SCALING, "schedule": schedule.SCHEDULES}
