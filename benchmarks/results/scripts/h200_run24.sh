#!/usr/bin/env bash
# Device run 24 on the lent H200 (second of two back-to-back calls; the first copies .whl/part_aa to
# /tmp): the `bfirst` schedule (n128 with tile j's block-b codes written into a third P buffer before
# the wait for block b's PV GEMM of tile j-1): GPU tests (bitwise equal to the 64-key kernel on the six
# shapes, 1000 calls), per-warpgroup timeline, then zyfa-bench beside n128 and FA3-fp8. NOT RUN yet:
# written in the session of runs 22-23, whose device time ended in refused machine starts.
set -o pipefail
source benchmarks/results/scripts/hopper_setup.sh "$1" || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee $OUT/gpu_tests.log
timeout 150 python3 -P -m pytest tests/kernels/hopper/test_hopper_gpu.py -q -s -p no:cacheprovider \
  -k "bfirst" 2>&1 | grep -v Warn | grep -E "SPEC|DETERM|SCHEDULE|passed|failed|Error|assert|illegal" | tee -a $OUT/gpu_tests.log
timeout 100 python3 -P benchmarks/results/scripts/hopper_timeline.py $OUT bfirst 2>&1 | grep -v Warn | tee $OUT/timeline.log
B=fa3-fp8,zyfa-cute-fp8-n128-nopp,zyfa-cute-fp8-n128-bfirst-nopp,zyfa-cute-fp8-n128-bfirst,sdpa-cudnn
grep -q "illegal\|CUDA error\|CUDA_ERROR\|failed" $OUT/gpu_tests.log && B=fa3-fp8,zyfa-cute-fp8-n128-nopp
timeout 200 python3 -P -m zyfa.cli.bench_main --models mha,mistral-7b --seqlens 16k,32k --backends $B \
  --rep-ms 250 --out $OUT/bench 2>&1 | grep -v Warn | tee $OUT/bench.log
