"""Export a saved trace: Chrome/Perfetto trace-event JSON (open it in ui.perfetto.dev) and metric
reports (CSV, markdown).

The Perfetto file has one process per SIMD with an "MFMA pipe" track and per-wave tracks for
MFMA, VALU, TRANS, scalar, memory and region records; times are microseconds derived from the
trace's clock. Simulated traces are labelled "simulated (cycle model)".

  zyfa-trace export out/zyfa-fp8.parquet --perfetto out/zyfa-fp8.perfetto.json --csv out/metrics.csv
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="trace file (.parquet, its .json sidecar, or the common stem)")
    p.add_argument("--perfetto", metavar="OUT.json", help="write Chrome/Perfetto trace-event JSON")
    p.add_argument("--csv", metavar="OUT.csv", help="write the metric report as CSV")
    p.add_argument("--md", metavar="OUT.md", help="write the metric report (and detail tables) as markdown")
    p.add_argument("--window", default="whole",
                   help="whole | steady | A:B: records exported and metrics computed over this window")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from zyfa.analyzer.perfetto import write_perfetto
    from zyfa.analyzer.report import render, render_tables
    from zyfa.trace.schema import Trace, TraceError

    if not (args.perfetto or args.csv or args.md):
        print("zyfa-trace export: nothing to do: give --perfetto, --csv and/or --md", file=sys.stderr)
        return 2
    try:
        trace = Trace.load(args.trace)
        print(f"{trace.meta.kernel}: {len(trace)} records, {trace.meta.label}")
        if args.perfetto:
            path = write_perfetto(trace, args.perfetto, args.window)
            print(f"wrote {path} (trace-event JSON; open in ui.perfetto.dev)")
        if args.csv:
            path = Path(args.csv)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render(trace, args.window, "csv"))
            print(f"wrote {path} (metric report, CSV)")
        if args.md:
            path = Path(args.md)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render(trace, args.window, "md") + "\n" + render_tables(trace, args.window, "md"))
            print(f"wrote {path} (metric report, markdown)")
    except (TraceError, ValueError, TypeError, OSError) as exc:
        print(f"zyfa-trace export: {exc}", file=sys.stderr)
        return 2
    return 0
