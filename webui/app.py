"""The Dash app of the schedule explorer: layout and callbacks only.

Callbacks look traces up in the :class:`~zyfa.webui.store.TraceStore` (loaded once, cached) and
call :mod:`zyfa.webui.timeline`, :mod:`zyfa.webui.figures` and :mod:`zyfa.webui.metrics` (which
calls :mod:`zyfa.analyzer`); they compute nothing themselves.
"""

from __future__ import annotations

import argparse
import io
import ipaddress
import json
import re
import socket
import sys
import tempfile
import threading
import urllib.parse
from pathlib import Path
from dataclasses import dataclass
from typing import Optional, Sequence

import dash
import dash_ag_grid as dag
import numpy as np
import pyarrow as pa
from dash import ALL, ClientsideFunction, Input, Output, State, ctx, dcc, html
from dash.exceptions import PreventUpdate
from flask import abort, request, send_file
from werkzeug.exceptions import BadRequest
from werkzeug.serving import WSGIRequestHandler, make_server

from zyfa.analyzer import METRICS
from zyfa.analyzer.listing import BUDGET_TERMS, occurrences
from zyfa.analyzer.perfetto import trace_events
from zyfa.analyzer.report import render
from zyfa.kernels import baseline
from zyfa.trace.schema import COLUMNS, Trace, TraceError
from zyfa.webui import figures, grid, metrics, timeline
from zyfa.webui.store import TraceStore, UnsafePathError, UploadError
from zyfa.webui.whatif import Simulator, WhatIf, default_simulator, generator_parameters

SLOTS = ("a", "b")
# plotly modebar: no logo, and no button that uploads a chart to Plotly's cloud (Chart Studio)
GRAPH_CONFIG = {"displaylogo": False, "showSendToCloud": False, "showEditInChartStudio": False,
                "modeBarButtonsToRemove": ["sendDataToCloud", "editInChartStudio"]}
# the timeline (drawn by assets/timeline.js): wheel zoom; a double click shows the whole trace
# (timeline.js handles it: plotly's own would autorange to the data the page has first)
TIMELINE_CONFIG = {**GRAPH_CONFIG, "scrollZoom": True, "doubleClick": False, "responsive": True}
# a timeline figure carries data for half a view either side of the view (figures.schedule_figure's
# pad): a pan by up to half a view, or a zoom out to twice the width, needs no new data
TIMELINE_PAD = 0.5
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
_SELECTED_RULE = "params.context && params.data && params.data.id === params.context.selected"
_NUMERIC = {name for name, col in COLUMNS.items() if pa.types.is_integer(col.type)}  # grid number filters


# -- element ids -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ids:
    headline: str = "headline"
    skipped: str = "skipped"
    trace_a: str = "trace-a"
    trace_b: str = "trace-b"
    open_path: str = "open-path"
    open_button: str = "open-button"
    upload: str = "upload"
    source_message: str = "source-message"
    window: str = "metric-window"
    iteration: str = "zoom-iteration"
    reset: str = "zoom-reset"
    view: str = "view"
    extent: str = "extent"
    metric_range: str = "metric-range"
    view_info: str = "view-info"
    timeline: str = "timeline"
    timeline_plot: str = "timeline-plot"  # the plotly graph div inside the timeline section
    timeline_figure: str = "timeline-figure"  # the server's figure; assets/timeline.js draws it
    timeline_shapes: str = "timeline-shapes"  # the selection outline, drawn over the figure
    timeline_click: str = "timeline-click"  # the clicked bar's customdata (set by timeline.js)
    timeline_drawn: str = "timeline-drawn"  # when timeline.js last drew (output of its callbacks)
    lod: str = "lod"  # the view the figure's data was asked for (set when the level of detail must change)
    metrics: str = "metrics"
    details: str = "details"
    selected: str = "selected"
    grid_slot: str = "grid-slot"
    grid: str = "grid"
    grid_info: str = "grid-info"
    grid_source: str = "grid-source"
    grid_purged: str = "grid-purged"
    definitions: str = "metric-definitions"
    why: str = "why"
    phases: str = "phases"
    shade: str = "shade"
    shade_info: str = "shade-info"
    downloads: str = "downloads"
    caveats: str = "caveats"
    keys: str = "keys"
    listing_a: str = "listing-a"
    listing_b: str = "listing-b"
    listing_info: str = "listing-info"
    regions: str = "regions"
    highlight: str = "highlight"
    highlight_info: str = "highlight-info"
    valu: str = "valu"
    stalls: str = "stalls"
    w_kernel: str = "whatif-kernel"
    w_seqlen: str = "whatif-seqlen"
    w_heads: str = "whatif-heads"
    w_run: str = "whatif-run"
    w_status: str = "whatif-status"
    w_message: str = "whatif-message"


ID = Ids()
PARAM_TYPE = "whatif-param"  # pattern-matching id type of the generator-parameter controls
WHY_TERM = "why-term"  # pattern-matching id type of the "why" table's clickable terms


# instruction-view columns (per-reason stall columns are added per trace)
LISTING_COLUMNS = [
    {"field": "pc", "headerName": "pc", "width": 90, "filter": "agNumberColumnFilter",
     "valueFormatter": {"function": "params.value >= 0 ? '0x' + params.value.toString(16) : '—'"}},
    {"field": "region", "filter": "agTextColumnFilter"},
    {"field": "part", "headerName": "loop part", "filter": "agTextColumnFilter", "width": 110},
    {"field": "opcode", "filter": "agTextColumnFilter"},
    {"field": "operands", "filter": "agTextColumnFilter"}, {"field": "unit", "filter": "agTextColumnFilter"},
    {"field": "executions", "filter": "agNumberColumnFilter"},
    {"field": "busy", "headerName": "busy cycles", "filter": "agNumberColumnFilter"},
    {"field": "latency", "headerName": "latency (mean)", "filter": "agNumberColumnFilter",
     "valueFormatter": {"function": "d3.format('.1f')(params.value)"}},
    {"field": "stall", "headerName": "stall cycles", "filter": "agNumberColumnFilter"},
    {"field": "share", "headerName": "share", "filter": "agNumberColumnFilter",
     "valueFormatter": {"function": "d3.format('.2%')(params.value)"}},
    {"field": "source", "headerName": "emitter (generator line)", "filter": "agTextColumnFilter", "width": 260},
]




# -- layout ------------------------------------------------------------------------------------
def _metric_range(choice: str, view=None) -> dict:
    """What the metric views depend on: the window choice, and the view range only for ``"view"``
    (so a zoom or pan recomputes nothing when the metric window is ``steady`` or ``whole``)."""
    return {"choice": choice, "view": view if choice == "view" else None}


def _options(store: TraceStore) -> list[dict]:
    return [{"label": e.label, "value": e.id} for e in store.entries()]


def default_pair(store: TraceStore, preferred: Sequence[tuple[str, str]] = ()) -> tuple[Optional[str], Optional[str]]:
    """The traces of the first ``preferred`` ``(ours, baseline)`` kernel pair that are both in the
    store (``zyfa.kernels.baseline.default_pairs``, as ``zyfa-trace kernel`` compares them), else a
    ZYFA trace and an AITER one when both exist, else the first two traces (or None)."""
    entries = store.entries()
    kernels = {}
    for e in entries:
        try:
            kernels[e.id] = store.get(e.id).meta.kernel.lower()
        except (TraceError, UnsafePathError, KeyError):
            continue
    ids = list(kernels)
    for ours, theirs in preferred:
        a = next((i for i in ids if kernels[i] == ours.lower()), None)
        b = next((i for i in ids if kernels[i] == theirs.lower()), None)
        if a and b:
            return a, b
    zyfa = next((i for i in ids if kernels[i].startswith("zyfa")), None)
    aiter = next((i for i in ids if "aiter" in kernels[i]), None)
    if zyfa and aiter:
        return zyfa, aiter
    rest = ids + [None, None]
    return rest[0], rest[1]


def _section(title: str, *children, **style) -> html.Div:
    return html.Div([html.H3(title, style={"margin": "4px 0"}), *children],
                    style={"border": "1px solid #ddd", "borderRadius": "4px", "padding": "8px", "margin": "6px 0",
                           **style})


def _skipped_note(store: TraceStore) -> html.Details | str:
    skipped = store.skipped
    if not skipped:
        return ""
    return html.Details([
        html.Summary(f"{len(skipped)} trace file(s) skipped (unreadable)"),
        html.Ul([html.Li(f"{name}: {why}") for name, why in sorted(skipped.items())]),
    ], id=ID.skipped, style={"color": "#a00", "marginTop": "4px"})


def _definitions() -> html.Details:
    """Every metric's definition as text (not only as a tooltip)."""
    items = []
    for name, m in METRICS.items():
        items += [html.Dt(html.Code(name), style={"fontWeight": "bold", "marginTop": "4px"}),
                  html.Dd(dcc.Markdown(metrics.definition(name)), style={"margin": "0 0 0 16px"})]
    return html.Details([html.Summary("metric definitions"), html.Dl(items, id=ID.definitions)])


def build_layout(store: TraceStore, kernels: Sequence[str], params: dict[str, tuple],
                 simulator_ready: bool, pairs: Sequence[tuple[str, str]] = ()) -> html.Div:
    a, b = default_pair(store, pairs)
    opts = _options(store)
    label = {"display": "inline-block", "marginRight": "6px", "fontWeight": "bold"}
    cell = {"display": "inline-block", "marginRight": "16px", "verticalAlign": "middle"}
    headline = html.Div(id=ID.headline, role="status", style={"fontSize": "16px", "margin": "6px 0"})
    sources = _section(
        "Traces",
        html.Div([html.Span("A", style=label),
                  dcc.Dropdown(id=ID.trace_a, options=opts, value=a, placeholder="trace A", style={"width": "420px"})],
                 style=cell),
        html.Div([html.Span("B", style=label),
                  dcc.Dropdown(id=ID.trace_b, options=opts, value=b, placeholder="trace B (optional)",
                               style={"width": "420px"})], style=cell),
        html.Div([
            dcc.Input(id=ID.open_path, type="text", placeholder="path under a trace directory (.parquet)",
                      style={"width": "340px"}, debounce=True),
            html.Button("Open", id=ID.open_button, n_clicks=0, style={"marginLeft": "4px"}),
            dcc.Upload(id=ID.upload, multiple=True, max_size=store.max_upload_bytes,
                       children=html.Span("or drop / choose a .parquet (+ .json) trace"),
                       style={"display": "inline-block", "border": "1px dashed #888", "padding": "3px 8px",
                              "marginLeft": "12px", "cursor": "pointer"}),
        ], style={"marginTop": "6px"}),
        html.Div(id=ID.source_message, role="status", style={"marginTop": "4px", "color": "#a00"}),
        _skipped_note(store),
    )
    whatif = _section(
        "What-if (re-simulate on the CDNA4 cycle model)",
        html.Div([
            html.Div([html.Span("kernel", style=label),
                      dcc.Dropdown(id=ID.w_kernel, options=list(kernels),
                                   value="zyfa-fp8" if "zyfa-fp8" in kernels else (list(kernels) or [None])[0],
                                   clearable=False, style={"width": "200px"})], style=cell),
            html.Div([html.Span("seqlen", style=label),
                      dcc.Input(id=ID.w_seqlen, type="number", min=1, step=1, value=1024,
                                style={"width": "90px"})], style=cell),
            html.Div([html.Span("heads", style=label),
                      dcc.Input(id=ID.w_heads, type="number", min=1, step=1, value=1, style={"width": "60px"})],
                     style=cell),
            *[html.Div([html.Span(name, style=label),
                        dcc.RadioItems(id={"type": PARAM_TYPE, "name": name}, options=["default", *choices],
                                       value="default", inline=True)], style=cell)
              for name, choices in params.items()],
            html.Button("Re-simulate", id=ID.w_run, n_clicks=0, disabled=not simulator_ready),
            html.Span(id=ID.w_status, style={"marginLeft": "8px", "fontStyle": "italic"}),
        ]),
        dcc.Loading(html.Div(id=ID.w_message, role="status",
                             children="" if simulator_ready else
                             "The cycle model is not available in this build: what-if is disabled."),
                    type="circle"),
        html.Div("The new trace replaces B; A stays as the baseline.", style={"color": "#666", "fontSize": "12px"}),
    )
    view = _section(
        "Timeline",
        html.Div([
            html.Div([html.Span("zoom to iteration", style=label),
                      dcc.Dropdown(id=ID.iteration, options=[], placeholder="iteration",
                                   style={"width": "140px"})], style=cell),
            html.Button("Whole trace", id=ID.reset, n_clicks=0, style=cell),
            html.Span(id=ID.view_info, style={"color": "#555"}),
            html.Div("mouse wheel: zoom · drag: zoom to a range · W/S: zoom in/out · A/D: pan left/right · "
                     "double click: whole trace; stalls (top lane, by reason) and memory requests in flight "
                     "(bottom lane) appear once zoomed to single instructions",
                     style={"color": "#666", "fontSize": "12px"}),
        ]),
        # drawn by assets/timeline.js from the figure store: a zoom or pan is drawn in the browser
        html.Div(id=ID.timeline, children=html.Div(id=ID.timeline_plot)),
        dcc.Store(id=ID.timeline_figure), dcc.Store(id=ID.timeline_shapes, data=[]), dcc.Store(id=ID.timeline_click),
        dcc.Store(id=ID.timeline_drawn), dcc.Store(id=ID.lod),
    )
    tables = html.Div([
        _section("Metrics (zyfa.analyzer)",
                 dcc.RadioItems(id=ID.window, options=list(metrics.WINDOWS), value="steady", inline=True),
                 html.Div(id=ID.metrics), _definitions(), style={"flex": "1"}),
        _section("Instruction details", html.Div(id=ID.details, children="click an instruction on the timeline "
                                                                          "or in the table"),
                 style={"flex": "1"}),
    ], style={"display": "flex", "gap": "12px"})
    columns = [{"field": grid.ROW, "headerName": "#", "width": 80, "filter": "agNumberColumnFilter"}] + [
        {"field": c, "filter": "agNumberColumnFilter" if c in _NUMERIC else "agTextColumnFilter"}
        for c in COLUMNS if c not in ("cu", "pc")
    ]
    text_filter = {"filterOptions": ["contains", "notContains", "equals", "notEqual", "startsWith", "endsWith"],
                   "maxNumConditions": 2}
    for col in columns:
        if col["filter"] == "agTextColumnFilter":
            col["filterParams"] = text_filter
    instructions = _section(
        "Instructions (every record in the view; filter and sort run on the server over all of them)",
        html.Div([dcc.RadioItems(id=ID.grid_slot, options=[{"label": "A", "value": "a"}, {"label": "B", "value": "b"}],
                                 value="a", inline=True, style=cell),
                  html.Span(id=ID.grid_info, role="status", style={"color": "#555"})]),
        dag.AgGrid(id=ID.grid, columnDefs=columns, rowModelType="infinite", getRowId="params.data.id",
                   defaultColDef={"sortable": True, "filter": True, "floatingFilter": True, "resizable": True,
                                  "minWidth": 70},
                   # the selected record is marked through the grid's context (set client-side when the
                   # selection changes): with server-side rows it may not be loaded yet when selected
                   rowClassRules={"zyfa-selected": _SELECTED_RULE},
                   getRowStyle={"styleConditions": [{"condition": _SELECTED_RULE,
                                                     "style": {"backgroundColor": "#FFE08A"}}]},
                   dashGridOptions={"animateRows": False, "cacheBlockSize": 200, "maxBlocksInCache": 50,
                                    "rowBuffer": 20, "context": {"selected": None}},
                   columnSize="autoSize", style={"height": "360px"}),
        dcc.Store(id=ID.grid_source), dcc.Store(id=ID.grid_purged),
    )
    def listing_grid(grid_id: str) -> dag.AgGrid:
        return dag.AgGrid(id=grid_id, columnDefs=LISTING_COLUMNS, rowData=[], getRowId="params.data.key",
                          defaultColDef={"sortable": True, "filter": True, "floatingFilter": True,
                                         "resizable": True, "minWidth": 60},
                          dashGridOptions={"rowSelection": {"mode": "singleRow", "checkboxes": False,
                                                            "enableClickSelection": True}, "animateRows": False},
                          style={"height": "420px"})

    listing = _section(
        "Instruction view: per instruction (pc) executions, busy, latency and stall cycles (zyfa.analyzer.listing, "
        "metric window); click a row to highlight every execution on the timeline",
        html.Div(id=ID.regions),
        html.Div([html.Div([html.B("A"), listing_grid(ID.listing_a)], style={"flex": "1", "minWidth": "0"}),
                  html.Div([html.B("B"), listing_grid(ID.listing_b)], style={"flex": "1", "minWidth": "0"})],
                 style={"display": "flex", "gap": "12px"}),
        html.Div(id=ID.listing_info, style={"color": "#555", "fontSize": "12px"}),
        html.Div(id=ID.highlight_info, role="status", style={"color": "#a00"}),
    )
    valu = _section("VALU/TRANS cycles per key block by opcode class (zyfa.analyzer.valu_by_class, metric window)",
                    dcc.Graph(id=ID.valu, config=GRAPH_CONFIG))
    stalls = _section("Stall cycles by reason (zyfa.analyzer.stall_breakdown, metric window): cycles a wave waited "
                      "before issuing; hover for the units of the instructions that waited",
                      dcc.Graph(id=ID.stalls, config=GRAPH_CONFIG))
    return html.Div([
        html.H2("zyfa schedule explorer", style={"margin": "4px 0"}),
        html.Div("Cycle-model traces are simulated (CDNA4 cycle model), not measured.",
                 style={"color": "#666", "fontSize": "12px"}),
        headline, html.Div(id=ID.downloads, style={"fontSize": "12px"}),
        html.Div(id=ID.caveats, style={"fontSize": "12px"}), html.Div(id=ID.why),
        html.Div(id=ID.shade_info, role="status", style={"color": "#a00"}),
        _section("Per iteration (simulated; zyfa.analyzer.listing.iteration_phases): one wave's MFMA phase vs one wave's "
                 "softmax (VALU + TRANS) phase, which a ping-pong runs under the partner wave's MFMA phase, and the MFMA "
                 "pipe's idle cycles at hand-overs between waves; A solid, B dashed",
                 dcc.Graph(id=ID.phases, config=GRAPH_CONFIG)),
        sources, whatif, view, tables, listing, instructions, valu, stalls,
        dcc.Store(id=ID.view), dcc.Store(id=ID.extent), dcc.Store(id=ID.metric_range, data=_metric_range("steady")),
        dcc.Store(id=ID.selected), dcc.Store(id=ID.shade), dcc.Store(id=ID.highlight), dcc.Store(id=ID.keys),
    ], style={"fontFamily": "sans-serif", "fontSize": "14px", "margin": "8px 16px"})


# -- app ---------------------------------------------------------------------------------------
def create_app(store: TraceStore, simulator: Optional[Simulator] = None, kernels: Sequence[str] = (),
               params: Optional[dict[str, tuple]] = None, hosts: Sequence[str] = (),
               pairs: Sequence[tuple[str, str]] = ()) -> dash.Dash:
    """The explorer over ``store``.

    ``simulator`` (``WhatIf -> Trace``) enables the what-if panel for ``kernels`` with the
    generator parameters ``params`` (name -> choices; default :func:`generator_parameters`).
    ``hosts``: host names the page may be reached by besides the loopback names (see
    :func:`host_allowed`); every other ``Host`` or ``Origin`` header is answered 403, so a web page
    elsewhere cannot reach the server through DNS rebinding. ``pairs``: ``(ours, baseline)`` kernel
    names shown as A and B first when their traces are in the store (:func:`default_pair`).
    """
    if not isinstance(store, TraceStore):
        raise TypeError(f"create_app: store must be a TraceStore, got {type(store).__name__}")
    if simulator is not None and not callable(simulator):
        raise TypeError(f"create_app: simulator must be a callable WhatIf -> Trace, got {type(simulator).__name__}")
    if isinstance(hosts, str) or not all(isinstance(h, str) for h in hosts):
        raise TypeError(f"create_app: hosts must be a sequence of host names, got {hosts!r}")
    app = dash.Dash(__name__, title="zyfa schedule explorer", update_title=None)
    app.zyfa_store = store
    params = generator_parameters() if params is None else dict(params)
    pairs = [(str(ours), str(theirs)) for ours, theirs in pairs]
    app.layout = lambda: build_layout(store, list(kernels), params, simulator is not None, pairs)
    _register_host_check(app, tuple(hosts))
    _register_file_route(app, store)
    _register_downloads(app, store)
    _register_callbacks(app, store, simulator)
    return app


def _hostname(value: str) -> str:
    """``"127.0.0.1:8050"`` -> ``"127.0.0.1"``, ``"[::1]:80"`` -> ``"::1"``; lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def host_allowed(host: Optional[str], origin: Optional[str], hosts: Sequence[str] = ()) -> bool:
    """Whether a request with these ``Host`` / ``Origin`` headers may be answered.

    The Host must name a loopback address or one of ``hosts`` (a DNS-rebinding page has its own
    name there); an Origin, when sent, must be ``http(s)://`` one of those names (a cross-site
    page's requests carry its own origin).
    """
    names = {*LOOPBACK_NAMES, *(h.lower() for h in hosts)}
    if not host or _hostname(host) not in names:
        return False
    if origin is None or origin == "":
        return True
    m = re.match(r"^https?://(\[[^\]]+\]|[^/:]+)(:\d+)?$", origin.strip().lower())
    return bool(m) and _hostname(m.group(1)) in names


def _register_host_check(app: dash.Dash, hosts: tuple[str, ...]) -> None:
    @app.server.before_request
    def check_host():
        if not host_allowed(request.headers.get("Host"), request.headers.get("Origin"), hosts):
            abort(403, description="Host or Origin header not allowed (the explorer answers its own address only)")


def _register_file_route(app: dash.Dash, store: TraceStore) -> None:
    """``GET /traces/<path>``: download a trace file, only under the allowed directories/files."""

    @app.server.route("/traces/<path:name>")
    def trace_file(name: str):
        try:
            path = store.resolve(name)
        except UnsafePathError:
            abort(403)
        return send_file(path, mimetype="application/vnd.apache.parquet", as_attachment=True)


DOWNLOADS = ("trace", "metrics", "perfetto")


def _register_downloads(app: dash.Dash, store: TraceStore) -> None:
    """``GET /download/<kind>?a=ID[&b=ID][&window=W]``: the trace A (Parquet with its metadata
    embedded), the metric table of A (and B) as CSV, or A as Perfetto / Chrome trace-event JSON."""

    @app.server.route("/download/<kind>")
    def download(kind: str):
        if kind not in DOWNLOADS:
            abort(404)
        trace = _trace(store, request.args.get("a"))
        other = _trace(store, request.args["b"]) if request.args.get("b") else None
        choice = request.args.get("window", "whole")
        try:
            window = metrics.window_spec(choice) if choice in ("steady", "whole") else \
                metrics.window_spec("view", tuple(float(v) for v in choice.split(":", 1)))
        except (TypeError, ValueError) as exc:
            raise BadRequest(f"window must be steady, whole or START:END, got {choice[:50]!r}") from exc
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", trace.meta.kernel)[:80] or "trace"
        if kind == "trace":
            with tempfile.TemporaryDirectory(prefix="zyfa-ui-download-") as tmp:
                data = trace.save(Path(tmp) / "trace").read_bytes()  # metadata is embedded in the Parquet
            return send_file(io.BytesIO(data), mimetype="application/vnd.apache.parquet", as_attachment=True,
                             download_name=f"{stem}.parquet")
        if kind == "metrics":
            text = render(trace, window, "csv", other)
            return send_file(io.BytesIO(text.encode()), mimetype="text/csv", as_attachment=True,
                             download_name=f"{stem}-metrics.csv")
        body = json.dumps(trace_events(trace, window))
        return send_file(io.BytesIO(body.encode()), mimetype="application/json", as_attachment=True,
                         download_name=f"{stem}.perfetto.json")


def download_links(a: Optional[str], b: Optional[str], window: metrics.Window) -> list:
    """Links for :func:`_register_downloads`; ``window`` as the metric table uses it."""
    if not a:
        return []
    win = f"{window[0]}:{window[1]}" if isinstance(window, tuple) else window
    query = {"a": a, "window": win}
    links = [html.A("trace A (.parquet)", href="/download/trace?" + urllib.parse.urlencode({"a": a}),
                    id="download-trace"),
             html.A("metrics (.csv)", href="/download/metrics?" + urllib.parse.urlencode({**query, **({"b": b} if b
                                                                                                       else {})}),
                    id="download-metrics"),
             html.A("trace A for Perfetto (.json)", href="/download/perfetto?" + urllib.parse.urlencode(query),
                    id="download-perfetto")]
    out: list = ["download: "]
    for link in links:
        out += [link, " · "]
    return out[:-1]


def caveats(trace: Trace, slot: str) -> html.Details:
    """The model's notes and its parameters with their ``guess`` flags, from ``meta.extra``."""
    extra = trace.meta.extra or {}
    params = extra.get("model_parameters") or {}
    rows = [html.Tr([html.Td(name), html.Td(str(p.get("value"))), html.Td(str(p.get("unit", ""))),
                     html.Td("guess" if p.get("guess") else "sourced", style={"color": "#a00" if p.get("guess")
                                                                             else "#060"})],
                    **{"data-param": name})
            for name, p in sorted(params.items()) if isinstance(p, dict)]
    notes = [html.Li(str(n)) for n in extra.get("notes") or []]
    if extra.get("trace_covers"):
        notes.append(html.Li(f"the trace covers: {extra['trace_covers']}"))
    guessed = sum(1 for p in params.values() if isinstance(p, dict) and p.get("guess"))
    summary = (f"{slot.upper()}: {trace.meta.label}; {len(notes)} note(s), {guessed} of {len(params)} model "
               "parameters are guesses") if params or notes else f"{slot.upper()}: {trace.meta.label}; no model notes"
    return html.Details([html.Summary(summary), html.Ul(notes),
                         html.Table([html.Tr([html.Th(h) for h in ("parameter", "value", "unit", "source")]), *rows])
                         if rows else ""], **{"data-slot": slot})


def _trace(store: TraceStore, trace_id) -> Trace:
    """The trace behind an id from the browser; a forged or stale id is a 400, never a 500."""
    if not isinstance(trace_id, str):
        raise BadRequest(f"trace id must be a string, got {type(trace_id).__name__}")
    try:
        return store.get(trace_id)
    except (KeyError, UnsafePathError, TypeError) as exc:
        raise BadRequest(f"unknown trace {trace_id[:200]!r}") from exc
    except (TraceError, OSError) as exc:
        raise BadRequest(f"trace {store.label(trace_id)!r} cannot be read: {exc}") from exc


def _panels(store: TraceStore, a: Optional[str], b: Optional[str]) -> list[tuple[str, figures.Panel]]:
    """``(slot, panel)`` for the traces chosen in A and B (empty slots skipped)."""
    out = []
    for slot, trace_id in zip(SLOTS, (a, b)):
        if not trace_id:
            continue
        trace = _trace(store, trace_id)
        note = metrics.reconstruction_note(trace.meta.kernel)
        title = figures.panel_title(slot.upper(), trace) + (f" · {note}" if note else "")
        out.append((slot, figures.Panel(title, trace)))
    return out


def _int(value, what: str) -> int:
    """An integer from the browser (a row number, a click's customdata), or a 400."""
    if isinstance(value, bool):
        raise BadRequest(f"{what} must be an integer, got {value!r}")
    try:
        out = int(value)
    except (TypeError, ValueError, OverflowError):
        raise BadRequest(f"{what} must be an integer, got {str(value)[:100]!r}") from None
    if isinstance(value, float) and value != out:
        raise BadRequest(f"{what} must be an integer, got {value!r}")
    return out


def _range(value) -> Optional[tuple[float, float]]:
    """A view range ``[x0, x1]`` from the browser's store (None if unset), or a 400."""
    if value is None:
        return None
    try:
        x0, x1 = (float(v) for v in value)
        return timeline.View(x0, x1).x0, x1
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"view range must be two increasing finite numbers, got {str(value)[:100]}") from exc


def _full_view(panels: list[tuple[str, figures.Panel]]) -> tuple[float, float]:
    spans = [timeline.extent(p.trace) for _, p in panels] or [(0, 1)]
    return float(min(s for s, _ in spans)), float(max(e for _, e in spans))


def _record(trace: Trace, row: int) -> dict:
    return {c: (v.item() if hasattr(v, "item") else v) for c, v in trace.table.slice(row, 1).to_pylist()[0].items()}


def analyzer_doc(metric: str) -> str:
    """A metric's definition as plain text (the tooltip of its name in the table)."""
    return metrics.plain(metrics.definition(metric))


def positive_int(value, name: str) -> int:
    """A what-if field: a positive whole number, else ValueError naming the field."""
    if value is None or value == "":
        raise ValueError(f"{name}: enter a positive whole number")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{name} must be a positive whole number, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{name} must be a positive whole number, got {value!r}") from None
    if not number.is_integer() or number <= 0 or number > 2 ** 31:
        raise ValueError(f"{name} must be a positive whole number (at most 2^31), got {value!r}")
    return int(number)


def _reconstruction(kernel: str) -> list:
    """A warning after a kernel that stands in for AITER's code but is ours (empty otherwise)."""
    note = metrics.reconstruction_note(kernel)
    return [html.Span(f" · {note}", style={"color": "#a00", "fontWeight": "bold"},
                      **{"data-field": "reconstruction"})] if note else []


def _headline(store: TraceStore, a: Optional[str], b: Optional[str]) -> list:
    """Predicted time, TFLOP/s and clock per trace, and A's speed-up over B (meta.extra, as the CLI)."""
    heads = [(slot, metrics.headline(p.trace)) for slot, p in _panels(store, a, b)]
    if not heads:
        return ["choose trace A"]
    lines = []
    for slot, h in heads:
        if h.seconds is None:
            lines.append(html.Div([html.B(f"{slot.upper()}: {h.kernel}"),
                                   f" — no whole-kernel prediction in this trace ({h.source})",
                                   *_reconstruction(h.kernel)],
                                  **{"data-slot": slot}))
            continue
        lines.append(html.Div([
            html.B(f"{slot.upper()}: {h.kernel}"), " — predicted ",
            html.B(f"{h.seconds * 1e6:,.2f} µs", **{"data-field": "time"}),
            f" ({h.cycles:,.0f} cycles) · ",
            html.B(f"{h.tflops:,.1f} TFLOP/s" if h.tflops is not None else "— TFLOP/s", **{"data-field": "tflops"}),
            html.Span(f" · {h.clock_note}", **{"data-field": "clock"}),
            html.Span(f" · {h.source}", style={"color": "#666"}),
            *_reconstruction(h.kernel),
        ], **{"data-slot": slot, "data-seconds": repr(h.seconds)}))
    if len(heads) == 2:
        up = metrics.speedup(heads[0][1], heads[1][1])
        if up is not None:
            faster = "faster" if up >= 1 else "slower"
            lines.append(html.Div([html.B(f"A is {max(up, 1 / up):.2f}× {faster} than B",
                                          id="speedup", **{"data-speedup": repr(up)}),
                                   " (B's predicted time / A's: cycles / predicted clock, as `zyfa-trace kernel` "
                                   "prints them)"]))
    lines.append(html.Div("Predicted time = the cycle model's kernel cycles / the power model's clock; TFLOP/s = "
                          "the shape's useful FLOPs (causal halved) / that time, as "
                          "`zyfa-trace kernel` prints. The metric table's tflops_device instead scales the traced "
                          "CU's executed MFMA rate (masked diagonal tiles included) to every SIMD of the device, "
                          "ignoring the tail and idle CUs, so it is higher.",
                          style={"color": "#666", "fontSize": "12px"}))
    return lines


def _window(metric_range, panels: dict) -> metrics.Window:
    """The analyzer window of the metric-range store (:func:`_metric_range`), or a 400."""
    if not isinstance(metric_range, dict):
        raise BadRequest(f"metric range must be an object, got {str(metric_range)[:100]}")
    try:
        return metrics.window_spec(metric_range.get("choice"),
                                   _range(metric_range.get("view")) or _full_view(list(panels.items())))
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc


def _listing_rows(frame) -> list[dict]:
    """Listing rows for the grid; ``key`` = ``"pc"`` (or ``"-1|opcode"`` for records without a pc)."""
    out = frame.to_dict("records")
    for rec in out:
        rec["key"] = str(rec["pc"]) if rec["pc"] >= 0 else f"-1|{rec['opcode']}"
    return out


def _region_view(regions) -> html.Table | str:
    """metrics.region_table as a table: a heading row per level (loop structure, schedule region)."""
    if regions.empty:
        return ""
    cols = [c for c in regions.columns if c not in ("level", "region")]
    head = html.Tr([html.Th("region")] + [html.Th(c.replace("_", " ")) for c in cols])
    body, level = [], None
    for r in regions.to_dict("records"):
        if r["level"] != level:
            level = r["level"]
            what = ("prologue / main loop / epilogue of each trace (comparable for any two kernels)"
                    if level == "loop structure" else "the generator's cluster names")
            body.append(html.Tr(html.Th(f"by {level}: {what}", colSpan=len(cols) + 1,
                                        style={"textAlign": "left", "paddingTop": "4px"})))
        body.append(html.Tr([html.Td(r["region"])] + [html.Td(metrics.fmt(r[c]), style={"textAlign": "right",
                                                                                           "padding": "0 8px"})
                                                      for c in cols],
                            **{"data-level": r["level"], "data-region": r["region"]}))
    return html.Details([html.Summary("A and B aligned by loop structure and by schedule region "
                                      "(Σ over the instructions of each)"),
                         html.Table([html.Thead(head), html.Tbody(body)], id="region-table")], open=True)


def _register_callbacks(app: dash.Dash, store: TraceStore, simulator: Optional[Simulator]) -> None:
    # -- sources: open a path, upload, re-simulate -----------------------------------------
    @app.callback(
        Output(ID.trace_a, "options"), Output(ID.trace_b, "options"),
        Output(ID.trace_a, "value"), Output(ID.trace_b, "value"), Output(ID.source_message, "children"),
        Input(ID.open_button, "n_clicks"), Input(ID.open_path, "value"), Input(ID.upload, "contents"),
        State(ID.upload, "filename"), State(ID.trace_a, "value"), State(ID.trace_b, "value"),
        prevent_initial_call=True,
    )
    def add_source(_clicks, path, contents, filenames, a, b):
        try:
            if ctx.triggered_id == ID.upload:
                if not contents:
                    raise PreventUpdate
                new = store.add_upload(filenames, contents)
            else:
                if not path:
                    raise PreventUpdate
                new = store.open_path(path)
        except (UnsafePathError, UploadError) as exc:
            return dash.no_update, dash.no_update, dash.no_update, dash.no_update, str(exc)
        except TraceError as exc:
            return dash.no_update, dash.no_update, dash.no_update, dash.no_update, f"not a valid trace: {exc}"
        opts = _options(store)
        if not a:
            return opts, opts, new, b, f"opened {store.label(new)} as A"
        return opts, opts, a, new, f"opened {store.label(new)} as B"

    @app.callback(
        Output(ID.trace_a, "options", allow_duplicate=True), Output(ID.trace_b, "options", allow_duplicate=True),
        Output(ID.trace_b, "value", allow_duplicate=True), Output(ID.w_message, "children"),
        Input(ID.w_run, "n_clicks"),
        State(ID.w_kernel, "value"), State(ID.w_seqlen, "value"), State(ID.w_heads, "value"),
        State({"type": PARAM_TYPE, "name": ALL}, "value"), State({"type": PARAM_TYPE, "name": ALL}, "id"),
        prevent_initial_call=True,
        running=[(Output(ID.w_run, "disabled"), True, False),
                 (Output(ID.w_status, "children"), "simulating on the CDNA4 cycle model…", "")],
    )
    def run_whatif(_clicks, kernel, seqlen, heads, values, ids):
        if simulator is None:
            raise PreventUpdate
        try:
            chosen = {i["name"]: v for i, v in zip(ids, values) if v != "default"}
            req = WhatIf(kernel=kernel, seqlen=positive_int(seqlen, "seqlen"), heads=positive_int(heads, "heads"),
                         params=chosen)
        except (ValueError, TypeError, KeyError) as exc:
            return dash.no_update, dash.no_update, dash.no_update, f"what-if rejected: {exc}"
        try:
            trace = simulator(req)
        except (ValueError, TypeError) as exc:
            return dash.no_update, dash.no_update, dash.no_update, f"what-if rejected: {exc}"
        except Exception as exc:  # the simulator is another package: report any failure on the page
            return dash.no_update, dash.no_update, dash.no_update, \
                f"simulation of {req.label} failed: {type(exc).__name__}: {exc}"
        new = store.add(trace, f"what-if: {req.label}")
        opts = _options(store)
        return opts, opts, new, f"simulated {req.label}: {len(trace)} records (shown as B)"

    @app.callback(Output(ID.headline, "children"), Output(ID.caveats, "children"),
                  Input(ID.trace_a, "value"), Input(ID.trace_b, "value"))
    def show_headline(a, b):
        notes = [caveats(p.trace, slot) for slot, p in _panels(store, a, b)]
        return _headline(store, a, b), ([html.B("Model caveats and guessed parameters"), *notes] if notes else "")

    @app.callback(Output(ID.downloads, "children"),
                  Input(ID.trace_a, "value"), Input(ID.trace_b, "value"), Input(ID.metric_range, "data"))
    def show_downloads(a, b, metric_range):
        panels = dict(_panels(store, a, b))
        if "a" not in panels:
            return []
        return download_links(a, b if "b" in panels else None, _window(metric_range, panels))

    # W/S zoom in/out, A/D pan (Perfetto's keys), on the timeline's x range; the relayout is drawn
    # in the browser like a drag-zoom (assets/timeline.js). Registered once, when the page is built.
    app.clientside_callback(
        """function(id) {
            if (window.zyfaKeys) { return window.dash_clientside.no_update; }
            window.zyfaKeys = true;
            document.addEventListener('keydown', function(ev) {
                const tag = (ev.target && ev.target.tagName || '').toLowerCase();
                if (tag === 'input' || tag === 'textarea' || ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
                const key = ev.key.toLowerCase();
                if (!'wasd'.includes(key) || key.length !== 1) { return; }
                const gd = document.querySelector('#%s .js-plotly-plot');
                if (!gd || !gd._fullLayout || !gd._fullLayout.xaxis) { return; }
                const [x0, x1] = gd._fullLayout.xaxis.range.map(Number);
                const w = x1 - x0, c = (x0 + x1) / 2;
                let r = null;
                if (key === 'w') { r = [c - w * 0.35, c + w * 0.35]; }
                if (key === 's') { r = [c - w * 0.75, c + w * 0.75]; }
                if (key === 'a') { r = [x0 - w * 0.2, x1 - w * 0.2]; }
                if (key === 'd') { r = [x0 + w * 0.2, x1 + w * 0.2]; }
                ev.preventDefault();
                window.Plotly.relayout(gd, {'xaxis.range[0]': r[0], 'xaxis.range[1]': r[1]});
            });
            return window.dash_clientside.no_update;
        }""" % ID.timeline,
        Output(ID.keys, "data"), Input(ID.timeline, "id"),
    )

    # -- view range: zoom, iteration, reset ------------------------------------------------
    @app.callback(
        Output(ID.view, "data"), Output(ID.extent, "data"), Output(ID.lod, "data"),
        Input(ID.iteration, "value"), Input(ID.reset, "n_clicks"), Input(ID.trace_a, "value"), Input(ID.trace_b, "value"),
        State(ID.view, "data"),
    )
    def update_view(iteration, _reset, a, b, current):
        panels = _panels(store, a, b)
        full = [*_full_view(panels)]
        target = full
        if ctx.triggered_id == ID.iteration and iteration is not None and panels:
            try:
                target = [float(v) for v in timeline.iteration_span(panels[0][1].trace, _int(iteration, "iteration"))]
            except ValueError as exc:
                raise BadRequest(str(exc)) from exc
        # an unchanged view is not sent again: the timeline also listens to A and B, so it is redrawn anyway
        if current == target:
            return dash.no_update, full, dash.no_update
        return target, full, target

    # zoom and pan set the view in the browser (assets/timeline.js: drawn at once, the `view` store
    # debounced, a new figure only when the level of detail must change); a view set here (an
    # iteration, the whole trace, new traces) is shown there
    app.clientside_callback(
        ClientsideFunction("zyfa", "syncView"),
        Output(ID.timeline_drawn, "data", allow_duplicate=True), Input(ID.view, "data"), prevent_initial_call=True,
    )

    # the metric views depend on the view range only when the metric window is "view"
    app.clientside_callback(
        """function(choice, view, current) {
            const next = {choice: choice, view: choice === 'view' ? view : null};
            if (current && JSON.stringify(current) === JSON.stringify(next)) { return window.dash_clientside.no_update; }
            return next;
        }""",
        Output(ID.metric_range, "data"), Input(ID.window, "value"), Input(ID.view, "data"),
        State(ID.metric_range, "data"),
    )

    @app.callback(
        Output(ID.iteration, "options"), Output(ID.iteration, "value"),
        Input(ID.trace_a, "value"), Input(ID.trace_b, "value"),
    )
    def iteration_options(a, b):
        panels = _panels(store, a, b)
        its = timeline.iterations(panels[0][1].trace) if panels else []
        return [{"label": f"iteration {i}", "value": i} for i in its], None

    # -- timeline -----------------------------------------------------------------------------
    @app.callback(
        Output(ID.timeline_figure, "data"),
        Input(ID.lod, "data"), Input(ID.trace_a, "value"), Input(ID.trace_b, "value"),
        Input(ID.highlight, "data"), Input(ID.shade, "data"), Input(ID.metric_range, "data"),
    )
    def draw_timeline(lod, a, b, highlight, shade, metric_range):
        shading = isinstance(shade, dict) and shade.get("term") in BUDGET_TERMS
        if not shading and set(ctx.triggered_prop_ids) == {f"{ID.metric_range}.data"}:
            raise PreventUpdate  # the metric window only moves the shading: with none, the figure stays
        panels = _panels(store, a, b)
        x0, x1 = _range(lod) or _full_view(panels)
        view = timeline.View(x0, x1)
        slots = [s for s, _ in panels]
        lit = None
        if isinstance(highlight, dict) and highlight.get("slot") in slots:
            index = slots.index(highlight["slot"])
            lit = (index, occurrences(panels[index][1].trace, _int(highlight.get("pc"), "pc"), highlight.get("opcode")))
        shaded = None
        if shading and panels:
            window = _window(metric_range, dict(panels))
            shaded = (BUDGET_TERMS[shade["term"]], [metrics.term_intervals(p.trace, shade["term"], window)
                                                    for _, p in panels])
        out = figures.schedule_figure([p for _, p in panels], view, None, lit, shaded, pad=TIMELINE_PAD).to_dict()
        # what the figure shows besides its range: the page keeps recent figures of one content and
        # draws a view from them when it can (assets/timeline.js)
        out["layout"].setdefault("meta", {})["content"] = json.dumps([a, b, highlight, shade, metric_range if shaded else None],
                                                      sort_keys=True)
        return {**out, "config": TIMELINE_CONFIG}

    # selecting a record sends only its outline (the figure is not sent again)
    @app.callback(Output(ID.timeline_shapes, "data"),
                  Input(ID.selected, "data"), State(ID.trace_a, "value"), State(ID.trace_b, "value"))
    def draw_outline(selected, a, b):
        panels = _panels(store, a, b)
        slots = [s for s, _ in panels]
        sel = None
        if isinstance(selected, dict) and selected.get("slot") in slots:
            sel = (slots.index(selected["slot"]), _int(selected.get("row"), "selected row"))
        return figures.outline_shapes([p for _, p in panels], sel)

    app.clientside_callback(
        ClientsideFunction("zyfa", "render"),
        Output(ID.timeline_drawn, "data"), Input(ID.timeline_figure, "data"), Input(ID.timeline_shapes, "data"),
        prevent_initial_call=True,
    )

    # -- metrics, VALU chart ------------------------------------------------------------------
    @app.callback(Output(ID.metrics, "children"), Output(ID.valu, "figure"), Output(ID.stalls, "figure"),
                  Input(ID.trace_a, "value"), Input(ID.trace_b, "value"), Input(ID.metric_range, "data"))
    def metric_views(a, b, metric_range):
        panels = dict(_panels(store, a, b))
        if "a" not in panels:
            return "choose trace A", figures.valu_figure([]), figures.stall_figure([])
        window = _window(metric_range, panels)
        frame = metrics.table(panels["a"].trace, panels["b"].trace if "b" in panels else None, window)
        cols = [c for c in ("a", "b", "diff", "ratio") if c in frame.columns]
        head = html.Tr([html.Th("metric")] + [html.Th({"a": "A", "b": "B", "diff": "B − A"}.get(c, c)) for c in cols])
        body = []
        for rec in frame.to_dict("records"):
            cells = [html.Td(rec["metric"], title=analyzer_doc(rec["metric"]))]
            for c in cols:
                unit = "" if c == "ratio" else rec["unit"]
                cells.append(html.Td(metrics.fmt(rec[c], unit), title=repr(rec[c]), **{"data-col": c},
                                     style={"textAlign": "right", "padding": "0 8px"}))
            body.append(html.Tr(cells, **{"data-metric": rec["metric"]}))
        label = f"window {window}" if isinstance(window, tuple) else f"window: {window}"
        table = html.Div([html.Table([html.Thead(head), html.Tbody(body)], id="metric-table",
                                     style={"borderCollapse": "collapse"}),
                          html.Div(label, style={"color": "#666", "fontSize": "12px"})])
        valu = figures.valu_figure([(slot.upper(), metrics.valu_by_class(p.trace, window))
                                    for slot, p in panels.items()])
        stalls = figures.stall_figure([(slot.upper(), metrics.stall_by_reason(p.trace, window))
                                       for slot, p in panels.items()])
        return table, valu, stalls

    # -- why, instruction view, highlight ---------------------------------------------------------
    @app.callback(Output(ID.why, "children"),
                  Input(ID.trace_a, "value"), Input(ID.trace_b, "value"), Input(ID.metric_range, "data"))
    def show_why(a, b, metric_range):
        panels = dict(_panels(store, a, b))
        if "a" not in panels or "b" not in panels:
            return ""
        window = _window(metric_range, panels)
        explained, work = metrics.why(panels["a"].trace, panels["b"].trace, window)
        words = metrics.why_words(explained, work, panels["a"].trace.meta.kernel, panels["b"].trace.meta.kernel,
                                  window)
        head = html.Tr([html.Th(h) for h in ("rank", "term", "A", "B", "B − A", "share of difference")])
        link = {"background": "none", "border": "none", "padding": "0", "color": "#0645AD", "textDecoration": "underline",
                "cursor": "pointer", "textAlign": "left", "font": "inherit"}
        body = [html.Tr([html.Td("" if r.term == "total" else str(i + 1)),
                         html.Td(r.meaning if r.term == "total" else
                                 html.Button(r.meaning, id={"type": WHY_TERM, "term": r.term}, n_clicks=0, style=link,
                                             title="shade these cycles on the timeline (click again to clear)"),
                                 title=r.term),
                         *[html.Td(metrics.fmt(v, "cycles"), style={"textAlign": "right", "padding": "0 8px"})
                           for v in (r.a, r.b, r.diff)],
                         html.Td(metrics.fmt(r.share, "fraction"), style={"textAlign": "right"})],
                        **{"data-term": r.term})
                for i, r in enumerate(explained.itertuples())]
        return _section("Why (simulated): SIMD-cycles per key block, split into terms that add up, ranked by how "
                        "much of the A/B difference each explains",
                        html.P(words, id="why-words"),
                        html.Table([html.Thead(head), html.Tbody(body)], id="why-table",
                                   style={"borderCollapse": "collapse"}))

    @app.callback(Output(ID.phases, "figure"), Input(ID.trace_a, "value"), Input(ID.trace_b, "value"))
    def show_phases(a, b):
        return figures.phase_figure([(f"{slot.upper()}: {p.trace.meta.kernel}", metrics.phases(p.trace))
                                     for slot, p in _panels(store, a, b)])

    @app.callback(Output(ID.shade, "data"), Output(ID.shade_info, "children"),
                  Input({"type": WHY_TERM, "term": ALL}, "n_clicks"), Input(ID.trace_a, "value"),
                  Input(ID.trace_b, "value"), Input(ID.metric_range, "data"), State(ID.shade, "data"),
                  prevent_initial_call=True)
    def choose_shade(_clicks, a, b, metric_range, current):
        """A click on a term of the "why" table shades its cycles on the timeline (again: clears);
        new traces clear it; a new metric window redraws it for that window."""
        if ctx.triggered_id in (ID.trace_a, ID.trace_b):
            return None, ""
        if ctx.triggered_id == ID.metric_range:
            term = current.get("term") if isinstance(current, dict) else None
        else:
            if not isinstance(ctx.triggered_id, dict) or not ctx.triggered or not ctx.triggered[0].get("value"):
                raise PreventUpdate  # the table was (re)drawn: its buttons start at 0 clicks
            term = ctx.triggered_id.get("term")
            if term not in BUDGET_TERMS:
                raise BadRequest(f"unknown why term {str(term)[:50]!r}")
            if isinstance(current, dict) and current.get("term") == term:
                return None, ""
        if term is None:
            raise PreventUpdate
        panels = dict(_panels(store, a, b))
        window = _window(metric_range, panels)
        parts = []
        for slot, p in panels.items():
            ranges = metrics.term_intervals(p.trace, term, window)
            parts.append(f"{slot.upper()}: {len(ranges)} ranges, {int((ranges['end'] - ranges['start']).sum()):,d} cycles")
        counts = " · ".join(parts)
        return {"term": term}, f"shaded on the timeline: {BUDGET_TERMS[term]} (window {window}; {counts})"

    @app.callback(Output(ID.listing_a, "rowData"), Output(ID.listing_b, "rowData"), Output(ID.regions, "children"),
                  Output(ID.listing_info, "children"), Output(ID.listing_a, "columnDefs"),
                  Output(ID.listing_b, "columnDefs"),
                  Input(ID.trace_a, "value"), Input(ID.trace_b, "value"), Input(ID.metric_range, "data"))
    def show_listing(a, b, metric_range):
        panels = dict(_panels(store, a, b))
        if "a" not in panels:
            return [], [], "", "", LISTING_COLUMNS, LISTING_COLUMNS
        window = _window(metric_range, panels)
        frames = {slot: metrics.listing(p.trace, window) for slot, p in panels.items()}
        cols = {slot: LISTING_COLUMNS[:-2] + [
            {"field": c, "headerName": c.replace("_", " "), "filter": "agNumberColumnFilter"}
            for c in f.columns if c.startswith("stall_")] + LISTING_COLUMNS[-2:] for slot, f in frames.items()}
        rows = {}
        notes = []
        for slot, f in frames.items():
            sources = metrics.emitter_sources(panels[slot].trace)
            rows[slot] = _listing_rows(f)
            for rec in rows[slot]:
                rec["source"] = sources.get(rec["pc"], "—") if sources else "no source"
            notes.append(f"{slot.upper()}: emitter lines recorded by the gfx950 generator at emit time" if sources else
                         f"{slot.upper()}: no source (not a generator build: AITER code object, hardware capture or "
                         "another generator version): regions by loop structure")
        regions = metrics.region_table(frames)
        info = (f"window {window}; busy = Σ(end − start); latency = mean(end − issue); stall = cycles the wave waited "
                "before issuing it, total and per reason; share = its stall + busy / all instructions' stall + busy; "
                + "; ".join(notes))
        return (rows.get("a", []), rows.get("b", []), _region_view(regions), info, cols.get("a", LISTING_COLUMNS),
                cols.get("b", LISTING_COLUMNS))

    @app.callback(Output(ID.highlight, "data"), Output(ID.highlight_info, "children"),
                  Input(ID.listing_a, "cellClicked"), Input(ID.listing_b, "cellClicked"),
                  Input(ID.trace_a, "value"), Input(ID.trace_b, "value"), prevent_initial_call=True)
    def choose_highlight(cell_a, cell_b, a, b):
        if ctx.triggered_id in (ID.trace_a, ID.trace_b):
            return None, ""
        slot = "a" if ctx.triggered_id == ID.listing_a else "b"
        cell = cell_a if slot == "a" else cell_b
        if not isinstance(cell, dict) or not isinstance(cell.get("rowId"), str):
            raise PreventUpdate
        panels = dict(_panels(store, a, b))
        if slot not in panels:
            raise PreventUpdate
        pc_text, _, opcode = cell["rowId"].partition("|")
        pc = _int(pc_text, "pc")
        rows = occurrences(panels[slot].trace, pc, opcode or None)
        if rows.size == 0:
            raise BadRequest(f"no instruction at pc {pc} in {slot.upper()}")
        name = str(panels[slot].trace.table.column("opcode")[int(rows[0])])
        where = f"pc 0x{pc:x}" if pc >= 0 else "no pc"
        return ({"slot": slot, "pc": pc, "opcode": opcode or None},
                f"{slot.upper()}: {name} at {where}: {rows.size} executions highlighted on the timeline")

    # -- instruction table (server-side rows) and selection ---------------------------------------
    @app.callback(
        Output(ID.grid_source, "data"),
        Input(ID.grid_slot, "value"), Input(ID.view, "data"), Input(ID.trace_a, "value"), Input(ID.trace_b, "value"),
    )
    def grid_source(slot, view_range, a, b):
        return {"slot": slot, "a": a, "b": b, "view": view_range}

    # a new source (trace, slot or view): drop the grid's cached blocks so it asks the server again
    app.clientside_callback(
        """function(source) {
            let api = null;  // getApi throws until the grid is initialised (it then asks for rows itself)
            try { api = window.dash_ag_grid.getApi('%s'); } catch (e) { api = null; }
            if (api && api.purgeInfiniteCache) { api.purgeInfiniteCache(); }
            return window.dash_clientside.no_update;
        }""" % ID.grid,
        Output(ID.grid_purged, "data"), Input(ID.grid_source, "data"), prevent_initial_call=True,
    )

    def _grid_rows(source) -> tuple[Trace, np.ndarray, int]:
        """The grid's trace and its rows in the view (start order), from the grid-source store."""
        if not isinstance(source, dict) or source.get("slot") not in SLOTS:
            raise PreventUpdate
        trace_id = source.get(source["slot"])
        if not trace_id:
            raise PreventUpdate
        trace = _trace(store, trace_id)
        x0, x1 = _range(source.get("view")) or timeline.extent(trace)
        rows = timeline.view_rows(trace, x0, x1)
        return trace, rows, int(rows.size)

    # mark the selected record in the grid (rows loaded later pick it up from the context)
    app.clientside_callback(
        """function(selected, source) {
            let api = null;
            try { api = window.dash_ag_grid.getApi('%s'); } catch (e) { api = null; }
            if (!api) { return window.dash_clientside.no_update; }
            const mine = selected && source && selected.slot === source.slot;
            api.setGridOption('context', {selected: mine ? String(selected.row) : null});
            api.redrawRows();
            return window.dash_clientside.no_update;
        }""" % ID.grid,
        Output(ID.grid_purged, "data", allow_duplicate=True), Input(ID.selected, "data"), Input(ID.grid_source, "data"),
        prevent_initial_call=True,
    )

    @app.callback(
        Output(ID.grid, "getRowsResponse"), Output(ID.grid_info, "children"),
        Input(ID.grid, "getRowsRequest"), State(ID.grid_source, "data"),
        prevent_initial_call=True,
    )
    def grid_rows(req, source):
        if not isinstance(req, dict):
            raise PreventUpdate
        trace, rows, total = _grid_rows(source)
        try:
            ordered = grid.query(trace, rows, req.get("filterModel"), req.get("sortModel"))
            data = grid.page(trace, ordered, _int(req.get("startRow", 0), "startRow"),
                             _int(req.get("endRow", 0), "endRow"))
        except grid.GridRequestError as exc:
            raise BadRequest(str(exc)) from exc
        slot = source["slot"].upper()
        info = f"{total} instructions in view in {slot}"
        if req.get("filterModel"):
            info = f"{ordered.size} of {total} instructions in view in {slot} match the filter"
        return {"rowData": data, "rowCount": int(ordered.size)}, info

    @app.callback(
        Output(ID.selected, "data"), Output(ID.grid_slot, "value"),
        Input(ID.timeline_click, "data"), Input(ID.grid, "cellClicked"),
        Input(ID.trace_a, "value"), Input(ID.trace_b, "value"),
        State(ID.grid_slot, "value"),
        prevent_initial_call=True,
    )
    def select(click, cell, a, b, grid_slot):
        slots = [s for s, _ in _panels(store, a, b)]
        if ctx.triggered_id in (ID.trace_a, ID.trace_b):
            return None, dash.no_update  # a selection in the old trace means nothing in the new one
        if ctx.triggered_id == ID.timeline_click:
            points = (click or {}).get("points") or [{}]
            custom = points[0].get("customdata") if isinstance(points[0], dict) else None
            if custom is None:
                raise PreventUpdate
            panel, row = figures.decode(_int(custom, "customdata"))
            if row < 0 or not 0 <= panel < len(slots):
                raise PreventUpdate
            return {"slot": slots[panel], "row": row}, slots[panel]
        if not isinstance(cell, dict) or cell.get("rowId") is None:
            raise PreventUpdate
        return {"slot": grid_slot, "row": _int(cell["rowId"], "rowId")}, dash.no_update

    @app.callback(
        Output(ID.details, "children"), Output(ID.grid, "scrollTo"),
        Input(ID.selected, "data"), State(ID.trace_a, "value"), State(ID.trace_b, "value"),
        State(ID.grid, "getRowsRequest"), State(ID.grid_source, "data"),
        prevent_initial_call=True,
    )
    def show_details(selected, a, b, req, source):
        panels = dict(_panels(store, a, b))
        if not selected:
            return "click an instruction on the timeline or in the table", dash.no_update
        if not isinstance(selected, dict) or selected.get("slot") not in panels:
            raise PreventUpdate
        trace = panels[selected["slot"]].trace
        row = _int(selected.get("row"), "selected row")
        if not 0 <= row < len(trace):
            raise BadRequest(f"row {row} is not in trace {selected['slot'].upper()} ({len(trace)} records)")
        rec = _record(trace, row)
        items = [html.Tr([html.Th("trace"), html.Td(panels[selected["slot"]].title)]),
                 html.Tr([html.Th("row"), html.Td(str(row))])]
        items += [html.Tr([html.Th(k), html.Td("—" if v is None else str(v), **{"data-field": k})])
                  for k, v in rec.items()]
        if rec.get("end") is not None:
            items.append(html.Tr([html.Th("busy cycles"), html.Td(str(rec["end"] - rec["start"]))]))
        scroll = dash.no_update
        if isinstance(source, dict) and source.get("slot") == selected["slot"]:
            _, rows, _ = _grid_rows(source)
            req = req if isinstance(req, dict) else {}
            try:
                pos = grid.position(grid.query(trace, rows, req.get("filterModel"), req.get("sortModel")), row)
            except grid.GridRequestError:
                pos = None
            if pos is not None:
                scroll = {"rowIndex": pos, "rowPosition": "middle"}
        return html.Table(items, id="details-table"), scroll


# -- server ------------------------------------------------------------------------------------
class _QuietHandler(WSGIRequestHandler):
    """Request handler that does not log every request (errors are still logged)."""

    def log_request(self, code="-", size="-") -> None:
        if str(code).startswith(("4", "5")):
            super().log_request(code, size)


class ServerThread(threading.Thread):
    """The app's Flask server on ``host:port`` in a daemon thread (``port=0``: a free port).

    ``url`` is known once constructed; :meth:`shutdown` stops it. Used by ``zyfa-ui`` and tests.
    """

    def __init__(self, app: dash.Dash, host: str = "127.0.0.1", port: int = 0):
        super().__init__(daemon=True, name="zyfa-ui-server")
        self._server = make_server(host, port, app.server, threaded=True, request_handler=_QuietHandler)
        self.host, self.port = host, self._server.server_port
        self.url = f"http://{host}:{self.port}"
        self.app_store: Optional[TraceStore] = getattr(app, "zyfa_store", None)

    def run(self) -> None:
        self._server.serve_forever()

    def shutdown(self) -> None:
        """Stop a started server and release its port."""
        self._server.shutdown()
        self._server.server_close()

    def close(self) -> None:
        """Release the port of a server that was never started."""
        self._server.server_close()


def is_loopback(host: str) -> bool:
    """Whether ``host`` names a loopback address (``127.0.0.1``, ``::1``, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def prepare(args: argparse.Namespace) -> tuple[Optional[ServerThread], int]:
    """The explorer's server for ``zyfa-ui``'s arguments, bound but not started, or ``(None, exit status)``.

    Unreadable traces (corrupt, FIFO, dangling symlink, a directory named ``*.parquet``) are skipped
    and listed on stderr and on the page; the others are served.
    """
    try:
        store = TraceStore(args.trace_dir or [], args.traces or [])
    except (TypeError, ValueError) as exc:
        print(f"zyfa-ui: {exc}", file=sys.stderr)
        return None, 2
    refused = _bind_error(args.host, args.port)
    if refused is not None:  # before the start-up simulation, which takes a while
        print(f"zyfa-ui: {refused}", file=sys.stderr)
        return None, 2
    for name, why in sorted(store.load_all().items()):  # one unreadable file must not stop the others
        print(f"zyfa-ui: skipped {name}: {why}", file=sys.stderr)
    simulator, kernels, why = default_simulator()
    if simulator is None:
        print(f"zyfa-ui: what-if disabled: {why}", file=sys.stderr)
    pairs: list[tuple[str, str]] = []
    if not store.entries() and simulator is not None and getattr(args, "simulate", True):
        # the comparisons zyfa-trace kernel makes by default (its source of truth): AITER's real FP8
        # object where it resolves, else real BF16 and our aiter-like-fp8 reconstruction
        defaults, note = baseline.default_pairs()
        print(f"zyfa-ui: no trace given: simulating zyfa-trace kernel's default pairs ({note})", flush=True)
        for pair in defaults:
            pairs.append((pair.ours, pair.baseline))
            for kernel in (pair.ours, pair.baseline):
                request = WhatIf(kernel=kernel, seqlen=args.seqlen)
                print(f"zyfa-ui: simulating {request.label} on the CDNA4 cycle model ...", flush=True)
                what = f" ({pair.label})" if kernel == pair.baseline else ""
                try:
                    store.add(simulator(request), f"simulated: {request.label}{what}")
                except Exception as exc:  # the simulator is another package: report and serve without it
                    print(f"zyfa-ui: simulating {kernel} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    if not is_loopback(args.host):
        print(f"zyfa-ui: warning: serving on {args.host}, reachable from other machines; the page has no "
              "authentication", file=sys.stderr)
    hosts = [*([] if is_loopback(args.host) else [args.host]), *getattr(args, "allow_host", [])]
    app = create_app(store, simulator, kernels, hosts=hosts, pairs=pairs)
    return ServerThread(app, args.host, args.port), 0


def _bind_error(host: str, port: int) -> Optional[str]:
    """Why ``host:port`` cannot be listened on (an unknown name, an address of another machine, a
    port in use), or None. Checked first: werkzeug's server prints the bare reason and exits 1."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as werkzeug's server does
            probe.bind(address)
    except OSError as exc:
        return f"cannot listen on --host {host} --port {port}: {exc.strerror or exc}"
    return None


def serve(args: argparse.Namespace) -> int:
    """Run the explorer for ``zyfa-ui`` until interrupted; returns the exit status."""
    server, status = prepare(args)
    if server is None:
        return status
    print(f"zyfa-ui: {len(server.app_store.entries())} trace(s); open {server.url}/  (Ctrl-C to stop)", flush=True)
    server.start()
    try:
        server.join()
    except KeyboardInterrupt:
        server.shutdown()
    return 0
