#!/usr/bin/env bash
# Device run 1 on the lent H200: environment, GPU tests, warp-specialisation probe, zyfa-bench, Proton capture.
source benchmarks/results/scripts/h200_setup.sh
LOG=$OUT/run1.log
{
echo "== env $(date -u)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
python3 -c "import fa3_fwd_interface; print('fa3 ok')" 2>&1 | tail -1
echo "== gpu tests"
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/triton/test_triton_gpu.py -x 2>&1 | tail -15
echo "== warp_specialize probe + fixed configs (fp8, 16k causal)"
timeout 120 python3 benchmarks/results/scripts/probe_configs.py 2>&1 | tail -25
echo "== bench"
timeout 260 python3 -m zyfa.cli.bench_main --models mha --seqlens 1k,4k,16k,32k --out $OUT 2>&1 | grep -v Warning
timeout 120 python3 -m zyfa.cli.bench_main --models mistral-7b,mla --seqlens 16k --out $OUT/gqa 2>&1 | grep -v Warning
echo "== proton"
timeout 90 python3 benchmarks/results/scripts/proton_capture.py $OUT/proton 2>&1 | tail -20
tar czf $OUT/proton.tgz -C $OUT proton 2>/dev/null; rm -rf $OUT/proton
mv $OUT/gqa/bench.csv $OUT/bench_gqa.csv 2>/dev/null; mv $OUT/gqa/bench.html $OUT/bench_gqa.html 2>/dev/null; rm -rf $OUT/gqa
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv
echo "== done $(date -u)"
} 2>&1 | tee $LOG
