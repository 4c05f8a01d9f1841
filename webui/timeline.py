"""Timeline data for the schedule explorer: tracks, decimation and per-bin busy fractions.

Pure functions over a :class:`zyfa.trace.schema.Trace`; the figure builders in
:mod:`zyfa.webui.figures` draw what these return and the Dash callbacks only call them.

Decimation rule. A view ``[x0, x1)`` holding at most ``budget`` records is drawn in full, one bar
per instruction. Above the budget, records of one ``(track, unit)`` whose gaps are shorter than
``resolution = (x1 - x0) / bins`` cycles are merged into one segment: at that zoom the gap is
narrower than one bin (about a pixel), so the merged picture differs from the full one by less
than a bin. Each segment keeps its instruction ``count`` and ``busy`` cycles (the sum of its
records' ``end - start``), shown on hover. Zooming in shrinks the view until it is under the
budget and full detail returns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from zyfa.analyzer.intervals import Coverage, grouped_cummax, union
from zyfa.analyzer.listing import EPILOGUE, region_of
from zyfa.trace.schema import Trace

# units drawn on the timeline with their colours (colour-blind-safe Okabe-Ito palette plus greys
# for the control units) and bar heights (fraction of a row); drawn in this order, so the
# execution units the schedule is about end on top
UNIT_STYLE: dict[str, tuple[str, float]] = {
    "MISC": ("#DDDDDD", 0.25),
    "BRANCH": ("#999999", 0.25),
    "BARRIER": ("#555555", 0.25),
    "WAIT": ("#BBBBBB", 0.25),
    "SALU": ("#F0E442", 0.25),
    "SMEM": ("#56B4E9", 0.26),
    "VMEM": ("#CC79A7", 0.26),
    "LDS": ("#009E73", 0.26),
    "REGION": ("#8E6C8A", 0.5),
    "TRANS": ("#D55E00", 0.5),
    "VALU": ("#E69F00", 0.5),
    "MFMA": ("#0072B2", 0.5),
}
UNIT_COLOURS: dict[str, str] = {unit: colour for unit, (colour, _) in UNIT_STYLE.items()}

# each wave's row (one unit of the y axis, drawn top = -0.5 to bottom = +0.5) has three lanes:
# stalls on top, execution in the middle, memory requests in flight at the bottom (so a long
# global load is not hidden under the MFMA bars it overlaps)
MEMORY_UNITS = ("VMEM", "LDS", "SMEM")
LANE_OFFSET = {"stall": -0.41, "exec": -0.08, "memory": 0.33}
STALL_WIDTH = 0.14
STALL_COLOURS: dict[str, str] = {  # by stall reason (Tol's muted palette; "other" for any reason not listed)
    "dependency": "#CC6677", "waitcnt": "#882255", "barrier": "#AA4499", "unit_busy": "#999933",
    "arbitration": "#DDCC77", "hazard": "#EE3377", "nop": "#88CCEE", "branch": "#117733", "other": "#777777",
}


def lane_offset(unit: str) -> float:
    """Vertical offset of a unit's bars within its wave's row."""
    return LANE_OFFSET["memory" if unit in MEMORY_UNITS else "exec"]

# VALU-side units whose work the ping-pong overlaps with another wave's MFMA
SOFTMAX_UNITS = ("VALU", "TRANS")


@dataclass(frozen=True)
class Track:
    """One timeline row: a wave on a SIMD of a CU."""

    cu: int
    simd: int
    wave: int

    @property
    def label(self) -> str:
        return f"CU{self.cu} S{self.simd} w{self.wave}"


@dataclass(frozen=True)
class View:
    """A cycle range ``[x0, x1)`` of the timeline and how finely to draw it.

    ``budget``: most records drawn one by one; ``bins``: resolution of merged segments and of the
    MFMA-busy strip when the view holds more.
    """

    x0: float
    x1: float
    budget: int = 4000
    bins: int = 800

    def __post_init__(self):
        for name in ("x0", "x1"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
                raise TypeError(f"View.{name} must be a finite number of cycles, got {value!r}")
        if self.x1 <= self.x0:
            raise ValueError(f"View: x1 ({self.x1}) must be greater than x0 ({self.x0})")
        for name in ("budget", "bins"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"View.{name} must be a positive int, got {value!r}")

    @property
    def resolution(self) -> float:
        """Cycles per bin."""
        return (self.x1 - self.x0) / self.bins

    def padded(self, extent: tuple[float, float], pad: float) -> "View":
        """The range a figure for this view carries data for: ``pad`` view widths on either side,
        clipped to ``extent`` (never narrower than the view), at this view's resolution and record
        density (``bins`` and ``budget`` scale with the width). Panning or zooming out within it
        needs no new data; zooming in needs new data only where the view is decimated."""
        if isinstance(pad, bool) or not isinstance(pad, (int, float)) or not 0 <= pad < 1e6:
            raise ValueError(f"View.padded: pad must be a number of view widths in [0, 1e6), got {pad!r}")
        lo, hi = extent
        width = self.x1 - self.x0
        x0 = min(self.x0, max(lo, self.x0 - pad * width))
        x1 = max(self.x1, min(hi, self.x1 + pad * width))
        scale = (x1 - x0) / width
        return View(float(x0), float(x1), budget=max(1, round(self.budget * scale)),
                    bins=max(1, round(self.bins * scale)))


@dataclass(frozen=True)
class _Arrays:
    """The columns the timeline needs, as numpy arrays, computed once per trace."""

    tracks: list  # [Track], sorted
    track: np.ndarray  # row -> index into tracks
    unit: np.ndarray  # row -> index into units
    units: tuple  # unit names
    start: np.ndarray
    end: np.ndarray  # as recorded
    drawn_end: np.ndarray  # max(end, start + 1): zero-length records are drawn one cycle wide


def _arrays(trace: Trace) -> _Arrays:
    key = "webui.timeline.arrays"
    if key not in trace.cache:
        if len(trace) == 0:
            empty = np.empty(0, dtype=np.int64)
            trace.cache[key] = _Arrays([], empty, empty, (), empty, empty, empty)
            return trace.cache[key]
        cu, simd, wave = (trace.column(c).astype(np.int64) for c in ("cu", "simd", "wave"))
        packed = (cu << 42) | (simd << 21) | wave  # one sortable key per (cu, simd, wave)
        keys, track = np.unique(packed, return_inverse=True)
        unit_codes = pa.chunked_array(trace.table.column("unit")).combine_chunks().dictionary_encode()
        start = trace.column("start")
        trace.cache[key] = _Arrays(
            tracks=[Track(int(k >> 42), int((k >> 21) & 0x1FFFFF), int(k & 0x1FFFFF)) for k in keys],
            track=track.reshape(-1), unit=unit_codes.indices.to_numpy(zero_copy_only=False),
            units=tuple(unit_codes.dictionary.to_pylist()), start=start, end=trace.column("end"),
            drawn_end=np.maximum(trace.column("end"), start + 1))
    return trace.cache[key]


def tracks(trace: Trace) -> list[Track]:
    """The trace's ``(cu, simd, wave)`` rows, sorted by CU, SIMD, then wave."""
    return list(_arrays(trace).tracks)


def extent(trace: Trace) -> tuple[int, int]:
    """``(first issue, last end)`` in cycles; ``(0, 1)`` for an empty trace."""
    if len(trace) == 0:
        return 0, 1
    return int(trace.column("issue").min()), int(max(trace.column("end").max(), trace.column("issue").min() + 1))


def iterations(trace: Trace) -> list[int]:
    """Main-loop iteration numbers present in the trace (empty when the column is all null)."""
    if len(trace) == 0 or trace.table.column("iteration").null_count == len(trace):
        return []
    it = trace.column("iteration", fill=-1)
    return sorted(int(i) for i in np.unique(it[it >= 0]))


def iteration_span(trace: Trace, iteration: int) -> tuple[int, int]:
    """``[first issue, last end)`` of the records of one loop iteration over all waves."""
    if isinstance(iteration, bool) or not isinstance(iteration, (int, np.integer)):
        raise TypeError(f"iteration must be an int, got {iteration!r}")
    it = trace.column("iteration", fill=-1) if len(trace) else np.empty(0, dtype=np.int32)
    rows = np.flatnonzero(it == iteration)
    if rows.size == 0:
        raise ValueError(f"iteration {iteration} is not in the trace; present: {iterations(trace)}")
    return int(trace.column("issue")[rows].min()), int(trace.column("end")[rows].max())


def view_rows(trace: Trace, x0: float, x1: float) -> np.ndarray:
    """Rows executing in ``[x0, x1)`` (zero-length records count as one cycle), in start order."""
    a = _arrays(trace)
    hit = np.flatnonzero((a.drawn_end > x0) & (a.start < x1))
    return hit[np.argsort(a.start[hit], kind="stable")]


def rows_in_view(trace: Trace, x0: float, x1: float, limit: int) -> tuple[list[int], int]:
    """:func:`view_rows`: the first ``limit`` of them, and how many there are."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be a non-negative int, got {limit!r}")
    hit = view_rows(trace, x0, x1)
    return [int(r) for r in hit[:limit]], int(hit.size)


def segments(trace: Trace, view: View) -> tuple[pd.DataFrame, bool]:
    """What to draw of ``trace`` in ``view``: one row per bar, and whether it was decimated.

    Columns: ``track`` (index into :func:`tracks`), ``unit``, ``start``, ``end``, ``count``
    (instructions in the bar), ``busy`` (sum of their ``end - start``), ``row`` (the record's row
    in the trace for a single instruction, -1 for a merged segment). Zero-length records (issue-
    only units such as WAIT or BRANCH) are drawn from ``issue`` to ``issue + 1``.
    """
    a = _arrays(trace)
    rows = np.flatnonzero((a.drawn_end > view.x0) & (a.start < view.x1))
    units = np.asarray(a.units, dtype=object)
    if rows.size <= view.budget:
        out = pd.DataFrame({"track": a.track[rows], "unit": units[a.unit[rows]], "start": a.start[rows],
                            "end": a.drawn_end[rows], "count": np.ones(rows.size, dtype=np.int64),
                            "busy": (a.end - a.start)[rows], "row": rows})
        return out, False
    # merge per (track, unit): a new segment starts where the gap to everything before it in the
    # group is at least one bin
    s, e, t, u = a.start[rows], a.drawn_end[rows], a.track[rows], a.unit[rows]
    order = np.lexsort((s, u, t))
    s, e, t, u = s[order], e[order], t[order], u[order]
    busy = (a.end - a.start)[rows][order]
    group = np.r_[True, (t[1:] != t[:-1]) | (u[1:] != u[:-1])]
    reach = grouped_cummax(e, group)
    new = group.copy()
    new[1:] |= s[1:] - reach[:-1] >= view.resolution
    seg = np.cumsum(new) - 1
    n = int(seg[-1]) + 1
    out = pd.DataFrame({
        "track": t[new], "unit": units[u[new]], "start": s[new],
        "end": np.maximum.reduceat(e, np.flatnonzero(new)), "count": np.bincount(seg, minlength=n),
        "busy": np.bincount(seg, weights=busy, minlength=n).astype(np.int64), "row": -1,
    })
    single = out["count"].to_numpy() == 1
    out.loc[single, "row"] = rows[order][new][single]
    return out, True


def stalls(trace: Trace, view: View) -> pd.DataFrame:
    """Stall intervals to draw in ``view``: ``[issue - stall, issue)`` of each record with ``stall > 0``
    (the cycles its wave waited before issuing it), with ``track``, ``reason`` and ``row``.

    Empty when the view holds more than ``view.budget`` records (a decimated view draws merged
    segments; stalls come back when zoomed in).
    """
    a = _arrays(trace)
    cols = ["track", "start", "end", "reason", "stall", "row"]
    if len(trace) == 0 or np.count_nonzero((a.drawn_end > view.x0) & (a.start < view.x1)) > view.budget:
        return pd.DataFrame(columns=cols)
    issue, stall = trace.column("issue"), trace.column("stall")
    rows = np.flatnonzero((stall > 0) & (issue > view.x0) & (issue - stall < view.x1))
    reason = trace.table.column("stall_reason").take(pa.array(rows, type=pa.int64())).to_pylist()
    return pd.DataFrame({"track": a.track[rows], "start": issue[rows] - stall[rows], "end": issue[rows],
                         "reason": [r or "unknown" for r in reason], "stall": stall[rows], "row": rows}, columns=cols)


@dataclass(frozen=True)
class Marker:
    """A labelled cycle range drawn over a panel (extrapolated loop periods)."""

    x0: float
    x1: float
    label: str
    kind: str  # "extrapolated" (a cycle range) or "skip" (the point x0 == x1 where skipped periods belong)


def epilogue_starts(trace: Trace) -> list[tuple[int, int]]:
    """``(track, cycle)``: where each wave's epilogue starts, the first issue of its records in the
    ``epilogue`` region (:func:`zyfa.analyzer.listing.region_of`: issued after the wave's last
    record of a main-loop pc, wherever the code lies in the binary). Waves
    of different workgroups run different numbers of key blocks (causal), so each has its own."""
    if len(trace) == 0:
        return []
    a = _arrays(trace)
    epi = np.flatnonzero(region_of(trace) == EPILOGUE)
    if epi.size == 0:
        return []
    first = pd.DataFrame({"track": a.track[epi], "issue": trace.column("issue")[epi]}).groupby("track")["issue"].min()
    return [(int(k), int(v)) for k, v in first.items()]


def markers(trace: Trace) -> list[Marker]:
    """Where the cycle model skipped loop periods.

    A cycle-model trace states it (``meta.extra["skipped_periods"]``: ``at_cycle`` on the record
    timeline, where the records before and after a skip meet): one ``"skip"`` marker at that point
    per skip, labelled with the representative sample's ``loops_extrapolated`` entry. Traces
    without it (older ones): skipped periods (``meta.extra["samples"][i]["loops_extrapolated"]`` of
    the sampled workgroup whose records the trace holds, ``representative_work_index`` along ``work_axis``) leave no
    records: every wave's issue times jump by ``cycles_skipped``. Each skip is placed at the first
    gap between consecutive issue times (all waves together) at least that long; a skip that cannot
    be placed is still listed, at cycle 0 with zero width.
    """
    out: list[Marker] = []
    if len(trace) == 0:
        return out
    extra = trace.meta.extra or {}
    axis = "xyz".find(str(extra.get("work_axis", "x")))
    index = extra.get("representative_work_index")
    skips: list = []  # the representative sample's loops_extrapolated entries
    for sample in extra.get("samples") or []:
        coord = sample.get("coord") or []
        if axis >= 0 and len(coord) > axis and coord[axis] == index:
            skips = sample.get("loops_extrapolated") or []
            break
    stated = extra.get("skipped_periods")
    if stated:
        return [Marker(float(x["at_cycle"]), float(x["at_cycle"]),
                       (_skip_label(skips[i], axis, index) if i < len(skips)
                        else f"extrapolated: {x['cycles']} cycles skipped, no records")
                       + f"; they belong at cycle {x['at_cycle']}", "skip")
                for i, x in enumerate(stated)]
    issue = np.unique(trace.column("issue"))
    gaps = np.flatnonzero(np.diff(issue) > 0)
    used: set[int] = set()
    for skip in skips:
        label = _skip_label(skip, axis, index)
        fits = [g for g in gaps if issue[g + 1] - issue[g] >= skip.get("cycles_skipped", 0) and g not in used]
        if fits:
            used.add(fits[0])
            out.append(Marker(float(issue[fits[0]]), float(issue[fits[0] + 1]), label, "extrapolated"))
        else:
            out.append(Marker(0.0, 0.0, label + " (not located on the timeline)", "extrapolated"))
    return out


def _skip_label(skip: dict, axis: int, index) -> str:
    return (f"extrapolated: {skip.get('periods_skipped')} loop periods of {skip.get('period_cycles')} cycles "
            f"(loop at pc 0x{int(skip.get('loop_pc', 0)):x}) skipped, no records; workgroup "
            f"{'xyz'[axis]}={index} sampled")


# -- busy fractions per bin (MFMA-busy strip and overlap shading) -----------------------------------

def coverage(start: np.ndarray, end: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Cycles of each bin ``[edges[i], edges[i+1])`` covered by the union of ``[start, end)``."""
    us, ue = union(np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64))
    edges = np.asarray(edges, dtype=np.float64)
    if us.size == 0:
        return np.zeros(edges.size - 1)
    return np.diff(Coverage(us, ue).at(edges))


@dataclass(frozen=True)
class Strip:
    """Per-SIMD fractions over the bins of a view.

    ``mfma[i, j]``: fraction of bin j in which SIMD ``simds[i]``'s MFMA unit is busy.
    ``overlap[i, j]``: fraction of bin j in which one wave's MFMA on that SIMD runs while another
    wave of the same SIMD executes VALU/TRANS work (the ping-pong overlap, per bin).
    """

    simds: tuple[tuple[int, int], ...]
    edges: np.ndarray
    mfma: np.ndarray
    overlap: np.ndarray


def strip(trace: Trace, view: View) -> Strip:
    """MFMA-busy and ping-pong-overlap fractions per SIMD and bin of ``view``."""
    edges = np.linspace(view.x0, view.x1, view.bins + 1)
    width = np.diff(edges)
    a = _arrays(trace)
    rows = np.flatnonzero((a.end > view.x0) & (a.start < view.x1))  # only work inside the view counts
    track, unit, start, end = a.track[rows], a.unit[rows], a.start[rows], a.end[rows]
    code = {name: i for i, name in enumerate(a.units)}
    is_mfma = unit == code.get("MFMA", -1)
    is_soft = np.isin(unit, [code[u] for u in SOFTMAX_UNITS if u in code])
    simds = sorted({(t.cu, t.simd) for t in a.tracks})
    mfma_rows, overlap_rows = [], []
    for c, s in simds:
        waves = [i for i, t in enumerate(a.tracks) if (t.cu, t.simd) == (c, s)]
        here = np.isin(track, waves)
        m = here & is_mfma
        mfma_rows.append(coverage(start[m], end[m], edges) / width)
        total = np.zeros(view.bins)
        for w in waves:
            mine = m & (track == w)
            if not mine.any():
                continue
            other = here & is_soft & (track != w)
            # |M_w ∩ V_other| = |M_w| + |V_other| - |M_w ∪ V_other|
            both = mine | other
            total += (coverage(start[mine], end[mine], edges) + coverage(start[other], end[other], edges)
                      - coverage(start[both], end[both], edges))
        overlap_rows.append(total / width)
    shape = (len(simds), view.bins)
    return Strip(tuple(simds), edges, np.array(mfma_rows).reshape(shape), np.array(overlap_rows).reshape(shape))
