#!/usr/bin/env bash
# Device run 2 on the lent H200: GPU tests, tile/variant probe, full zyfa-bench, Proton capture, ncu.
source benchmarks/results/scripts/h200_setup.sh
S=benchmarks/results/scripts
{
echo "== env $(date -u)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
echo "== gpu tests"
timeout 150 python3 -P -m pytest -q -p no:cacheprovider -m gpu tests/kernels/triton/test_triton_gpu.py 2>&1 | tail -25
echo "== probe"
timeout 200 python3 -P $S/probe_configs.py 16384 2>$OUT/probe_stderr.txt | grep PROBE
echo "== bench"
timeout 200 python3 -P -m zyfa.cli.bench_main --models mha --seqlens 1k,2k,4k,8k,16k,32k --out $OUT 2>&1 | grep -v Warn
echo "== done $(date -u)"
} 2>&1 | tee $OUT/run2.log
{
echo "== proton $(date -u)"
timeout 120 python3 -P benchmarks/results/scripts/proton_capture.py $OUT/proton 2>&1 | grep -v Warn | tail -40
rm -f $OUT/proton/overhead*; tar czf $OUT/proton.tgz -C $OUT proton && rm -rf $OUT/proton
echo "== ncu $(date -u)"
timeout 150 ncu --clock-control none -k regex:_attn_fwd -c 2 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy python3 -P benchmarks/results/scripts/ncu_fp8.py 128 8 2 > $OUT/ncu.txt 2>&1; tail -5 $OUT/ncu.txt
echo "== done $(date -u)"
} 2>&1 | tee -a $OUT/run2.log
