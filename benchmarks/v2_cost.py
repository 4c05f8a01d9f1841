"""Cost of spec v2 on gfx950 in the cycle model (simulated): zyfa-fp8-v1 (spec v1) beside zyfa-fp8-v2.

Each kernel is simulated twice on the same shape: with its out-of-line O rescale never taken (the
generator's stated steady-state direction, what ``zyfa-trace kernel`` prints) and always taken
(every wave rescales on every tile: the upper bound). The static softmax VALU cycles per 32x128
tile and the rescale cluster's VALU count come from the generated code. Where the branch really
goes depends on the data: ``benchmarks/v2_rescale_rate.py`` measures the fraction of wave-tiles
that take it; the time at a rate r is bracketed by the two rows (linear in r if the rescale's cost
per execution does not depend on how often it runs: an assumption, printed as such).

    python benchmarks/v2_cost.py --shape 32k [--rate-v1 0.23 --rate-v2 0.44]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from zyfa.kernels import gfx950
from zyfa.kernels.gfx950.counts import tile_counts
from zyfa.kernels.gfx950.generator import generate
from zyfa.shapes import AttnShape, parse_seqlen
from zyfa.trace.cdna4 import power
from zyfa.trace.cdna4.estimate import EstimateConfig, estimate
from zyfa.trace.cdna4.launch import prepare

KERNELS = {"v1": "zyfa-fp8-v1", "v2": "zyfa-fp8-v2"}


def simulate(kernel: str, shape: AttnShape, rescale: str) -> dict:
    """Predicted time and TFLOP/s of ``kernel`` with its rescale branch ``rescale`` ("taken" / "not-taken")."""
    launch = prepare(kernel, shape)
    rescale_pcs = {b["pc"] for b in gfx950.rescale_branches(launch.meta["branch_assumptions"])}
    assumptions = [dict(b, steady_state=rescale) if b["pc"] in rescale_pcs else b
                   for b in launch.meta["branch_assumptions"]]
    launch = replace(launch, meta={**launch.meta, "branch_assumptions": assumptions})
    est = estimate(launch, EstimateConfig(clock_mhz=2400.0))
    clock = power.predict_clock(power.activity(est.cu_result.records, est.cu_result.skipped_periods()), shape.dtype)
    seconds = est.cycles / (clock.mhz * 1e6)
    return {"cycles": est.cycles, "mhz": clock.mhz, "ms": seconds * 1e3, "tflops": shape.tflops(seconds),
            "tflops_2400": est.tflops}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="32k", help="sequence length (q and k), e.g. 32k")
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--rate-v1", type=float, help="measured rescale rate of v1 (v2_rescale_rate.py)")
    parser.add_argument("--rate-v2", type=float, help="measured rescale rate of v2")
    args = parser.parse_args(argv)
    s = parse_seqlen(args.shape)
    shape = AttnShape(batch=1, heads=args.heads, heads_k=args.heads, seqlen_q=s, seqlen_k=s, headdim=128,
                      headdim_v=128, causal=True, dtype="fp8")
    print(f"CDNA4 cycle model (simulated, not measured): b1 h{args.heads} s{s} d128 causal fp8")
    print(f"{'kernel':<13} {'softmax VALU cyc/tile':>21} {'rescale VALU':>12} {'rescale':>9} {'cycles':>9} "
          f"{'MHz':>5} {'ms':>7} {'TFLOP/s':>8} {'@2400':>6}")
    rows = {}
    for recipe, kernel in KERNELS.items():
        counts = tile_counts(generate(gfx950.config_for(kernel, shape)))
        meta = gfx950.build_for(kernel, shape).meta
        rescale_valu = next(c["units"]["VALU"] for c in meta["clusters"] if c["name"] == "rescale_O")
        for direction in ("not-taken", "taken"):
            r = simulate(kernel, shape, direction)
            rows[recipe, direction] = r
            print(f"{kernel:<13} {counts.valu_cycles:>21} {rescale_valu:>12} {direction:>9} {r['cycles']:>9} "
                  f"{r['mhz']:>5.0f} {r['ms']:>7.3f} {r['tflops']:>8.0f} {r['tflops_2400']:>6.0f}")
    for recipe, rate in (("v1", args.rate_v1), ("v2", args.rate_v2)):
        if rate is not None:
            lo, hi = rows[recipe, "not-taken"]["ms"], rows[recipe, "taken"]["ms"]
            print(f"{KERNELS[recipe]} at a rescale rate of {rate:.3f}: {lo + rate * (hi - lo):.3f} ms "
                  f"(linear between the rows above: an estimate)")
    if args.rate_v1 is not None and args.rate_v2 is not None:
        v1 = rows["v1", "not-taken"]["ms"] + args.rate_v1 * (rows["v1", "taken"]["ms"] - rows["v1", "not-taken"]["ms"])
        v2 = rows["v2", "not-taken"]["ms"] + args.rate_v2 * (rows["v2", "taken"]["ms"] - rows["v2", "not-taken"]["ms"])
        print(f"v2 / v1 time at those rates: {v2 / v1:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
