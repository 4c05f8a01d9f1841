#!/usr/bin/env bash
# Device run 9 on the lent H200 (second of two back-to-back calls; the first copied .whl/part_aa to
# /tmp): per-warpgroup clock64 timeline of the CuTe DSL FP8 kernel at 16k, ping-pong on and off.
set -o pipefail
source benchmarks/results/scripts/hopper_setup.sh "$1" || exit 1
timeout 200 python3 -P benchmarks/results/scripts/hopper_timeline.py $OUT 2>&1 | grep -v Warn | tee $OUT/timeline.log
