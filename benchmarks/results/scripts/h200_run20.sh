#!/usr/bin/env bash
# Run 20 (lead): the Triton FP8 kernel's NaN rule after 5a27939 (host-side first-NaN keys), then
# run 18's script (repo GPU tests through the bucketed autotune, zyfa-fp8 8K breakdown). From the repo root, $OUT set.
set -uo pipefail
mkdir -p "$OUT/nan" "$OUT/r18"
git log --oneline -1 > "$OUT/commit.txt" 2>&1 || true
source benchmarks/results/scripts/h200_setup.sh
echo "=== bench_nan_checks (<= 100 s) ==="
timeout 100 python3 -P benchmarks/bench_nan_checks.py 2>&1 | grep -v Warn | tee "$OUT/nan/nan_checks.log"
echo "rc nan: ${PIPESTATUS[0]}"
OUT=$OUT/r18 bash benchmarks/results/scripts/h200_run18.sh
echo "total ${SECONDS} s"
