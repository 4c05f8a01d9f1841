#!/usr/bin/env bash
# Device run 12 on the lent H200 (second of two back-to-back calls; the first copied .whl/part_aa to
# /tmp and timed the Triton FP8 kernel from run 8's tree and from this one): the prefetch variant
# (block j+1's Q K^T under block j's softmax) through the GPU tests, the non-causal exact-mode
# diagnostics, per-warpgroup timeline of the n128 kernel, then zyfa-bench beside FA3-fp8.
set -o pipefail
source benchmarks/results/scripts/hopper_setup.sh "$1" || exit 1
timeout 100 python3 -P -m pytest tests/kernels/hopper/test_hopper_gpu.py -q -s -p no:cacheprovider -k "prefetch or exact" \
  2>&1 | grep -v Warn | grep -E "SPEC|SCHEDULE|DETERM|EXACT|passed|failed|xfail|Error|illegal" | tee $OUT/gpu_tests.log
timeout 120 python3 -P benchmarks/results/scripts/hopper_timeline.py $OUT n128 2>&1 | grep -v Warn | tee $OUT/timeline.log
B=fa3-fp8,zyfa-cute-fp8-n128-nopp,zyfa-cute-fp8-n128-nopp-s3,zyfa-cute-fp8-pf
grep -q "illegal\|CUDA error\|CUDA_ERROR\|Timeout" $OUT/gpu_tests.log && B=fa3-fp8,zyfa-cute-fp8-n128-nopp,zyfa-cute-fp8-n128-nopp-s3
timeout 150 python3 -P -m zyfa.cli.bench_main --models mha,mistral-7b --seqlens 16k,32k --backends $B \
  --rep-ms 300 --out $OUT/bench 2>&1 | grep -v Warn | tee $OUT/bench.log
