#!/usr/bin/env bash
# Run 17 (issue 21), one device call of ~310 s on the H200, from the repository root:
#     bash benchmarks/results/scripts/h200_run17.sh        (carry: .fa, a FlashAttention checkout)
# 1. the repository's GPU tests: every head-dim class (fp16/bf16/fp8, d = dv and d != dv) through the
#    autotuned Triton launch, the FP8 spec/emulator checks, the custom op's fake vs real metadata, the
#    transformers FP8 path (8 xdist workers, <= 90 s);
# 2. FlashAttention's upstream forward tests through examples/fa_shim: FA3 (hopper/test_flash_attn.py,
#    <= 100 s) then FA2 (tests/test_flash_attn.py, <= 80 s), 12 xdist workers, each (test, head dim,
#    dtype, causal) in one worker, ZYFA_TRITON_FIXED_CONFIG=1 (run_upstream_tests.sh's default);
# 3. how many Triton kernels were compiled (cubins in the cache);
# 4. where the "zyfa-fp8" attention function's time goes at 8K (benchmarks/fp8_prefill_breakdown.py, <= 30 s).
# Output under $OUT (else benchmarks/results/h200_run17/): env.txt, gpu_tests.log/.xml, fa3.log/.xml,
# fa2.log/.xml, summary.txt (the breakdown is appended to it).
set -uo pipefail
RES=${OUT:-benchmarks/results/h200_run17}
mkdir -p "$RES"
# shellcheck source=h200_setup.sh
source benchmarks/results/scripts/h200_setup.sh
export PYTHONSAFEPATH=1  # python3 -P for pytest-xdist's workers too: the checkout's zyfa/ must not shadow /tmp/zp
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  python3 -c "import transformers, xdist, einops; print('transformers', transformers.__version__, 'xdist', xdist.__version__)"
  git log --oneline -1 2>/dev/null; nproc; } > "$RES/env.txt" 2>&1
cat "$RES/env.txt"

echo "=== 1. repository GPU tests (<= 90 s) ==="
timeout 90 python3 -m pytest tests/kernels/triton/test_triton_gpu.py \
  tests/zyfa/test_custom_op.py::test_triton_fake_matches_real \
  tests/integrations/test_transformers.py::test_gpu_fp8_path_uses_the_fused_quantiser_bit_identically \
  -n 8 -rA -q -p no:cacheprovider --junitxml="$RES/gpu_tests.xml" > "$RES/gpu_tests.log" 2>&1
echo "rc gpu tests: $?"
grep -E "HEADDIM|^(PASSED|FAILED|ERROR)|passed|failed" "$RES/gpu_tests.log" | tail -50

echo "=== 2. FlashAttention upstream forward tests through examples/fa_shim ==="
if [ -f .fa/hopper/test_flash_attn.py ] && [ -f .fa/tests/test_flash_attn.py ]; then
  for suite in fa3 fa2; do
    budget=$([ $suite = fa3 ] && echo 85 || echo 65)
    start=$SECONDS
    ZYFA_FA_SUITES=$suite ZYFA_FA_BUDGET_S=$budget ZYFA_FA_WORKERS=12 timeout $((budget + 15)) \
      bash examples/fa_shim/run_upstream_tests.sh "$PWD/.fa" --junitxml="$RES/$suite.xml" > "$RES/$suite.log" 2>&1
    echo "rc $suite: $? in $((SECONDS - start)) s"
    grep -E "zyfa shim|passed|failed|backward guards" "$RES/$suite.log" | tail -30
  done
else
  echo "skipped: carry .fa/ (a flash-attention checkout)"
fi

echo "=== 3. Triton kernels compiled in this call ==="
echo "cubins: $(find "$TRITON_CACHE_DIR" -name '*.cubin' | wc -l)"
{ grep -h "zyfa shim total" "$RES"/fa*.log; grep -E "^[0-9]+ (passed|failed)|^=+ .*(passed|failed)" "$RES/gpu_tests.log"; } \
  | tee "$RES/summary.txt"
echo "=== 4. zyfa-fp8 attention breakdown at 8K (<= 30 s) ==="
timeout 30 python3 benchmarks/fp8_prefill_breakdown.py --seqlen 8192 --reps 20 2>&1 | tee -a "$RES/summary.txt"
echo "done in ${SECONDS} s"
