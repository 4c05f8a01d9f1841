#!/usr/bin/env python3
"""The cycle model's fidelity table (SIMULATED predictions vs published MI355X TFLOP/s), and the
fit of the clock/power model's calibrated coefficient on that set's in-band rows.

    python3 benchmarks/fidelity.py [--format text|markdown|csv]
    python3 benchmarks/fidelity.py --fit      # refit e_mfma_pj on the calibration set's in-band rows

``--fit`` prints the fitted values and the table with them; copy them into
``zyfa/trace/cdna4/power.py`` (PARAMS, with the date) by hand: nothing is written. Same table as
``zyfa-trace fidelity``. Set ZYFA_AITER_DIR to a ROCm/aiter checkout to include AITER's FP8 row.
"""

import argparse
import time

from zyfa.trace.cdna4 import fidelity


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--format", choices=("text", "markdown", "csv"), default="text")
    p.add_argument("--fit", action="store_true", help="fit e_mfma_pj on the calibration set's in-band rows")
    args = p.parse_args()
    start = time.perf_counter()
    results = fidelity.simulate_rows(fidelity.calibration_set())
    params = None
    if args.fit:
        params = fidelity.fit(results)
        print(f"fitted on {sum(r.activity is not None and not r.row.out_of_band for r in results)} in-band rows: {params}")
    checks = fidelity.predict(fidelity.simulate_rows(fidelity.clock_checks()), params)
    print(fidelity.render(fidelity.predict(results, params), args.format, params, checks=checks))
    print(f"\n(cycle model, this machine: {time.perf_counter() - start:.0f} s wall)")


if __name__ == "__main__":
    main()
