"""Sweep throughput: points/second through the generator + cycle model on a local Ray instance
with 1 and with 2 workers (same 8-point grid, fresh output directory each time).

    python3 benchmarks/bench_sweep.py [--seqlen 1k] [--heads 2]

Each point is independent CPU work (generate, assemble, simulate), so throughput scales with
workers until the machine's cores are used; on a cluster (`--address auto`) it scales with the
cluster's CPUs, minus Ray's per-task overhead (about a millisecond) and the time to ship a row back.
"""

import argparse
import tempfile
import time

import ray

from zyfa import sweep


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seqlen", default="1k")
    p.add_argument("--heads", type=int, default=2)
    args = p.parse_args()
    spec = sweep.spec_from_dict({
        "sweep": {"name": "bench", "mode": "grid", "objective": "tflops"},
        "shape": {"seqlen": args.seqlen, "heads": args.heads},
        "params": {"softmax": ["lean", "exact"], "schedule": ["pingpong", "serial"], "rescale_threshold": [0, 8]},
    })
    n = len(sweep.grid_points(spec))
    for workers in (1, 2):
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            results = sweep.run_sweep(spec, out, workers=workers, progress=False)
            elapsed = time.perf_counter() - start
        ray.shutdown()
        failed = int(results["error"].notna().sum())
        print(f"workers={workers}: {n} points in {elapsed:.1f} s = {n / elapsed:.3f} points/s ({failed} failed)")


if __name__ == "__main__":
    main()
