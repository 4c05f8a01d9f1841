#!/usr/bin/env bash
# Issue 20 (engineer 20b), H200 run 16 (the script issue 20 had prepared, never run, now this): the fused RoPE + Hadamard + quantise kernel variants
# (hadamard_fp8.VARIANTS x 64 / 128 rows, without the host check) bit for bit against the torch path
# and timed beside the RoPE pass, the cast and zyfa-bench's attention rows in one process
# (benchmarks/fused_rope_quant.py); then ncu on the per-token kernel, run 25's form vs the
# tables-in-x-layout one. Run from the repository root with $OUT set; carries nothing.
set -u -o pipefail
source benchmarks/results/scripts/h200_setup.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee "$OUT/env.txt"
python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)' | tee -a "$OUT/env.txt"
git log -1 --format=%H 2>/dev/null | tee -a "$OUT/env.txt"
timeout 200 python3 -P benchmarks/fused_rope_quant.py --csv "$OUT/fused_rope_quant.csv" 2>&1 | grep -v Warn \
  | tee "$OUT/fused_rope_quant.log"
echo "rc fused: ${PIPESTATUS[0]} at ${SECONDS} s"
timeout 90 ncu --clock-control none -k regex:_hadamard_fp8_token -c 2 --section SpeedOfLight --section Occupancy \
  --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats \
  python3 -P benchmarks/results/scripts/fused_ncu.py > "$OUT/ncu.txt" 2>&1
echo "rc ncu: $? at ${SECONDS} s"
grep -E "hadamard_fp8_token|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Issued Ipc|L1/TEX Hit|Stall|Block Limit" "$OUT/ncu.txt" | head -60
echo "total ${SECONDS} s"
