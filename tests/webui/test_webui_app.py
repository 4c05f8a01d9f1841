"""App helpers, figures, metric formatting and what-if requests (no browser)."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from zyfa import analyzer
from zyfa.kernels import baseline, gfx950, registry
from zyfa.webui import app as app_module
from zyfa.webui import metrics
from zyfa.shapes import AttnShape
from zyfa.trace.cdna4 import power, tracer
from zyfa.trace.schema import Trace
from zyfa.webui.app import (GRAPH_CONFIG, ServerThread, create_app, default_pair, host_allowed, is_loopback,
                            positive_int)
from zyfa.webui.figures import Panel, decode, encode, schedule_figure, stall_figure, valu_figure
from zyfa.webui.store import TraceStore
from zyfa.webui.timeline import View
from zyfa.webui.timeline import markers as timeline_markers
from zyfa.webui import whatif
from zyfa.webui.whatif import WhatIf


def test_is_loopback():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4") and not is_loopback("example.org")


def test_default_pair_prefers_zyfa_and_aiter(tmp_path, make_trace):
    make_trace("aiter-like-fp8").save(tmp_path / "a1")
    make_trace("other").save(tmp_path / "a0")
    make_trace("zyfa-fp8").save(tmp_path / "z")
    store = TraceStore([tmp_path])
    a, b = default_pair(store)
    assert (store.get(a).meta.kernel, store.get(b).meta.kernel) == ("zyfa-fp8", "aiter-like-fp8")
    # the CLI's default pairs come first, in their order, when both traces are there
    make_trace("zyfa-bf16").save(tmp_path / "zb")
    make_trace("aiter:fwd_hd128_bf16_causal").save(tmp_path / "ab")
    store = TraceStore([tmp_path])
    a, b = default_pair(store, [("zyfa-bf16", "aiter:fwd_hd128_bf16_causal"), ("zyfa-fp8", "aiter-like-fp8")])
    assert (store.get(a).meta.kernel, store.get(b).meta.kernel) == ("zyfa-bf16", "aiter:fwd_hd128_bf16_causal")
    a, b = default_pair(store, [("zyfa-bf16", "missing"), ("zyfa-fp8", "aiter-like-fp8")])
    assert (store.get(a).meta.kernel, store.get(b).meta.kernel) == ("zyfa-fp8", "aiter-like-fp8")
    # ids name files relatively: the browser never learns the server's absolute paths
    assert default_pair(TraceStore([], [tmp_path / "a0.parquet"])) == ("file:a0.parquet", None)


def test_create_app_validates_arguments(tmp_path):
    with pytest.raises(TypeError, match="store must be a TraceStore"):
        create_app("traces/")
    with pytest.raises(TypeError, match="simulator must be a callable"):
        create_app(TraceStore([tmp_path]), simulator=42)


def test_file_route_serves_only_allowed_traces(tmp_path, make_trace):
    make_trace().save(tmp_path / "traces" / "z")
    make_trace().save(tmp_path / "secret")
    client = create_app(TraceStore([tmp_path / "traces"])).server.test_client()
    ok = client.get("/traces/z.parquet")
    assert ok.status_code == 200 and ok.data[:4] == b"PAR1"
    for bad in ("/traces/../secret.parquet", "/traces/..%2Fsecret.parquet", "/traces/z.json",
                f"/traces/..{tmp_path / 'secret.parquet'}"):
        assert client.get(bad).status_code == 403, bad
    # "/traces//abs/path" never reaches the route: Dash answers with its index page, not the file
    page = client.get(f"/traces/{tmp_path / 'secret.parquet'}")
    assert page.data[:4] != b"PAR1" and b"<html" in page.data.lower()


def test_server_thread_binds_loopback_free_port(tmp_path, make_trace):
    make_trace().save(tmp_path / "z")
    server = ServerThread(create_app(TraceStore([tmp_path])), "127.0.0.1", 0)
    server.start()
    try:
        import urllib.request
        assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}"
        with urllib.request.urlopen(server.url + "/_dash-layout") as resp:
            assert b"trace-a" in resp.read()
    finally:
        server.shutdown()


# -- figures ---------------------------------------------------------------------------------------

def test_schedule_figure_tracks_customdata_and_outline(make_trace):
    a, b = make_trace("zyfa-fp8"), make_trace("aiter-like-fp8", simds=1)
    fig = schedule_figure([Panel("A", a), Panel("B", b)], View(0, 400), selected=(1, 5))
    axes = [fig.layout[k] for k in ("yaxis", "yaxis3")]
    assert [list(ax.ticktext) for ax in axes] == [["CU0 S0 w0", "CU0 S0 w1", "CU0 S1 w2", "CU0 S1 w3"],
                                                  ["CU0 S0 w0", "CU0 S0 w1"]]
    bars = [t for t in fig.data if t.type == "bar" and t.meta is None]  # one bar per record (meta: stall lanes)
    assert sum(len(t.base) for t in bars) == len(a) + len(b)
    stall_bars = [t for t in fig.data if t.meta == "stall"]
    waited = sum(int(((t.column("stall") > 0) & (t.column("issue") > 0)).sum()) for t in (a, b))  # [issue-stall, issue) in view
    assert sum(len(t.base) for t in stall_bars) == waited
    first = next(t for t in stall_bars if t.name == "stall: dependency")
    assert (first.base[0], first.x[0]) == (int(a.column("issue")[decode(first.customdata[0])[1]]) - 2, 2)
    rows = {decode(c) for t in bars for c in t.customdata}
    assert rows == {(0, r) for r in range(len(a))} | {(1, r) for r in range(len(b))}
    assert not fig.layout.meta["decimated"]
    (shape,) = fig.layout.shapes
    assert (shape.x0, shape.x1) == (int(b.column("start")[5]), int(b.column("end")[5]))
    assert fig.layout.xaxis.range == (0, 400)


def test_schedule_figure_carries_data_beyond_the_view_and_says_which(make_trace):
    t = make_trace(iterations=6)  # 0..768 cycles
    fig = schedule_figure([Panel("A", t)], View(300, 400), pad=0.5)
    assert fig.layout.xaxis.range == (300, 400)  # shown: the view
    meta = fig.layout.meta
    assert (meta["view"], meta["x0"], meta["x1"], meta["extent"]) == ([300, 400], 250, 450, [0, 768])
    assert not meta["decimated"] and meta["resolution"] == 0
    bars = [t for t in fig.data if t.type == "bar" and t.meta is None]
    start, end = t.column("start"), np.maximum(t.column("end"), t.column("start") + 1)
    want = np.flatnonzero((end > 250) & (start < 450))  # every record of the covered range, not only the view's
    assert sorted(decode(c)[1] for b in bars for c in b.customdata) == want.tolist()
    merged = schedule_figure([Panel("A", t)], View(0, 768, budget=10, bins=64), pad=0.5).layout.meta
    assert merged["decimated"] and (merged["x0"], merged["x1"], merged["resolution"]) == (0, 768, 12)


def test_schedule_figure_decimates_and_handles_no_panel(make_trace):
    fig = schedule_figure([Panel("A", make_trace(iterations=50))], View(0, 6400, budget=100, bins=50))
    assert fig.layout.meta["decimated"]
    assert all(decode(c)[1] == -1 for t in fig.data if t.type == "bar" for c in t.customdata)
    assert not [t for t in fig.data if t.meta == "stall"]  # stalls are drawn once zoomed in
    empty = schedule_figure([], View(0, 1))
    assert empty.layout.annotations[0].text == "no trace loaded"
    with pytest.raises(TypeError, match="Panel.trace must be a Trace"):
        Panel("A", "trace.parquet")


def test_valu_figure_uses_analyzer_table(make_trace):
    t = make_trace()
    frame = analyzer.valu_by_class(t, "whole")
    fig = valu_figure([("A", frame)])
    assert list(fig.data[0].x) == [f"{u} {c}" for u, c in zip(frame["unit"], frame["op_class"])]
    assert list(fig.data[0].y) == list(frame["cycles_per_block"])


# -- metrics ---------------------------------------------------------------------------------------

def test_metric_table_is_the_analyzer_compare(make_trace):
    a, b = make_trace(), make_trace("aiter-like-fp8", valu_ops=24, gap=8)
    got = metrics.table(a, b, "steady")
    want = analyzer.compare(a, b, "steady")
    assert got.equals(want)
    assert metrics.table(a, b, "steady") is got  # cached
    one = metrics.table(a, None, "whole")
    s = analyzer.summary(a, "whole")
    assert list(one["metric"]) == list(s)
    assert [None if math.isnan(v) else v for v in one["a"]] == list(s.values())


def test_region_table_aligns_by_loop_structure_then_by_region(make_trace):
    a, b = make_trace(), make_trace("aiter-like-fp8", valu_ops=24, gap=8)
    frames = {"a": metrics.listing(a, "whole"), "b": metrics.listing(b.__class__(b.df.assign(region=None), b.meta),
                                                                       "whole")}
    out = metrics.region_table(frames)
    loop = out[(out["level"] == "loop structure")].set_index("region")
    assert list(loop.index) == ["loop"]  # every fixture pc runs in every iteration
    assert (loop.loc["loop", "A_executions"], loop.loc["loop", "B_executions"]) == (len(a), len(b))
    named = out[out["level"] == "schedule region"].set_index("region")
    assert set(named.index) == {"QK_0", "softmax_0", "loop"}  # per pc its most frequent name (ties: the first)
    assert named.loc["loop", "A_executions"] == 0 and named.loc["loop", "B_executions"] == len(b)  # B names none
    assert loop.loc["loop", "B−A busy+stall"] == (loop.loc["loop", "B_busy"] + loop.loc["loop", "B_stall"]
                                                   - loop.loc["loop", "A_busy"] - loop.loc["loop", "A_stall"])
    unnamed = metrics.region_table({"b": frames["b"]})
    assert set(unnamed["level"]) == {"loop structure"}  # no names: the loop structure alone


def test_window_spec():
    assert metrics.window_spec("steady") == "steady"
    assert metrics.window_spec("view", (10.4, 20.2)) == (10, 21)
    with pytest.raises(ValueError, match="window must be one of"):
        metrics.window_spec("middle")
    with pytest.raises(ValueError, match="needs the timeline range"):
        metrics.window_spec("view")


@pytest.mark.parametrize("value, unit, text", [
    (0.8571, "fraction", "85.7 %"), (None, "", "—"), (float("nan"), "cycles", "—"), (1024.0, "cycles", "1,024"),
    (3.14159, "", "3.142"), (1234.5678, "", "1,234.6"), (1.572864e9, "flop", "1.573e+09"), (-0.0004, "", "-0.0004"),
])
def test_fmt(value, unit, text):
    assert metrics.fmt(value, unit) == text


# -- what-if requests ------------------------------------------------------------------------------

def test_whatif_runs_the_lazy_rescale_at_its_measured_rate(monkeypatch):
    """Where a generator kernel's rescale rate is measured for the shape, the what-if simulates it
    there, as zyfa-trace kernel does (a stand-in measurement at s2048 keeps the test small)."""
    monkeypatch.setitem(gfx950.MEASURED_RESCALE_RATES, ("zyfa-fp8", 2048), {"gaussian": 0.25, "sink": 0.125})
    request = WhatIf("zyfa-fp8", seqlen=2048, heads=1)
    trace = whatif.simulate(request)
    shape = registry.spec_of("zyfa-fp8").fit(request.shape)
    assert tracer.measured_rescale("zyfa-fp8", shape) == (Fraction(1, 4), "gaussian")
    at_rate = tracer.simulate("zyfa-fp8", shape, rescale_rate=Fraction(1, 4))[1].cycles
    never = tracer.simulate("zyfa-fp8", shape)[1].cycles
    assert trace.meta.extra["predicted_cycles"] == at_rate != never
    assert "lazy O rescale at its measured 25.00 %, gaussian inputs" in trace.meta.provenance["command"]
    assert tracer.measured_rescale("aiter-like-fp8", shape) is None


def test_whatif_request():
    r = WhatIf("zyfa-fp8", seqlen=2048, heads=2, params={"softmax": "exact", "schedule": "serial"})
    assert r.params == (("schedule", "serial"), ("softmax", "exact"))
    assert r.label == "zyfa-fp8 schedule=serial softmax=exact · b1 h2 s2048 d128"
    assert (r.shape.seqlen_q, r.shape.heads, r.shape.heads_k) == (2048, 2, 2)


@pytest.mark.parametrize("kwargs, exc, message", [
    (dict(kernel=""), ValueError, "WhatIf.kernel"),
    (dict(seqlen=0), ValueError, "WhatIf.seqlen must be a positive int"),
    (dict(heads=True), ValueError, "WhatIf.heads must be a positive int"),
    (dict(params=(("a", 1), ("a", 2))), ValueError, "names a parameter twice"),
    (dict(params=5), TypeError, "WhatIf.params must be"),
])
def test_whatif_validation(kwargs, exc, message):
    with pytest.raises(exc, match=message):
        WhatIf(**kwargs)


def test_hover_text_names_instruction_cycles_and_stall(make_trace):
    t = make_trace(simds=1, iterations=1)
    fig = schedule_figure([Panel("A", t)], View(0, 128))
    mfma = next(tr for tr in fig.data if tr.type == "bar" and tr.name == "MFMA")
    row = t.column("start").tolist().index(0)  # w0's first MFMA: [0, 16), stalled 2 cycles on a dependency
    text = mfma.hovertext[[decode(c)[1] for c in mfma.customdata].index(row)]
    assert text == ("<b>v_mfma_f32_32x32x64_f8f6f4</b> a[0:15], v[0:7], v[64:71], a[0:15]"
                    "<br>issue 0 · start 0 · end 16 (16 cycles)<br>stall 2 (dependency)<br>region QK_0")


def test_stall_figure_labels_by_reason_not_by_waiting_unit(make_trace):
    t = make_trace()
    fig = stall_figure([("A", metrics.stall_by_reason(t, "whole"))])
    # 2 SIMDs x 2 waves x 3 iterations: each first MFMA of a phase waits 2 cycles on a dependency
    assert list(fig.data[0].x) == ["dependency"] and list(fig.data[0].y) == [2 * 2 * 3 * 2]
    assert fig.data[0].customdata[0][1] == "MFMA 24"  # the units of the instructions that waited


def test_barrier_stall_is_not_called_a_salu_barrier(make_trace):
    """The record after s_barrier carries the barrier stall; the chart says "barrier", and names
    the waiting instruction's unit only as the one that waited."""
    base = make_trace(simds=1, iterations=1)
    df = base.df
    extra = df.iloc[[0]].copy()
    extra["opcode"], extra["unit"], extra["stall"], extra["stall_reason"] = "s_mov_b32", "SALU", 40, "barrier"
    extra["issue"] = extra["start"] = 1000
    extra["end"] = 1001
    t = Trace(pd.concat([df, extra], ignore_index=True), base.meta)
    by_reason = metrics.stall_by_reason(t, "whole")
    row = by_reason.set_index("reason").loc["barrier"]
    assert (row["stall_cycles"], row["waiting"]) == (40, "SALU 40")
    assert "SALU barrier" not in list(stall_figure([("A", by_reason)]).data[0].x)


def test_metric_definitions_are_text_not_rest():
    for name in analyzer.METRICS:
        text = metrics.definition(name)
        assert text and "``" not in text and ":func:" not in text and ":class:" not in text, (name, text)
    assert "`zyfa.analyzer.tables.ARCHS`" not in metrics.definition("tflops_device")
    with pytest.raises(KeyError, match="unknown metric"):
        metrics.definition("nope")


# -- headline -------------------------------------------------------------------------------------

def test_headline_is_the_clis_prediction(make_trace):
    """Time = predicted cycles / the power model's clock on the trace's records, as zyfa-trace kernel
    computes it (zyfa/cli/kernel_cmd.py); a trace simulated at a forced clock keeps that clock."""
    a, b = make_trace(), make_trace("aiter-like-fp8", valu_ops=24, gap=8)
    for t, cycles in ((a, 48000), (b, 72000)):
        t.meta.extra.update(predicted_cycles=cycles)
    ha, hb = metrics.headline(a), metrics.headline(b)
    records = {c: a.df[c].to_numpy() for c in ("unit", "opcode", "issue", "start", "end")}
    clock = power.predict_clock(power.activity(records), a.meta.attn_shape.dtype)
    assert ha.clock_mhz == clock.mhz and ha.seconds == 48000 / (clock.mhz * 1e6)
    assert ha.tflops == a.meta.attn_shape.tflops(ha.seconds) and ha.clock_note == str(clock)
    assert metrics.speedup(ha, hb) == hb.seconds / ha.seconds
    forced = make_trace()
    forced = Trace(forced.df, dataclasses.replace(forced.meta, clock_mhz=1500.0, extra={"predicted_cycles": 3000}))
    assert metrics.headline(forced).seconds == 3000 / 1.5e9
    assert metrics.headline(make_trace()).seconds is None  # no prediction (a hardware capture): no numbers
    assert metrics.speedup(ha, metrics.headline(make_trace())) is None


def test_reconstruction_is_labelled_in_headline_and_panel_title(tmp_path, make_trace):
    """aiter-like-fp8 is ours, not AITER's code: the headline and its timeline title say so."""
    assert metrics.reconstruction_note("aiter-like-fp8") == baseline.RECONSTRUCTIONS["aiter-like-fp8"]
    assert metrics.reconstruction_note("aiter-like-fp8[schedule=serial]") == baseline.RECONSTRUCTIONS["aiter-like-fp8"]
    assert metrics.reconstruction_note("aiter:fwd_hd128_bf16_causal") == ""
    make_trace("zyfa-fp8").save(tmp_path / "z")
    make_trace("aiter-like-fp8").save(tmp_path / "a")
    store = TraceStore([tmp_path])
    a, b = default_pair(store)
    lines = app_module._headline(store, a, b)
    text = [str(line) for line in lines]
    assert "OUR RECONSTRUCTION" in text[1] and "OUR RECONSTRUCTION" not in text[0]
    titles = {slot: p.title for slot, p in app_module._panels(store, a, b)}
    assert titles["b"].endswith(baseline.RECONSTRUCTIONS["aiter-like-fp8"]) and "RECONSTRUCTION" not in titles["a"]


# -- request checks: Host / Origin, forged ids, grid requests --------------------------------------

@pytest.mark.parametrize("host, origin, hosts, ok", [
    ("127.0.0.1:8050", None, (), True),
    ("localhost:8050", "http://localhost:8050", (), True),
    ("[::1]:8050", "http://[::1]:8050", (), True),
    ("evil.example:8050", None, (), False),  # DNS rebinding: the attacker's name in Host
    ("127.0.0.1:8050", "http://evil.example", (), False),  # cross-site request
    ("127.0.0.1:8050", "null", (), False),
    (None, None, (), False),
    ("box.lan:8050", "http://box.lan:8050", ("box.lan",), True),
])
def test_host_allowed(host, origin, hosts, ok):
    assert host_allowed(host, origin, hosts) is ok


def test_host_and_origin_checked_on_every_route(tmp_path, make_trace):
    make_trace().save(tmp_path / "z")
    client = create_app(TraceStore([tmp_path])).server.test_client()
    assert client.get("/", headers={"Host": "127.0.0.1:8050"}).status_code == 200
    for headers in ({"Host": "rebind.example:8050"}, {"Host": "127.0.0.1", "Origin": "http://evil.example"}):
        for path in ("/", "/_dash-layout", "/traces/z.parquet"):
            assert client.get(path, headers=headers).status_code == 403, (path, headers)
        assert client.post("/_dash-update-component", json={}, headers=headers).status_code == 403


def _dash_call(client, outputs: list[str], inputs: list, state: list = ()):
    """POST one Dash callback request the way the renderer does (``outputs``: ``"id.property"``)."""
    outs = [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in outputs]
    body = {"output": ".." + "...".join(outputs) + ".." if len(outputs) > 1 else outputs[0],
            "outputs": outs if len(outs) > 1 else outs[0], "inputs": inputs, "state": list(state),
            "changedPropIds": [f"{i['id']}.{i['property']}" for i in inputs]}
    return client.post("/_dash-update-component", json=body, headers={"Host": "127.0.0.1"})


def test_forged_trace_ids_are_4xx_not_500(tmp_path, make_trace):
    make_trace().save(tmp_path / "z")
    app = create_app(TraceStore([tmp_path]))
    client = app.server.test_client()
    client.get("/_dash-layout", headers={"Host": "127.0.0.1"})
    for forged in ("file:../../etc/passwd.parquet", "file:/etc/passwd", "sim:999", "upload:x", 5, ["a"]):
        resp = _dash_call(client, ["headline.children", "caveats.children"],
                          [{"id": "trace-a", "property": "value", "value": forged},
                           {"id": "trace-b", "property": "value", "value": None}])
        assert resp.status_code == 400, (forged, resp.status_code)
        assert str(tmp_path) not in resp.get_data(as_text=True)
    ok = _dash_call(client, ["headline.children", "caveats.children"], [{"id": "trace-a", "property": "value", "value": "file:z.parquet"},
                                                  {"id": "trace-b", "property": "value", "value": None}])
    assert ok.status_code == 200


def test_whatif_seqlen_field():
    assert positive_int(100, "seqlen") == 100 and positive_int("256", "seqlen") == 256
    for bad in (None, "", 0, -5, 1.5, "abc", True):
        with pytest.raises(ValueError, match="seqlen"):
            positive_int(bad, "seqlen")


def test_modebar_has_no_cloud_share_button(tmp_path, make_trace):
    assert "sendDataToCloud" in GRAPH_CONFIG["modeBarButtonsToRemove"] and GRAPH_CONFIG["showSendToCloud"] is False


def test_markers_for_extrapolated_periods_and_epilogue(make_trace):
    t = make_trace(simds=1, iterations=3)
    df = t.df
    shift = df["iteration"] >= 2  # the model skipped 5 periods of 128 cycles before iteration 2
    for c in ("issue", "start", "end"):
        df.loc[shift, c] += 640
    meta = dataclasses.replace(t.meta, extra={
        "work_axis": "x", "representative_work_index": 1,
        "samples": [{"coord": [0, 0, 0], "loops_extrapolated": [{"cycles_skipped": 999}]},
                    {"coord": [1, 0, 0], "loops_extrapolated": [{"loop_pc": 256, "period_cycles": 128,
                                                                 "periods_skipped": 5, "cycles_skipped": 640}]}]})
    shifted = Trace(df, meta)
    (m,) = timeline_markers(shifted)
    gap_start = int(df.loc[~shift, "issue"].max())
    assert (m.x0, m.x1) == (gap_start, int(df.loc[shift, "issue"].min()))
    assert "5 loop periods of 128 cycles" in m.label and "x=1 sampled" in m.label
    fig = schedule_figure([Panel("A", shifted)], View(0, 3000))
    assert [tr.name for tr in fig.data if tr.meta == "marker"][0] == "extrapolated (no records)"


def test_markers_where_the_model_states_its_skips(make_trace):
    """A cycle-model trace states where each skip belongs (meta.extra["skipped_periods"], records
    contiguous): a point marker there, drawn as a line when in view, not the gap search."""
    t = make_trace(simds=1, iterations=3)
    at = int(t.df.loc[t.df["iteration"] >= 2, "issue"].min())
    meta = dataclasses.replace(t.meta, extra={
        "work_axis": "x", "representative_work_index": 0,
        "samples": [{"coord": [0, 0, 0], "loops_extrapolated": [{"loop_pc": 256, "period_cycles": 128,
                                                                 "periods_skipped": 5, "cycles_skipped": 640}]}],
        "skipped_periods": [{"at_cycle": at, "cycles": 640, "mfma_cycles": [320], "valu_cycles": 0, "lds_bytes": 0,
                             "vmem_bytes": 0}]})
    stated = Trace(t.df, meta)
    (m,) = timeline_markers(stated)
    assert (m.x0, m.x1, m.kind) == (at, at, "skip")
    assert "5 loop periods of 128 cycles" in m.label and f"belong at cycle {at}" in m.label
    fig = schedule_figure([Panel("A", stated)], View(0, at + 10))
    (line,) = [tr for tr in fig.data if tr.meta == "marker" and tr.name == "extrapolated (no records)"]
    assert list(line.x) == [at, at]
    assert not [tr for tr in schedule_figure([Panel("A", stated)], View(0, at)).data
                if tr.name == "extrapolated (no records)"]  # out of view: not drawn


def test_customdata_encoding_round_trips():
    for panel in range(4):
        for row in (-1, 0, 7, 2 ** 40):
            assert decode(encode(panel, np.array([row]))[0]) == (panel, row)
    with pytest.raises(ValueError, match="panel must be"):
        encode(4, np.array([1]))


BAD_DOWNLOADS = [  # (url, status); the three windows with inf / overflow were 500s
    ("/download/metrics?a=file:z.parquet&window=inf:-inf", 400),
    ("/download/metrics?a=file:z.parquet&window=1e308:1e309", 400),
    ("/download/metrics?a=file:z.parquet&window=" + "9" * 400 + ":1", 400),
    ("/download/perfetto?a=file:z.parquet&window=nan:1", 400),
    ("/download/metrics?a=file:z.parquet&window=a:b", 400),
    ("/download/metrics?a=file:z.parquet&window=1:2:3", 400),
    ("/download/metrics?a=file:z.parquet&window=:", 400),
    ("/download/metrics?a=file:z.parquet&b=file:nope.parquet", 400),
    ("/download/trace", 400),
    ("/download/trace?a=", 400),
    ("/download/trace?a=sim:99999999999999999999", 400),
    ("/download/perfetto?a=file:../../etc/passwd", 400),
    ("/download/trace?a=file:%00", 400),
    ("/download/nope?a=file:z.parquet", 404),
    ("/traces/../../etc/passwd", 403),
    ("/traces/%2e%2e/x", 403),
]


@pytest.mark.parametrize("url,status", BAD_DOWNLOADS, ids=[u for u, _ in BAD_DOWNLOADS])
def test_bad_download_requests_are_4xx_and_name_no_path(tmp_path, make_trace, url, status):
    make_trace().save(tmp_path / "z")
    client = create_app(TraceStore([tmp_path])).server.test_client()
    resp = client.get(url, headers={"Host": "127.0.0.1"})
    assert resp.status_code == status, resp.get_data(as_text=True)[:300]
    assert str(tmp_path) not in resp.get_data(as_text=True)
    ok = client.get("/download/metrics?a=file:z.parquet&window=10:20", headers={"Host": "127.0.0.1"})
    assert ok.status_code == 200 and ok.mimetype == "text/csv"


def test_emitter_sources_link_generator_instructions_to_their_lines(make_trace):
    """A cycle-model trace of a generator kernel (a what-if's parameters included) gets each pc's
    emitter line from the build (recorded at emit time); other traces get none."""
    root = Path(__file__).resolve().parents[2]
    shape = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=256, seqlen_k=256, headdim=128, headdim_v=128, dtype="fp8")
    trace, _ = tracer.simulate("zyfa-fp8", shape, {"schedule": "serial"})
    assert trace.meta.kernel == "zyfa-fp8[schedule=serial]"
    sources = metrics.emitter_sources(trace)
    pcs = set(trace.column("pc").tolist())
    assert sources is not None and pcs <= set(sources)
    for pc in pcs:
        path, line = sources[pc].rsplit(":", 1)
        assert path.startswith("kernels/gfx950/") and 0 < int(line) <= len((root / path).read_text().splitlines())
    assert metrics.emitter_sources(make_trace()) is None  # hand-made records: no build matches their pcs
    # a trace whose recorded regions are not the build's clusters (another generator version): refused
    regions = trace.df["region"].where(trace.df["region"].isna(), "renamed_cluster")
    stale = Trace(trace.df.assign(region=regions), trace.meta)
    assert metrics.emitter_sources(stale) is None
