"""Plotly figures of the schedule explorer, built from :mod:`zyfa.webui.timeline` data.

One figure holds every panel (trace) stacked with a shared, linked x-axis in cycles: per panel a
timeline (a row per wave, bars coloured by unit) and a strip (per SIMD: MFMA busy, and the
ping-pong overlap shading). Every bar carries ``customdata = encode(panel, row)`` (one integer:
:func:`encode` / :func:`decode`) so a click names the
record (``row = -1`` for a merged segment).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from zyfa.analyzer.listing import PHASES
from zyfa.trace.schema import Trace
from zyfa.webui.timeline import (LANE_OFFSET, STALL_COLOURS, STALL_WIDTH, UNIT_COLOURS, UNIT_STYLE, View,
                                 epilogue_starts, extent, lane_offset, markers, segments, stalls, strip, tracks)

TRACK_PX = 26  # height of one timeline row
STRIP_PX = 16  # height of one strip row
HIGHLIGHT = "#000000"
OVERLAP_COLOUR = "#332288"  # strip rows: ping-pong overlap (Tol indigo: no unit on the timeline uses it)


MAX_PANELS = 4  # customdata packs the panel into the low 2 bits


def encode(panel: int, rows: np.ndarray) -> list[int]:
    """One integer per bar naming ``(panel, row)``: ``row * MAX_PANELS + panel`` (``row = -1`` for a
    merged segment). A 1-D integer array is validated and serialised by plotly without a Python
    loop per bar (a list of ``[panel, row]`` pairs cost most of a redraw), and a click's point
    carries it back as a plain number. Sent as a flat list: plotly would ship an array as a typed
    array ({"dtype", "bdata"}) that click events do not decode."""
    if not 0 <= panel < MAX_PANELS:
        raise ValueError(f"panel must be in 0..{MAX_PANELS - 1}, got {panel}")
    return (np.asarray(rows, dtype=np.int64) * MAX_PANELS + panel).tolist()


def decode(value: int) -> tuple[int, int]:
    """``(panel, row)`` from :func:`encode`'s number."""
    value = int(value)
    return value % MAX_PANELS, value // MAX_PANELS


@dataclass(frozen=True)
class Panel:
    """A trace shown on the timeline under a title (``"A: zyfa-fp8 ..."``)."""

    title: str
    trace: Trace

    def __post_init__(self):
        if not isinstance(self.trace, Trace):
            raise TypeError(f"Panel.trace must be a Trace, got {type(self.trace).__name__}")


def panel_title(slot: str, trace: Trace) -> str:
    """``"A: zyfa-fp8 · b1 h32 s4096 d128 causal fp8 · simulated (cycle model) · 1234 records"``."""
    shape = trace.meta.attn_shape
    parts = [f"{slot}: {trace.meta.kernel}"]
    if shape is not None:
        parts.append(str(shape))
    parts += [trace.meta.label, f"{len(trace)} records"]
    return " · ".join(parts)


def _hover(trace: Trace, seg: pd.DataFrame) -> list[str]:
    """Hover text per bar: the instruction, its cycles and stall, or a merged segment's totals."""
    single = seg["row"].to_numpy() >= 0
    rows = seg["row"].to_numpy()[single]
    picked = trace.table.select(["opcode", "operands", "issue", "end", "stall", "stall_reason", "region"]).take(rows)
    records = iter(picked.to_pylist())
    out = []
    for one, s, e, count, busy in zip(single, seg["start"], seg["end"], seg["count"], seg["busy"]):
        if not one:
            out.append(f"{count} instructions merged at this zoom<br>cycles {s}-{e}: busy {busy} of {e - s}"
                       "<br>zoom in for single instructions")
            continue
        r = next(records)
        text = f"<b>{r['opcode']}</b> {r['operands'] or ''}".rstrip()
        text += f"<br>issue {r['issue']} · start {s} · end {r['end']} ({r['end'] - s} cycles)"
        text += f"<br>stall {r['stall']}" + (f" ({r['stall_reason']})" if r["stall_reason"] else "")
        if r["region"]:
            text += f"<br>region {r['region']}"
        out.append(text)
    return out


def _axes(row: int) -> dict:
    """The axis references of subplot row ``row`` (1-based: ``x``, ``y`` for row 1, ``x3`` ...)."""
    suffix = "" if row == 1 else str(row)
    return {"xaxis": "x" + suffix, "yaxis": "y" + suffix}


def _axis_key(axis: str, row: int) -> str:
    return f"{axis}axis" + ("" if row == 1 else str(row))


@functools.lru_cache(maxsize=16)
def _subplot_layout(heights: tuple[int, ...], titles: tuple[str, ...]) -> str:
    """plotly's stacked, x-linked subplot layout for these row heights and titles, as JSON (cached:
    :func:`make_subplots` costs more than the rest of a redraw; a copy is taken per figure)."""
    n_panels = len(heights) // 2
    fig = make_subplots(rows=len(heights), cols=1, shared_xaxes=True, row_heights=list(heights),
                        vertical_spacing=40 / sum(heights) / n_panels, subplot_titles=list(titles))
    return json.dumps(fig.layout.to_plotly_json())


def _compact(values) -> np.ndarray:
    """Numbers as the smallest exact typed array plotly ships (int32 for cycles below 2^31)."""
    values = np.asarray(values)
    if values.dtype.kind in "iu" and values.size and -2 ** 31 <= values.min() and values.max() < 2 ** 31:
        return values.astype(np.int32)
    return values


def schedule_figure(panels: Sequence[Panel], view: View, selected: Optional[tuple[int, int]] = None,
                    highlight: Optional[tuple[int, np.ndarray]] = None,
                    shade: Optional[tuple[str, Sequence[pd.DataFrame]]] = None, pad: float = 0.0) -> go.Figure:
    """Timelines and strips of ``panels`` shown over ``view``; ``selected = (panel, row)`` is outlined;
    ``highlight = (panel, rows)`` (every execution of one instruction) is drawn as outlined bars;
    ``shade = (label, ranges per panel)`` (the cycles behind a "why" term, columns cu, simd, wave,
    start, end) is drawn see-through over the rows.

    The data covers ``view.padded(extent, pad)`` (``pad`` view widths either side, at the view's
    resolution), so the browser can pan and zoom out over it without new data. ``layout.meta``
    says what the data is: ``decimated``, the ``view`` it was made for, the covered range ``x0``/``x1``, the merge
    ``resolution`` in cycles (0 when every instruction is drawn), the view's ``bins`` and the
    panels' ``extent``; the page asks for a new figure only when a view leaves that range or zooms
    in past the resolution.

    Traces and layout are built as plain dicts and wrapped without plotly's per-property validation
    (which cost most of a redraw); the figure is the same."""
    if not panels:
        fig = go.Figure()
        fig.update_layout(height=200, annotations=[dict(text="no trace loaded", showarrow=False,
                                                        xref="paper", yref="paper", x=0.5, y=0.5)])
        return fig
    heights, titles = [], []
    for p in panels:
        n_tracks = max(len(tracks(p.trace)), 1)
        n_simds = max(len({(t.cu, t.simd) for t in tracks(p.trace)}), 1)
        heights += [n_tracks * TRACK_PX, 2 * n_simds * STRIP_PX]
        titles += [p.title, ""]
    layout = json.loads(_subplot_layout(tuple(heights), tuple(titles)))
    spans = [extent(p.trace) for p in panels]
    whole = (min(lo for lo, _ in spans), max(hi for _, hi in spans))
    covered = view.padded(whole, pad)
    data: list[dict] = []
    decimated_any = False
    in_legend: set[str] = set()
    for i, p in enumerate(panels):
        row_t, row_s = 2 * i + 1, 2 * i + 2
        decimated_any |= _add_timeline(data, layout, p, i, row_t, covered, in_legend)
        _add_strip(data, layout, p, row_s, covered)
    if shade is not None:
        for i, (p, ranges) in enumerate(zip(panels, shade[1])):
            _add_shade(data, p, 2 * i + 1, covered, shade[0], ranges)
    if highlight is not None:
        _highlight(data, panels, covered, *highlight)
    for key in [k for k in layout if k.startswith("xaxis")]:
        layout[key].update(range=[view.x0, view.x1], showspikes=True, spikemode="across", spikethickness=1)
    layout[_axis_key("x", len(heights))]["title"] = {"text": "cycle"}
    layout.update(
        barmode="overlay", height=sum(heights) + 60 * len(panels) + 120, margin=dict(l=110, r=20, t=40, b=90),
        hovermode="closest", legend=dict(orientation="h", y=0, yanchor="bottom", x=0, xanchor="left",
                                         traceorder="normal", yref="container"),
        plot_bgcolor="white", clickmode="event", shapes=outline_shapes(panels, selected),
        meta={"decimated": decimated_any, "view": [view.x0, view.x1], "x0": covered.x0, "x1": covered.x1,
              "bins": view.bins, "resolution": covered.resolution if decimated_any else 0.0,
              "extent": [float(v) for v in whole]},
    )
    return go.Figure({"data": data, "layout": layout}, _validate=False)


def _add_timeline(data: list, layout: dict, panel: Panel, index: int, row: int, view: View,
                  in_legend: set[str]) -> bool:
    """Bars of one panel; each unit enters the legend once (``in_legend`` collects them)."""
    trk = tracks(panel.trace)
    seg, decimated = segments(panel.trace, view)
    hover = np.array(_hover(panel.trace, seg), dtype=object)
    for rank, (unit, (colour, height)) in enumerate(UNIT_STYLE.items()):
        mask = (seg["unit"] == unit).to_numpy()
        if not mask.any():
            continue
        part = seg[mask]
        start = part["start"].to_numpy()
        data.append(dict(
            type="bar", orientation="h", base=_compact(start), x=_compact(part["end"].to_numpy() - start),
            y=(part["track"].to_numpy() + lane_offset(unit)).astype(np.float32),
            width=height, name=unit, legendgroup=unit, legendrank=len(UNIT_STYLE) - rank,
            showlegend=unit not in in_legend, marker=dict(color=colour, line=dict(width=0)),
            customdata=encode(index, part["row"].to_numpy()),
            hovertext=hover[mask].tolist(), hovertemplate="%{hovertext}<extra>" + unit + "</extra>", **_axes(row)))
        in_legend.add(unit)
    _add_stalls(data, panel, index, row, view, in_legend)
    _add_markers(data, panel, row, view, in_legend)
    layout[_axis_key("y", row)].update(tickmode="array", tickvals=list(range(len(trk))),
                                       ticktext=[t.label for t in trk], range=[len(trk) - 0.5, -0.5],
                                       showgrid=False, fixedrange=True)  # rows are waves: zoom and pan in x only
    return decimated


def _add_stalls(data: list, panel: Panel, index: int, row: int, view: View, in_legend: set[str]) -> None:
    """The cycles each wave waited before issuing, on the top lane of its row, coloured by reason."""
    st = stalls(panel.trace, view)
    for reason, part in st.groupby("reason", sort=True):
        colour = STALL_COLOURS.get(reason, STALL_COLOURS["other"])
        name = f"stall: {reason}"
        start = part["start"].to_numpy()
        data.append(dict(
            type="bar", orientation="h", base=_compact(start), x=_compact(part["end"].to_numpy() - start),
            y=(part["track"].to_numpy() + LANE_OFFSET["stall"]).astype(np.float32),
            width=STALL_WIDTH, name=name, legendgroup=name, showlegend=name not in in_legend,
            marker=dict(color=colour, line=dict(width=0)), meta="stall",
            customdata=encode(index, part["row"].to_numpy()),
            hovertemplate="waited %{x} cycles before issue (" + reason + ")<extra>stall</extra>", **_axes(row)))
        in_legend.add(name)


SHADE = "rgba(230,97,0,0.45)"  # the cycles behind a clicked "why" term (Tol orange, see-through)
SHADE_BUDGET = 5000  # most shaded ranges drawn per panel (the first ones in the view)


def _add_shade(data: list, panel: Panel, row: int, view: View, label: str, ranges: pd.DataFrame) -> None:
    """Ranges ``(cu, simd, wave, start, end)`` over the whole height of their wave's row."""
    if ranges is None or ranges.empty:
        return
    keep = ranges[(ranges["end"] > view.x0) & (ranges["start"] < view.x1)]
    total = len(keep)
    keep = keep.head(SHADE_BUDGET)
    y_of = {(t.cu, t.simd, t.wave): i for i, t in enumerate(tracks(panel.trace))}
    y = [y_of.get(k, -1) for k in zip(keep["cu"].tolist(), keep["simd"].tolist(), keep["wave"].tolist())]
    name = f"why: {label}" + (f" (first {SHADE_BUDGET} of {total} in view)" if total > SHADE_BUDGET else "")
    start = keep["start"].to_numpy()
    data.append(dict(
        type="bar", orientation="h", base=_compact(start), x=_compact(keep["end"].to_numpy() - start), y=y,
        width=0.96, name=name, legendgroup="why", showlegend=True, meta="shade",
        marker=dict(color=SHADE, line=dict(width=0)),
        hovertemplate="%{x} cycles: " + label + "<extra>why</extra>", **_axes(row)))


def _add_markers(data: list, panel: Panel, row: int, view: View, in_legend: set[str]) -> None:
    """Extrapolated loop periods (shaded, labelled; a dotted line where the trace states the point
    they were cut out at) and each wave's epilogue start (a tick)."""
    n = len(tracks(panel.trace))
    for m in markers(panel.trace):
        if m.kind == "skip":
            if view.x0 <= m.x0 < view.x1:
                data.append(dict(
                    type="scatter", x=[m.x0, m.x0], y=[-0.5, n - 0.5], mode="lines",
                    line=dict(color="#AA0000", dash="dot", width=2),
                    name="extrapolated (no records)", legendgroup="extrapolated", meta="marker",
                    showlegend="extrapolated" not in in_legend, hoverinfo="text", text=m.label, **_axes(row)))
                in_legend.add("extrapolated")
            continue
        if m.x1 <= view.x0 or m.x0 >= view.x1 or m.x1 <= m.x0:
            continue
        data.append(dict(
            type="scatter", x=[m.x0, m.x1, m.x1, m.x0, m.x0], y=[-0.5, -0.5, n - 0.5, n - 0.5, -0.5], fill="toself",
            mode="lines", line=dict(color="#AA0000", dash="dot", width=1), fillcolor="rgba(170,0,0,0.08)",
            name="extrapolated (no records)", legendgroup="extrapolated", meta="marker",
            showlegend="extrapolated" not in in_legend, hoverinfo="text", text=m.label, hoveron="fills+points",
            **_axes(row)))
        in_legend.add("extrapolated")
    starts = [(t, x) for t, x in epilogue_starts(panel.trace) if view.x0 <= x < view.x1]
    if starts:
        data.append(dict(
            type="scatter", x=[x for _, x in starts], y=[t for t, _ in starts], mode="markers+text",
            text=["epilogue"] * len(starts), textposition="middle right", textfont=dict(size=9, color="#444"),
            marker=dict(symbol="line-ns-open", size=22, color="#444", line=dict(width=2)), name="epilogue starts",
            legendgroup="epilogue", showlegend="epilogue" not in in_legend, meta="marker",
            hovertemplate="epilogue starts at cycle %{x}<extra></extra>", **_axes(row)))
        in_legend.add("epilogue")


def _add_strip(data: list, layout: dict, panel: Panel, row: int, view: View) -> None:
    """Per SIMD two heatmap rows over the view's bins: MFMA busy and the ping-pong overlap, as whole
    percentages (uint8: the strip is a few pixels high, a finer value is not visible)."""
    st = strip(panel.trace, view)
    if not st.simds:
        return
    labels = []
    for cu, simd in st.simds:
        labels += [f"CU{cu} S{simd} MFMA busy", f"CU{cu} S{simd} overlap"]
    kinds = ((st.mfma, UNIT_COLOURS["MFMA"], "MFMA busy"),
             (st.overlap, OVERLAP_COLOUR, "MFMA overlapped by another wave's VALU"))
    step = float(st.edges[1] - st.edges[0])
    for i in range(len(st.simds)):
        for offset, (values, colour, what) in enumerate(kinds):
            data.append(dict(
                type="heatmap", x0=float(st.edges[0]) + step / 2, dx=step, y=[2 * i + offset],
                z=np.rint(100 * np.clip(values[i:i + 1], 0, 1)).astype(np.uint8), zmin=0, zmax=100, showscale=False,
                colorscale=[[0, "#FFFFFF"], [1, colour]], name=what,
                hovertemplate="%{z}% of cycles near %{x:.0f}<extra>" + what + "</extra>", **_axes(row)))
    layout[_axis_key("y", row)].update(tickmode="array", tickvals=list(range(len(labels))), ticktext=labels,
                                       range=[len(labels) - 0.5, -0.5], showgrid=False, tickfont=dict(size=10),
                                       fixedrange=True)


def outline_shapes(panels: Sequence[Panel], selected: Optional[tuple[int, int]]) -> list[dict]:
    """The layout shapes outlining record ``selected = (panel, row)`` (none if out of range): what
    :func:`schedule_figure` draws, also sent alone as a patch when only the selection changes."""
    if selected is None:
        return []
    index, row = selected
    if not (0 <= index < len(panels)) or not (0 <= row < len(panels[index].trace)):
        return []
    trace = panels[index].trace
    trk = tracks(trace)
    key = (int(trace.column("cu")[row]), int(trace.column("simd")[row]), int(trace.column("wave")[row]))
    y = next(i for i, t in enumerate(trk) if (t.cu, t.simd, t.wave) == key)
    start = int(trace.column("start")[row])
    end = max(int(trace.column("end")[row]), start + 1)
    axis = 2 * index + 1  # the panel's timeline subplot (row r of the figure has axes x<r>, y<r>)
    suffix = "" if axis == 1 else str(axis)
    return [dict(type="rect", x0=start, x1=end, y0=y - 0.5, y1=y + 0.5, xref=f"x{suffix}", yref=f"y{suffix}",
                 line=dict(color=HIGHLIGHT, width=2), fillcolor="rgba(0,0,0,0)")]


def _highlight(data: list, panels: Sequence[Panel], view: View, index: int, rows: np.ndarray) -> None:
    """Outlined bars over the records ``rows`` of panel ``index`` that lie in ``view``."""
    if not 0 <= index < len(panels):
        return
    trace = panels[index].trace
    rows = np.asarray(rows, dtype=np.int64)
    start, end = trace.column("start")[rows], np.maximum(trace.column("end")[rows], trace.column("start")[rows] + 1)
    keep = (end > view.x0) & (start < view.x1)
    rows, start, end = rows[keep], start[keep], end[keep]
    trk = tracks(trace)
    y_of = {(t.cu, t.simd, t.wave): i for i, t in enumerate(trk)}
    y = [y_of[k] for k in zip(trace.column("cu")[rows].tolist(), trace.column("simd")[rows].tolist(),
                              trace.column("wave")[rows].tolist())]
    data.append(dict(
        type="bar", orientation="h", base=_compact(start), x=_compact(end - start), y=y, width=1.0,
        name="highlighted instruction",
        marker=dict(color="rgba(255,0,0,0.25)", line=dict(color="#D00000", width=2)), showlegend=True,
        customdata=encode(index, rows), hovertemplate="highlighted instruction<extra></extra>",
        **_axes(2 * index + 1)))


PHASE_COLOURS = {"mfma_phase": "#0072B2", "softmax_phase": "#E69F00", "handover_gap": "#CC3311"}


def phase_figure(tables: Sequence[tuple[str, pd.DataFrame]]) -> go.Figure:
    """Per loop iteration: MFMA phase, softmax phase and hand-over gap (cycles), one line each per
    trace (the first solid, the next dashed). ``tables``: ``(trace label,
    zyfa.analyzer.listing.iteration_phases frame)``."""
    fig = go.Figure()
    for k, (label, frame) in enumerate(tables):
        for phase, meaning in PHASES.items():
            fig.add_trace(go.Scatter(
                x=frame["iteration"], y=frame[phase], mode="lines+markers", name=f"{label}: {phase.replace('_', ' ')}",
                line=dict(color=PHASE_COLOURS[phase], dash="solid" if k == 0 else "dash"),
                marker=dict(symbol="circle" if k == 0 else "square"), meta=phase,
                hovertemplate="iteration %{x}: %{y:,.0f} cycles<br>" + meaning + "<extra>" + label + "</extra>"))
    fig.update_layout(height=320, margin=dict(l=60, r=20, t=30, b=60), plot_bgcolor="white",
                      xaxis_title="main-loop iteration (key block)", yaxis_title="cycles",
                      legend=dict(orientation="h", y=1.02, yanchor="bottom"))
    if not tables or all(frame.empty for _, frame in tables):
        fig.add_annotation(text="no loop iterations with MFMA in these traces", showarrow=False,
                           xref="paper", yref="paper", x=0.5, y=0.5)
    return fig


def valu_figure(tables: Sequence[tuple[str, pd.DataFrame]]) -> go.Figure:
    """Grouped bars: VALU/TRANS cycles per key block by opcode class, one colour per trace.

    ``tables``: ``(trace label, zyfa.analyzer.valu_by_class frame)``; bars are labelled
    ``UNIT op_class`` and sorted by the first trace's cycles.
    """
    return _grouped_bars(tables, "unit", "op_class", "cycles_per_block", "ops_per_block",
                         "%{x}: %{y:.1f} cycles, %{customdata:.1f} ops per block",
                         height=320, yaxis_title="cycles per key block (per wave)")


def stall_figure(tables: Sequence[tuple[str, pd.DataFrame]]) -> go.Figure:
    """Grouped bars: stall cycles by reason, one colour per trace.

    ``tables``: ``(trace label, zyfa.webui.metrics.stall_by_reason frame)``; bars are labelled by
    the reason only (a ``barrier`` stall is filed under the instruction *after* ``s_barrier``, so
    its unit is not the barrier's); the hover lists the units of the instructions that waited.
    """
    return _grouped_bars(tables, None, "reason", "stall_cycles", ["share", "waiting"],
                         "%{x}: %{y} stall cycles (%{customdata[0]:.0%} of this trace's)"
                         "<br>instructions that waited: %{customdata[1]}",
                         height=300, yaxis_title="stall cycles (metric window)")


def _grouped_bars(tables: Sequence[tuple[str, pd.DataFrame]], prefix: Optional[str], kind: str, y: str,
                  custom, hover: str, *, height: int, yaxis_title: str) -> go.Figure:
    """One bar trace per ``(label, frame)``, bars named ``"<prefix column> <kind column>"`` (or just
    the kind column), in first-seen order."""
    fig = go.Figure()
    order: list[str] = []
    for label, frame in tables:
        names = (frame[kind] if prefix is None else frame[prefix] + " " + frame[kind]).tolist()
        order += [n for n in names if n not in order]
        fig.add_trace(go.Bar(x=names, y=frame[y], name=label, customdata=frame[custom].to_numpy().tolist()
                             if isinstance(custom, list) else frame[custom],
                             hovertemplate=hover + "<extra>" + label + "</extra>"))
    fig.update_layout(barmode="group", height=height, margin=dict(l=60, r=20, t=30, b=80),
                      yaxis_title=yaxis_title, plot_bgcolor="white",
                      xaxis=dict(categoryorder="array", categoryarray=order),
                      legend=dict(orientation="h", y=1.02, yanchor="bottom"))
    if not tables:
        fig.add_annotation(text="no trace", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    return fig
