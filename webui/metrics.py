"""Analyzer results for the page, cached per trace (callbacks never compute metrics themselves).

Every number shown comes from :mod:`zyfa.analyzer`; this module only resolves the page's window
choice, caches results on the trace (``Trace.cache``) and formats values for display.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np
import pandas as pd

from zyfa import analyzer
from zyfa.analyzer import listing as analyzer_listing
from zyfa.kernels import baseline, registry
from zyfa.trace.cdna4 import power
from zyfa.trace.cdna4.estimate import EstimateConfig
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
    if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in view):
        raise ValueError(f"window 'view' needs a finite range (x0, x1), got {view!r}")
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


def stall_by_reason(trace: Trace, window: Window) -> pd.DataFrame:
    """Stall cycles per reason (reason, stall_cycles, share, waiting), summed over units.

    ``zyfa.analyzer.stall_breakdown`` files a stall under the unit of the instruction that *waited*
    (the one issued after an ``s_barrier``, say), not under the unit that caused it, so the page
    labels bars by reason and lists the waiting instructions' units in ``waiting``
    (``"SALU 48, VALU 16"``) instead of printing ``"SALU barrier"``.
    """
    def compute() -> pd.DataFrame:
        frame = stall_breakdown(trace, window)
        rows = []
        for reason, part in frame.groupby("reason", sort=False):
            part = part.sort_values("stall_cycles", ascending=False)
            rows.append({"reason": reason, "stall_cycles": int(part["stall_cycles"].sum()),
                         "share": float(part["share"].sum()),
                         "waiting": ", ".join(f"{u} {int(c)}" for u, c in zip(part["unit"], part["stall_cycles"]))})
        out = pd.DataFrame(rows, columns=["reason", "stall_cycles", "share", "waiting"])
        return out.sort_values("stall_cycles", ascending=False, kind="stable").reset_index(drop=True)
    return _cached(trace, f"webui.stall_by_reason.{window}", compute)


_ROLE = re.compile(r":(?:func|class|data|attr|meth|mod):`~?([^`]+)`")


def definition(metric: str) -> str:
    """A metric's definition as Markdown: its docstring's first paragraph with reST markup turned
    into text (``x`` -> `x`, :func:`~a.b.c` -> `c`)."""
    m = analyzer.METRICS.get(metric)
    if m is None:
        raise KeyError(f"unknown metric {metric!r}")
    doc = " ".join((m.fn.__doc__ or m.description or "").strip().split("\n\n")[0].split())
    doc = _ROLE.sub(lambda g: f"`{g.group(1).rsplit('.', 1)[-1]}`", doc)
    return doc.replace("``", "`")


def plain(markdown: str) -> str:
    """Markdown from :func:`definition` without backticks (for tooltips)."""
    return markdown.replace("`", "")


@dataclass(frozen=True)
class Headline:
    """The whole-kernel prediction as ``zyfa-trace kernel`` prints it, or None fields for traces
    without one (hardware captures): cycles from ``meta.extra["predicted_cycles"]``, the clock from
    the power model (:func:`zyfa.trace.cdna4.power.predict_clock` on the trace's records and skipped loop periods, as the CLI
    does) unless the trace was simulated at a forced clock, time = cycles / clock, TFLOP/s = the
    shape's FLOPs / time."""

    kernel: str
    source: str
    seconds: Optional[float]
    cycles: Optional[float]
    tflops: Optional[float]
    clock_mhz: Optional[float]
    clock_note: str


def _activity(trace: Trace) -> power.Activity:
    cols = {c: trace.table.column(c).to_numpy() for c in ("unit", "opcode")}
    cols.update({c: trace.column(c) for c in ("issue", "start", "end")})
    return power.activity(cols, (trace.meta.extra or {}).get("skipped_periods") or ())


def headline(trace: Trace) -> Headline:
    extra = trace.meta.extra or {}
    cycles = extra.get("predicted_cycles")
    shape = trace.meta.attn_shape
    if isinstance(cycles, bool) or not isinstance(cycles, (int, float)) or cycles <= 0 or len(trace) == 0 \
            or shape is None:
        return Headline(trace.meta.kernel, trace.meta.label, None, None, None, trace.meta.clock_mhz,
                        "clock of the trace")

    def compute() -> Headline:
        default = float(EstimateConfig().clock_mhz)  # the clock a trace is simulated at unless forced
        if trace.meta.clock_mhz is not None and trace.meta.clock_mhz != default:
            mhz, note = float(trace.meta.clock_mhz), f"clock forced to {trace.meta.clock_mhz:.0f} MHz"
        else:
            clock = power.predict_clock(_activity(trace), shape.dtype)
            mhz, note = clock.mhz, str(clock)
        seconds = float(cycles) / (mhz * 1e6)
        return Headline(trace.meta.kernel, trace.meta.label, seconds, float(cycles), shape.tflops(seconds), mhz, note)
    return _cached(trace, "webui.headline", compute)


def reconstruction_note(kernel: str) -> str:
    """What to say about a kernel that stands in for AITER's code but is ours
    (:data:`zyfa.kernels.baseline.RECONSTRUCTIONS`; a what-if's ``name[param=...]`` counts), else ``""``."""
    return baseline.RECONSTRUCTIONS.get(str(kernel).split("[", 1)[0], "")


def speedup(a: Headline, b: Headline) -> Optional[float]:
    """How many times faster A is than B: B's predicted time / A's (None without both predictions)."""
    if a.seconds is None or b.seconds is None or a.seconds <= 0:
        return None
    return b.seconds / a.seconds


def listing(trace: Trace, window: Window) -> pd.DataFrame:
    """``zyfa.analyzer.listing.instruction_listing``, cached per trace and window."""
    return _cached(trace, f"webui.listing.{window}", lambda: analyzer_listing.instruction_listing(trace, window))


def why(a: Trace, b: Trace, window: Window) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(explain(a, b), unit_work_diff(a, b))`` of :mod:`zyfa.analyzer.listing`, cached on A."""
    key = f"webui.why.{window}.{id(b)}"
    cached = a.cache.get(key)
    if cached is None or cached[0] is not b:
        cached = a.cache[key] = (b, analyzer_listing.explain(a, b, window),
                                 analyzer_listing.unit_work_diff(a, b, window))
    return cached[1], cached[2]


_NAMED = re.compile(r"^([^\[\]]+)(?:\[(.*)\])?$")  # "zyfa-fp8[schedule=serial,softmax=exact]"


def _parameter(value: str):
    try:
        return int(value)
    except ValueError:
        return value


def emitter_sources(trace: Trace) -> Optional[dict[int, str]]:
    """pc -> the generator line that emitted the instruction (``"kernels/gfx950/generator.py:612"``,
    recorded at emit time in the build's ``instruction_sources``), for a cycle-model trace of a
    gfx950 generator kernel. The build is made again from the trace's kernel name (with its
    ``[param=value,...]`` what-if parameters) and shape (``zyfa.kernels.registry.resolve``) and
    used only if it matches the trace: every pc of the trace is in it and every recorded region
    is the build's cluster at that pc (a trace saved by another generator version is refused).
    None for other traces (AITER code objects, hardware captures: no source; regions come from
    the loop structure) and when the build cannot be made or does not match."""
    def compute() -> Optional[dict[int, str]]:
        m = _NAMED.match(trace.meta.kernel or "")
        shape = trace.meta.attn_shape
        if trace.meta.source != "model" or m is None or shape is None or len(trace) == 0:
            return None
        spec = registry.spec_of(m.group(1))
        if spec is None or spec.variant is None:
            return None
        params = dict(p.split("=", 1) for p in m.group(2).split(",") if "=" in p) if m.group(2) else {}
        try:
            meta = registry.resolve(m.group(1), shape, {k: _parameter(v) for k, v in params.items()}).build.meta
        except (ValueError, TypeError, KeyError):
            return None
        pcs, sources, clusters = (meta.get(k) for k in ("instruction_pcs", "instruction_sources",
                                                         "instruction_clusters"))
        if not pcs or not sources or not clusters:
            return None
        cluster_of = dict(zip(pcs, clusters))
        pc = trace.column("pc", fill=-1)
        region = np.asarray(trace.table.column("region").to_pandas(), dtype=object)
        for p, r in set(zip(pc.tolist(), region.tolist())):
            if p >= 0 and (p not in cluster_of or (r is not None and r == r and r != cluster_of[p])):
                return None
        return dict(zip(pcs, sources))
    return _cached(trace, "webui.emitter_sources", compute)


def phases(trace: Trace) -> pd.DataFrame:
    """``zyfa.analyzer.listing.iteration_phases`` over the whole trace (every iteration), cached."""
    return _cached(trace, "webui.phases", lambda: analyzer_listing.iteration_phases(trace, "whole"))


def term_intervals(trace: Trace, term: str, window: Window) -> pd.DataFrame:
    """``zyfa.analyzer.listing.pipe_intervals``: the cycles behind one term of the "why", cached."""
    return _cached(trace, f"webui.term_intervals.{term}.{window}",
                   lambda: analyzer_listing.pipe_intervals(trace, term, window))


def why_words(explained: pd.DataFrame, work: pd.DataFrame, a_label: str, b_label: str, window: Window) -> str:
    """One paragraph naming the term that explains most of the difference, with cycles."""
    if explained.empty:
        return "No key block lies wholly inside the window of both traces: nothing to explain."
    total = explained.set_index("term").loc["total"]
    top = explained.iloc[0]
    faster, slower = (a_label, b_label) if total["diff"] > 0 else (b_label, a_label)
    text = (f"Per key block (window {window}), A ({a_label}) costs {total['a']:,.0f} SIMD-cycles and B ({b_label}) "
            f"{total['b']:,.0f}: {faster} is cheaper by {abs(total['diff']):,.0f}. "
            f"Largest term: {top['meaning']}: {top['a']:,.0f} vs {top['b']:,.0f} "
            f"({top['diff']:+,.0f} cycles, {100 * top['share']:.0f}% of the difference).")
    moved = work[work["diff"].abs() > 0].head(3)
    if len(moved):
        parts = [f"{r.region} {r.unit} {r.diff:+,.0f}" for r in moved.itertuples()]
        text += " Busy cycles per key block that differ most (B − A, by region and unit): " + ", ".join(parts) + "."
    return text


LOOP_PARTS = ("prologue", "loop", "epilogue")


def region_table(listings: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The A and B listings aligned: each slot's executions, busy and stall cycles (sums of its
    listing rows) and the B − A difference of busy + stall, first per part of the loop structure
    (``level = "loop structure"``: prologue, loop, epilogue, which any two traces have, a
    generator build and an AITER code object alike), then per schedule region (``level =
    "schedule region"``: the generator's cluster names) where a trace names any."""
    levels = [("loop structure", "part")]
    if any(not f.empty and not set(f["region"]) <= set(LOOP_PARTS) for f in listings.values()):
        levels.append(("schedule region", "region"))
    tables = []
    for level, column in levels:
        parts = {}
        for slot, frame in listings.items():
            if frame.empty:
                continue
            sums = frame.groupby(column)[["executions", "busy", "stall"]].sum()
            parts[slot] = sums.rename(columns=lambda c: f"{slot.upper()}_{c}")
        if not parts:
            continue
        out = pd.concat(parts.values(), axis=1).fillna(0).astype(np.int64)
        if column == "part":
            out = out.reindex([p for p in LOOP_PARTS if p in out.index])
        if "a" in parts and "b" in parts:
            out["B−A busy+stall"] = (out["B_busy"] + out["B_stall"]) - (out["A_busy"] + out["A_stall"])
        tables.append(out.rename_axis("region").reset_index().assign(level=level))
    if not tables:
        return pd.DataFrame(columns=["level", "region"])
    out = pd.concat(tables, ignore_index=True)
    return out[["level", "region", *[c for c in out.columns if c not in ("level", "region")]]]
