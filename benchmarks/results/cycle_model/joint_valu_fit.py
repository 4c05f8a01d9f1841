#!/usr/bin/env python3
"""The clock model's calibrated energies fitted six ways on the calibration set's in-band rows
(SIMULATED, this machine): e_mfma alone (e_valu at its former guess, 60 pJ), jointly with a free
e_valu, or with e_valu tied to it by the public Gluon loops (power.tied_valu_energy: what
fidelity.fit does), with every row taken as Gaussian or at its harness's stated input
distribution (fidelity.Row.inputs). For each: the fit's error,
the leave-one-out error and the pure-MFMA-loop clocks (to hold against the Gluon GEMMs' >= 1438 /
>= 1557 MHz). docs/cdna4-facts.md "Clocks and power" quotes its output (2026-12-03).

    ZYFA_AITER_DIR=<ROCm/aiter checkout> python3 benchmarks/results/cycle_model/joint_valu_fit.py
"""

import math

import numpy as np

from zyfa.trace.cdna4 import fidelity, power

E_MFMA = np.arange(1000, 6001, 20.0)
E_VALU = np.arange(0, 3001, 20.0)


def errors(rows, e_mfma, e_valu, inputs):
    return fidelity.log_errors(rows, {"e_mfma_pj": e_mfma, "e_valu_pj": e_valu}, inputs=inputs)


def fit(rows, how, inputs):
    if how == "joint":
        grid = np.array([(m, v) for m in E_MFMA for v in E_VALU])
    elif how == "tied":
        grid = np.stack([E_MFMA, power.tied_valu_energy(E_MFMA)], axis=1)
    else:
        grid = np.array([(m, 60.0) for m in E_MFMA])
    loss = (errors(rows, grid[:, 0], grid[:, 1], inputs) ** 2).sum(axis=1)
    return grid[int(np.argmin(loss))]


def main():
    results = fidelity.simulate_rows(fidelity.calibration_set())
    rows = [r for r in results if r.activity is not None and not r.row.out_of_band]
    for how in ("alone", "joint", "tied"):
        for inputs in (False, True):
            m, v = fit(rows, how, inputs)
            err = np.expm1(errors(rows, [m], [v], inputs)[0])
            loo = np.abs([math.expm1(errors([r], *([x] for x in fit(rows[:i] + rows[i + 1:], how, inputs)), inputs)[0, 0])
                          for i, r in enumerate(rows)])
            pure = {d: power.pure_mfma_clock(d, params={"e_mfma_pj": m, "e_valu_pj": v}).mhz for d in ("bf16", "fp8")}
            fp8 = [1 + e for e, r in zip(err, rows) if r.row.kernel == "aiter:fwd_hd128_fp8_causal"]
            label = {"alone": "e_mfma alone", "joint": "e_mfma+e_valu", "tied": "e_valu tied"}[how]
            print(f"{label:13s} {'harness inputs' if inputs else 'all Gaussian':14s}: "
                  f"e_mfma {m:.0f} e_valu {v:.0f} pJ; fit mean/max |error| {100 * np.mean(np.abs(err)):.1f}/"
                  f"{100 * np.max(np.abs(err)):.1f}%, {(np.abs(err) <= 0.15).sum()}/{len(err)} within 15%; leave-one-out "
                  f"{100 * loo.mean():.1f}/{100 * loo.max():.1f}%, {(loo <= 0.15).sum()}/{len(loo)}; pure MFMA loop "
                  f"{pure['bf16']:.0f} / {pure['fp8']:.0f} MHz; AITER FP8 32K {fp8[0] if fp8 else float('nan'):.3f}x",
                  flush=True)


if __name__ == "__main__":
    main()
