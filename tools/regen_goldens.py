#!/usr/bin/env python3
"""Regenerate the golden cycle-model traces in ``tests/data/golden/`` (or check them).

Usage: ``python3 tools/regen_goldens.py [--check] [--only NAME ...]``

The goldens pin the cycle model's and the gfx950 generator's output: ``tests/golden/
test_goldens.py`` re-simulates every case below and compares the records column for column
(values and Arrow types) and the deterministic metadata (everything but ``provenance``: the
command, commit and date of a run) with the stored files. A commit that changes model or
generator output *on purpose* runs this script and commits the new files separately, saying
why in its message; an unintended difference is a bug the test catches.

Per case: ``<name>.parquet`` (records, zstd) and ``<name>.json`` (metadata; for AITER code
objects also the SHA-256 of the ``.co`` the golden was made from: a different amd-aiter wheel
is a different input, which the test reports as a skip, not as a model change).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from zyfa.shapes import AttnShape
from zyfa.kernels import aiter
from zyfa.trace.cdna4.tracer import simulate

ROOT = Path(__file__).resolve().parents[1]
GOLDEN_DIR = ROOT / "tests" / "data" / "golden"
# Small causal shapes: each case simulates in about a second on the 2-core CPU box.
SHAPE = dict(batch=1, heads=1, heads_k=1, seqlen_q=1024, seqlen_k=1024, headdim=128, headdim_v=128, causal=True)
CASES = {
    "zyfa-fp8": ("zyfa-fp8", AttnShape(**SHAPE, dtype="fp8")),
    "aiter-like-fp8": ("aiter-like-fp8", AttnShape(**SHAPE, dtype="fp8")),
    "zyfa-bf16": ("zyfa-bf16", AttnShape(**SHAPE, dtype="bf16")),
    "aiter_fwd_hd128_bf16_causal": ("aiter:fwd_hd128_bf16_causal", AttnShape(**SHAPE, dtype="bf16")),
}


def code_object_sha256(kernel: str):
    """SHA-256 of an ``aiter:NAME`` code object (None for other kernels)."""
    if not kernel.startswith("aiter:"):
        return None
    return hashlib.sha256(aiter.resolve(kernel).read_bytes()).hexdigest()


def simulate_case(name: str) -> tuple[pa.Table, dict]:
    """(records table without schema metadata, deterministic metadata) of one golden case."""
    kernel, shape = CASES[name]
    trace, _ = simulate(kernel, shape)
    meta = trace.meta.to_dict()
    meta.pop("provenance")  # command, commit, date: differ run to run
    meta["code_object_sha256"] = code_object_sha256(kernel)
    return trace.table.replace_schema_metadata(None), json.loads(json.dumps(meta, sort_keys=True))


def paths(name: str) -> tuple[Path, Path]:
    return GOLDEN_DIR / f"{name}.parquet", GOLDEN_DIR / f"{name}.json"


def load(name: str) -> tuple[pa.Table, dict]:
    parquet_path, json_path = paths(name)
    return pq.read_table(parquet_path).replace_schema_metadata(None), json.loads(json_path.read_text())


def differences(name: str, table: pa.Table, meta: dict) -> list[str]:
    """Human-readable differences between a fresh simulation and the stored golden (empty: equal)."""
    golden_table, golden_meta = load(name)
    out = []
    if table.schema != golden_table.schema:
        out.append(f"schema differs:\n  golden: {golden_table.schema}\n  now:    {table.schema}")
    if table.num_rows != golden_table.num_rows:
        out.append(f"{table.num_rows} records, golden has {golden_table.num_rows}")
    for col in golden_table.column_names:
        if col not in table.column_names or table.num_rows != golden_table.num_rows:
            continue
        a, b = table.column(col).to_pylist(), golden_table.column(col).to_pylist()
        if a != b:
            i = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
            out.append(f"column {col!r} differs first at record {i}: now {a[i]!r}, golden {b[i]!r}")
    for key in sorted(set(meta) | set(golden_meta)):
        if meta.get(key) != golden_meta.get(key):
            out.append(f"metadata {key!r}: now {json.dumps(meta.get(key))[:300]}, "
                       f"golden {json.dumps(golden_meta.get(key))[:300]}")
    return out


def write(name: str, table: pa.Table, meta: dict) -> None:
    parquet_path, json_path = paths(name)
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, parquet_path, compression="zstd", compression_level=19)
    json_path.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="Regenerate only in a commit that changes model/generator output on purpose.")
    p.add_argument("--check", action="store_true", help="compare with the stored goldens, write nothing")
    p.add_argument("--only", nargs="+", choices=sorted(CASES), help="cases to regenerate/check (default: all)")
    args = p.parse_args(argv)
    failed = 0
    for name in args.only or CASES:
        table, meta = simulate_case(name)
        if args.check:
            diff = differences(name, table, meta) if paths(name)[0].exists() else ["no stored golden"]
            failed += bool(diff)
            print(f"{name}: " + ("identical" if not diff else "DIFFERS\n  " + "\n  ".join(diff)))
        else:
            write(name, table, meta)
            print(f"{name}: wrote {paths(name)[0].relative_to(ROOT)} ({table.num_rows} records, "
                  f"{paths(name)[0].stat().st_size} bytes)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
