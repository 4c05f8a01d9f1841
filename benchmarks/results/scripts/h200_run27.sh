#!/usr/bin/env bash
# Issue 20's device call (H200 run 27): spec v2 as refined for bit-exact backends (per-tile running
# max, alpha by a fixed fp32 FMA sequence, chunked scores). h200_numerics.py: Triton v2 (and v1)
# == the zyfa.numerics emulator bit for bit on exact-accumulation inputs; the fused Hadamard +
# quantise and its rotate=False twin == the torch path; zyfa-accuracy rows at 16K (emulator on the
# GPU); zyfa-bench rows v1 / v2 / quantise / Hadamard at b1 h32 s16K d128 causal and the rotation's
# marginal cost. Then the FP8-P / input-quantisation floors with the targets at 16K.
# Run from the repository root with $OUT set; time-boxed to about 3 minutes.
set -u -o pipefail
source benchmarks/results/scripts/h200_setup.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee "$OUT/env.txt"
echo "=== h200_numerics (<= 150 s) ==="
timeout 150 python3 -P benchmarks/h200_numerics.py --accuracy-until 70 2>&1 | grep -v Warn
echo "rc numerics: ${PIPESTATUS[0]}"
for source in llm gaussian outliers; do
  [ "$SECONDS" -gt 185 ] && { echo "floors: $source skipped for time"; continue; }
  echo "=== floors + targets, $source, 16K, last 2048 queries (<= 30 s) ==="
  timeout 30 python3 -P benchmarks/fp8_p_floor.py --source "$source" --seqlen 16384 --queries 2048 --device cuda \
    --recipes zyfa-v2 --targets 2>&1 | tee "$OUT/floor_$source.log"
done
echo "total ${SECONDS} s"
