#!/usr/bin/env bash
# Sourced at the start of every device run (H200 machine, no network): makes zyfa importable
# without pip (symlinked package tree: zyfa.kernels -> kernels/, ...) and installs the carried
# FA3 wheel from .whl/ offline into /tmp/site.
REPO=$(pwd)
mkdir -p /tmp/zp/zyfa
for f in "$REPO"/zyfa/*; do ln -sfn "$f" /tmp/zp/zyfa/; done
for d in kernels trace analyzer webui; do ln -sfn "$REPO/$d" /tmp/zp/zyfa/$d; done
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=/tmp/zp:${PYTHONPATH:-}
export PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR=/tmp/triton-cache
