#!/usr/bin/env bash
# Issue 19's device call (H200 run 19): what the Triton kernels' NaN/Inf rules cost, FP8 and BF16,
# b1 h32 s16384 d128 causal, fixed tiles (no autotuning: the call has about 30 s). Run from the
# repository root with $OUT set.
set -u -o pipefail
source benchmarks/results/scripts/h200_setup.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader | tee "$OUT/env.txt"
timeout 100 python3 -P benchmarks/bench_nan_checks.py 2>&1 | grep -v Warn | tee "$OUT/nan_checks.log"
echo "rc: $?"
