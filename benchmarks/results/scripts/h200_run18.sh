#!/usr/bin/env bash
# Run 18 (issue 21; first run inside run 20, NOTES.md), ~260 s on the H200, from
# the repository root:   bash benchmarks/results/scripts/h200_run18.sh
# 1. the repository's GPU tests through the default (autotuned) launch, which since 598a487 tunes once
#    per power-of-two bucket of the lengths (_common.BucketedAutotune) and reuses the winner after:
#    first GPU check of that path (8 xdist workers, pytest-benchmark off, <= 150 s; run 17's session
#    printed 51 passes but had not exited after 90 s);
# 2. where the "zyfa-fp8" attention function's time goes at 8K (benchmarks/fp8_prefill_breakdown.py,
#    <= 90 s: the FP8 rows' first call autotunes).
# Output under $OUT (else benchmarks/results/h200_run18/): env.txt, gpu_tests.log/.xml, breakdown.txt.
set -uo pipefail
RES=${OUT:-benchmarks/results/h200_run18}
mkdir -p "$RES"
# shellcheck source=h200_setup.sh
source benchmarks/results/scripts/h200_setup.sh
export PYTHONSAFEPATH=1  # python3 -P for pytest-xdist's workers too: the checkout's zyfa/ must not shadow /tmp/zp
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$RES/env.txt" 2>&1
cat "$RES/env.txt"

echo "=== 1. repository GPU tests, autotuned per length bucket (<= 150 s) ==="
# a session still alive at 150 s gets SIGABRT (timeout signals the whole process group): with
# PYTHONFAULTHANDLER=1 the controller and every xdist worker print their threads' stacks into the log
PYTHONFAULTHANDLER=1 timeout -s ABRT 150 python3 -m pytest tests/kernels/triton/test_triton_gpu.py \
  tests/zyfa/test_custom_op.py::test_triton_fake_matches_real \
  tests/integrations/test_transformers.py::test_gpu_fp8_path_uses_the_fused_quantiser_bit_identically \
  -n 8 -rA -q -p no:cacheprovider -p no:benchmark -o faulthandler_timeout=120 \
  --junitxml="$RES/gpu_tests.xml" > "$RES/gpu_tests.log" 2>&1
echo "rc gpu tests: $?"
grep -E "HEADDIM|^(FAILED|ERROR)|passed|failed" "$RES/gpu_tests.log" | tail -50

echo "=== 2. zyfa-fp8 attention breakdown at 8K (<= 90 s) ==="
timeout 90 python3 benchmarks/fp8_prefill_breakdown.py --seqlen 8192 --reps 20 2>&1 | tee "$RES/breakdown.txt"
echo "done in ${SECONDS} s"
