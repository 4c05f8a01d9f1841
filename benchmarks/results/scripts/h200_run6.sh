#!/usr/bin/env bash
# Device run 6 on the lent H200 (second of two back-to-back calls; the first copied .whl/part_aa to
# /tmp): smoke test, GPU tests and zyfa-bench of the first CuTe DSL FP8 kernel (PV accumulated in the
# tensor core over the whole key loop). Run from a copy of the repository root, $1 = .whl2/part_ab.
set -o pipefail
source benchmarks/results/scripts/hopper_setup.sh "$1" || exit 1
python3 -c "import cutlass, cuda.bindings; print('cutlass dsl ok; cuda-bindings', cuda.bindings.__version__)"
for pp in 0 1; do timeout 120 python3 -P benchmarks/results/scripts/hopper_smoke.py $pp 333 2>&1 | tail -15; done | tee $OUT/smoke.log
timeout 60 python3 -P benchmarks/results/scripts/hopper_smoke.py 1 4096 2>&1 | tail -5 | tee -a $OUT/smoke.log
grep -q "rel_l2 vs spec [0-4]\.[0-9]*e-0[3-9]" $OUT/smoke.log || { echo "smoke test failed: skipping tests and bench"; exit 3; }
timeout 200 python3 -P -m pytest tests/kernels/hopper -q -s -x -p no:cacheprovider 2>&1 | grep -v Warn | tail -40 | tee $OUT/gpu_tests.log
timeout 170 python3 -P -m zyfa.cli.bench_main --models mha --seqlens 16k,32k \
  --backends zyfa-cute-fp8,zyfa-cute-fp8-nopp,zyfa-triton-fp8,fa3-fp8 --out $OUT/bench 2>&1 | grep -v Warn | tee $OUT/bench.log
