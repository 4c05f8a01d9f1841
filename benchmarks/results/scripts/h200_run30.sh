#!/usr/bin/env bash
# Device run 30 on the lent H200 (second of two back-to-back calls; the first copies .whl/part_aa to
# /tmp), from a copy of branch issue23 (carried as .dev23/repo; $1 = the second half of the bundle):
# `split_pv` (t128 with the tile's PV GEMM committed as two 64-key halves: run 29's timeline put ~270
# cycles of each tile's chain in the wait for the whole PV GEMM; same bits) beside t128, n128 and FA3-fp8;
# GPU tests (bitwise equal to t128, 1000 calls), per-warpgroup timeline. Trimmed to three bench rows:
# this engineer's device time was nearly spent (a refused start cost 90 s).
set -o pipefail
source benchmarks/results/scripts/hopper_setup.sh "$1" || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee $OUT/gpu_tests.log
B=fa3-fp8,zyfa-cute-fp8-t128-nopp,zyfa-cute-fp8-t128-split-nopp
timeout 120 python3 -P -m zyfa.cli.bench_main --models mha,mistral-7b --seqlens 16k,32k --backends $B \
  --rep-ms 250 --out $OUT/bench 2>&1 | grep -v Warn | tee $OUT/bench.log
cp $OUT/bench/bench.csv $OUT/bench.csv && rm -r $OUT/bench
timeout 120 python3 -P -m pytest tests/kernels/hopper/test_hopper_gpu.py -q -s -p no:cacheprovider \
  -k "split" 2>&1 | grep -v Warn | grep -E "LATE|DETERM|passed|failed|Error|assert|illegal" | tee -a $OUT/gpu_tests.log
mkdir -p /tmp/tl
timeout 45 python3 -P benchmarks/results/scripts/hopper_timeline.py /tmp/tl split 2>&1 | grep -v Warn | tee -a $OUT/timeline.log
tar -cf $OUT/timelines.tar -C /tmp/tl .
echo "total ${SECONDS} s"
