#!/usr/bin/env bash
# Device run 23 on the lent H200 (second of two back-to-back calls; the first copied .whl/part_aa to
# /tmp): the `lag` schedule after run 22, with each K/V pipeline wait just before its GEMM and the
# producer one K tile ahead of V (run 22 stalled ~1200 cycles per tile in the waits at the step's
# start): GPU tests (bitwise equal to the 64-key kernel, spec bound, 1000 calls), per-warpgroup
# timeline, then zyfa-bench beside FA3-fp8 and cuDNN (run 22 has the Triton rows).
# Eight files come back at most: env goes into gpu_tests.log, the timeline writes four.
set -o pipefail
source benchmarks/results/scripts/hopper_setup.sh "$1" || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee $OUT/gpu_tests.log
timeout 200 python3 -P -m pytest tests/kernels/hopper/test_hopper_gpu.py -q -s -p no:cacheprovider \
  -k "lag" 2>&1 | grep -v Warn \
  | grep -E "SPEC|DETERM|SCHEDULE|passed|failed|Error|assert|illegal" | tee -a $OUT/gpu_tests.log
timeout 100 python3 -P benchmarks/results/scripts/hopper_timeline.py $OUT lag 2>&1 | grep -v Warn | tee $OUT/timeline.log
B=fa3-fp8,zyfa-cute-fp8-n128-nopp,zyfa-cute-fp8-n128-lag-nopp,zyfa-cute-fp8-n128-lag-nopp-s3,zyfa-cute-fp8-n128-lag,zyfa-cute-fp8-n128-lag-s3,sdpa-cudnn
grep -q "illegal\|CUDA error\|CUDA_ERROR\|failed" $OUT/gpu_tests.log && B=fa3-fp8,zyfa-cute-fp8-n128-nopp,sdpa-cudnn
timeout 230 python3 -P -m zyfa.cli.bench_main --models mha,mistral-7b --seqlens 16k,32k --backends $B \
  --rep-ms 250 --out $OUT/bench 2>&1 | grep -v Warn | tee $OUT/bench.log
