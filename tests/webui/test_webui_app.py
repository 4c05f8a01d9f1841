"""App helpers, figures, metric formatting and what-if requests (no browser)."""

from __future__ import annotations

import math

import pytest

from zyfa import analyzer
from zyfa.webui import metrics
from zyfa.webui.app import ServerThread, create_app, default_pair, is_loopback, parse_relayout
from zyfa.webui.figures import Panel, schedule_figure, valu_figure
from zyfa.webui.store import TraceStore
from zyfa.webui.timeline import View
from zyfa.webui.whatif import WhatIf


@pytest.mark.parametrize("data, expected", [
    ({"xaxis.range[0]": 10, "xaxis.range[1]": 20.5}, (10.0, 20.5)),
    ({"xaxis3.range[0]": 1, "xaxis3.range[1]": 2}, (1.0, 2.0)),
    ({"xaxis2.range": [5, 7]}, (5.0, 7.0)),
    ({"xaxis.autorange": True}, "reset"),
    ({"yaxis.range[0]": 1, "yaxis.range[1]": 2}, None),
    ({"autosize": True}, None),
    ({"xaxis.range[0]": 5, "xaxis.range[1]": 5}, None),
    (None, None),
])
def test_parse_relayout(data, expected):
    assert parse_relayout(data) == expected


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
    assert default_pair(TraceStore([tmp_path / "a0.parquet"] and [], [tmp_path / "a0.parquet"])) == (
        f"file:{(tmp_path / 'a0.parquet').resolve()}", None)


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
    bars = [t for t in fig.data if t.type == "bar"]
    assert sum(len(t.base) for t in bars) == len(a) + len(b)
    rows = {(p, r) for t in bars for p, r in t.customdata}
    assert rows == {(0, r) for r in range(len(a))} | {(1, r) for r in range(len(b))}
    assert not fig.layout.meta["decimated"]
    (shape,) = fig.layout.shapes
    assert (shape.x0, shape.x1) == (int(b.column("start")[5]), int(b.column("end")[5]))
    assert fig.layout.xaxis.range == (0, 400)


def test_schedule_figure_decimates_and_handles_no_panel(make_trace):
    fig = schedule_figure([Panel("A", make_trace(iterations=50))], View(0, 6400, budget=100, bins=50))
    assert fig.layout.meta["decimated"]
    assert all(r == -1 for t in fig.data if t.type == "bar" for _, r in t.customdata)
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
    text = mfma.hovertext[[r for _, r in mfma.customdata].index(row)]
    assert text == ("<b>v_mfma_f32_32x32x64_f8f6f4</b> a[0:15], v[0:7], v[64:71], a[0:15]"
                    "<br>issue 0 · start 0 · end 16 (16 cycles)<br>stall 2 (dependency)<br>region QK_0")


def test_stall_figure_uses_analyzer_table(make_trace):
    from zyfa.webui.figures import stall_figure

    t = make_trace()
    frame = analyzer.stall_breakdown(t, "whole")
    fig = stall_figure([("A", frame)])
    # 2 SIMDs x 2 waves x 3 iterations: each first MFMA of a phase waits 2 cycles on a dependency
    assert list(fig.data[0].x) == ["MFMA dependency"] and list(fig.data[0].y) == [2 * 2 * 3 * 2]
