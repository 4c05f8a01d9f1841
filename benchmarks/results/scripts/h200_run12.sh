#!/usr/bin/env bash
# Device run 12 on the lent H200 (second of two back-to-back calls; the first copied .whl/part_aa to
# /tmp and timed the Triton FP8 kernel from run 8's tree and from this one): per-warpgroup timeline of
# the n128 CuTe kernel (which resource binds), the non-causal exact-mode diagnostics, and n128 with
# three K/V stages beside FA3-fp8.
set -o pipefail
source benchmarks/results/scripts/hopper_setup.sh "$1" || exit 1
timeout 60 python3 -P -m pytest tests/kernels/hopper/test_hopper_gpu.py -q -s -p no:cacheprovider -k "exact" \
  2>&1 | grep -v Warn | grep -E "EXACT|passed|failed|xfail|Error" | tee $OUT/gpu_tests.log
timeout 150 python3 -P benchmarks/results/scripts/hopper_timeline.py $OUT n128 2>&1 | grep -v Warn | tee $OUT/timeline.log
timeout 150 python3 -P -m zyfa.cli.bench_main --models mha,mistral-7b --seqlens 16k,32k \
  --backends fa3-fp8,zyfa-cute-fp8-n128-nopp,zyfa-cute-fp8-n128-nopp-s3,zyfa-cute-fp8-n128-s3 \
  --rep-ms 300 --out $OUT/bench 2>&1 | grep -v Warn | tee $OUT/bench.log
