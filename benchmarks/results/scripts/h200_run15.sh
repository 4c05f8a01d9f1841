#!/usr/bin/env bash
# Issue 20's device call (H200 run 15): quantize_fp8 GPU == CPU and the per-token fused Hadamard +
# FP8 fix checked bit for bit at 16K; zyfa-bench's zyfa-triton-fp8 rows with and without the fused
# rotation; the fused op's launches timed against the autotuned attention and a bf16 -> fp8 cast
# (its bandwidth floor); the accuracy ratios at 16K (llm, gaussian, outliers) and the FP8-P error
# floor. Run from the repository root with $OUT set; time-boxed to about 3.5 minutes.
set -u -o pipefail
source benchmarks/results/scripts/h200_setup.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee "$OUT/env.txt"
echo "=== h200_numerics (<= 150 s) ==="
timeout 150 python3 -P benchmarks/h200_numerics.py --skip-attention-check 2>&1 | grep -v Warn | tail -80
echo "rc numerics: $?"
echo "=== FP8-P error floor at 16K, llm (<= 30 s) ==="
timeout 30 python3 -P benchmarks/fp8_p_floor.py --source llm --seqlen 16384 --queries 2048 --device cuda 2>&1 \
  | tee "$OUT/p_floor.log"
