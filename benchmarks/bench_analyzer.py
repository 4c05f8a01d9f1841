"""Analyzer speed: load a ~1M-record trace and compute every metric (target: < 2 s on the 2-core box).

Builds a synthetic two-wave ping-pong trace (numbers below), saves it as Parquet + JSON, then times
``Trace.load`` + ``summary`` (whole and steady windows) + every table metric. Also prints the
metric values next to what the construction implies, as a sanity check.

    python3 benchmarks/bench_analyzer.py [--records 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

import zyfa.analyzer as za
from zyfa.trace.schema import ARROW_SCHEMA, Trace, TraceMeta

# construction: per wave per iteration 16 MFMA (64 cycles), 192 VALU + 32 TRANS (4 cycles),
# 8 misc records; two waves per SIMD alternate MFMA phases separated by a GAP-cycle idle gap
MFMA, MFMA_CYCLES = 16, 64
VALU, TRANS, OP_CYCLES = 192, 32, 4
MISC = ("LDS", "LDS", "SALU", "SALU", "WAIT", "WAIT", "BRANCH", "MISC")
GAP = 128
PHASE = MFMA * MFMA_CYCLES + GAP  # one wave's MFMA phase + gap
PERIOD = 2 * PHASE
PER_BLOCK = MFMA + VALU + TRANS + len(MISC)


def _template() -> dict[str, np.ndarray]:
    """One wave's records for one iteration, times relative to the iteration start."""
    mfma = np.arange(MFMA) * MFMA_CYCLES
    misc = MFMA * MFMA_CYCLES + np.arange(len(MISC)) * (GAP // len(MISC))
    vector = PHASE + np.arange(VALU + TRANS) * OP_CYCLES
    start = np.concatenate((mfma, misc, vector))
    length = np.concatenate((np.full(MFMA, MFMA_CYCLES), np.full(len(MISC), 4), np.full(VALU + TRANS, OP_CYCLES)))
    unit = np.array(["MFMA"] * MFMA + list(MISC) + ["VALU"] * VALU + ["TRANS"] * TRANS)
    valu_ops = np.array(["v_max3_f32", "v_pk_fma_f32", "v_add_f32", "v_mul_f32", "v_cvt_pk_fp8_f32", "v_mov_b32"])
    opcode = np.concatenate((["v_mfma_f32_32x32x64_f8f6f4"] * MFMA,
                             ["ds_read_b128", "ds_read_b128", "s_add_u32", "s_cmp_lt_u32", "s_waitcnt", "s_nop",
                              "s_cbranch_scc1", "s_setprio"],
                             valu_ops[np.arange(VALU) % valu_ops.size], ["v_exp_f32"] * TRANS))
    stall = np.where(np.arange(start.size) % 8 == 3, 4, 0)
    return {"start": start, "length": length, "unit": unit, "opcode": opcode, "stall": stall}


def synthetic_trace(records: int, cus: int = 4) -> Trace:
    """A ping-pong trace of about ``records`` records over ``cus`` CUs x 4 SIMDs x 2 waves."""
    waves = cus * 4 * 2
    iterations = max(3, round(records / (PER_BLOCK * waves)))
    tpl = _template()
    wave = np.arange(waves)
    it = np.arange(iterations)
    # (wave, iteration, record) grid, flattened
    w = np.repeat(wave, iterations * PER_BLOCK)
    i = np.tile(np.repeat(it, PER_BLOCK), waves)
    r = np.tile(np.arange(PER_BLOCK), waves * iterations)
    cu, simd, slot = w // 8, (w % 8) // 2, w % 2
    start = i * PERIOD + slot * PHASE + tpl["start"][r]
    stall = tpl["stall"][r]
    n = start.size
    columns = {
        "cu": pa.array(cu, pa.int32()), "simd": pa.array(simd, pa.int32()), "wave": pa.array(w % 8, pa.int32()),
        "slot": pa.array(slot, pa.int32()), "pc": pa.array(r * 8, pa.int64()),
        "opcode": pa.DictionaryArray.from_arrays(pa.array(r, pa.int32()), pa.array(tpl["opcode"])).cast(pa.string()),
        "operands": pa.nulls(n, pa.string()),
        "unit": pa.DictionaryArray.from_arrays(pa.array(r, pa.int32()), pa.array(tpl["unit"])).cast(pa.string()),
        "issue": pa.array(start, pa.int64()), "start": pa.array(start, pa.int64()),
        "end": pa.array(start + tpl["length"][r], pa.int64()), "stall": pa.array(stall, pa.int64()),
        "stall_reason": pa.array(np.where(stall > 0, "dependency", None), pa.string()),
        "iteration": pa.array(i, pa.int32()), "region": pa.nulls(n, pa.string()),
    }
    table = pa.Table.from_arrays(list(columns.values()), schema=ARROW_SCHEMA)
    meta = TraceMeta(kernel="synthetic-pingpong", arch="gfx950", source="model", clock_mhz=2400.0,
                     provenance={"command": "benchmarks/bench_analyzer.py"})
    return Trace(table, meta)


def analyse(trace: Trace) -> dict:
    out = {"whole": za.summary(trace, "whole"), "steady": za.summary(trace, "steady")}
    for name, entry in za.TABLES.items():
        out[name] = entry.fn(trace, "steady")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    build = time.perf_counter()
    trace = synthetic_trace(args.records)
    build = time.perf_counter() - build
    with tempfile.TemporaryDirectory() as tmp:
        path = trace.save(Path(tmp) / "bench")
        times, cpu = [], []
        for _ in range(args.repeat):
            t, c = time.perf_counter(), time.process_time()
            loaded = Trace.load(path)
            result = analyse(loaded)
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
    steady = result["steady"]
    print(f"records: {len(trace)} ({trace.meta.kernel}, built and validated in {build:.2f} s)")
    print(f"load + summary(whole) + summary(steady) + {len(za.TABLES)} tables: "
          f"best {min(times):.3f} s wall, all {', '.join(f'{x:.3f}' for x in times)} s (target < 2 s); "
          f"CPU time best {min(cpu):.3f} s (process time, all threads: lower than wall when the box is shared)")
    print("steady-state values vs the construction:")
    print(f"  mfma_busy {steady['mfma_busy']:.4f} (construction: {2 * MFMA * MFMA_CYCLES / PERIOD:.4f})")
    print(f"  pingpong_overlap {steady['pingpong_overlap']:.4f} "
          f"(construction: {(VALU + TRANS) * OP_CYCLES / (MFMA * MFMA_CYCLES):.4f})")
    print(f"  valu_cycles_per_block {steady['valu_cycles_per_block']} (construction: {VALU * OP_CYCLES})")
    print(f"  trans_cycles_per_block {steady['trans_cycles_per_block']} (construction: {TRANS * OP_CYCLES})")
    print(f"  handover_gap_mean {steady['handover_gap_mean']} (construction: {GAP})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
