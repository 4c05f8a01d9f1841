#!/usr/bin/env bash
# Lead's device call: zyfa.timing.elapsed_s on CUDA (vs do_bench) and bench_nan_checks through it.
set -uo pipefail
source benchmarks/results/scripts/h200_setup.sh
timeout 60 python3 -P benchmarks/results/scripts/timer_check.py 2>&1 | grep -v Warn | tee "$OUT/timer_check.log"
timeout 120 python3 -P benchmarks/bench_nan_checks.py --seqlen 8192 --rounds 3 --reps 5 2>&1 | grep -v Warn | tee "$OUT/nan_checks.log"
echo "total ${SECONDS} s"
