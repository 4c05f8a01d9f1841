#!/usr/bin/env bash
# Device run 29 on the lent H200 (second of two back-to-back calls; the first copies .whl/part_aa to
# /tmp), from a copy of branch issue23 (carried as .dev23/repo; $1 = the second half of the bundle):
# t128 (run 28's fastest: 0.97-1.01x FA3-fp8) again beside FA3-fp8 and n128, and `late_merge` (t128 with
# each tile's merge moved under the next S GEMM, same bits); GPU tests, per-warpgroup timelines of both.
set -o pipefail
source benchmarks/results/scripts/hopper_setup.sh "$1" || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee $OUT/gpu_tests.log
B=fa3-fp8,zyfa-cute-fp8-n128-nopp,zyfa-cute-fp8-t128-nopp,zyfa-cute-fp8-t128-late-nopp,zyfa-cute-fp8-t128-late
timeout 150 python3 -P -m zyfa.cli.bench_main --models mha,mistral-7b --seqlens 16k,32k --backends $B \
  --rep-ms 300 --out $OUT/bench 2>&1 | grep -v Warn | tee $OUT/bench.log
cp $OUT/bench/bench.csv $OUT/bench.csv && rm -r $OUT/bench
timeout 150 python3 -P -m pytest tests/kernels/hopper/test_hopper_gpu.py -q -s -p no:cacheprovider \
  -k "late or t128 or (exact_mode and not runmax)" 2>&1 | grep -v Warn \
  | grep -E "TILE|LATE|EXACT|DETERM|passed|failed|Error|assert|illegal" | tee -a $OUT/gpu_tests.log
mkdir -p /tmp/tl
for v in t128 late; do
  timeout 60 python3 -P benchmarks/results/scripts/hopper_timeline.py /tmp/tl $v 2>&1 | grep -v Warn | tee -a $OUT/timeline.log
done
tar -cf $OUT/timelines.tar -C /tmp/tl .
echo "total ${SECONDS} s"
