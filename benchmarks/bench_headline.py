#!/usr/bin/env python3
"""Time the headline command, ``zyfa-trace kernel --shape 32k`` (the default pair(s) of
``zyfa.kernels.baseline``), against its 3 s goal on this machine. Prints, per run, the wall time
and the CPU time of the command (user + sys, its worker processes included) and the 1-minute
load average, so a slow run on a shared box can be told from a slow command.

    python3 benchmarks/bench_headline.py [--runs 3] [--goal 3.0] [-- extra zyfa-trace arguments]
"""

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--goal", type=float, default=3.0, help="seconds")
    p.add_argument("extra", nargs="*", help="more zyfa-trace kernel arguments (after --)")
    args = p.parse_args()
    exe = shutil.which("zyfa-trace")
    if exe is None:
        sys.exit("zyfa-trace is not on PATH: run bash scripts/install.sh first")
    cmd = [exe, "kernel", "--shape", "32k", *args.extra]
    print(f"command: {' '.join(cmd[1:])}  (ZYFA_AITER_DIR={os.environ.get('ZYFA_AITER_DIR', 'unset')}, "
          f"{os.cpu_count()} CPUs)")
    walls = []
    for i in range(args.runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        load = os.getloadavg()[0]
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        walls.append(wall)
        print(f"run {i + 1}: wall {wall:.2f} s, CPU {cpu:.2f} s, load average {load:.1f}")
    best = min(walls)
    print(f"best wall {best:.2f} s = {best / args.goal:.2f} x the {args.goal:.1f} s goal")


if __name__ == "__main__":
    main()
