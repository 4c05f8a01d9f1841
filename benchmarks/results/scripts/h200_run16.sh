#!/usr/bin/env bash
# Issue 20's next device call (not run yet): the fused RoPE + Hadamard + quantise pass with the RoPE
# launch default chosen after run 25 (64 rows per 4 warps; run 25's 128-row per-head launch spills,
# timed beside it as rope_hadamard_quantise_head_rows128), its marginal cost over the RoPE pass as %
# of the zyfa FP8 attention, b1 h32 s16K d128 causal, one process. About 70 s wall (run 25: 64 s).
# Run from the repository root with $OUT set; carries nothing.
set -u -o pipefail
source benchmarks/results/scripts/h200_setup.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee "$OUT/env.txt"
timeout 170 python3 -P benchmarks/fused_rope_quant.py --csv "$OUT/fused_rope_quant.csv" 2>&1 | grep -v Warn \
  | tee "$OUT/fused_rope_quant.log"
echo "rc fused: ${PIPESTATUS[0]}; total ${SECONDS} s"
