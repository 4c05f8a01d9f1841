#!/usr/bin/env bash
# Issue 20 (engineer 20b), H200 run 16 (the script issue 20 had prepared, never run, now this): the fused RoPE + Hadamard + quantise kernel variants
# (hadamard_fp8.VARIANTS x 64 / 128 rows, without the host check) bit for bit against the torch path
# and timed beside the RoPE pass, the cast and zyfa-bench's attention rows in one process
# (benchmarks/fused_rope_quant.py), after the GPU test of every variant (GQA, seqlen 333, -0); then ncu
# on the per-token kernel, run 25's form vs the tables-in-x-layout one, and the RoPE pass. Run once
# (run 16, NOTES.md); since then the benchmark also times the "lean" variant and register caps
# (maxnreg 168 / 128), so a rerun takes longer (about 180 s of benchmark). Run from the repository root with $OUT set; carries nothing.
set -u -o pipefail
source benchmarks/results/scripts/h200_setup.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee "$OUT/env.txt"
python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)' | tee -a "$OUT/env.txt"
timeout 60 python3 -P -m pytest -q -p no:cacheprovider -m gpu tests/kernels/triton/test_triton_gpu.py -k fused_rope 2>&1 \
  | tail -4 | tee "$OUT/gpu_test.log"
timeout 240 python3 -P benchmarks/fused_rope_quant.py --csv "$OUT/fused_rope_quant.csv" 2>&1 | grep -v Warn \
  | tee "$OUT/fused_rope_quant.log"
echo "rc fused: ${PIPESTATUS[0]} at ${SECONDS} s"
timeout 60 ncu --clock-control none -k "regex:_hadamard_fp8_token|_rope_kernel" -c 3 --section SpeedOfLight --section Occupancy \
  --section WarpStateStats --section ComputeWorkloadAnalysis --section LaunchStats \
  python3 -P benchmarks/results/scripts/fused_ncu.py > "$OUT/ncu.txt" 2>&1
echo "rc ncu: $? at ${SECONDS} s"
grep -E "hadamard_fp8_token|_rope_kernel|Duration|Throughput|Registers Per|Occupancy|Warp Cycles Per Issued|Ipc|Issue Slots|stalled|Block Limit" "$OUT/ncu.txt" | head -90
echo "total ${SECONDS} s"
