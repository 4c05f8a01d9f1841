"""What-if requests: a kernel, a problem shape and schedule-generator parameters to re-simulate.

The page builds a :class:`WhatIf` from its controls and hands it to a simulator, a callable
``WhatIf -> Trace``. The default simulator, :func:`simulate`, builds the kernel with the gfx950
generator (:mod:`zyfa.kernels.gfx950`) and runs it through the CDNA4 cycle model
(:mod:`zyfa.trace.cdna4`); tests may pass another callable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from zyfa.shapes import AttnShape
from zyfa.trace.schema import Trace

SOFTMAX_VARIANTS = ("lean", "exact")  # Lean P FMA + cvt  |  v_exp + fp8 convert (AITER v3)
SCHEDULES = ("pingpong", "serial")  # two waves per SIMD alternating MFMA/softmax  |  one phase after the other

Simulator = Callable[["WhatIf"], Trace]


@dataclass(frozen=True)
class WhatIf:
    """One re-simulation: kernel + shape + generator schedule parameters.

    ``softmax``/``schedule``/``handover`` of None keep the kernel's registered default.
    ``handover`` lists the schedule clusters after which a wave lowers its ``s_setprio`` priority
    (the hand-over points of the ping-pong).
    """

    kernel: str = "zyfa-fp8"
    seqlen: int = 1024
    batch: int = 1
    heads: int = 1
    headdim: int = 128
    softmax: Optional[str] = None
    schedule: Optional[str] = None
    handover: Optional[tuple[str, ...]] = None

    def __post_init__(self):
        if not isinstance(self.kernel, str) or not self.kernel:
            raise ValueError(f"WhatIf.kernel must be a registered kernel name, got {self.kernel!r}")
        for name in ("seqlen", "batch", "heads", "headdim"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"WhatIf.{name} must be a positive int, got {value!r}")
        if self.softmax is not None and self.softmax not in SOFTMAX_VARIANTS:
            raise ValueError(f"WhatIf.softmax must be one of {SOFTMAX_VARIANTS} or None, got {self.softmax!r}")
        if self.schedule is not None and self.schedule not in SCHEDULES:
            raise ValueError(f"WhatIf.schedule must be one of {SCHEDULES} or None, got {self.schedule!r}")
        if self.handover is not None:
            if isinstance(self.handover, str) or not all(isinstance(h, str) and h for h in self.handover):
                raise TypeError(f"WhatIf.handover must be a tuple of cluster names, got {self.handover!r}")
            object.__setattr__(self, "handover", tuple(self.handover))

    @property
    def shape(self) -> AttnShape:
        return AttnShape(batch=self.batch, heads=self.heads, heads_k=self.heads, seqlen_q=self.seqlen,
                         seqlen_k=self.seqlen, headdim=self.headdim, headdim_v=self.headdim)

    @property
    def label(self) -> str:
        """``"zyfa-fp8 softmax=exact schedule=serial · s1024"`` (only the parameters that were set)."""
        parts = [self.kernel]
        if self.softmax:
            parts.append(f"softmax={self.softmax}")
        if self.schedule:
            parts.append(f"schedule={self.schedule}")
        if self.handover is not None:
            parts.append(f"handover={','.join(self.handover) or 'none'}")
        return " ".join(parts) + f" · b{self.batch} h{self.heads} s{self.seqlen} d{self.headdim}"


def default_simulator() -> tuple[Optional[Simulator], list[str], str]:
    """The cycle-model simulator and the kernels it can build, or ``(None, [], why not)``."""
    try:
        from zyfa.trace.cdna4 import simulate_kernel  # noqa: F401
    except ImportError as exc:
        return None, [], f"the CDNA4 cycle model (zyfa.trace.cdna4) is not available: {exc}"
    return None, [], "not wired yet"
