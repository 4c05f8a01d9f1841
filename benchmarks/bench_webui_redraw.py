"""Schedule explorer: zoom/pan redraw time for a ~50k-record trace (goal: <= 300 ms on the 2-core box).

Not a test (no pass/fail): prints milliseconds and the ratio to the 300 ms goal, with the load average.

The trace is ``bench_analyzer.synthetic_trace`` on one CU (8 waves, ping-pong: 16 MFMA, 192 VALU,
32 TRANS and 8 other records per wave and key block): the cycle model extrapolates steady loop
periods, so its one-CU traces stay near 35k records even at 64k tokens. Two panels (A and B, the
same trace) are drawn, as on the page. Two measurements:

* ``server``: what the page asks of the server when a view needs a new level of detail: the figure
  for both panels (``zyfa.webui.figures.schedule_figure`` with the page's padding: decimated
  segments or single instructions, stall lanes, strips, markers) and its JSON encoding;
* ``browser`` (when Debian's chromium and Playwright are installed; ``--no-browser`` skips it):
  real input events in a real page through the live server (Playwright's mouse and keyboard: a
  drag-zoom to 10 % of the trace, a drag-zoom to 1 %, the D key (pan), a wheel notch out, the W key
  (zoom in), a double click (whole trace)). Timed in the page from the input event's own
  ``timeStamp`` to ``drawn``: the frame after plotly's redraw of the new range (the next
  animation frame after ``plotly_relayout``, for the double click the relayout to the whole
  trace), and to ``settled``: the frame after the last redraw the interaction caused, once no Dash
  callback, debounce timer or plot is pending (the server's new figure, if the view needed one).
  With ``--before REV`` the same sequence also runs, alternating, against the web UI of git
  revision REV (its ``webui/`` served from a subprocess, the rest of zyfa from this checkout).

    python3 benchmarks/bench_webui_redraw.py [--records 50000] [--repeat 3] [--before REV] [--no-browser]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import plotly.io as pio

from bench_analyzer import synthetic_trace  # sibling script: python3 benchmarks/bench_webui_redraw.py
from zyfa.webui import figures, timeline
from zyfa.webui.app import TIMELINE_PAD, ServerThread, create_app
from zyfa.webui.store import TraceStore

GOAL_MS = 300.0
CHROMIUM = "/usr/bin/chromium"
REPO = Path(__file__).resolve().parents[1]


def views(trace) -> list[tuple[str, float, float]]:
    lo, hi = timeline.extent(trace)
    span = hi - lo
    mid = lo + span / 2
    return [("whole trace", lo, hi), ("zoom 10 %", mid - span / 20, mid + span / 20),
            ("zoom 1 %", mid - span / 200, mid + span / 200), ("pan 1 % view right", mid, mid + span / 100),
            ("zoom 30 %", mid - span * 0.15, mid + span * 0.15)]


def server_side(trace, repeat: int) -> list[tuple[str, float, bool, int]]:
    panels = [figures.Panel("A: " + trace.meta.kernel, trace), figures.Panel("B: " + trace.meta.kernel, trace)]
    figures.schedule_figure(panels, timeline.View(*timeline.extent(trace)))  # warm the per-trace caches
    out = []
    for name, x0, x1 in views(trace):
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fig = figures.schedule_figure(panels, timeline.View(x0, x1), pad=TIMELINE_PAD)
            payload = pio.to_json(fig, validate=False)
            times.append(time.perf_counter() - t0)
        out.append((name, 1e3 * statistics.median(times), bool(fig.layout.meta["decimated"]), len(payload)))
    return out


# In-page instrumentation (performance.now(), the time base of an event's timeStamp): the input
# events (capture phase, so before plotly sees them), every plotly relayout/afterplot of the timeline
# with the frame after it, and every Dash request for a timeline figure (old page: output
# 'timeline.figure'; this one: 'timeline-figure') with its size.
PROBE = """
(() => {
  window.zyfaLog = {input: [], relayout: [], plot: [], figure: []};
  const frame = (rec) => requestAnimationFrame(() => setTimeout(() => { rec.frame = performance.now(); }, 0));
  for (const type of ['mouseup', 'wheel', 'keydown', 'dblclick']) {
    window.addEventListener(type, ev => window.zyfaLog.input.push({type: type, t: ev.timeStamp}), true);
  }
  window.zyfaHook = () => {
    const gd = document.querySelector('#timeline .js-plotly-plot');
    if (!gd || gd.zyfaProbe) { return Boolean(gd); }
    gd.zyfaProbe = true;
    gd.on('plotly_relayout', () => { const r = {t: performance.now(), range: gd._fullLayout.xaxis.range.slice(), frame: null};
                                     window.zyfaLog.relayout.push(r); frame(r); });
    gd.on('plotly_afterplot', () => { const r = {t: performance.now(), range: gd._fullLayout.xaxis.range.slice(), frame: null};
                                      window.zyfaLog.plot.push(r); frame(r); });
    return true;
  };
  const fetch0 = window.fetch;
  window.fetch = function(url, opts) {
    const body = (opts && typeof opts.body === 'string') ? opts.body : '';
    if (!String(url).includes('_dash-update-component') || !/timeline[.-]figure/.test(body)) {
      return fetch0.apply(this, arguments);
    }
    const rec = {t0: performance.now(), t1: null, bytes: 0};
    window.zyfaLog.figure.push(rec);
    return fetch0.apply(this, arguments).then(resp => {
      resp.clone().text().then(t => { rec.bytes = t.length; rec.t1 = performance.now(); });
      return resp;
    });
  };
})();
"""
# nothing pending: no Dash callback, no debounce timer of assets/timeline.js, no dcc.Graph plot,
# every request answered and every logged redraw's frame painted
IDLE = """() => { const s = window.store && window.store.getState();
  const dash = s && s.callbacks && Object.entries(s.callbacks).every(([k, v]) => k === 'completed' || !v || !v.length);
  const T = window.zyfaTimeline, timer = !T || (T.state.timer === null && !T.state.drawing);
  const L = window.zyfaLog;
  return Boolean(dash && timer && !document.querySelector('.dash-graph--pending')
    && L.figure.every(r => r.t1 !== null) && L.relayout.every(r => r.frame !== null) && L.plot.every(r => r.frame !== null)); }"""
# viewport pixel of cycle x on the first timeline subplot, at the middle of its rows
PIXEL = """(x) => { const gd = document.querySelector('#timeline .js-plotly-plot');
  const box = gd.getBoundingClientRect(), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
  return [box.left + xa._offset + xa.l2p(x), box.top + ya._offset + ya._length / 2]; }"""
RANGE = "() => document.querySelector('#timeline .js-plotly-plot')._fullLayout.xaxis.range.slice()"


def interactions(lo: float, hi: float) -> list[tuple[str, str, tuple]]:
    """(name, kind, argument): the sequence run per repeat, from the whole trace back to it."""
    span, mid = hi - lo, (lo + hi) / 2
    return [("drag-zoom to 10 %", "drag", (mid - span / 20, mid + span / 20)),
            ("drag-zoom to 1 %", "drag", (mid - span / 200, mid + span / 200)),
            ("D key: pan 20 %", "key", ("d",)), ("wheel out one notch", "wheel", (100,)),
            ("W key: zoom in 30 %", "key", ("w",)), ("double click: whole trace", "dblclick", ())]


def _act(page, kind: str, arg: tuple) -> None:
    if kind == "drag":
        (x0, y), (x1, _) = page.evaluate(PIXEL, arg[0]), page.evaluate(PIXEL, arg[1])
        page.mouse.move(x0, y)
        page.mouse.down()
        page.mouse.move((x0 + x1) / 2, y)
        page.mouse.move(x1, y)
        page.mouse.up()
    elif kind == "key":
        page.keyboard.press(arg[0])
    elif kind == "wheel":
        lo, hi = page.evaluate(RANGE)
        page.mouse.move(*page.evaluate(PIXEL, (lo + hi) / 2))
        page.mouse.wheel(0, arg[0])
    else:
        lo, hi = page.evaluate(RANGE)
        page.mouse.dblclick(*page.evaluate(PIXEL, (lo + hi) / 2))


def _measure(page, kind: str, arg: tuple, extent: tuple[float, float]) -> dict:
    page.evaluate("() => { for (const k of Object.keys(window.zyfaLog)) { window.zyfaLog[k] = []; } }")
    _act(page, kind, arg)
    # the interaction's redraw: plotly's relayout; for the double click, the first redraw (a relayout
    # or a new figure) whose range is the whole trace
    if kind == "dblclick":
        want = ("([a, b]) => window.zyfaLog.relayout.concat(window.zyfaLog.plot).some(r => r.frame !== null"
                " && Math.abs(r.range[0] - a) < 0.5 && Math.abs(r.range[1] - b) < 0.5)")
    else:
        want = "() => window.zyfaLog.relayout.some(r => r.frame !== null)"
    page.wait_for_function(want, arg=list(extent), timeout=600_000)
    page.wait_for_function(IDLE, timeout=600_000)
    log = page.evaluate("() => window.zyfaLog")
    t0 = log["input"][-1]["t"]  # mouseup of a drag, the wheel, the key, the double click
    drawn = log["relayout"]
    if kind == "dblclick":
        drawn = [r for r in log["relayout"] + log["plot"]
                 if abs(r["range"][0] - extent[0]) < 0.5 and abs(r["range"][1] - extent[1]) < 0.5]
    frames = [r["frame"] for r in log["plot"] + log["relayout"]]
    return {"drawn": min(r["frame"] for r in drawn) - t0, "settled": max(frames) - t0,
            "figures": len(log["figure"]), "bytes": sum(r["bytes"] for r in log["figure"])}


def _old_server(rev: str, trace_dir: str, tmp: str) -> tuple[subprocess.Popen, str]:
    """The web UI of git revision ``rev`` serving ``trace_dir``, in a subprocess; returns it and its URL."""
    root = Path(tmp) / "before"
    root.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "webui"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    code = (
        "import importlib.util, sys\n"
        "import zyfa\n"
        "spec = importlib.util.spec_from_file_location('zyfa.webui', sys.argv[1] + '/webui/__init__.py',"
        " submodule_search_locations=[sys.argv[1] + '/webui'])\n"
        "mod = importlib.util.module_from_spec(spec); sys.modules['zyfa.webui'] = mod; spec.loader.exec_module(mod)\n"
        "from zyfa.webui.app import ServerThread, create_app\n"
        "from zyfa.webui.store import TraceStore\n"
        "server = ServerThread(create_app(TraceStore([sys.argv[2]])), '127.0.0.1', 0)\n"
        "server.start(); print(server.url, flush=True); sys.stdin.read(); server.shutdown()\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(root), trace_dir], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit(f"--before {rev}: its web UI did not start (see the error above)")
    return proc, url


def browser_side(trace, repeat: int, before: str | None) -> dict[str, list[tuple[str, dict]]]:
    """Per page ('this checkout', and 'before REV'): (interaction, result) for each repeat."""
    from playwright.sync_api import sync_playwright  # optional: only this measurement needs it

    extent = tuple(float(v) for v in timeline.extent(trace))
    with tempfile.TemporaryDirectory() as tmp:
        trace_dir = Path(tmp) / "traces"
        trace.save(trace_dir / "synthetic")
        server = ServerThread(create_app(TraceStore([trace_dir])), "127.0.0.1", 0)
        server.start()
        urls = {"this checkout": server.url}
        old = None
        try:
            if before:
                old, urls[f"before {before}"] = _old_server(before, str(trace_dir), tmp)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM,
                                            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
                pages = {}
                for name, url in urls.items():
                    page = browser.new_page(viewport={"width": 1500, "height": 1200})
                    page.add_init_script(PROBE)
                    page.goto(url, timeout=300_000)
                    page.wait_for_function("() => window.zyfaHook()", timeout=600_000)
                    page.wait_for_function(IDLE, timeout=600_000)
                    page.evaluate("() => document.querySelector('#timeline').scrollIntoView()")
                    page.locator("h2").click()  # keyboard focus on the page, not an input
                    pages[name] = page
                out: dict[str, list] = {name: [] for name in pages}
                for _ in range(repeat):
                    for label, kind, arg in interactions(*extent):
                        for name, page in pages.items():  # alternate: both pages see the same load
                            out[name].append((label, _measure(page, kind, arg, extent)))
                browser.close()
        finally:
            server.shutdown()
            if old is not None:
                old.stdin.close()
                old.wait(timeout=60)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before", metavar="REV", help="also measure the web UI of this git revision, alternating")
    ap.add_argument("--no-browser", action="store_true")
    args = ap.parse_args()
    trace = synthetic_trace(args.records, cus=1)
    print(f"trace: synthetic ping-pong, one CU: {len(trace)} records, {len(timeline.tracks(trace))} waves; "
          "two panels (A and B) drawn, as on the page")
    print(f"load average at start (1, 5, 15 min): {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"{'view (server: figure + JSON)':30s} {'ms':>7s} {'/ 300 ms':>9s} {'decimated':>10s} {'JSON bytes':>11s}")
    for name, ms, decimated, size in server_side(trace, args.repeat):
        print(f"{name:30s} {ms:7.1f} {ms / GOAL_MS:9.2f} {str(decimated):>10s} {size:11,d}")
    if args.no_browser or not Path(CHROMIUM).exists():
        print("browser: skipped (--no-browser or no /usr/bin/chromium)")
        return
    results = browser_side(trace, args.repeat, args.before)
    print("browser, real input events: ms from the event to the frame with the new range drawn ('drawn') and to "
          "the frame after the last redraw it caused ('settled'); figures = timeline figures asked of the server")
    print(f"{'page':22s} {'interaction':28s} {'drawn ms':>20s} {'settled ms':>20s} {'figures':>8s} {'bytes':>10s}")
    for page, runs in results.items():
        for label in dict.fromkeys(label for label, _ in runs):
            rs = [r for name, r in runs if name == label]
            drawn = "/".join(f"{r['drawn']:.0f}" for r in rs)
            settled = "/".join(f"{r['settled']:.0f}" for r in rs)
            print(f"{page:22s} {label:28s} {drawn:>20s} {settled:>20s} {sum(r['figures'] for r in rs) / len(rs):8.1f} "
                  f"{sum(r['bytes'] for r in rs) // len(rs):10,d}")
    for page, runs in results.items():
        drawn = [r["drawn"] for _, r in runs]
        settled = [r["settled"] for _, r in runs]
        print(f"{page}: drawn median {statistics.median(drawn):.0f} ms, max {max(drawn):.0f} ms "
              f"({sum(d <= GOAL_MS for d in drawn)} of {len(drawn)} within {GOAL_MS:.0f} ms); settled median "
              f"{statistics.median(settled):.0f} ms, max {max(settled):.0f} ms")
    if len(results) == 2:
        (new_name, new), (old_name, old) = results.items()
        for key in ("drawn", "settled"):
            a = statistics.median(r[key] for _, r in old)
            b = statistics.median(r[key] for _, r in new)
            print(f"{key}: median {old_name} / {new_name} = {a:.0f} / {b:.0f} ms = {a / b:.2f}x")
    print(f"load average at end (1, 5, 15 min): {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
