#!/usr/bin/env bash
# Device run 12, first call (run from the repository root with .whl/ and .dev23/ carried: .dev23/old =
# git archive a867426, run 8's tree; .dev23/repo = this branch): the Triton FP8 kernel from both trees in
# one session, separate Triton caches; copies .whl/part_aa to /tmp for the second call (h200_run12.sh)
cp .whl/part_aa /tmp/part_aa
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv
for tree in old repo; do
  rm -rf /tmp/zp; cd .dev23/$tree
  source ../repo/benchmarks/results/scripts/h200_setup.sh
  export TRITON_CACHE_DIR=/tmp/tc_$tree
  echo "== tree $tree ($(grep -c . kernels/triton/attn_fp8.py) lines in attn_fp8.py)"
  timeout 100 python3 -P ../repo/benchmarks/results/scripts/triton_tile_check.py quick 2>&1 | grep -v Warn
  cd ../..
done
