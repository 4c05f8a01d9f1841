"""Compute pipeline metrics of a saved trace (schema v1 Parquet + JSON), optionally against another.

Windows: `whole` (first issue to last end), `steady` (every wave past its first and before its
last main-loop iteration; see zyfa.analyzer.steady_window) or `A:B` (cycles). Metrics are defined
in the docstrings of zyfa.analyzer.metrics. Traces from the CDNA4 cycle model are labelled
"simulated (cycle model)"; hardware traces name their tracer.

  zyfa-trace analyze out/zyfa-fp8.parquet --window steady
  zyfa-trace analyze out/zyfa-fp8.parquet --compare out/aiter.parquet --format md
"""

from __future__ import annotations

import argparse
import sys

from zyfa.analyzer.report import render, render_tables
from zyfa.trace.schema import Trace, TraceError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="trace file (.parquet, its .json sidecar, or the common stem)")
    p.add_argument("--window", default="whole", help="whole | steady | A:B (cycle range); default whole")
    p.add_argument("--compare", metavar="OTHER", help="second trace: print a, b, b - a and b / a per metric")
    p.add_argument("--format", choices=("table", "json", "md", "csv"), default="table", help="output format")
    p.add_argument("--tables", action="store_true",
                   help="also print per-SIMD busy/overlap, hand-over gaps, VALU by opcode class and stalls "
                        "(table/md formats)")


def run(args: argparse.Namespace) -> int:

    try:
        trace = Trace.load(args.trace)
        other = Trace.load(args.compare) if args.compare else None
        text = render(trace, args.window, args.format, other=other)
        if args.tables:
            if args.format not in ("table", "md"):
                raise ValueError(f"--tables needs --format table or md, not {args.format}")
            for label, t in (("a", trace), ("b", other)):
                if t is not None:
                    text += "\n" + (f"[{label}: {t.meta.kernel}]\n" if other is not None else "")
                    text += render_tables(t, args.window, args.format)
    except (TraceError, ValueError, TypeError) as exc:
        print(f"zyfa-trace analyze: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0
