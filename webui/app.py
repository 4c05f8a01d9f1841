"""The Dash app of the schedule explorer: layout and callbacks only.

Callbacks look traces up in the :class:`~zyfa.webui.store.TraceStore` (loaded once, cached) and
call :mod:`zyfa.webui.timeline`, :mod:`zyfa.webui.figures` and :mod:`zyfa.webui.metrics` (which
calls :mod:`zyfa.analyzer`); they compute nothing themselves.
"""

from __future__ import annotations

import argparse
import ipaddress
import re
import sys
import threading
from dataclasses import dataclass
from typing import Optional, Sequence

import dash
import dash_ag_grid as dag
import pyarrow as pa
from dash import ALL, Input, Output, State, ctx, dcc, html
from dash.exceptions import PreventUpdate
from flask import abort, send_file
from werkzeug.serving import WSGIRequestHandler, make_server

from zyfa.analyzer import METRICS
from zyfa.trace.schema import COLUMNS, Trace, TraceError
from zyfa.webui import figures, metrics, timeline
from zyfa.webui.store import TraceStore, UnsafePathError, UploadError
from zyfa.webui.whatif import Simulator, WhatIf, default_simulator, generator_parameters

DEFAULT_PAIR = ("zyfa-fp8", "aiter-like-fp8")  # simulated at start-up when no trace is given
GRID_MAX_ROWS = 5000  # instruction-table rows sent to the browser (those in the current view first)
SLOTS = ("a", "b")
_NUMERIC = {name for name, col in COLUMNS.items() if pa.types.is_integer(col.type)}  # grid number filters


# -- element ids -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ids:
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
    view_info: str = "view-info"
    timeline: str = "timeline"
    metrics: str = "metrics"
    details: str = "details"
    selected: str = "selected"
    grid_slot: str = "grid-slot"
    grid: str = "grid"
    grid_info: str = "grid-info"
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


# -- relayout parsing --------------------------------------------------------------------------
_RANGE_KEY = re.compile(r"^xaxis\d*\.range\[([01])\]$")
_RANGE_LIST = re.compile(r"^xaxis\d*\.range$")
_AUTORANGE = re.compile(r"^xaxis\d*\.autorange$")


def parse_relayout(data: Optional[dict]) -> Optional[tuple[float, float] | str]:
    """The x range a plotly ``relayoutData`` event asks for: ``(x0, x1)``, ``"reset"`` for an
    autorange (double click), or None when the event is not an x zoom."""
    if not isinstance(data, dict):
        return None
    bounds: dict[int, float] = {}
    for key, value in data.items():
        if _AUTORANGE.match(key) and value:
            return "reset"
        m = _RANGE_KEY.match(key)
        if m and isinstance(value, (int, float)):
            bounds[int(m.group(1))] = float(value)
        elif _RANGE_LIST.match(key) and isinstance(value, (list, tuple)) and len(value) == 2:
            bounds = {0: float(value[0]), 1: float(value[1])}
    if 0 in bounds and 1 in bounds and bounds[1] > bounds[0]:
        return bounds[0], bounds[1]
    return None


# -- layout ------------------------------------------------------------------------------------
def _options(store: TraceStore) -> list[dict]:
    return [{"label": e.label, "value": e.id} for e in store.entries()]


def default_pair(store: TraceStore) -> tuple[Optional[str], Optional[str]]:
    """A ZYFA trace and an AITER one when both exist, else the first two traces (or None)."""
    entries = store.entries()
    kernels = {}
    for e in entries:
        try:
            kernels[e.id] = store.get(e.id).meta.kernel.lower()
        except (TraceError, UnsafePathError, KeyError):
            continue
    ids = list(kernels)
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


def build_layout(store: TraceStore, kernels: Sequence[str], params: dict[str, tuple],
                 simulator_ready: bool) -> html.Div:
    a, b = default_pair(store)
    opts = _options(store)
    label = {"display": "inline-block", "marginRight": "6px", "fontWeight": "bold"}
    cell = {"display": "inline-block", "marginRight": "16px", "verticalAlign": "middle"}
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
    )
    whatif = _section(
        "What-if (re-simulate on the CDNA4 cycle model)",
        html.Div([
            html.Div([html.Span("kernel", style=label),
                      dcc.Dropdown(id=ID.w_kernel, options=list(kernels),
                                   value="zyfa-fp8" if "zyfa-fp8" in kernels else (list(kernels) or [None])[0],
                                   clearable=False, style={"width": "200px"})], style=cell),
            html.Div([html.Span("seqlen", style=label),
                      dcc.Input(id=ID.w_seqlen, type="number", min=64, step=64, value=1024,
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
        ]),
        dcc.Graph(id=ID.timeline, config={"displaylogo": False, "scrollZoom": False}),
    )
    tables = html.Div([
        _section("Metrics (zyfa.analyzer)",
                 dcc.RadioItems(id=ID.window, options=list(metrics.WINDOWS), value="steady", inline=True),
                 html.Div(id=ID.metrics), style={"flex": "1"}),
        _section("Instruction details", html.Div(id=ID.details, children="click an instruction on the timeline "
                                                                          "or in the table"),
                 style={"flex": "1"}),
    ], style={"display": "flex", "gap": "12px"})
    columns = [{"field": "row", "headerName": "#", "width": 80, "filter": "agNumberColumnFilter"}] + [
        {"field": c, "filter": "agNumberColumnFilter" if c in _NUMERIC else "agTextColumnFilter"}
        for c in COLUMNS if c not in ("cu", "pc")
    ]
    grid = _section(
        "Instructions",
        html.Div([dcc.RadioItems(id=ID.grid_slot, options=[{"label": "A", "value": "a"}, {"label": "B", "value": "b"}],
                                 value="a", inline=True, style=cell),
                  html.Span(id=ID.grid_info, style={"color": "#555"})]),
        dag.AgGrid(id=ID.grid, columnDefs=columns, rowData=[], getRowId="params.data.id",
                   defaultColDef={"sortable": True, "filter": True, "floatingFilter": True, "resizable": True,
                                  "minWidth": 70},
                   dashGridOptions={"rowSelection": {"mode": "singleRow", "checkboxes": False,
                                                     "enableClickSelection": True},
                                    "animateRows": False},
                   columnSize="autoSize", style={"height": "360px"}),
    )
    valu = _section("VALU/TRANS cycles per key block by opcode class (zyfa.analyzer.valu_by_class, metric window)",
                    dcc.Graph(id=ID.valu))
    stalls = _section("Stall cycles by unit and reason (zyfa.analyzer.stall_breakdown, metric window)",
                      dcc.Graph(id=ID.stalls))
    return html.Div([
        html.H2("zyfa schedule explorer", style={"margin": "4px 0"}),
        html.Div("Cycle-model traces are simulated (CDNA4 cycle model), not measured.",
                 style={"color": "#666", "fontSize": "12px"}),
        sources, whatif, view, tables, grid, valu, stalls,
        dcc.Store(id=ID.view), dcc.Store(id=ID.selected),
    ], style={"fontFamily": "sans-serif", "fontSize": "14px", "margin": "8px 16px"})


# -- app ---------------------------------------------------------------------------------------
def create_app(store: TraceStore, simulator: Optional[Simulator] = None, kernels: Sequence[str] = (),
               params: Optional[dict[str, tuple]] = None) -> dash.Dash:
    """The explorer over ``store``.

    ``simulator`` (``WhatIf -> Trace``) enables the what-if panel for ``kernels`` with the
    generator parameters ``params`` (name -> choices; default :func:`generator_parameters`).
    """
    if not isinstance(store, TraceStore):
        raise TypeError(f"create_app: store must be a TraceStore, got {type(store).__name__}")
    if simulator is not None and not callable(simulator):
        raise TypeError(f"create_app: simulator must be a callable WhatIf -> Trace, got {type(simulator).__name__}")
    app = dash.Dash(__name__, title="zyfa schedule explorer", update_title=None)
    params = generator_parameters() if params is None else dict(params)
    app.layout = lambda: build_layout(store, list(kernels), params, simulator is not None)
    _register_file_route(app, store)
    _register_callbacks(app, store, simulator)
    return app


def _register_file_route(app: dash.Dash, store: TraceStore) -> None:
    """``GET /traces/<path>``: download a trace file, only under the allowed directories/files."""

    @app.server.route("/traces/<path:name>")
    def trace_file(name: str):
        try:
            path = store.resolve(name)
        except UnsafePathError:
            abort(403)
        return send_file(path, mimetype="application/vnd.apache.parquet", as_attachment=True)


def _panels(store: TraceStore, a: Optional[str], b: Optional[str]) -> list[tuple[str, figures.Panel]]:
    """``(slot, panel)`` for the traces chosen in A and B (missing or unloadable ones skipped)."""
    out = []
    for slot, trace_id in zip(SLOTS, (a, b)):
        if not trace_id:
            continue
        trace = store.get(trace_id)
        out.append((slot, figures.Panel(figures.panel_title(slot.upper(), trace), trace)))
    return out


def _full_view(panels: list[tuple[str, figures.Panel]]) -> tuple[float, float]:
    spans = [timeline.extent(p.trace) for _, p in panels] or [(0, 1)]
    return float(min(s for s, _ in spans)), float(max(e for _, e in spans))


def _record(trace: Trace, row: int) -> dict:
    return {c: (v.item() if hasattr(v, "item") else v) for c, v in trace.table.slice(row, 1).to_pylist()[0].items()}


def analyzer_doc(metric: str) -> str:
    """First paragraph of a metric's docstring (its definition), for the table's tooltips."""
    m = METRICS.get(metric)
    doc = (m.fn.__doc__ or "") if m is not None else ""
    return " ".join(doc.strip().split("\n\n")[0].split())


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
            request = WhatIf(kernel=kernel, seqlen=int(seqlen or 0), heads=int(heads or 0), params=chosen)
        except (ValueError, TypeError) as exc:
            return dash.no_update, dash.no_update, dash.no_update, f"what-if rejected: {exc}"
        try:
            trace = simulator(request)
        except (ValueError, TypeError) as exc:
            return dash.no_update, dash.no_update, dash.no_update, f"what-if rejected: {exc}"
        except Exception as exc:  # the simulator is another package: report any failure on the page
            return dash.no_update, dash.no_update, dash.no_update, \
                f"simulation of {request.label} failed: {type(exc).__name__}: {exc}"
        new = store.add(trace, f"what-if: {request.label}")
        opts = _options(store)
        return opts, opts, new, f"simulated {request.label}: {len(trace)} records (shown as B)"

    # -- view range: zoom, iteration, reset ------------------------------------------------
    @app.callback(
        Output(ID.view, "data"),
        Input(ID.timeline, "relayoutData"), Input(ID.iteration, "value"), Input(ID.reset, "n_clicks"),
        Input(ID.trace_a, "value"), Input(ID.trace_b, "value"),
        State(ID.view, "data"),
    )
    def update_view(relayout, iteration, _reset, a, b, current):
        panels = _panels(store, a, b)
        full = _full_view(panels)
        trigger = ctx.triggered_id
        if trigger == ID.timeline:
            asked = parse_relayout(relayout)
            if asked is None:
                raise PreventUpdate
            target = full if asked == "reset" else asked
        elif trigger == ID.iteration and iteration is not None and panels:
            target = timeline.iteration_span(panels[0][1].trace, int(iteration))
        else:
            target = full
        target = [float(target[0]), float(target[1])]
        if current == target:
            raise PreventUpdate
        return target

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
        Output(ID.timeline, "figure"), Output(ID.view_info, "children"),
        Input(ID.view, "data"), Input(ID.selected, "data"),
        State(ID.trace_a, "value"), State(ID.trace_b, "value"),
    )
    def draw_timeline(view_range, selected, a, b):
        panels = _panels(store, a, b)
        x0, x1 = view_range or _full_view(panels)
        view = timeline.View(x0, x1)
        slots = [s for s, _ in panels]
        sel = None
        if selected and selected.get("slot") in slots:
            sel = (slots.index(selected["slot"]), int(selected["row"]))
        fig = figures.schedule_figure([p for _, p in panels], view, sel)
        mode = "merged segments (zoom in for single instructions)" if fig.layout.meta["decimated"] else \
            "every instruction"
        return fig, f"cycles {x0:,.0f}–{x1:,.0f}: {mode}"

    # -- metrics, VALU chart ------------------------------------------------------------------
    @app.callback(Output(ID.metrics, "children"), Output(ID.valu, "figure"), Output(ID.stalls, "figure"),
                  Input(ID.trace_a, "value"), Input(ID.trace_b, "value"), Input(ID.window, "value"),
                  Input(ID.view, "data"))
    def metric_views(a, b, choice, view_range):
        panels = dict(_panels(store, a, b))
        if "a" not in panels:
            return "choose trace A", figures.valu_figure([]), figures.stall_figure([])
        window = metrics.window_spec(choice, view_range or _full_view(list(panels.items())))
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
        stalls = figures.stall_figure([(slot.upper(), metrics.stall_breakdown(p.trace, window))
                                       for slot, p in panels.items()])
        return table, valu, stalls

    # -- instruction table and selection ------------------------------------------------------
    @app.callback(
        Output(ID.grid, "rowData"), Output(ID.grid_info, "children"),
        Input(ID.grid_slot, "value"), Input(ID.view, "data"),
        Input(ID.trace_a, "value"), Input(ID.trace_b, "value"),
    )
    def grid_rows(slot, view_range, a, b):
        panels = dict(_panels(store, a, b))
        if slot not in panels:
            return [], f"no trace in {slot.upper()}"
        trace = panels[slot].trace
        x0, x1 = view_range or _full_view(list(panels.items()))
        rows, total = timeline.rows_in_view(trace, x0, x1, GRID_MAX_ROWS)
        data = trace.table.take(rows).to_pylist()
        for r, rec in zip(rows, data):
            rec["row"], rec["id"] = int(r), str(r)
        more = f" (first {len(rows)}; zoom in for the rest)" if total > len(rows) else ""
        return data, f"{total} instructions in view{more}"

    @app.callback(
        Output(ID.selected, "data"), Output(ID.grid_slot, "value"),
        Input(ID.timeline, "clickData"), Input(ID.grid, "cellClicked"),
        State(ID.grid_slot, "value"), State(ID.trace_a, "value"), State(ID.trace_b, "value"),
        prevent_initial_call=True,
    )
    def select(click, cell, grid_slot, a, b):
        slots = [s for s, _ in _panels(store, a, b)]
        if ctx.triggered_id == ID.timeline:
            point = (click or {}).get("points", [{}])[0]
            custom = point.get("customdata")
            if not custom or int(custom[1]) < 0 or int(custom[0]) >= len(slots):
                raise PreventUpdate
            slot = slots[int(custom[0])]
            return {"slot": slot, "row": int(custom[1])}, slot
        if not cell or cell.get("rowId") is None:
            raise PreventUpdate
        return {"slot": grid_slot, "row": int(cell["rowId"])}, dash.no_update

    @app.callback(
        Output(ID.details, "children"), Output(ID.grid, "selectedRows"), Output(ID.grid, "scrollTo"),
        Input(ID.selected, "data"), State(ID.trace_a, "value"), State(ID.trace_b, "value"),
        prevent_initial_call=True,
    )
    def show_details(selected, a, b):
        panels = dict(_panels(store, a, b))
        if not selected or selected.get("slot") not in panels:
            raise PreventUpdate
        trace = panels[selected["slot"]].trace
        row = int(selected["row"])
        if not 0 <= row < len(trace):
            raise PreventUpdate
        rec = _record(trace, row)
        items = [html.Tr([html.Th("trace"), html.Td(panels[selected["slot"]].title)]),
                 html.Tr([html.Th("row"), html.Td(str(row))])]
        items += [html.Tr([html.Th(k), html.Td("—" if v is None else str(v), **{"data-field": k})])
                  for k, v in rec.items()]
        if rec.get("end") is not None:
            items.append(html.Tr([html.Th("busy cycles"), html.Td(str(rec["end"] - rec["start"]))]))
        return (html.Table(items, id="details-table"), {"ids": [str(row)]},
                {"rowId": str(row), "rowPosition": "middle"})


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

    def run(self) -> None:
        self._server.serve_forever()

    def shutdown(self) -> None:
        self._server.shutdown()


def is_loopback(host: str) -> bool:
    """Whether ``host`` names a loopback address (``127.0.0.1``, ``::1``, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(args: argparse.Namespace) -> int:
    """Run the explorer for ``zyfa-ui`` until interrupted; returns the exit status."""
    try:
        store = TraceStore(args.trace_dir or [], args.traces or [])
    except (TypeError, ValueError) as exc:
        print(f"zyfa-ui: {exc}", file=sys.stderr)
        return 2
    for entry in store.entries():
        try:
            store.get(entry.id)
        except TraceError as exc:
            print(f"zyfa-ui: {exc}", file=sys.stderr)
            return 2
    simulator, kernels, why = default_simulator()
    if simulator is None:
        print(f"zyfa-ui: what-if disabled: {why}", file=sys.stderr)
    if not store.entries() and simulator is not None and getattr(args, "simulate", True):
        for kernel in [k for k in DEFAULT_PAIR if k in kernels]:
            request = WhatIf(kernel=kernel, seqlen=args.seqlen)
            print(f"zyfa-ui: no trace given: simulating {request.label} on the CDNA4 cycle model ...", flush=True)
            try:
                store.add(simulator(request), f"simulated: {request.label}")
            except Exception as exc:  # the simulator is another package: report and serve without it
                print(f"zyfa-ui: simulating {kernel} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    if not is_loopback(args.host):
        print(f"zyfa-ui: warning: serving on {args.host}, reachable from other machines; the page has no "
              "authentication", file=sys.stderr)
    app = create_app(store, simulator, kernels)
    server = ServerThread(app, args.host, args.port)
    print(f"zyfa-ui: {len(store.entries())} trace(s); open {server.url}/  (Ctrl-C to stop)", flush=True)
    server.start()
    try:
        server.join()
    except KeyboardInterrupt:
        server.shutdown()
    return 0
