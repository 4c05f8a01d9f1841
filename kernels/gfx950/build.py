"""Assemble and link generated kernels into gfx950 code objects (Debian llvm-22 / lld-22).

``build(config)`` -> :class:`Built` with the assembly, the code-object path (cached under
``$XDG_CACHE_HOME/zyfa/gfx950/<sha256 of the assembly>.co``) and the schedule clusters with their
byte ranges (offsets from the kernel entry, as ``llvm-objdump`` reports them).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from zyfa.kernels.gfx950.generator import Generated, generate
from zyfa.kernels.gfx950.schedule import KernelConfig

LLVM_MC = "llvm-mc-22"
LD_LLD = "ld.lld-22"
LLVM_OBJDUMP = "llvm-objdump-22"
TRIPLE = "amdgcn-amd-amdhsa"
MCPU = "gfx950"
_INST = re.compile(r"^\s+([a-z][a-z0-9_]*)\b.*//\s*([0-9A-Fa-f]+):((?:\s+[0-9A-Fa-f]{8})*)")
_SYMBOL = re.compile(r"^([0-9a-fA-F]+) <([^>]+)>:\s*$")


class ToolchainError(RuntimeError):
    """llvm-mc / ld.lld missing or failing; the message names the tool and shows its output."""


@dataclass(frozen=True)
class Built:
    generated: Generated
    code_object: Path
    pcs: tuple[int, ...]  # byte offset of every instruction from the kernel entry
    sizes: tuple[int, ...]  # encoded bytes of every instruction (from the same disassembly)

    @property
    def clusters(self) -> list[dict]:
        """Schedule cluster instances with instruction and byte ranges."""
        out = []
        for cl in self.generated.clusters:
            end = self.pcs[cl["last"] + 1] if cl["last"] + 1 < len(self.pcs) else None
            out.append({**cl, "pc_start": self.pcs[cl["first"]], "pc_end": end})
        return out


def cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return root / "zyfa" / "gfx950"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ToolchainError(f"{name} not found on PATH; install Debian packages llvm-22 and lld-22 "
                             "(scripts/install.sh does)")
    return path


def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolchainError(f"{' '.join(cmd[:1])} failed ({proc.returncode}):\n{proc.stderr.strip()[:4000]}")
    return proc.stdout


def assemble(text: str, out: Path) -> Path:
    """llvm-mc text -> relocatable object -> ld.lld shared code object at ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src, obj = Path(tmp) / "kernel.s", Path(tmp) / "kernel.o"
        src.write_text(text)
        _run([_tool(LLVM_MC), f"-triple={TRIPLE}", f"-mcpu={MCPU}", "-filetype=obj", str(src), "-o", str(obj)])
        partial = out.with_suffix(f".{os.getpid()}.tmp")
        _run([_tool(LD_LLD), "-shared", str(obj), "-o", str(partial)])
        partial.replace(out)
    return out


def disassemble(code_object: Path) -> str:
    return _run([_tool(LLVM_OBJDUMP), "-d", f"--mcpu={MCPU}", str(code_object)])


def instruction_layout(objdump: str, symbol: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(byte offsets from the entry of ``symbol``, encoded bytes) of its instructions, in order:
    the sizes are the 32-bit words llvm-objdump prints per instruction, x 4."""
    pcs, sizes, entry, inside = [], [], None, False
    for line in objdump.splitlines():
        head = _SYMBOL.match(line)
        if head:
            inside = head.group(2) == symbol
            entry = int(head.group(1), 16) if inside else entry
            continue
        match = _INST.match(line)
        if inside and match and match.group(1) != "s_code_end":
            pcs.append(int(match.group(2), 16) - entry)
            sizes.append(4 * len(match.group(3).split()))
    if not pcs:
        raise ToolchainError(f"symbol {symbol!r} not found in the disassembly")
    return tuple(pcs), tuple(sizes)


@functools.lru_cache(maxsize=32)
def build(config: KernelConfig) -> Built:
    """Generate, assemble (cached by content) and index one kernel."""
    generated = generate(config)
    full = generated.asm + generated.metadata
    digest = hashlib.sha256(full.encode()).hexdigest()[:20]
    path = cache_dir() / f"{config.name}-{digest}.co"
    if not path.exists():
        assemble(full, path)
    pcs, sizes = instruction_layout(disassemble(path), generated.symbol)
    if len(pcs) != len(generated.instructions):
        raise ToolchainError(f"{config.name}: {len(generated.instructions)} instructions generated but "
                             f"{len(pcs)} disassembled")
    return Built(generated, path, pcs, sizes)
