#!/usr/bin/env bash
# Device run 24 on the lent H200 (second of two back-to-back calls; the first copied .whl/part_aa to
# /tmp): the `bfirst` schedule (n128 with tile j's block-b codes written before the wait for block b's
# PV GEMM of tile j-1, a third P buffer): GPU tests (bitwise equal to the 64-key kernel on the s1024
# shape, 1000 calls), then zyfa-bench beside n128 and FA3-fp8. Kept short: the last of this engineer's device time.
set -o pipefail
source benchmarks/results/scripts/hopper_setup.sh "$1" || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee $OUT/gpu_tests.log
timeout 35 python3 -P -m pytest tests/kernels/hopper/test_hopper_gpu.py -q -s -p no:cacheprovider \
  -k "bfirst and (1024 or deterministic)" 2>&1 | grep -v Warn | grep -E "DETERM|SCHEDULE|passed|failed|Error|assert|illegal" | tee -a $OUT/gpu_tests.log
B=fa3-fp8,zyfa-cute-fp8-n128-nopp,zyfa-cute-fp8-n128-bfirst-nopp
grep -q "illegal\|CUDA error\|CUDA_ERROR\|failed" $OUT/gpu_tests.log && exit 1
timeout 55 python3 -P -m zyfa.cli.bench_main --models mha,mistral-7b --seqlens 16k,32k --backends $B \
  --rep-ms 150 --out $OUT/bench 2>&1 | grep -v Warn | tee $OUT/bench.log
