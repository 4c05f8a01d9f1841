#!/usr/bin/env bash
# Device run 28 on the lent H200 (second of two back-to-back calls; the first copies .whl/part_aa to
# /tmp), from a copy of branch issue23 (carried as .dev23/repo; $1 = the second half of the bundle):
# the tile recipes `runmax` (zyfa-runmax: codes against the row's running max, PV into O, no merge) and
# `t128` (zyfa-v1 with 128-key scaling blocks: one PV GEMM and one merge per tile). GPU tests (each vs its
# emulator, exact mode bit for bit, 1000 calls), accuracy at 16K, timeline, zyfa-bench beside n128 and FA3-fp8.
set -o pipefail
source benchmarks/results/scripts/hopper_setup.sh "$1" || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee $OUT/gpu_tests.log
B=fa3-fp8,zyfa-cute-fp8-n128-nopp,zyfa-cute-fp8-runmax-nopp,zyfa-cute-fp8-runmax,zyfa-cute-fp8-t128-nopp,zyfa-cute-fp8-t128
timeout 150 python3 -P -m zyfa.cli.bench_main --models mha,mistral-7b --seqlens 16k,32k --backends $B \
  --rep-ms 250 --out $OUT/bench 2>&1 | grep -v Warn | tee $OUT/bench.log
timeout 170 python3 -P -m pytest tests/kernels/hopper/test_hopper_gpu.py -q -s -p no:cacheprovider \
  -k "tile or runmax or t128 or without_keys" 2>&1 | grep -v Warn \
  | grep -E "TILE|DETERM|passed|failed|Error|assert|illegal" | tee -a $OUT/gpu_tests.log
timeout 90 python3 -P benchmarks/results/scripts/hopper_tile_accuracy.py 2>&1 | grep -v Warn | tee $OUT/accuracy.log
timeout 80 python3 -P benchmarks/results/scripts/hopper_timeline.py $OUT runmax 2>&1 | grep -v Warn | tee $OUT/timeline.log
echo "total ${SECONDS} s"
