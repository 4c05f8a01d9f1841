"""What-if requests: a kernel, a problem shape and schedule-generator parameters to re-simulate.

The page builds a :class:`WhatIf` from its controls and hands it to a simulator, a callable
``WhatIf -> Trace``. The default simulator (:func:`default_simulator`) applies the parameters to
a registered variant of the gfx950 generator (:mod:`zyfa.kernels.gfx950`), builds it and runs it
through the CDNA4 cycle model (:mod:`zyfa.trace.cdna4`); tests may pass another callable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from zyfa.kernels import aiter, registry
from zyfa.kernels.gfx950 import schedule
from zyfa.shapes import AttnShape
from zyfa.trace.cdna4 import tracer
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


def simulate(request: WhatIf) -> Trace:
    """Re-simulate ``request`` on the CDNA4 cycle model (:func:`zyfa.trace.cdna4.tracer.simulate`,
    the path ``zyfa-trace kernel`` and the sweeps take).

    The shape takes the kernel's own dtype and, where compiled in, its mask (facts of its spec).
    A generator kernel's lazy O rescale runs at its measured rate where one exists for the shape
    (:func:`zyfa.trace.cdna4.tracer.measured_rescale`, as in ``zyfa-trace kernel``), else never.
    Parameter overrides apply to a gfx950 generator variant's configuration (which validates
    them); the trace is then named ``kernel[param=value,...]``.
    """
    if not isinstance(request, WhatIf):
        raise TypeError(f"simulate: request must be a WhatIf, got {type(request).__name__}")
    spec = registry.spec_of(request.kernel)  # None: a code-object file, nothing known about it
    shape = request.shape if spec is None else spec.fit(request.shape)
    measured = tracer.measured_rescale(request.kernel, shape)  # as zyfa-trace kernel runs it
    rate = None if measured is None else measured[0]
    at = "" if measured is None else f" (lazy O rescale at its measured {100 * float(rate):.2f} %, {measured[1]} inputs)"
    trace, _ = tracer.simulate(request.kernel, shape, dict(request.params), rescale_rate=rate,
                               command=f"zyfa-ui what-if: {request.label}{at}")
    return trace


def default_simulator() -> tuple[Optional[Simulator], list[str], str]:
    """``(simulate, kernels the page offers, "")``; the third item ("why not") stays empty: the
    cycle model is part of zyfa (a custom simulator passed to ``create_app`` may be absent).

    Kernels: every registered one, plus AITER's code objects when already on disk (the page
    never triggers the amd-aiter wheel download; ``zyfa-trace kernel --list`` does).
    """
    names = sorted(registry.kernels())
    try:
        names += sorted(f"aiter:{p.stem}" for p in aiter.code_object_dir(download=False).glob("*.co"))
    except aiter.AiterUnavailable:
        pass
    return simulate, names, ""


def generator_parameters() -> dict[str, tuple]:
    """Schedule parameters the page offers, with their choices."""
    return {"softmax": schedule.SOFTMAX, "scaling": schedule.SCALING, "schedule": schedule.SCHEDULES}
