"""How far to trust the CDNA4 cycle model: published MI355X TFLOP/s vs the model's prediction.

Runs every row of the calibration set (AITER README, AITER PR #3390, HipKittens' AITER column,
the ZYFA write-up; docs/cdna4-facts.md) through the cycle model at the 2400 MHz peak, predicts
the sustained clock with the clock/power model (power-limited or peak) and prints published vs
predicted TFLOP/s, their ratio, the predicted clock, the implied clock (the one at which the
model's cycles give the published figure: the error split into cycles vs clock), and the mean
and max absolute error over the in-band rows, the leave-one-out error, and clock checks (the
write-up's Mistral-7B layer clocks against the model's). Rows measured through a harness whose public
per-call host overhead exceeds 15% of their time (HipKittens 1K/2K) are printed out of band,
with the reason, and are neither summarised nor fitted. All predictions are SIMULATED; the
published throughputs state no clock.

  zyfa-trace fidelity
  zyfa-trace fidelity --format markdown -o fidelity.md
  ZYFA_AITER_DIR=~/aiter zyfa-trace fidelity --format csv   # include AITER's FP8 row

Rows whose kernel cannot be resolved here (AITER's FP8 object is not in the PyPI wheel) are
listed as skipped, with the reason. Takes about a minute on a 2-core CPU.
"""

from __future__ import annotations

import argparse

from tqdm import tqdm

from zyfa.kernels import aiter
from zyfa.trace.cdna4 import fidelity
from zyfa.trace.safeio import check_output, write_text


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("text", "markdown", "csv"), default="text", help="table format (default text)")
    p.add_argument("-o", "--out", default=None, help="write the table to this file (default: stdout)")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    p.add_argument("--aiter-dir", default=None,
                   help="folder with AITER's hsa/gfx950 objects (a ROCm/aiter checkout); default: $ZYFA_AITER_DIR")


def run(args: argparse.Namespace) -> int:
    aiter.use_dir(args.aiter_dir)  # a bad --aiter-dir / $ZYFA_AITER_DIR: one error now, not skipped rows
    if args.out:
        check_output(args.out, force=args.force)
    progress = lambda rows: tqdm(rows, desc="cycle model: calibration rows", unit="row", leave=False, disable=None)
    results = fidelity.predict(fidelity.simulate_rows(fidelity.calibration_set(), progress=progress))
    checks = fidelity.predict(fidelity.simulate_rows(fidelity.clock_checks(), progress=progress))
    text = fidelity.render(results, args.format, checks=checks)
    if args.out:
        write_text(args.out, text + "\n")
        print(f"wrote {args.out}")
    else:
        print(text)
    return 0
