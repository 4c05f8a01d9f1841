#!/usr/bin/env python3
"""SASS of the CuTe DSL FP8 kernel's configurations, compiled for sm_90a without a GPU.

Usage: ``python3 tools/hopper_sass.py OUT_DIR [--only NAME ...] [--against DIR] [--force]``

Compiles each configuration below (``compile_without_gpu``: ptxas included, no GPU needed), writes
``OUT_DIR/NAME.sass`` (``nvdisasm -c`` of the cubin: code only) and prints its SHA-256 and
instruction count. ``--against DIR`` compares every written file with ``DIR/NAME.sass`` byte for
byte and exits 1 if any differs: run it once on the old code and once on the new one to show that a
change leaves the kernels' machine code as it was (a refactor, a removed variant).

Needs the CuTe DSL (``pip install 'zyfa[hopper]'``) and ``nvdisasm`` (on PATH, or the copy that the
``triton`` wheel ships). The DSL's compile cache is switched off, so every run compiles afresh.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# tools/sass_compare.py: this folder is on sys.path when the tool runs as a script, not under python3 -P
# (the H200 scripts) or when a test loads it from its file
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))
from sass_compare import HELP as AGAINST_HELP, check_dir, compare  # noqa: E402

# read by the DSL when it is imported: the target (no GPU to detect it from), keep the cubin on disk,
# compile afresh every time (a cached compile does not write the cubin)
_DUMP = tempfile.mkdtemp(prefix="hopper_sass_")
os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
os.environ.update(CUTE_DSL_KEEP="cubin", CUTE_DSL_NO_CACHE="1", CUTE_DSL_DUMP_DIR=_DUMP)

try:
    from zyfa.kernels.hopper.attn_fp8_sm90 import compile_without_gpu
    _NO_DSL = None
except ImportError as e:  # the DSL is an optional extra; --help works without it
    compile_without_gpu, _NO_DSL = None, str(e)

# name: (head_dim, head_dim_v, causal, LeanPAttentionSm90 options)
CONFIGS = {
    "default_pp": (128, 128, True, dict(pingpong=True)),
    "default_nopp_noncausal": (128, 128, False, dict(pingpong=False)),
    "default_mla": (192, 128, True, dict(pingpong=True)),
    "default_d64_nopp": (64, 64, True, dict(pingpong=False)),
    "default_timeline": (128, 128, True, dict(timeline=True)),
    "default_exact": (128, 128, True, dict(exact=True)),
    "default_nolpt": (128, 128, True, dict(lpt=False)),
    "n128_pp": (128, 128, True, dict(n128=True)),
    "n128_s3_nopp": (128, 128, True, dict(n128=True, pingpong=False, kv_stages=3)),
    "n128_nopp_mla": (192, 128, False, dict(n128=True, pingpong=False)),
    "n128_exact": (128, 128, False, dict(exact=True, n128=True)),
    "n128_timeline": (128, 128, True, dict(n128=True, timeline=True, lpt=False)),
    "t128_pp": (128, 128, True, dict(n128=True, t128=True)),
    "t128_nopp": (128, 128, True, dict(n128=True, t128=True, pingpong=False)),
    "t128_timeline": (128, 128, True, dict(n128=True, t128=True, timeline=True)),
    "t128_mla_exact": (192, 128, False, dict(n128=True, t128=True, pingpong=False, exact=True)),
    "runmax_pp": (128, 128, True, dict(n128=True, runmax=True)),
    "runmax_mla_nopp": (192, 128, False, dict(n128=True, runmax=True, pingpong=False)),
    "runmax_exact": (128, 128, True, dict(n128=True, runmax=True, exact=True)),
    "grouped4_pp": (128, 128, True, dict(n128=True, grouped=4)),
    "grouped4_nopp": (128, 128, True, dict(n128=True, grouped=4, pingpong=False)),
    "grouped8_nopp": (128, 128, True, dict(n128=True, grouped=8, pingpong=False)),
    "grouped4_timeline": (128, 128, True, dict(n128=True, grouped=4, pingpong=False, timeline=True)),
    "grouped4_mla_exact": (192, 128, False, dict(n128=True, grouped=4, pingpong=False, exact=True)),
}
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+\S")


def nvdisasm() -> str:
    found = shutil.which("nvdisasm")
    if found:
        return found
    spec = importlib.util.find_spec("triton")
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
        if bundled.is_file():
            return str(bundled)
    sys.exit("hopper_sass: nvdisasm not found (not on PATH, and no triton wheel with its bundled copy)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="configurations: " + ", ".join(CONFIGS))
    ap.add_argument("out_dir", type=Path, help="folder for NAME.sass (created)")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="these configurations only")
    ap.add_argument("--against", type=Path, metavar="DIR", help=AGAINST_HELP)
    ap.add_argument("--force", action="store_true", help="overwrite existing NAME.sass in OUT_DIR")
    a = ap.parse_args(argv)
    names = a.only or list(CONFIGS)
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        ap.error(f"--only: unknown configuration {', '.join(unknown)} (known: {', '.join(CONFIGS)})")
    check_dir(ap, a.against)
    a.out_dir.mkdir(parents=True, exist_ok=True)
    exists = [n for n in names if (a.out_dir / f"{n}.sass").exists()]
    if exists and not a.force:
        ap.error(f"out_dir: {a.out_dir} already holds {exists[0]}.sass (--force overwrites)")
    if compile_without_gpu is None:
        sys.exit(f"hopper_sass: needs the CuTe DSL (pip install 'zyfa[hopper]'): {_NO_DSL}")
    disasm = nvdisasm()
    differ = 0
    for name in names:
        d, dv, causal, variant = CONFIGS[name]
        cubin = compile_without_gpu(d, dv, causal, **variant).__cubin__  # the cubin or its file's path
        if not (isinstance(cubin, str) and os.path.isfile(cubin)):
            path = os.path.join(_DUMP, f"{name}.cubin")
            Path(path).write_bytes(cubin)
            cubin = path
        sass = subprocess.run([disasm, "-c", cubin], check=True, capture_output=True, text=True).stdout
        (a.out_dir / f"{name}.sass").write_text(sass)
        n = sum(1 for line in sass.splitlines() if _INSTRUCTION.match(line))
        line = f"{name:24s} sha256 {hashlib.sha256(sass.encode()).hexdigest()[:16]}  {n} instructions"
        if a.against is not None:
            same, word = compare(sass, a.against / f"{name}.sass")
            differ += not same
            line += f"  {word}"
        print(line, flush=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
