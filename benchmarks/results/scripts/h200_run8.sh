#!/usr/bin/env bash
# Device run 8 on the lent H200 (second of two back-to-back calls; the first copied .whl/part_aa to
# /tmp): the CuTe DSL FP8 kernel after run 7 + the one-pass Triton V' kernel, with variants: Q from
# registers (qreg), double-buffered P with the masked blocks in a loop of their own (pbuf), ping-pong
# on/off, V' prepared outside the timed call (vonce: the kernel alone).
set -o pipefail
source benchmarks/results/scripts/hopper_setup.sh "$1" || exit 1
for pp in 0 1; do timeout 120 python3 -P benchmarks/results/scripts/hopper_smoke.py $pp 333 2>&1 | tail -15; done | tee $OUT/smoke.log
timeout 90 python3 -P benchmarks/results/scripts/hopper_smoke.py 1 4096 2>&1 | tail -5 | tee -a $OUT/smoke.log
grep -q "rel_l2 vs spec [0-4]\.[0-9]*e-0[3-9]" $OUT/smoke.log || { echo "smoke test failed: skipping tests and bench"; exit 3; }
timeout 150 python3 -P -m pytest tests/kernels/hopper -q -s -p no:cacheprovider 2>&1 | grep -v Warn | grep -E "SPEC|DETERM|DISPATCH|passed|failed|Error|assert" | tee $OUT/gpu_tests.log
timeout 230 python3 -P -m zyfa.cli.bench_main --models mha,mistral-7b --seqlens 16k,32k \
  --backends zyfa-cute-fp8,zyfa-cute-fp8-nopp,zyfa-cute-fp8-pbuf-nopp,zyfa-cute-fp8-qreg-pbuf,zyfa-cute-fp8-qreg-pbuf-nopp,zyfa-cute-fp8-qreg-pbuf-nopp-vonce,zyfa-triton-fp8,fa3-fp8 \
  --rep-ms 200 --out $OUT/bench 2>&1 | grep -v Warn | tee $OUT/bench.log
