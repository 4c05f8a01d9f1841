#!/usr/bin/env bash
# Issue 20's device call (H200 run 15): the per-token fused Hadamard + FP8 fix checked bit for bit
# at 16K, the fused op's launches timed against the autotuned attention (the call zyfa-bench
# times) and against a bf16 -> fp8 cast (its bandwidth floor), the zyfa-bench row with the
# rotation inside the timed call, the descale test on the GPU, and the accuracy ratios at 16K.
# Run from the repository root with $OUT set; time-boxed to about 7 minutes.
set -u -o pipefail
source benchmarks/results/scripts/h200_setup.sh
mkdir -p "$OUT/bench"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee "$OUT/env.txt"
echo "=== GPU tests: descale on cuda, fused Hadamard / v2 GPU tests ===" | tee "$OUT/gpu_tests.log"
timeout 90 python3 -P -m pytest tests/zyfa/test_numerics.py -k descale -q -p no:cacheprovider 2>&1 | tail -4 | tee -a "$OUT/gpu_tests.log"
echo "=== h200_numerics (<= 250 s) ==="
timeout 250 python3 -P benchmarks/h200_numerics.py 2>&1 | grep -v Warn | tail -90
echo "rc numerics: $?"
echo "=== zyfa-bench: zyfa-triton-fp8 with and without the fused rotation in the timed call (<= 120 s) ==="
timeout 120 python3 -P -m zyfa.cli.bench_main --models mha --seqlens 16k \
  --backends zyfa-triton-fp8,zyfa-triton-fp8-hadamard,zyfa-triton-fp8 --rep-ms 300 --out "$OUT/bench" 2>&1 \
  | grep -v Warn | tee "$OUT/bench/bench.log"
