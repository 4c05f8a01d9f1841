"""Analysis windows: the cycle range ``[w0, w1)`` a metric is computed over.

- ``"whole"``: ``[first issue, last end)`` of the trace (``last end`` is at least last issue + 1, so a
  final zero-length instruction is inside). An empty trace has the empty window ``(0, 0)``.
- ``"steady"``: see :func:`steady_window`.
- ``(start, end)`` or ``"start:end"``: a cycle range, ``end > start``.
"""

from __future__ import annotations

from typing import NamedTuple, Union

import numpy as np

from zyfa.analyzer.arrays import Arrays, arrays_of
from zyfa.trace.schema import Trace



class Window(NamedTuple):
    """A resolved window ``[start, end)``; passed back to a metric it is used as is (it may be empty)."""

    start: int
    end: int


WindowSpec = Union[str, tuple, list, Window]


def whole_window(trace: Trace) -> Window:
    a = arrays_of(trace)
    return Window(a.t0, a.t1)


def steady_window(trace: Trace) -> Window:
    """The steady-state cycle range: every wave is inside its main loop, past its first and before its last iteration.

    Rule, per wave (``(cu, wave)``) with at least 3 distinct ``iteration`` values: its steady
    iterations are all but its first (lowest) and last (highest); it enters steady state at the
    first issue of a steady-iteration record and leaves it at the last end of one. The window is
    ``[latest enter, earliest leave)``: the span in which all such waves are in steady state. If
    those spans do not overlap (waves that never run together), the window is
    ``[earliest enter, latest leave)`` instead.

    Fallbacks: no wave with 3+ iterations (``iteration`` null, or too short a loop) -> from the
    first MFMA start to the last MFMA end (drops launch-time loads and final stores); no MFMA
    either -> the whole window.
    """
    a = arrays_of(trace)
    return a.cached("steady_window", lambda: _steady(a))


def _steady(a: Arrays) -> Window:
    b = a.blocks
    if b.n:
        lo = np.full(a.n_wave, np.iinfo(np.int64).max)
        hi = np.full(a.n_wave, np.iinfo(np.int64).min)
        np.minimum.at(lo, b.wave, b.iteration)
        np.maximum.at(hi, b.wave, b.iteration)
        steady = (b.iteration > lo[b.wave]) & (b.iteration < hi[b.wave])
        if steady.any():
            waves = b.wave[steady]
            enter = np.full(a.n_wave, np.iinfo(np.int64).max)
            leave = np.full(a.n_wave, np.iinfo(np.int64).min)
            np.minimum.at(enter, waves, b.first_issue[steady])
            np.maximum.at(leave, waves, b.last_end[steady])
            present = np.unique(waves)
            enter, leave = enter[present], leave[present]
            w0, w1 = int(enter.max()), int(leave.min())
            if w1 <= w0:
                w0, w1 = int(enter.min()), int(leave.max())
            return Window(w0, w1)
    mfma = a.unit_mask("MFMA")
    if mfma.any():
        return Window(int(a.start[mfma].min()), int(a.end[mfma].max()))
    return Window(a.t0, a.t1)


def resolve_window(trace: Trace, window: WindowSpec = "whole") -> Window:
    """Turn a window spec (``"whole"``, ``"steady"``, ``(start, end)``, ``"start:end"``) into a :class:`Window`."""
    if isinstance(window, Window):
        return window
    if isinstance(window, str):
        if window == "whole":
            return whole_window(trace)
        if window == "steady":
            return steady_window(trace)
        parts = window.split(":")
        if len(parts) != 2:
            raise ValueError(f"window must be 'whole', 'steady', 'START:END' or (start, end); got {window!r}")
        try:
            window = (int(parts[0]), int(parts[1]))
        except ValueError:
            raise ValueError(f"window {window!r}: START and END must be integer cycles") from None
    if isinstance(window, (tuple, list)) and len(window) == 2:
        w0, w1 = window
        if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in (w0, w1)):
            raise TypeError(f"window bounds must be integer cycles, got {window!r}")
        if w1 <= w0:
            raise ValueError(f"window end must be greater than its start, got {tuple(window)!r}")
        return Window(int(w0), int(w1))
    raise TypeError(f"window must be 'whole', 'steady', 'START:END' or (start, end); got {window!r}")
