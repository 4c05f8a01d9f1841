#!/usr/bin/env bash
# Device run 11 on the lent H200 (second of two back-to-back calls; the first copied .whl/part_aa to
# /tmp and ran triton_tile_check.py): the CuTe DSL FP8 kernel with 128-key S tiles (n128) and
# heaviest-first causal launch order (lpt): GPU tests of the new variants (spec bound, bitwise equal
# to the 64-key kernel, determinism, exact-accumulation mode vs the emulator bit for bit), then zyfa-bench beside FA3-fp8, cuDNN and the Triton kernel.
set -o pipefail
source benchmarks/results/scripts/hopper_setup.sh "$1" || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee $OUT/env.txt
timeout 150 python3 -P -m pytest tests/kernels/hopper/test_hopper_gpu.py -q -s -p no:cacheprovider \
  -k "n128 or schedule or determin or dispatch or exact" 2>&1 | grep -v Warn \
  | grep -E "SPEC|DETERM|DISPATCH|SCHEDULE|EXACT|passed|failed|Error|assert|illegal" | tee $OUT/gpu_tests.log
B=zyfa-cute-fp8,zyfa-cute-fp8-nolpt,fa3-fp8,zyfa-triton-fp8,sdpa-cudnn,zyfa-cute-fp8-n128,zyfa-cute-fp8-n128-nopp
grep -q "illegal\|CUDA error\|CUDA_ERROR" $OUT/gpu_tests.log && B=zyfa-cute-fp8,zyfa-cute-fp8-nolpt,zyfa-triton-fp8,fa3-fp8,sdpa-cudnn
timeout 200 python3 -P -m zyfa.cli.bench_main --models mha,mistral-7b --seqlens 16k,32k --backends $B \
  --rep-ms 200 --out $OUT/bench 2>&1 | grep -v Warn | tee $OUT/bench.log
