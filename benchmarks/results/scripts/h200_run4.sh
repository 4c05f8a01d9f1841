#!/usr/bin/env bash
# Device run 4 on the lent H200: the GPU tests alone, full per-test summary.
source benchmarks/results/scripts/h200_setup.sh
timeout 230 python3 -P -m pytest -q -s -rA -p no:cacheprovider -m gpu tests/kernels/triton/test_triton_gpu.py > $OUT/gpu_tests.log 2>&1
grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed|SPEC|EMULATOR" $OUT/gpu_tests.log
