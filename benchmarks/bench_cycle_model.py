#!/usr/bin/env python3
"""Benchmark of the CDNA4 cycle model: wall time of ``zyfa-trace kernel --shape 32k`` (target
<= 10 s) and the simulator's speed in instructions per second.

Usage: ``python3 benchmarks/bench_cycle_model.py [--kernel NAME] [--shape 32k] [--samples 3]``

Prints (1) the end-to-end wall time of the CLI in a fresh process (imports, kernel build,
disassembly/parsing, simulation, trace writing, summary) and (2) for the same kernel and shape,
in-process: detailed instructions simulated, instructions covered by loop extrapolation, the
simulation's CPU time and both rates. The machine is whatever runs it; numbers are not stored.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default=None, help="kernel name (default: the CLI's default kernel)")
    parser.add_argument("--shape", default="32k")
    parser.add_argument("--samples", type=int, default=3)
    args = parser.parse_args(argv)

    from zyfa.shapes import parse_shape
    from zyfa.trace.cdna4.estimate import EstimateConfig, estimate
    from zyfa.kernels.registry import DEFAULT_KERNEL, spec_of
    from zyfa.trace.cdna4.launch import prepare

    kernel = args.kernel or DEFAULT_KERNEL
    cmd = [sys.executable, "-m", "zyfa.cli.trace_main", "kernel", "--shape", args.shape, "--kernel", kernel,
           "--samples", str(args.samples)]
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        proc = subprocess.run(cmd + ["-o", out], capture_output=True, text=True)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        print(proc.stdout + proc.stderr)
        return proc.returncode
    print(f"end to end: {' '.join(cmd[2:])}: {wall:.2f} s wall (target <= 10 s)")

    shape = spec_of(kernel).fit(parse_shape(args.shape))
    t0 = time.perf_counter()
    launch = prepare(kernel, shape)
    t_resolve = time.perf_counter() - t0
    cpu0 = time.process_time()
    est = estimate(launch, EstimateConfig(samples=args.samples))
    cpu = time.process_time() - cpu0
    sim, extra = est.simulated_instructions, est.extrapolated_instructions
    print(f"kernel {kernel} on {shape}: build+parse {t_resolve:.2f} s; simulation {cpu:.2f} s CPU "
          f"({est.wall_seconds:.2f} s wall) for {len(est.samples)} sampled workgroup column(s)")
    print(f"  {sim} instructions simulated in detail: {sim / cpu:,.0f} instructions/s")
    print(f"  {extra} instructions covered by loop extrapolation: {(sim + extra) / cpu:,.0f} instructions/s effective")
    print(f"  predicted (cycle model, simulated): {est.seconds * 1e3:.3f} ms, {est.tflops:.0f} TFLOP/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
