"""Schedule design-space sweep: every point is generated and run through the CDNA4 cycle model
(simulated) as a Ray task; results stream into OUT/results.parquet and resume after interruption.

Example spec: examples/sweep-handover.toml. A rerun with the same -o skips finished points.
The best and the baseline point are saved as traces (OUT/best.parquet, OUT/baseline.parquet)
for `zyfa-ui OUT/best.parquet OUT/baseline.parquet`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="sweep spec (.toml, .yaml or .yml)")
    p.add_argument("-o", "--out", default=None, help="output directory (default: sweeps/<spec name>)")
    p.add_argument("--address", default="local",
                   help="'local' starts a Ray instance on this machine; 'auto' or HOST:PORT joins a cluster")
    p.add_argument("--workers", type=int, default=None, help="CPUs for a local Ray instance (default: all)")
    p.add_argument("--top", type=int, default=10, help="how many ranked variants to print")
    p.add_argument("--no-traces", action="store_true", help="do not save best/baseline traces")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from zyfa import sweep

    try:
        spec = sweep.load_spec(args.spec)
    except sweep.SweepError as exc:
        print(f"zyfa-trace sweep: {exc}", file=sys.stderr)
        return 2
    if args.workers is not None and args.workers <= 0:
        print("zyfa-trace sweep: --workers must be positive", file=sys.stderr)
        return 2
    out = Path(args.out or Path("sweeps") / spec.name)
    print(f"sweep {spec.name!r}: mode={spec.mode}, evaluator={spec.evaluator} (simulated), "
          f"objective={spec.objective} ({'max' if spec.maximise else 'min'}), output {out}")
    results = sweep.run_sweep(spec, out, address=args.address, workers=args.workers, progress=not args.quiet)
    failed = int(results["error"].notna().sum()) if len(results) else 0
    print(f"{len(results)} points in {out / 'results.parquet'}; {failed} failed")
    ranked = sweep.rank(results, spec.objective, spec.maximise, args.top)
    if ranked.empty:
        print("no successful point to rank", file=sys.stderr)
        return 1
    print(sweep.format_ranking(ranked, spec))
    if not args.no_traces:
        for label, path in sweep.save_best_and_baseline(results, spec, out).items():
            print(f"{label} trace: {path}")
    return 0
