#!/usr/bin/env python3
"""Where the headline command's time goes: ``zyfa-trace kernel --shape 32k``'s work (its default
pairs), phase by phase, in CPU seconds (this process and its llvm subprocesses), so that the
numbers mean something on a shared, loaded box.

    python3 benchmarks/headline_phases.py [--runs 3] [--cold] [--against REV]

Each run is a fresh process that imports what the command imports, then does each kernel's work
one after the other, as a worker of the command does it (``zyfa.cli.kernel_cmd._summarise``), with
these phases timed: build (resolve: generate, assemble, disassemble, kernel arguments), parse (the
model's program), static (per-instruction tables), simulate (the cycle model's CU runs), trace
(records to the trace table), summary (the analyzer's metrics and the power model's activity).
Medians over ``--runs``. ``--cold``: an empty cache folder per run, as bench_headline.py.
``--against REV``: the same for git revision REV's tree (runs alternate), and the ratios.

The last line estimates the command's wall time on an idle machine from the measured CPU: the
imports (the command's main process, serial) plus the busiest worker when the command's pool
(one worker per CPU) hands the kernels out in the order that tree's command submits them; an
estimate, not a measurement.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_headline import FINDER, ROOT, namespace_roots, run_env, sides_of

PHASES = ("imports", "build", "parse", "static", "simulate", "trace", "summary")

# Runs in a fresh process on the tree named by argv[1] (FINDER); prints one JSON line.
CHILD = FINDER + """
import json, os, resource, time

def cpu():
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

spent = dict.fromkeys({phases!r}, 0.0)
spent["imports"] = -cpu()
from zyfa.cli import kernel_cmd, trace_main
from zyfa.kernels import baseline
from zyfa.trace.cdna4 import launch, sim, tracer
parser, _ = trace_main.build_parser("kernel")
spent["imports"] += cpu()

def timed(owner, name, phase):
    inner = getattr(owner, name)
    def wrapper(*args, **kwargs):
        start = cpu()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[phase] += cpu() - start
    setattr(owner, name, wrapper)

timed(launch.registry, "resolve", "build")
timed(launch, "parse_asm", "parse")
timed(sim, "static_of", "static")
timed(sim.CUSim, "run", "simulate")
timed(tracer, "to_trace", "trace")
timed(kernel_cmd, "_summary_values", "summary")
timed(kernel_cmd.power, "activity", "summary")
args = parser.parse_args(["kernel", "--shape", "32k"])
pairs, _ = baseline.default_pairs()
kernels = {{}}
for pair in pairs:
    for kernel in (pair.ours, pair.baseline):
        start = cpu()
        kernel_cmd._summarise(args, kernel, kernel_cmd._shape(args, kernel), False)
        kernels[kernel] = cpu() - start
names = list(kernels)
order = getattr(kernel_cmd, "submission_order", lambda n: range(2 * n))(len(pairs))  # the command's hand-out order
print(json.dumps({{"phases": spent, "kernels": kernels, "order": [names[i] for i in order]}}))
"""


def measure(tree: Path, cold: bool, scratch: Path) -> dict:
    code = CHILD.format(roots=namespace_roots(tree), phases=PHASES)
    out = subprocess.run([sys.executable, "-c", code, str(tree)], check=True, capture_output=True, text=True,
                         env=run_env(cold, scratch)).stdout
    return json.loads(out.strip().splitlines()[-1])


def idle_estimate(imports: float, kernels: list, workers: int) -> float:
    """Imports + the makespan of greedy list scheduling of ``kernels`` (in order) on ``workers``."""
    free = [0.0] * workers
    for cost in kernels:
        free[free.index(min(free))] += cost
    return imports + max(free)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--cold", action="store_true", help="an empty cache folder for every run")
    p.add_argument("--against", metavar="REV", default=None, help="also measure git revision REV's tree")
    args = p.parse_args()
    if args.runs < 1:
        p.error(f"--runs must be >= 1, got {args.runs}")
    with tempfile.TemporaryDirectory(prefix="headline-phases-") as scratch:
        scratch = Path(scratch)
        sides = sides_of(args.against, scratch) if args.against else {"this": ROOT}
        runs = {name: [] for name in sides}
        for _ in range(args.runs):
            for name, tree in sides.items():
                runs[name].append(measure(tree, args.cold, scratch))
        load = os.getloadavg()[0]
    names = list(sides)
    med = {name: {**{ph: statistics.median(r["phases"][ph] for r in runs[name]) for ph in PHASES},
                  **{k: statistics.median(r["kernels"][k] for r in runs[name]) for k in runs[name][0]["kernels"]}}
           for name in names}
    print(f"headline work, CPU seconds (process + llvm subprocesses), median of {args.runs} fresh processes, "
          f"{'cold' if args.cold else 'warm'} cache, {os.cpu_count()} CPUs, load average {load:.1f} at the end")
    print(f"{'':28s}" + "".join(f"{n:>10s}" for n in names) + ("     ratio" if len(names) == 2 else ""))
    rows = list(PHASES) + [k for k in med[names[-1]] if k not in PHASES]
    for row in rows:
        values = [med[n].get(row) for n in names]
        line = f"{row:28s}" + "".join(f"{v:10.3f}" if v is not None else f"{'-':>10s}" for v in values)
        if len(names) == 2 and None not in values and values[0]:
            line += f"{values[1] / values[0]:10.2f}"
        print(line)
    for name in names:
        kernels = [med[name][k] for k in runs[name][0]["order"]]
        total = med[name]["imports"] + sum(kernels)
        print(f"{name}: total {total:.2f} s CPU; idle-machine wall estimate (imports + busiest of "
              f"{os.cpu_count()} workers) {idle_estimate(med[name]['imports'], kernels, os.cpu_count() or 1):.2f} s")


if __name__ == "__main__":
    main()
