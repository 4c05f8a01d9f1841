#!/usr/bin/env python3
"""Issue 17 experiment (tried, not adopted; docs/cdna4-facts.md "Clocks and power"): pin the clock
model's ``e_mfma_pj`` on AMD's Gluon GEMMs instead of fitting it, then fit the VALU energy (or an
extra energy per TRANS-busy cycle) alone on the calibration set's in-band rows. SIMULATED (CDNA4
cycle model + clock/power model); nothing is written. Set ZYFA_AITER_DIR for AITER's FP8 row.

    python3 benchmarks/results/cycle_model/pin_e_mfma.py
"""

import math

import numpy as np

from zyfa.gfx950 import timing
from zyfa.trace.cdna4 import fidelity, power
from zyfa.trace.cdna4.estimate import EstimateConfig
from zyfa.trace.cdna4.tracer import simulate

FP8_ROW = "aiter:fwd_hd128_fp8_causal"


def pinned_e_mfma() -> float:
    """e_mfma_pj at which a pure BF16 MFMA loop runs at the Gluon FP16 GEMM's implied clock (the
    inverse of power.pure_mfma_clock; the same E(f) as power.fp8_energy_ratio)."""
    p = {k: float(v.value) for k, v in power.PARAMS.items()}
    f = power.PUBLIC_LOOPS[0].clock_mhz
    v = p["v0"] + (1 - p["v0"]) * f / p["f_peak_mhz"]
    e_cycle = (p["board_power_w"] - p["p_static_w"]) / (timing.param("cus") * f * 1e6 * v * v) * 1e12
    return (e_cycle - p["e_clock_pj"]) / (float(power.TOGGLE["bf16"].value) * timing.param("simds_per_cu"))


def simulate_with_trans(rows):
    """fidelity.simulate_rows, keeping each row's TRANS share of its VALU+TRANS busy cycles."""
    config = EstimateConfig(clock_mhz=power.param("f_peak_mhz"))
    out = []
    for row in rows:
        _, est = simulate(row.kernel, row.shape, config=config)
        rec = est.cu_result.records
        unit = np.asarray(rec["unit"])
        busy = np.asarray(rec["end"]) - np.asarray(rec["start"])
        trans, valu = float(busy[unit == "TRANS"].sum()), float(busy[unit == "VALU"].sum())
        act = power.activity(rec, est.cu_result.skipped_periods())
        out.append((fidelity.Result(row, tflops_peak=est.tflops, activity=act, work=est.flops_ratio),
                    trans / (trans + valu) if trans + valu else 0.0))
    return out


def ratio_clock(r, share, params, e_trans=0.0):
    """A row's predicted/published ratio and clock with ``params``; ``e_trans``: extra pJ per
    TRANS-busy SIMD-cycle (at tau_valu), added to the row as a constant energy per CU-cycle."""
    extra = e_trans * power.param("tau_valu") * r.activity.valu * share
    p = dict(params) | {"e_clock_pj": power.param("e_clock_pj") + extra}
    clock = power.predict_clock(r.activity, r.row.shape.dtype, params=p).mhz
    return r.tflops_peak * clock / power.param("f_peak_mhz") / r.row.published, clock


def evaluate(rows, params, e_trans=0.0):
    """In-band |errors| and the AITER FP8 row's (ratio, clock)."""
    errs, fp8 = [], None
    for r, share in rows:
        if r.row.out_of_band:
            continue
        ratio, clock = ratio_clock(r, share, params, e_trans)
        errs.append(abs(ratio - 1))
        if r.row.kernel == FP8_ROW:
            fp8 = (ratio, clock)
    return np.array(errs), fp8


def line(tag, rows, params, e_trans=0.0):
    errs, fp8 = evaluate(rows, params, e_trans)
    pure = "/".join(f"{power.pure_mfma_clock(d, params=params).mhz:.0f}" for d in ("bf16", "fp8"))
    fp8_text = f"AITER FP8 {fp8[0]:.3f}x at {fp8[1]:.0f} MHz" if fp8 else "AITER FP8 row not simulated"
    print(f"{tag}: {errs.size} in-band rows, mean {100 * errs.mean():.2f}%, max {100 * errs.max():.2f}%, "
          f"{int((errs <= fidelity.BAND).sum())} within 15%; {fp8_text}; pure loops {pure} MHz (bf16/fp8)")
    return errs


def best(rows, make, grid):
    """The grid point minimising the in-band sum of squared log errors (fidelity.fit's loss)."""
    def loss(x):
        params, e_trans = make(x)
        return sum(math.log(ratio_clock(r, share, params, e_trans)[0]) ** 2 for r, share in rows if not r.row.out_of_band)
    return min(grid, key=loss)


def main():
    rows = simulate_with_trans(fidelity.calibration_set())
    e_mfma = round(pinned_e_mfma())
    print(f"pinned e_mfma_pj = {e_mfma} (pure BF16 loop at the Gluon FP16 GEMM's "
          f"{power.PUBLIC_LOOPS[0].clock_mhz:.0f} MHz)")
    for r, _ in rows:
        if not math.isnan(r.traced_clock):
            print(f"{r.row.kernel}: traced clock {r.traced_clock:.0f} MHz (the check, not a target)")
    today = line("today (stored coefficients)", rows, {})
    line(f"pinned e_mfma {e_mfma}, e_valu 60", rows, {"e_mfma_pj": e_mfma})
    ev = best(rows, lambda x: ({"e_mfma_pj": e_mfma, "e_valu_pj": float(x)}, 0.0), range(0, 4001, 10))
    fitted = line(f"pinned, e_valu fitted = {ev}", rows, {"e_mfma_pj": e_mfma, "e_valu_pj": float(ev)})
    print(f"  rows worse than today: {int((fitted > today + 1e-12).sum())} of {today.size}")
    for x in (300, 600, 1000):
        line(f"pinned, e_valu {x}", rows, {"e_mfma_pj": e_mfma, "e_valu_pj": float(x)})
    et = best(rows, lambda x: ({"e_mfma_pj": e_mfma}, float(x)), range(0, 3001, 10))
    line(f"pinned, e_valu 60, TRANS extra fitted = {et}", rows, {"e_mfma_pj": e_mfma}, float(et))
    line("pinned, e_valu 60, TRANS extra 1000", rows, {"e_mfma_pj": e_mfma}, 1000.0)


if __name__ == "__main__":
    main()
