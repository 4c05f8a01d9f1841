"""Schedule explorer: zoom/pan redraw time for a ~50k-record trace (goal: <= 300 ms on the 2-core box).

Not a test (no pass/fail): prints milliseconds and the ratio to the 300 ms goal.

The trace is ``bench_analyzer.synthetic_trace`` on one CU (8 waves, ping-pong: 16 MFMA, 192 VALU,
32 TRANS and 8 other records per wave and key block): the cycle model extrapolates steady loop
periods, so its one-CU traces stay near 35k records even at 64k tokens. Two panels (A and B, the
same trace) are drawn, as on the page. Two measurements per view:

* ``server``: what the redraw callback does for a new x range: the figure for both panels
  (``zyfa.webui.figures.schedule_figure``: decimated segments or single instructions, stall lanes,
  strips, markers) and its JSON encoding as Dash sends it (``plotly.io.to_json``);
* ``browser`` (when Debian's chromium and Playwright are installed): from ``Plotly.relayout`` in a
  real page to the server's answer with the new figure, through the live server, while the page's
  other callbacks on the view (metrics, listing, grid) run too (``--no-browser`` skips it).

    python3 benchmarks/bench_webui_redraw.py [--records 50000] [--repeat 5] [--no-browser]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import plotly.io as pio

from bench_analyzer import synthetic_trace  # sibling script: python3 benchmarks/bench_webui_redraw.py
from zyfa.webui import figures, timeline
from zyfa.webui.app import ServerThread, create_app
from zyfa.webui.store import TraceStore

GOAL_MS = 300.0
CHROMIUM = "/usr/bin/chromium"


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
            fig = figures.schedule_figure(panels, timeline.View(x0, x1))
            payload = pio.to_json(fig, validate=False)
            times.append(time.perf_counter() - t0)
        out.append((name, 1e3 * statistics.median(times), bool(fig.layout.meta["decimated"]), len(payload)))
    return out


# In-page instrumentation (performance.now(), so Playwright's event delivery is not counted): every
# Dash callback request is logged with its outputs, start, answer (response headers) and body size;
# "drawn": the first plotly redraw after the timeline figure's request. Between plotly's own redraw
# of the zoom and that request, dcc.Graph writes the zoomed layout back into its figure and re-plots
# the old data (as long as a redraw) before Dash runs the view callback: "sent at" shows it.
PROBE = """
(() => {
  window.zyfaLog = [];
  const fetch0 = window.fetch;
  window.fetch = function(url, opts) {
    const body = (opts && typeof opts.body === 'string') ? opts.body : '';
    if (!String(url).includes('_dash-update-component')) { return fetch0.apply(this, arguments); }
    let output = '';
    try { output = JSON.parse(body).output; } catch (e) { output = '?'; }
    const rec = {output: output, t0: performance.now(), t1: null, bytes: 0};
    window.zyfaLog.push(rec);
    return fetch0.apply(this, arguments).then(resp => {
      rec.t1 = performance.now();
      // the answer's headers are in; Dash reads its body after this: the next redraw is the new figure's
      // (not dcc.Graph's re-plot of the zoomed old data, which can finish after the request was sent)
      if (output.includes('timeline.figure')) { window.zyfaAnswered = rec.t1; window.zyfaWantDraw = true; }
      resp.clone().text().then(t => { rec.bytes = t.length; });
      return resp;
    });
  };
})();
"""
HOOK = """() => { const gd = document.querySelector('#timeline .js-plotly-plot');
  if (!gd.zyfaHooked) { gd.zyfaHooked = true;
    gd.on('plotly_afterplot', () => {
      if (window.zyfaWantDraw) { window.zyfaWantDraw = false; window.zyfaDrawn = performance.now(); } }); } }"""
RELAYOUT = """([a, b]) => { window.zyfaLog = []; window.zyfaAnswered = null; window.zyfaDrawn = null;
  window.zyfaWantDraw = false; window.zyfaRelaid = null; window.zyfaT0 = performance.now();
  Plotly.relayout(document.querySelector('#timeline .js-plotly-plot'), {'xaxis.range[0]': a, 'xaxis.range[1]': b})
    .then(() => { window.zyfaRelaid = performance.now(); }); }"""
SETTLED = """() => { const s = window.store && window.store.getState();
  const idle = s && s.callbacks && Object.entries(s.callbacks).every(([k, v]) => k === 'completed' || !v || !v.length);
  return window.zyfaRelaid !== null && idle && window.zyfaLog.every(r => r.t1 !== null)
    && window.zyfaDrawn !== null; }"""
RESULT = """() => ({answered: window.zyfaAnswered === null ? null : window.zyfaAnswered - window.zyfaT0,
  drawn: window.zyfaDrawn - window.zyfaT0,
  relaid: window.zyfaRelaid - window.zyfaT0,
  requests: window.zyfaLog.map(r => ({output: r.output, sent: r.t0 - window.zyfaT0,
                                      ms: r.t1 === null ? null : r.t1 - r.t0, bytes: r.bytes}))})"""


def browser_side(trace, repeat: int) -> list[tuple[str, list[dict]]]:
    """Per view and repeat: ms from ``Plotly.relayout`` to plotly's redraw of the figure it has
    (``relaid``: the immediate zoom), to the timeline figure's answer and to the redraw after it
    (``drawn``), and the Dash requests the zoom fired (output, sent at, ms, bytes)."""
    from playwright.sync_api import sync_playwright  # optional: only this measurement needs it

    with tempfile.TemporaryDirectory() as tmp:
        trace.save(Path(tmp) / "synthetic")
        server = ServerThread(create_app(TraceStore([tmp])), "127.0.0.1", 0)
        server.start()
        out = []
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM,
                                            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
                page = browser.new_page(viewport={"width": 1500, "height": 1200})
                page.add_init_script(PROBE)
                page.goto(server.url, timeout=300_000)
                page.wait_for_function("() => { const e = document.querySelector('#view-info');"
                                       " return e && e.textContent.includes('cycles'); }", timeout=600_000)
                page.evaluate(HOOK)
                for name, x0, x1 in views(trace):
                    runs = []
                    for _ in range(repeat):
                        # shift the range by a cycle so every relayout is a new view
                        x0 += 1.0
                        x1 += 1.0
                        page.evaluate(RELAYOUT, [x0, x1])
                        page.wait_for_function(SETTLED, timeout=600_000)
                        runs.append(page.evaluate(RESULT))
                    out.append((name, runs))
                browser.close()
        finally:
            server.shutdown()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-browser", action="store_true")
    args = ap.parse_args()
    trace = synthetic_trace(args.records, cus=1)
    print(f"trace: synthetic ping-pong, one CU: {len(trace)} records, {len(timeline.tracks(trace))} waves; "
          "two panels (A and B) drawn, as on the page")
    print(f"{'view':22s} {'server ms':>10s} {'/ 300 ms':>9s} {'decimated':>10s} {'JSON bytes':>11s}")
    for name, ms, decimated, size in server_side(trace, args.repeat):
        print(f"{name:22s} {ms:10.1f} {ms / GOAL_MS:9.2f} {str(decimated):>10s} {size:11,d}")
    if args.no_browser or not Path(CHROMIUM).exists():
        print("browser round trip: skipped (--no-browser or no /usr/bin/chromium)")
        return
    print(f"{'view':22s} {'repeat':>6s} {'zoomed ms':>10s} {'answer ms':>10s} {'drawn ms':>9s} {'/ 300 ms':>9s}   "
          "(relayout -> plotly redrew the old data -> the timeline figure's answer -> plotly drew it)")
    rows = browser_side(trace, args.repeat)
    for name, runs in rows:
        for k, r in enumerate(runs):
            print(f"{name if k == 0 else '':22s} {k + 1:6d} {r['relaid']:10.1f} {r['answered']:10.1f} {r['drawn']:9.1f} "
                  f"{r['drawn'] / GOAL_MS:9.2f}")
    print("requests the first relayout of each view fired (output: sent at +ms after the relayout, took ms, bytes):")
    for name, runs in rows:
        print(f"  {name}: " + ("; ".join(
            f"{r['output'][:32]} +{r['sent']:.0f} " + ("pending" if r["ms"] is None else f"{r['ms']:.0f} ms")
            + f" {r['bytes']:,d} B" for r in runs[0]["requests"])))


if __name__ == "__main__":
    main()
