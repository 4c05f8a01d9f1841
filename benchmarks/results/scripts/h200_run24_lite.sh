#!/usr/bin/env bash
# Lead's trimmed run 24 (second call of the pair; the first copied .whl/part_aa to /tmp): the bfirst
# schedule's GPU tests, then zyfa-bench MHA 16k/32k beside n128 and FA3-fp8 (no timeline: device time).
set -o pipefail
source benchmarks/results/scripts/hopper_setup.sh "$1" || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee $OUT/gpu_tests.log
timeout 110 python3 -P -m pytest tests/kernels/hopper/test_hopper_gpu.py -q -s -p no:cacheprovider \
  -k "bfirst" 2>&1 | grep -v Warn | grep -E "SPEC|DETERM|SCHEDULE|passed|failed|Error|assert|illegal" | tee -a $OUT/gpu_tests.log
B=fa3-fp8,zyfa-cute-fp8-n128-nopp,zyfa-cute-fp8-n128-bfirst-nopp,zyfa-cute-fp8-n128-bfirst
grep -q "illegal\|CUDA error\|CUDA_ERROR\|failed" $OUT/gpu_tests.log && B=fa3-fp8,zyfa-cute-fp8-n128-nopp
timeout 100 python3 -P -m zyfa.cli.bench_main --models mha,mistral-7b --seqlens 16k,32k --backends $B \
  --rep-ms 150 --out $OUT/bench 2>&1 | grep -v Warn | tee $OUT/bench.log
echo "total ${SECONDS} s"
