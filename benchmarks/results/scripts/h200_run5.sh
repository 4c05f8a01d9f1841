#!/usr/bin/env bash
# Device run 5 on the lent H200: zyfa-bench MHA 1k-32k causal after reverting the run-3 tile order.
source benchmarks/results/scripts/h200_setup.sh
timeout 200 python3 -P -m zyfa.cli.bench_main --models mha --seqlens 1k,2k,4k,8k,16k,32k --out $OUT 2>&1 | grep -v Warn | tee $OUT/run5.log
