"""Shared fixtures of the CDNA4 cycle-model tests: real gfx950 inputs nobody here wrote."""

import shutil
import subprocess
from pathlib import Path

import pytest

from zyfa.kernels import aiter

LLVM = ("llvm-mc-22", "ld.lld-22", "llvm-objdump-22", "llvm-readelf-22")


@pytest.fixture(scope="session")
def llvm_tools():
    missing = [t for t in LLVM if shutil.which(t) is None]
    if missing:
        pytest.skip(f"Debian llvm-22/lld-22 tools missing: {missing}")


@pytest.fixture(scope="session")
def assemble(llvm_tools, tmp_path_factory):
    """Assemble llvm-mc text for gfx950 and link it into a code object; returns its path."""
    root = tmp_path_factory.mktemp("asm")
    counter = iter(range(1000))

    def build(text: str) -> Path:
        n = next(counter)
        src, obj, co = root / f"k{n}.s", root / f"k{n}.o", root / f"k{n}.co"
        src.write_text(text)
        subprocess.run(["llvm-mc-22", "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx950", "-filetype=obj", str(src),
                        "-o", str(obj)], check=True, capture_output=True)
        subprocess.run(["ld.lld-22", "-shared", str(obj), "-o", str(co)], check=True, capture_output=True)
        return co

    return build


@pytest.fixture(scope="session")
def aiter_causal(llvm_tools):
    """AITER's real fwd_hd128_bf16_causal.co from the amd-aiter wheel (cached download)."""
    try:
        return aiter.resolve("aiter:fwd_hd128_bf16_causal")
    except aiter.AiterUnavailable as exc:
        pytest.skip(f"PyPI registry unreachable, AITER code objects unavailable: {exc}")
