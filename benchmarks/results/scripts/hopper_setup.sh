#!/usr/bin/env bash
# Sourced on the H200 box from a copy of the repository root: joins the two carried halves of the
# offline bundle (CuTe DSL 4.8.1 cp312 wheels, the xz'd libs-cu13 wheel contents, FA3's fa3-fwd
# 0.0.3 wheel; split to fit 64 MiB per call), installs them under /tmp/site, then h200_setup.sh.
# $1: path of the second half; the first half was copied to /tmp/part_aa by the previous call.
cat /tmp/part_aa "$1" > /tmp/bundle.tar && mkdir -p /tmp/b /tmp/site && tar -xf /tmp/bundle.tar -C /tmp/b || return 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site /tmp/b/*.whl 2>&1 | grep -v WARN
tar -xJf /tmp/b/cu13.tar.xz -C /tmp/site || return 1
export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages
source benchmarks/results/scripts/h200_setup.sh
export CUTE_DSL_CACHE_DIR=/tmp/cute-cache
