#!/usr/bin/env bash
# Device run 34 on the lent H200 (sixth session, lead): the part of run 31 that did not finish. Run 31's
# first test selection ("grouped or deterministic or without_keys") hit its 150 s timeout after the grouped
# tests had printed all their lines but before the 1000-call determinism tests and the empty-row test ran,
# so pytest printed no summary for it. This run gives that selection 330 s, then stamps grouped=8 (the faster
# of the two grouped variants in run 31, still 0.92x of t128) for the per-warpgroup timeline that says why
# grouping lost. Second of two back-to-back calls (the first copies .whl/part_aa to /tmp); runs from main:
#   bash benchmarks/results/scripts/h200_run34.sh .whl2/part_ab      (carry .whl2)
set -o pipefail
source benchmarks/results/scripts/hopper_setup.sh "$1" || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee $OUT/gpu_tests.log
timeout 330 python3 -P -m pytest tests/kernels/hopper/test_hopper_gpu.py -q -s -p no:cacheprovider \
  -k "grouped or deterministic or without_keys" -rfE 2>&1 | grep -v Warn \
  | grep -E "GROUPED|DETERM|passed|failed|FAILED|Error|assert|illegal" | tee -a $OUT/gpu_tests.log
echo "tests done at ${SECONDS} s" | tee -a $OUT/gpu_tests.log
mkdir -p /tmp/tl
timeout 75 python3 -P benchmarks/results/scripts/hopper_timeline.py /tmp/tl g8 2>&1 | grep -v Warn | tee $OUT/timeline.log
tar -cf $OUT/timelines.tar -C /tmp/tl .
echo "total ${SECONDS} s"
