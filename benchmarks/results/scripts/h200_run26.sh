#!/usr/bin/env bash
# Device run 26 on the lent H200 (lead; second of two back-to-back calls, the first copies .whl/part_aa to
# /tmp; $1 = the second half of the bundle), main as merged at the end of the fourth 2026-12-03 session:
# the hopper backend as flash_attn_func runs it since 7350f48 (t128) against the v1 spec on every spec
# shape, its dispatch and empty-row tests, and which backend "auto" picks per recipe on sm_90.
set -o pipefail
source benchmarks/results/scripts/hopper_setup.sh "$1" || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv | tee $OUT/gpu_tests.log
timeout 240 python3 -P -m pytest tests/kernels/hopper/test_hopper_gpu.py -q -s -p no:cacheprovider \
  -k "backend_holds or dispatch or rows_without" 2>&1 | grep -v Warn \
  | grep -E "BACKEND|DISPATCH|passed|failed|Error|assert|illegal" | tee -a $OUT/gpu_tests.log
timeout 60 python3 -P - <<'PY' 2>&1 | grep -v Warn | tee -a $OUT/gpu_tests.log
import torch, zyfa
from zyfa.backends import AttentionArgs, select_backend
q = torch.zeros(1, 4096, 32, 128, device="cuda").to(torch.float8_e4m3fn)
for recipe in ("zyfa-v1", "zyfa-v2", "zyfa-folded"):
    a = AttentionArgs(q, q, q, 128 ** -0.5, True, (-1, -1), 0.0, None, None, None, None, recipe=recipe)
    print("AUTO", recipe, "->", select_backend("auto", a).name)
PY
echo "total ${SECONDS} s"
