#!/usr/bin/env bash
# Device run 24 on the lent H200 (second of two back-to-back calls; the first copied .whl/part_aa to
# /tmp): the `bfirst` schedule (n128 with tile j's block-b codes written before the wait for block b's
# PV GEMM of tile j-1, a third P buffer): zyfa-bench beside n128 and FA3-fp8 only (no GPU tests: the
# last of this engineer's device time after two refused starts).
set -o pipefail
source benchmarks/results/scripts/hopper_setup.sh "$1" || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee $OUT/env.txt
B=fa3-fp8,zyfa-cute-fp8-n128-nopp,zyfa-cute-fp8-n128-bfirst-nopp
timeout 60 python3 -P -m zyfa.cli.bench_main --models mha,mistral-7b --seqlens 16k,32k --backends $B \
  --rep-ms 150 --out $OUT/bench 2>&1 | grep -v Warn | tee $OUT/bench.log
