#!/usr/bin/env bash
# Lead's device call: first_nan_keys as one kernel (6db32e2): GPU equality, NaN rule cases, cost.
set -uo pipefail
source benchmarks/results/scripts/h200_setup.sh
timeout 90 python3 -P benchmarks/results/scripts/first_nan_keys_gpu.py 2>&1 | grep -v Warn | tee "$OUT/first_nan_keys.log"
timeout 120 python3 -P benchmarks/results/scripts/h200_run21_nan.py triton cuda 2>&1 | grep -v Warn | tail -4 | tee "$OUT/nan_gpu.log"
for s in 8192 16384; do
  timeout 120 python3 -P benchmarks/bench_nan_checks.py --seqlen $s --rounds 3 --reps 5 2>&1 | grep -v Warn | tee "$OUT/nan_checks_s$s.log"
done
echo "total ${SECONDS} s"
