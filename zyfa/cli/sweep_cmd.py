"""Schedule design-space sweep: every point is generated and run through the CDNA4 cycle model
(simulated) as a Ray task; results stream into OUT/results.parquet and resume after interruption.

Example spec: examples/sweep-handover.toml. A rerun with the same -o evaluates exactly the points
not yet in OUT/parts. OUT belongs to one spec: another spec, or a folder that is not a sweep, is
refused unless --force. Ctrl-C stops after keeping every finished point.
The best and the baseline point are saved as traces (OUT/best.parquet, OUT/baseline.parquet)
for `zyfa-ui OUT/best.parquet OUT/baseline.parquet`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from zyfa import sweep, sweep_eval


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="sweep spec (.toml, .yaml or .yml)")
    p.add_argument("-o", "--out", default=None, help="output directory (default: sweeps/<spec name>)")
    p.add_argument("--address", default="local",
                   help="'local' starts a Ray instance on this machine; 'auto' or HOST:PORT joins a cluster")
    p.add_argument("--workers", type=int, default=None, help="CPUs for a local Ray instance (default: all)")
    p.add_argument("--top", type=int, default=10, help="how many ranked variants to print")
    p.add_argument("--no-traces", action="store_true", help="do not save best/baseline traces")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--force", action="store_true",
                   help="run in an OUT that holds another spec's sweep or is not a sweep folder")


def run(args: argparse.Namespace) -> int:
    spec = sweep.load_spec(args.spec)
    if args.workers is not None and args.workers <= 0:
        raise ValueError(f"--workers must be positive, got {args.workers}")
    if args.top <= 0:
        raise ValueError(f"--top must be positive, got {args.top}")
    out = Path(args.out or Path("sweeps") / spec.name)
    print(f"sweep {spec.name!r}: mode={spec.mode}, evaluator={spec.evaluator} (simulated), "
          f"objective={spec.objective} ({'max' if spec.maximise else 'min'}), output {out}")
    try:
        results = sweep.run_sweep(spec, out, address=args.address, workers=args.workers,
                                  progress=not args.quiet, force=args.force)
    except KeyboardInterrupt:
        print(f"zyfa-trace sweep: interrupted; finished points are kept in {out / 'parts'}, run the same "
              "command again to resume", file=sys.stderr)
        return 130
    failed = int(results["error"].notna().sum()) if len(results) else 0
    print(f"{len(results)} points in {out / 'results.parquet'}; {failed} failed")
    ranked = sweep.rank(results, spec.objective, spec.maximise, args.top)
    if ranked.empty:
        print("zyfa-trace sweep: no successful point to rank", file=sys.stderr)
        return 1
    print(sweep.format_ranking(ranked, spec))
    if not args.no_traces:
        for label, path in sweep_eval.save_best_and_baseline(results, spec, out).items():
            print(f"{label} trace: {path}")
    return 0
