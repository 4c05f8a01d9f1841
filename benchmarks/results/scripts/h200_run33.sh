#!/usr/bin/env bash
# Run (one device call, from the repository root, $OUT set, carries nothing):
#   bash benchmarks/results/scripts/h200_run33.sh
# Issue 20, H200 run 33: NOT RUN (prepared on the CPU box, 2026-12-03). A launch sweep of the fused
# RoPE + Hadamard + FP8 quantise variant "rows". Run 32 timed it per token fastest at 64 rows x 2
# warps (Q + K 0.2132 ms; minus the fastest RoPE pass, 0.1655 ms, = +1.06 % of v1's attention, the
# goal is <= 0.5 %), and its ncu found the kernel latency-bound: 168 registers, 18.75 % theoretical
# occupancy (register-limited), issue slots 35 %, DRAM 37 %. This run tries launches that let more
# warps share an SM or keep more loads in flight (benchmarks/fused_rope_quant.py SWEEP): 32 rows per
# warp at 1, 2, 4, 8 warps under register caps (maxnreg none / 144 / 136 / 128 / 96; counted on the
# CPU box, Triton 3.9: 12 -> 14 -> 14 -> 16 -> 20 warps per SM, 0 -> 12 -> ~150 -> ~480 -> ~1830 bytes
# of spill stores), two rows per thread, and per head "rows" at 2 / 4 warps with and without a cap
# and "lean" (run 32's fastest per head) at caps 128 and 96; and variant "pairs" (each row in two
# threads, 88-96 registers; added to SWEEP by commit f593b01 after this script was written) per token
# at 16 rows per warp x 1-8 warps and per head at 2 / 4 warps: 32 launches. num_stages does not apply
# (no loop).
# 1. tools/hadamard_sass.py --sweep under the device's Triton (3.6): registers, spill bytes, static
#    SASS per element and the warps per SM the registers allow, for every launch (CPU only, 8
#    compiles at once; runs while step 2 runs: it never touches the GPU);
# 2. benchmarks/fused_rope_quant.py --sweep, one process: every launch bit-checked against the torch
#    path (codes and descales, Q and K), run 25's RoPE pass at 16-128 rows (checked), then all timed
#    in two alternated rounds beside the cast and zyfa-triton-fp8 (v1); prints per launch and for the
#    fastest per granularity "fused minus the fastest RoPE pass, % of v1's attention".
# Timeouts: 80 + 250 = 330 s (the two steps overlap: ~4-5 min warm).
set -u -o pipefail
source benchmarks/results/scripts/h200_setup.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee "$OUT/env.txt"
python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)' | tee -a "$OUT/env.txt"
(timeout 80 python3 -P tools/hadamard_sass.py --sweep --jobs 8 > "$OUT/sass_sweep.txt" 2>&1; echo "rc sass: $?" >> "$OUT/sass_sweep.txt") &
SASS=$!
timeout 250 python3 -P benchmarks/fused_rope_quant.py --sweep --csv "$OUT/fused_rope_sweep.csv" 2>&1 | grep -v Warn \
  | tee "$OUT/fused_rope_sweep.log"
echo "rc sweep: ${PIPESTATUS[0]} at ${SECONDS} s"
wait "$SASS"
cat "$OUT/sass_sweep.txt"
echo "total ${SECONDS} s"
