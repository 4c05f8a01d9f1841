"""Metric reports: one trace (or two, compared) rendered as a text table, markdown, CSV or JSON."""

from __future__ import annotations

import json
import math
from typing import Optional

import numpy as np
import pandas as pd

from zyfa.analyzer.metrics import METRICS, TABLES, compare, summary
from zyfa.analyzer.window import WindowSpec, resolve_window
from zyfa.trace.schema import Trace

FORMATS = ("table", "md", "csv", "json")


def format_value(value: Optional[float], unit: str) -> str:
    """Human form of one metric value: fractions as percent, cycles/counts plain, flops in %.4g."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if unit == "fraction":
        return f"{100.0 * value:.1f} %"
    if unit in ("cycles", "count"):
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"
    if unit == "flop":
        return f"{value:.4g}"
    if unit == "TFLOP/s":
        return f"{value:.2f}"
    raise ValueError(f"Unknown metric unit: {unit!r}")


def _format_diff(diff: float, unit: str) -> str:
    """A signed difference: fractions in percentage points."""
    if math.isnan(diff):
        return "n/a"
    if unit == "fraction":
        return f"{100.0 * diff:+.1f} pp"
    return f"{diff:+.4g}" if unit == "flop" else f"{diff:+.2f}"


def _header(trace: Trace, window: WindowSpec) -> str:
    w0, w1 = resolve_window(trace, window)
    meta = trace.meta
    clock = f", {meta.clock_mhz:g} MHz" if meta.clock_mhz else ""
    name = window if isinstance(window, str) else "range"
    return (f"{meta.kernel} [{meta.arch}, {meta.label}{clock}]: {len(trace)} records, "
            f"window {name} = cycles [{w0}, {w1})")


def summary_frame(trace: Trace, window: WindowSpec = "whole") -> pd.DataFrame:
    """Columns metric, unit, value (float, NaN where undefined), description."""
    values = summary(trace, window)
    return pd.DataFrame({"metric": list(METRICS), "unit": [m.unit for m in METRICS.values()],
                         "value": [math.nan if values[n] is None else values[n] for n in METRICS],
                         "description": [m.description for m in METRICS.values()]})


def _text_table(rows: list[list[str]], header: list[str], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = lambda row: "  ".join(str(x).ljust(w) if i == 0 else str(x).rjust(w) for i, (x, w) in
                                enumerate(zip(row, widths)))
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(row) for row in rows])


def _cell(value) -> str:
    """One table cell: integral floats without decimals, other floats to 4 significant digits."""
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return "n/a"
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.4g}"
    return str(value)


def _json_value(value: float):
    return None if isinstance(value, float) and math.isnan(value) else value


def render(trace: Trace, window: WindowSpec = "whole", fmt: str = "table", other: Optional[Trace] = None) -> str:
    """The metric report of ``trace`` (and its comparison with ``other``) in one of FORMATS.

    ``table``/``md`` start with a header naming kernel, arch, whether the trace is simulated, and
    the window; ``json`` carries them as keys, ``csv`` as the columns kernel, label, window_start,
    window_end (``a_``/``b_`` prefixed when comparing) on every row.
    """
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    if other is not None and not isinstance(other, Trace):
        raise TypeError(f"other must be a Trace or None, got {type(other).__name__}")
    traces = [trace] if other is None else [trace, other]
    if other is None:
        frame = summary_frame(trace, window)
    else:
        frame = compare(trace, other, window)
    if fmt == "csv":
        # every row names its trace(s): kernel, "simulated (cycle model)" / "hardware (...)", window
        for prefix, t in zip(("",) if other is None else ("a_", "b_"), traces):
            w0, w1 = resolve_window(t, window)
            frame[prefix + "kernel"], frame[prefix + "label"] = t.meta.kernel, t.meta.label
            frame[prefix + "window_start"], frame[prefix + "window_end"] = w0, w1
        return frame.to_csv(index=False)
    if fmt == "json":
        out = {"traces": [{"kernel": t.meta.kernel, "arch": t.meta.arch, "source": t.meta.source,
                           "simulated": t.meta.simulated, "label": t.meta.label,
                           "window": list(resolve_window(t, window))} for t in traces],
               "metrics": [{k: _json_value(v) for k, v in row.items()} for row in frame.to_dict("records")]}
        return json.dumps(out, indent=2)
    markdown = fmt == "md"
    heads = [_header(t, window) for t in traces]
    if other is None:
        header = ["metric", "value"]
        rows = [[r.metric, format_value(r.value, r.unit)] for r in frame.itertuples()]
    else:
        header = ["metric", "a", "b", "b - a", "b / a"]
        rows = [[r.metric, format_value(r.a, r.unit), format_value(r.b, r.unit),
                 _format_diff(r.diff, r.unit),
                 "n/a" if math.isnan(r.ratio) else f"{r.ratio:.3f}x"] for r in frame.itertuples()]
    lines = [("a: " if other is not None else "") + heads[0]]
    if other is not None:
        lines.append("b: " + heads[1])
    if markdown:
        lines = [f"- {line}" for line in lines]
    return "\n".join(lines) + "\n\n" + _text_table(rows, header, markdown) + "\n"


# tables shown by ``zyfa-trace analyze --tables`` (handover_gaps itself is one row per hand-over)
DETAIL_TABLES = ("mfma_busy_per_simd", "pingpong_overlap_per_simd", "pingpong_overlap_per_wave",
                 "handover_gap_histogram", "valu_by_class", "cycles_by_region", "stall_breakdown",
                 "unknown_mfma_opcodes")


def render_tables(trace: Trace, window: WindowSpec = "whole", fmt: str = "table",
                  names: tuple[str, ...] = DETAIL_TABLES) -> str:
    """Table metrics of ``trace`` one after another, each under its name (``table`` or ``md``)."""
    if fmt not in ("table", "md"):
        raise ValueError(f"fmt must be 'table' or 'md' for tables, got {fmt!r}")
    unknown = [n for n in names if n not in TABLES]
    if unknown:
        raise ValueError(f"unknown table metric(s) {unknown}; known: {list(TABLES)}")
    resolved = resolve_window(trace, window)
    parts = []
    for name in names:
        frame = TABLES[name].fn(trace, resolved)
        title = f"{name}: {TABLES[name].description}"
        if frame.empty:
            parts.append(f"{title}\n(none)")
            continue
        cells = [[_cell(v) for v in row] for row in frame.itertuples(index=False)]
        parts.append(title + "\n" + _text_table(cells, list(frame.columns), fmt == "md"))
    return "\n\n".join(parts) + "\n"
