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


def browser_side(trace, repeat: int) -> list[tuple[str, float]]:
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
                page.goto(server.url, timeout=300_000)
                page.wait_for_function("() => { const e = document.querySelector('#view-info');"
                                       " return e && e.textContent.includes('cycles'); }", timeout=600_000)

                def answered(resp) -> bool:
                    return "_dash-update-component" in resp.url and "timeline.figure" in (resp.request.post_data or "")

                for name, x0, x1 in views(trace):
                    times = []
                    for _ in range(repeat):
                        # jitter the range so every relayout is a new view the server must answer
                        x0 += 1.0
                        x1 += 1.0
                        t0 = time.perf_counter()
                        with page.expect_response(answered, timeout=600_000):
                            page.evaluate("([a, b]) => Plotly.relayout(document.querySelector('#timeline "
                                          ".js-plotly-plot'), {'xaxis.range[0]': a, 'xaxis.range[1]': b})", [x0, x1])
                        times.append(time.perf_counter() - t0)
                    out.append((name, 1e3 * statistics.median(times)))
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
    print(f"{'view':22s} {'browser ms':>10s} {'/ 300 ms':>9s}   (relayout -> the server's answer with the figure)")
    for name, ms in browser_side(trace, args.repeat):
        print(f"{name:22s} {ms:10.1f} {ms / GOAL_MS:9.2f}")


if __name__ == "__main__":
    main()
