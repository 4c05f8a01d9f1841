#!/usr/bin/env python3
"""How much the zyfa-fp8 / AITER ratios of the clock/power model (SIMULATED) hang on the two
guessed per-byte energies, ``e_lds_pj_per_byte`` and ``e_vmem_pj_per_byte`` (power.PARAMS).

For every point of a grid of (e_lds, e_vmem) it refits ``e_mfma_pj`` on the declared calibration
set exactly as ``benchmarks/fidelity.py --fit`` does (fidelity.fit: the in-band rows, nothing
else; ``e_valu_pj`` tied to it by the public Gluon loops at that point's per-byte energies, which
the tie depends on) and prints, per point, the fit's in-band mean/max |error| and leave-one-out
errors beside zyfa-fp8 / AITER v3 ``fwd_hd128_fp8_causal`` at b1 h32 s32K causal FP8 (zyfa-fp8 at
its measured lazy rescale rate, as benchmarks/model_table.py) and zyfa-fp8 / AITER v4
``fwd_hd128_fp8`` on the same shape non-causal. Every point is printed; none is picked.

    ZYFA_AITER_DIR=<ROCm/aiter checkout> python3 benchmarks/power_sensitivity.py \\
        [--lds 0.5,1,2,4] [--vmem 2,5,10,20,31,45]

Each kernel and calibration row is simulated once (cycle counts do not depend on the energies);
each grid point is a refit and a clock solve. Also printed: which global bytes the model counts
(every byte a buffer load or store moves between a CU and the memory system, L2 hit or not) and
what share of them the shape's unique tensor bytes are (at most what HBM has to serve).
"""

import argparse
import os
import sys
import time

from zyfa.gfx950 import timing
from zyfa.kernels import gfx950
from zyfa.shapes import parse_shape
from zyfa.trace.cdna4 import fidelity, power

from model_table import V4, simulate_row

V3 = "aiter:fwd_hd128_fp8_causal"


def _floats(text: str, flag: str) -> list:
    try:
        values = [float(v) for v in text.split(",") if v]
    except ValueError:
        sys.exit(f"power_sensitivity.py: {flag} wants comma-separated numbers (pJ/byte), got {text!r}")
    if not values or min(values) < 0:
        sys.exit(f"power_sensitivity.py: {flag} wants at least one number >= 0, got {text!r}")
    return values


def ratio(ours: dict, base: dict, params: dict) -> float:
    """ours / base at the clocks the power model predicts with ``params`` (the cycles are fixed):
    each a dict with ``tflops_2400`` and ``activity`` (a :func:`model_table.simulate_row` row or
    benchmarks/ratio_bound.py's idealised one)."""
    mhz = {k: power.predict_clock(r["activity"], "fp8", params=params).mhz for k, r in (("o", ours), ("b", base))}
    return ours["tflops_2400"] / base["tflops_2400"] * mhz["o"] / mhz["b"]


def tensor_bytes(shape) -> dict:
    """The shape's unique tensor bytes: Q, K, V (FP8, one byte an element) and O (BF16)."""
    s = shape
    return {"q": s.batch * s.heads * s.seqlen_q * s.headdim, "k": s.batch * s.heads_k * s.seqlen_k * s.headdim,
            "v": s.batch * s.heads_k * s.seqlen_k * s.headdim_v, "o": 2 * s.batch * s.heads * s.seqlen_q * s.headdim_v}


def _global_bytes(row: dict, shape) -> str:
    """The model's global bytes for ``row`` (activity x cycles x CUs: every CU runs the whole
    time, so an upper estimate by the grid tail) against the shape's unique Q, K, V (FP8) and O
    (BF16) bytes."""
    counted = row["activity"].vmem_bytes * row["cycles"] * timing.param("cus")
    unique = sum(tensor_bytes(shape).values())
    blocks = -(-shape.seqlen_q // gfx950.ROWS_PER_WG)
    return (f"{counted / 2**30:.1f} GiB of global traffic counted (every buffer load/store, L2 hit or not); the "
            f"shape's unique Q/K/V/O bytes are {unique / 2**20:.0f} MiB = {100 * unique / counted:.1f} % of it: the "
            f"rest are K/V tiles re-read by the other query blocks of the same head ({blocks} blocks of "
            f"{gfx950.ROWS_PER_WG} rows per head in zyfa-fp8), which L2 "
            f"(4 MB per XCD) or the Infinity Cache can serve; the model prices every counted byte at one "
            f"e_vmem_pj_per_byte")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lds", default="0.5,1,2,4", help="e_lds_pj_per_byte values (default: %(default)s)")
    p.add_argument("--vmem", default="2,5,10,20,31,45", help="e_vmem_pj_per_byte values (default: %(default)s)")
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--shape", default="32k")
    args = p.parse_args()
    lds, vmem = _floats(args.lds, "--lds"), _floats(args.vmem, "--vmem")
    if not os.environ.get("ZYFA_AITER_DIR"):
        sys.exit("power_sensitivity.py: set ZYFA_AITER_DIR to a ROCm/aiter checkout: AITER v3 FP8 is the ratio's "
                 "baseline and one of the calibration set's in-band rows")
    start = time.perf_counter()
    causal = parse_shape(args.shape, heads=args.heads)
    rate = gfx950.measured_rescale_rate("zyfa-fp8", causal)
    rows = {"ours": simulate_row("zyfa-fp8", causal, rescale_rate=None if rate is None else rate[0]),
            "v3": simulate_row(V3, causal)}
    dense = parse_shape(args.shape, heads=args.heads, causal=False)
    rows |= {"ours_nc": simulate_row("zyfa-fp8", dense), "v4": simulate_row(V4, dense)}
    for name, row in rows.items():
        if isinstance(row, str):
            sys.exit(f"power_sensitivity.py: {name}: {row}")
    results = fidelity.simulate_rows(fidelity.calibration_set())
    skipped = [r for r in results if r.activity is None]
    if skipped:
        sys.exit(f"power_sensitivity.py: calibration row {skipped[0].row.kernel} skipped: {skipped[0].skipped}")
    n = sum(not r.row.out_of_band for r in results)
    print(f"CDNA4 cycle model + clock/power model (SIMULATED), b1 h{args.heads} s{args.shape} d128 FP8. Per point: "
          f"e_mfma_pj refitted on the calibration set's {n} in-band rows (fidelity.fit, as benchmarks/fidelity.py "
          f"--fit), e_valu_pj tied to it; zyfa-fp8 causal at its lazy rescale rate "
          f"{'never' if rate is None else f'{100 * rate[0]:.1f} % ({rate[1]}, measured)'}, non-causal never\n")
    print("| e_lds pJ/B | e_vmem pJ/B | e_mfma pJ (fit) | e_valu pJ (tied) | in-band mean / max error | "
          "leave-one-out mean / max | / AITER v3 causal | / AITER v4 non-causal |")
    print("|---|---|---|---|---|---|---|---|")
    points = []
    for e_lds in lds:
        for e_vmem in vmem:
            point = {"e_lds_pj_per_byte": e_lds, "e_vmem_pj_per_byte": e_vmem}
            coeffs = point | fidelity.fit(results, params=point)
            s = fidelity.summarise(fidelity.predict(results, coeffs))
            cv = fidelity.leave_one_out(results, params=point)
            default = all(point[k] == power.param(k) for k in point)
            v3, v4 = ratio(rows["ours"], rows["v3"], coeffs), ratio(rows["ours_nc"], rows["v4"], coeffs)
            points.append((s.max_abs, v3, v4))
            print(f"| {e_lds:g} | {e_vmem:g}{' (PARAMS)' if default else ''} | {coeffs['e_mfma_pj']:.0f} | "
                  f"{coeffs['e_valu_pj']:.0f} | {100 * s.mean_abs:.1f} % / {100 * s.max_abs:.1f} % | "
                  f"{100 * cv.mean_abs:.1f} % / {100 * cv.max_abs:.1f} % | {v3:.3f}x | {v4:.3f}x |")
    print()
    for label, chosen in (("every point", points),
                          (f"points whose refit keeps every in-band row within {100 * fidelity.BAND:.0f} %",
                           [x for x in points if x[0] <= fidelity.BAND])):
        if not chosen:
            print(f"- {label}: none")
            continue
        lo, hi = (lambda i: min(x[i] for x in chosen)), (lambda i: max(x[i] for x in chosen))
        print(f"- {label} ({len(chosen)} of {len(points)}): zyfa-fp8 / AITER v3 causal {lo(1):.3f}x-{hi(1):.3f}x, "
              f"/ AITER v4 non-causal {lo(2):.3f}x-{hi(2):.3f}x; in-band max |error| {100 * lo(0):.1f}-{100 * hi(0):.1f} %; "
              f"points at >= 1.37x over AITER v3 (the write-up's hardware ratio): {sum(x[1] >= 1.37 for x in chosen)}")
    print(f"\nzyfa-fp8 causal: {_global_bytes(rows['ours'], causal)}")
    print(f"AITER v3 causal: {_global_bytes(rows['v3'], causal)}")
    print(f"\n(cycle model, this machine: {time.perf_counter() - start:.0f} s wall)")


if __name__ == "__main__":
    main()
