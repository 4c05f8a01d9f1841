#!/usr/bin/env bash
# Issue 21 on an H200, one device call of at most 5 minutes. From the repository root:
#
#     bash benchmarks/h200_production.sh
#
# Expects torch (CUDA) and triton 3.6 installed; zyfa is made importable from this tree without pip
# (benchmarks/results/scripts/h200_setup.sh). Carried, git-ignored folders:
#   .whl-hf/  wheels (cp312, manylinux x86_64, ~21 MB): transformers-5.23.0-py3-none-any,
#             huggingface_hub-2.4.0-py3-none-any, tokenizers-0.23.3-cp310-abi3-manylinux_2_17_x86_64
#             .manylinux2014_x86_64, safetensors-0.8.0-cp310-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64,
#             regex-2026.11.19-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64,
#             pyyaml-6.0.4-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64,
#             httpx2-2.16.2, httpcore2-2.16.2, h11-0.16.0, anyio-4.16.0, idna-3.20, sniffio-1.3.1,
#             certifi-2026.10.19.post1, truststore-0.10.5, tqdm-4.70.1, packaging-26.4, einops-0.8.2
#             (the last twelve py3-none-any). Each is installed (offline, --no-deps) only if its module
#             is missing, so the machine's own versions win. numpy must already be there.
#   .fa/      a FlashAttention checkout (BSD-3; not vendored here): tests/test_flash_attn.py and
#             hopper/{test_flash_attn.py,test_util.py,padding.py} are what is read.
# Parts (time-boxed; a part whose inputs are missing says so and is skipped):
#   1. prefill: random-init Llama with Llama-3-8B's attention shape (2 layers), 8192 tokens,
#      "zyfa-fp8" and "zyfa" (and "fa3-fp8", "fa3" where .whl/ carries the fa3-fwd wheel, as in the
#      earlier runs) vs "sdpa" bf16: logits rel. L2, top-1 agreement, KL/token, prefill time
#      (benchmarks/hf_prefill.py) -> prefill.csv
#   2. GPU tests: the custom op's fake vs real metadata (Triton), the transformers FP8 path with the
#      fused quantiser, every head-dim class (fp16/bf16/fp8, d = dv and d != dv) -> gpu_tests.log
#   3. FlashAttention's upstream forward tests through examples/fa_shim (FA3 then FA2) -> fa3.log, fa2.log
#      (full pytest output; the per-(test, head dim, dtype) counts are at the end)
# Output: $OUT if set (the device machine's return folder), else benchmarks/results/h200_production/.
set -uo pipefail
cd "$(dirname "$0")/.."
RES=${OUT:-benchmarks/results/h200_production}
mkdir -p "$RES"
# shellcheck source=results/scripts/h200_setup.sh
source benchmarks/results/scripts/h200_setup.sh

if ls .whl-hf/*.whl >/dev/null 2>&1; then
  for whl in .whl-hf/*.whl; do
    dist=$(basename "$whl" | cut -d- -f1)
    mod=$([ "$dist" = pyyaml ] && echo yaml || echo "$dist")
    python3 -c "import $mod" 2>/dev/null && continue
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-hf "$whl" || echo "could not install $whl"
  done
  export PYTHONPATH=${PYTHONPATH}:/tmp/site-hf
fi

{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  python3 -c "import transformers; print('transformers', transformers.__version__)" 2>&1 | tail -1
  git log --oneline -1 2>/dev/null; } > "$RES/env.txt" 2>&1
cat "$RES/env.txt"

echo "=== 1. prefill 8192 tokens (budget 90 s) ==="
if python3 -c "import transformers" 2>/dev/null; then
  timeout 90 python3 benchmarks/hf_prefill.py --seqlen 8192 --preset llama3-8b-2l --impls sdpa zyfa-fp8 zyfa fa3-fp8 fa3 \
    --reps 5 --csv "$RES/prefill.csv" 2>&1 | tee "$RES/prefill.log"
else
  echo "skipped: transformers not importable (carry .whl-hf/)" | tee "$RES/prefill.log"
fi

echo "=== 2. GPU tests: zyfa::fwd fake == real, fused FP8 path in transformers, every head-dim class (budget 50 s) ==="
timeout 50 python3 -P -m pytest tests/zyfa/test_custom_op.py::test_triton_fake_matches_real \
  tests/integrations/test_transformers.py::test_gpu_fp8_path_uses_the_fused_quantiser_bit_identically \
  tests/kernels/triton/test_triton_gpu.py::test_every_head_dim_runs -v -s -p no:cacheprovider 2>&1 \
  | grep -E "HEADDIM|GPU zyfa|PASSED|FAILED|Error|passed|failed" | tee "$RES/gpu_tests.log"

echo "=== 3. FlashAttention upstream forward tests (FA3 budget 60 s, FA2 budget 30 s; 12 xdist workers, fixed tiles) ==="
if [ -f .fa/hopper/test_flash_attn.py ] && [ -f .fa/tests/test_flash_attn.py ] && python3 -c "import einops" 2>/dev/null; then
  for suite in fa3 fa2; do
    budget=$([ $suite = fa3 ] && echo 60 || echo 30)
    PYTHONSAFEPATH=1 ZYFA_FA_SUITES=$suite ZYFA_FA_BUDGET_S=$budget ZYFA_FA_WORKERS=12 timeout $((budget + 25)) \
      bash examples/fa_shim/run_upstream_tests.sh "$PWD/.fa" > "$RES/$suite.log" 2>&1
    grep -E "^===|passed|failed|zyfa shim|backward guards" "$RES/$suite.log" | tail -30
  done
else
  echo "skipped: needs .fa/ (a flash-attention checkout) and einops" | tee "$RES/fa3.log"
fi
echo "done in ${SECONDS} s; results in $RES"
