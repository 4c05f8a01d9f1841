"""What-if requests: a kernel, a problem shape and schedule-generator parameters to re-simulate.

The page builds a :class:`WhatIf` from its controls and hands it to a simulator, a callable
``WhatIf -> Trace``. The default simulator (:func:`default_simulator`) applies the parameters to
a registered variant of the gfx950 generator (:mod:`zyfa.kernels.gfx950`), builds it and runs it
through the CDNA4 cycle model (:mod:`zyfa.trace.cdna4`); tests may pass another callable.
"""

from __future__ import annotations

from dataclasses import dataclass
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


def default_simulator() -> tuple[Optional[Simulator], list[str], str]:
    """The cycle-model simulator and the kernels it can build, or ``(None, [], why not)``."""
    try:
        from zyfa.trace.cdna4 import simulate_kernel  # noqa: F401
    except ImportError as exc:
        return None, [], f"the CDNA4 cycle model (zyfa.trace.cdna4) is not available: {exc}"
    return None, [], "not wired yet"


def generator_parameters() -> dict[str, tuple]:
    """Schedule parameters the page offers, with their choices (empty without the generator)."""
    try:
        from zyfa.kernels.gfx950 import schedule
    except ImportError:
        return {}
    return {"softmax": schedule.SOFTMAX, "scaling": schedule.SCALING, "schedule": schedule.SCHEDULES}
