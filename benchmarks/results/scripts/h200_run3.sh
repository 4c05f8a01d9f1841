#!/usr/bin/env bash
# Device run 3 on the lent H200: GPU tests (printing measured bounds), probe, the full zyfa-bench
# (MHA 1k-32k, Mistral-7B / Qwen3-8B GQA, MLA; causal) + non-causal 16k, Proton overhead under ncu.
source benchmarks/results/scripts/h200_setup.sh
S=benchmarks/results/scripts
{
echo "== env $(date -u)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
echo "== gpu tests"
timeout 200 python3 -P -m pytest -q -s -p no:cacheprovider -m gpu tests/kernels/triton/test_triton_gpu.py 2>&1 | grep -E "SPEC|EMULATOR|passed|failed|Error|assert" | head -40
echo "== probe"
timeout 120 python3 -P $S/probe_configs.py 16384 2>$OUT/probe_stderr.txt | grep PROBE
echo "== bench causal"
timeout 200 python3 -P -m zyfa.cli.bench_main --models mha --seqlens 1k,2k,4k,8k,16k,32k --out $OUT 2>&1 | grep -v Warn
timeout 200 python3 -P -m zyfa.cli.bench_main --models mistral-7b,qwen3-8b,mla --seqlens 4k,16k,32k --out $OUT/gqa 2>&1 | grep -v Warn
mv $OUT/gqa/bench.csv $OUT/bench_gqa_mla.csv; rm -rf $OUT/gqa
echo "== bench non-causal"
timeout 60 python3 -P -m zyfa.cli.bench_main --models mha --seqlens 16k --non-causal --out $OUT/nc 2>&1 | grep -v Warn
mv $OUT/nc/bench.csv $OUT/bench_noncausal.csv; rm -rf $OUT/nc
echo "== proton overhead (ncu gpu__time_duration) $(date -u)"
timeout 120 ncu --clock-control none -k regex:_attn_fwd_fp8 --metrics gpu__time_duration.sum python3 -P $S/proton_overhead.py 2>&1 | grep -E "gpu__time_duration|order|_attn_fwd|Error" | head -12
echo "== done $(date -u)"
} 2>&1 | tee $OUT/run3.log
