"""Analyzer results for the page, cached per trace (callbacks never compute metrics themselves).

Every number shown comes from :mod:`zyfa.analyzer`; this module only resolves the page's window
choice, caches results on the trace (``Trace.cache``) and formats values for display.
"""

from __future__ import annotations

import math
from typing import Optional, Union

import pandas as pd

from zyfa import analyzer
from zyfa.trace.schema import Trace

# page window choice -> analyzer window spec ("view" = the timeline's current x range)
WINDOWS = ("steady", "whole", "view")

Window = Union[str, tuple[int, int]]


def window_spec(choice: str, view: Optional[tuple[float, float]] = None) -> Window:
    """The analyzer window for a page choice; ``"view"`` needs the timeline's ``(x0, x1)``."""
    if choice not in WINDOWS:
        raise ValueError(f"window must be one of {WINDOWS}, got {choice!r}")
    if choice != "view":
        return choice
    if view is None or len(view) != 2:
        raise ValueError(f"window 'view' needs the timeline range (x0, x1), got {view!r}")
    x0, x1 = math.floor(view[0]), math.ceil(view[1])
    return (x0, max(x1, x0 + 1))


def _cached(trace: Trace, key: str, compute):
    if key not in trace.cache:
        trace.cache[key] = compute()
    return trace.cache[key]


def table(a: Trace, b: Optional[Trace], window: Window) -> pd.DataFrame:
    """``zyfa.analyzer.compare(a, b, window)`` (metric, unit, a, b, diff, ratio); with one trace, its
    ``summary`` as (metric, unit, a)."""
    if b is None:
        def one() -> pd.DataFrame:
            s = analyzer.summary(a, window)
            return pd.DataFrame({"metric": list(s), "unit": [analyzer.METRICS[m].unit for m in s],
                                 "a": [math.nan if v is None else v for v in s.values()]})
        return _cached(a, f"webui.summary.{window}", one)
    key = f"webui.compare.{window}.{id(b)}"
    cached = a.cache.get(key)
    if cached is None or cached[0] is not b:  # b is kept with the result so id(b) stays unique
        cached = a.cache[key] = (b, analyzer.compare(a, b, window))
    return cached[1]


def valu_by_class(trace: Trace, window: Window) -> pd.DataFrame:
    """``zyfa.analyzer.valu_by_class`` (unit, op_class, ops_per_block, cycles_per_block), cached."""
    return _cached(trace, f"webui.valu_by_class.{window}", lambda: analyzer.valu_by_class(trace, window))


def stall_breakdown(trace: Trace, window: Window) -> pd.DataFrame:
    """``zyfa.analyzer.stall_breakdown`` (unit, reason, stall_cycles, records, share), cached."""
    return _cached(trace, f"webui.stall_breakdown.{window}", lambda: analyzer.stall_breakdown(trace, window))


def fmt(value, unit: str = "") -> str:
    """Display form: fractions as percentages, other values to 4 significant digits, ``—`` if undefined."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if unit == "fraction":
        return f"{100 * value:.1f} %"
    if value != 0 and (abs(value) >= 1e7 or abs(value) < 1e-3):
        return f"{value:.4g}"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.1f}"
