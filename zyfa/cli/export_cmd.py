"""Export a saved trace: Chrome/Perfetto trace-event JSON (open it in ui.perfetto.dev) and metric
reports (CSV, markdown).

The Perfetto file has one process per SIMD with an "MFMA pipe" track and per-wave tracks for
MFMA, VALU, TRANS, scalar, memory and region records; times are microseconds derived from the
trace's clock. Simulated traces are labelled "simulated (cycle model)".

  zyfa-trace export out/zyfa-fp8.parquet --perfetto out/zyfa-fp8.perfetto.json --csv out/metrics.csv

Outputs are never the input trace or its sidecar, never an existing file unless --force, and are
written to a temporary file next to the target, then renamed (no half-written file on a crash).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from zyfa.analyzer.perfetto import write_perfetto
from zyfa.analyzer.report import render, render_tables
from zyfa.trace.safeio import check_output, write_text
from zyfa.trace.schema import Trace


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="trace file (.parquet, its .json sidecar, or the common stem)")
    p.add_argument("--perfetto", metavar="OUT.json", help="write Chrome/Perfetto trace-event JSON")
    p.add_argument("--csv", metavar="OUT.csv", help="write the metric report as CSV")
    p.add_argument("--md", metavar="OUT.md", help="write the metric report (and detail tables) as markdown")
    p.add_argument("--window", default="whole",
                   help="whole | steady | A:B: records exported and metrics computed over this window")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")


def run(args: argparse.Namespace) -> int:
    outputs = [(flag, path) for flag, path in (("--perfetto", args.perfetto), ("--csv", args.csv), ("--md", args.md))
               if path]
    if not outputs:
        print("zyfa-trace export: nothing to do: give --perfetto, --csv and/or --md", file=sys.stderr)
        return 2
    inputs = Trace.files(args.trace)
    seen: dict[Path, str] = {}
    for flag, path in outputs:  # every refusal before anything is read or written
        key = Path(path).resolve()
        if key in seen:
            raise ValueError(f"{flag} {path}: same file as {seen[key]}; give each output its own file")
        seen[key] = flag
        check_output(path, force=args.force, inputs=inputs)
    trace = Trace.load(args.trace)
    print(f"{trace.meta.kernel}: {len(trace)} records, {trace.meta.label}")
    if args.perfetto:
        path = write_perfetto(trace, args.perfetto, args.window)
        print(f"wrote {path} (trace-event JSON; open in ui.perfetto.dev)")
    if args.csv:
        path = write_text(args.csv, render(trace, args.window, "csv"))
        print(f"wrote {path} (metric report, CSV)")
    if args.md:
        path = write_text(args.md, render(trace, args.window, "md") + "\n" + render_tables(trace, args.window, "md"))
        print(f"wrote {path} (metric report, markdown)")
    return 0
