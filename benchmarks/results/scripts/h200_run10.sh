#!/usr/bin/env bash
# Lead's one device call: issue 20's and issue 21's H200 scripts, time-boxed to fit one call.
set -u
cd "$(dirname "$0")/.."
mkdir -p "$OUT/num" "$OUT/prod"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv
echo "=== h200_numerics (<=235 s) ==="
OUT=$OUT/num timeout 235 python3 benchmarks/h200_numerics.py 2>&1 | tail -60
echo "rc numerics: ${PIPESTATUS[0]}"
echo "=== h200_production (<=300 s) ==="
OUT=$OUT/prod timeout 300 bash benchmarks/h200_production.sh 2>&1 | tail -80
echo "rc production: ${PIPESTATUS[0]}"
