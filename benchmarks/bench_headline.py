#!/usr/bin/env python3
"""Time the headline command, ``zyfa-trace kernel --shape 32k`` (the default pair(s) of
``zyfa.kernels.baseline``), against its 3 s goal on this machine. Prints, per run, the wall time
and the CPU time of the command (user + sys, its worker processes included) and the 1-minute
load average, so a slow run on a shared box can be told from a slow command.

    python3 benchmarks/bench_headline.py [--runs 3] [--goal 3.0] [--cold] [-- extra zyfa-trace arguments]
    python3 benchmarks/bench_headline.py --against REV [--runs 5] [--cold]

``--cold``: every run starts with an empty cache folder (``XDG_CACHE_HOME`` pointed at a new
temporary folder: no assembled gfx950 code objects), as the first run
after a fresh install; the amd-aiter wheel, which that first run downloads once into
``~/.cache/zyfa/aiter`` (``ZYFA_CACHE``), stays where it is: a download is not the command's time.

``--against REV``: A/B on a shared box. The command of git revision REV (exported with ``git
archive`` into a temporary folder) and of this checkout run alternately, ``--runs`` times each,
both through the same launcher (``python3 -c``, the ``zyfa.*`` folders mapped as setup.py maps
them), both byte-compiled as scripts/install.sh does; prints each one's median wall and CPU time and the ratios this/REV. Load from other jobs
hits both sides alike, so the ratio means more than either time.
"""

import argparse
import ast
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ["kernel", "--shape", "32k"]

# Imports zyfa from the source tree given as the first argument, whatever is installed: the
# setup.py folder -> package map, ahead of any installed finder. LAUNCHER then runs zyfa-trace.
FINDER = """
import importlib.util, sys
root = sys.argv.pop(1)
roots = {roots!r}
class Finder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in roots:
            return None
        folder = root + "/" + roots[name]
        return importlib.util.spec_from_file_location(name, folder + "/__init__.py",
                                                      submodule_search_locations=[folder])
sys.meta_path.insert(0, Finder)
"""
LAUNCHER = FINDER + """
from zyfa.cli.trace_main import main
sys.exit(main())
"""


def namespace_roots(tree: Path) -> dict:
    """setup.py's NAMESPACE_ROOTS of ``tree`` (read, not executed)."""
    module = ast.parse((tree / "setup.py").read_text())
    for node in module.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "NAMESPACE_ROOTS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit(f"{tree / 'setup.py'}: no NAMESPACE_ROOTS")


def timed(cmd: list, env: dict) -> tuple:
    """(wall s, CPU s of the command and its children, 1-minute load average before it)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), load


def run_env(cold: bool, scratch: Path) -> dict:
    env = dict(os.environ)
    if cold:  # a new empty cache folder for this run only (the aiter wheel stays in ZYFA_CACHE)
        env.setdefault("ZYFA_CACHE", str(Path.home() / ".cache" / "zyfa"))
        env["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="cache-", dir=scratch)
    return env


def plain(args, extra: list, scratch: Path) -> None:
    exe = shutil.which("zyfa-trace")
    if exe is None:
        sys.exit("zyfa-trace is not on PATH: run bash scripts/install.sh first")
    cmd = [exe, *COMMAND, *extra]
    print(f"command: {' '.join(cmd[1:])}  (ZYFA_AITER_DIR={os.environ.get('ZYFA_AITER_DIR', 'unset')}, "
          f"{os.cpu_count()} CPUs, {'cold: empty cache per run' if args.cold else 'warm cache'})")
    walls = []
    for i in range(args.runs):
        wall, cpu, load = timed(cmd, run_env(args.cold, scratch))
        walls.append(wall)
        print(f"run {i + 1}: wall {wall:.2f} s, CPU {cpu:.2f} s, load average {load:.1f}")
    best, median = min(walls), statistics.median(walls)
    print(f"best wall {best:.2f} s = {best / args.goal:.2f} x the {args.goal:.1f} s goal; "
          f"median {median:.2f} s = {median / args.goal:.2f} x")


def sides_of(rev: str, scratch: Path) -> dict:
    """{short rev: REV's tree exported under ``scratch``, "this": this checkout}, both
    byte-compiled, as scripts/install.sh leaves an install."""
    short = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev], check=True,
                           capture_output=True, text=True).stdout.strip()
    old = scratch / f"tree-{short}"
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", short], check=True,
                             capture_output=True).stdout
    old.mkdir()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(old, filter="data")
    sides = {short: old, "this": ROOT}
    for tree in sides.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", *namespace_roots(tree).values()], cwd=tree,
                       check=True, stdout=subprocess.DEVNULL)
    return sides


def against(args, extra: list, scratch: Path) -> None:
    sides = sides_of(args.against, scratch)
    rev = next(iter(sides))
    cmds = {name: [sys.executable, "-c", LAUNCHER.format(roots=namespace_roots(tree)), str(tree), *COMMAND, *extra]
            for name, tree in sides.items()}
    print(f"A/B: {' '.join(COMMAND + extra)}: {rev} vs this checkout ({ROOT}), alternating, {args.runs} runs "
          f"each after one untimed warm-up, {'cold: empty cache per run' if args.cold else 'warm cache'}, "
          f"{os.cpu_count()} CPUs")
    for name in sides:  # warm-up: byte-compiles each tree, fills the warm cache
        timed(cmds[name], run_env(args.cold, scratch))
    results = {name: [] for name in sides}
    for i in range(args.runs):
        for name in sides:
            wall, cpu, load = timed(cmds[name], run_env(args.cold, scratch))
            results[name].append((wall, cpu))
            print(f"run {i + 1} {name:>8}: wall {wall:.2f} s, CPU {cpu:.2f} s, load average {load:.1f}")
    med = {name: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r)) for name, r in results.items()}
    for name, (wall, cpu) in med.items():
        print(f"median {name:>8}: wall {wall:.2f} s, CPU {cpu:.2f} s")
    print(f"this / {rev}: wall {med['this'][0] / med[rev][0]:.2f}x, CPU {med['this'][1] / med[rev][1]:.2f}x "
          f"(medians); this checkout's median wall = {med['this'][0] / args.goal:.2f} x the {args.goal:.1f} s goal")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--goal", type=float, default=3.0, help="seconds")
    p.add_argument("--cold", action="store_true", help="an empty cache folder for every run (see above)")
    p.add_argument("--against", metavar="REV", default=None, help="A/B against git revision REV (see above)")
    p.add_argument("extra", nargs="*", help="more zyfa-trace kernel arguments (after --)")
    args = p.parse_args()
    if args.runs < 1:
        p.error(f"--runs must be >= 1, got {args.runs}")
    with tempfile.TemporaryDirectory(prefix="bench-headline-") as scratch:
        (against if args.against else plain)(args, args.extra, Path(scratch))


if __name__ == "__main__":
    main()
