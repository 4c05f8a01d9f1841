"""AITER's gfx950 attention code objects as cycle-model inputs (``--kernel aiter:NAME``).

Code objects come from an installed ``aiter`` package or from the PyPI ``amd-aiter`` wheel,
downloaded once with ``pip download --no-deps amd-aiter`` into ``~/.cache/zyfa/aiter`` (never
committed). Files: ``aiter_meta/hsa/gfx950/fmha_v3_fwd/*.co``.

Kernel arguments of the fmha v3 forward kernels (``fmha_fwd_v3_args``). The layout (name,
offset, size of every field) is read from the code object's own metadata (``.args`` in
``llvm-readelf --notes``); the values follow the host dispatcher ``fmha_fwd_v3_dispatcher`` in
the same wheel's ``aiter_meta/hsa/gfx950/fmha_v3_fwd/codegen.py``:

- pointers ``R`` (output O), ``Q``, ``K``, ``V``, ``LSE``; ``scalar`` = softmax scale (f32);
- ``seq_len`` = seqlen_q, ``kv_seq_len`` = seqlen_k, ``qk_head_dim``/``v_head_dim``,
  ``q_head_num``, ``gqa`` = heads / heads_k;
- strides in bytes (bf16: element stride * 2): ``Seqs`` = stride between query rows, ``Ts`` =
  ts_qo (256 for hd128) * Seqs, ``Hs`` = head stride, ``Bs`` = batch stride; ``k_*``, ``v_*``,
  ``r_*`` (output) likewise; ``lse_Hs`` = seqlen_q * 4;
- ``msk_opt`` (``s_opt``) = tune_opt: 5, lowered by 2 for causal masks when heads % 8 != 0 or
  seqlen_q > 16384; ``lse`` = 1 to store the LSE.
- launch: block 512 threads (256 for hd192), grid ``(ceil(ceil(s/ts_qo) / tg_div), heads,
  batch)`` with tg_div = 2 for causal masks (each workgroup takes a pair of query tiles).

Tensors are laid out BSHD (``(batch, seqlen, heads, headdim)``, the ``flash_attn_func`` layout).
"""

from __future__ import annotations

import math
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Optional

from zyfa.shapes import AttnShape
from zyfa.gfx950.isa import Program

CACHE = Path(os.environ.get("ZYFA_CACHE", Path.home() / ".cache" / "zyfa")) / "aiter"
SUBDIR = "aiter_meta/hsa/gfx950/fmha_v3_fwd"
TS_QO = {128: 256, 192: 128}  # FmhaFwdV3Ts in codegen.py
BLOCK = {128: 512, 192: 256}  # bdx in launch_kernel
_POINTERS = {"R": 0x7E00_0000_0000, "Q": 0x7E10_0000_0000, "K": 0x7E20_0000_0000,
             "V": 0x7E30_0000_0000, "LSE": 0x7E40_0000_0000}


class AiterUnavailable(RuntimeError):
    """No AITER code objects: neither an installed package nor a downloadable wheel."""


def _installed_dir() -> Optional[Path]:
    try:
        import importlib.util
        spec = importlib.util.find_spec("aiter")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        for candidate in (Path(root) / "hsa/gfx950/fmha_v3_fwd", Path(root).parent / SUBDIR):
            if candidate.is_dir():
                return candidate
    return None


def code_object_dir(download: bool = True) -> Path:
    """Folder holding AITER's gfx950 fmha v3 forward ``.co`` files (downloads the wheel once)."""
    installed = _installed_dir()
    if installed is not None:
        return installed
    target = CACHE / "x" / SUBDIR
    if target.is_dir() and any(target.glob("*.co")):
        return target
    wheels = sorted(CACHE.glob("amd_aiter-*.whl"))
    if not wheels and download:
        CACHE.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "amd-aiter", "-d", str(CACHE)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise AiterUnavailable("could not download the amd-aiter wheel from PyPI "
                                   f"(pip download --no-deps amd-aiter): {proc.stderr.strip()[-500:]}")
        wheels = sorted(CACHE.glob("amd_aiter-*.whl"))
    if not wheels:
        raise AiterUnavailable(f"no aiter package installed and no amd-aiter wheel in {CACHE}")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        members = [m for m in wheel.namelist() if m.startswith(SUBDIR + "/")]
        if not members:
            raise AiterUnavailable(f"{wheels[-1].name} has no {SUBDIR}/ folder")
        wheel.extractall(CACHE / "x", members)
    return target


def available() -> list[str]:
    """Names usable as ``aiter:NAME`` (code-object stems)."""
    return sorted(p.stem for p in code_object_dir().glob("*.co"))


def resolve(name: str) -> Path:
    """Path of ``aiter:NAME`` (``NAME`` with or without ``.co``)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"aiter kernel name must be a non-empty string, got {name!r}")
    stem = name.removeprefix("aiter:").removesuffix(".co")
    path = code_object_dir() / f"{stem}.co"
    if not path.is_file():
        raise ValueError(f"unknown AITER kernel {stem!r}; available: {', '.join(available())}")
    return path


def is_fmha_v3(program: Program) -> bool:
    """Whether a program's metadata has the fmha_fwd_v3_args layout (named fields below)."""
    names = {a.name for a in program.descriptor.args}
    return {"Q", "K", "V", "seq_len", "kv_seq_len", "Ts", "gqa", "msk_opt"} <= names


def is_causal(path: Path) -> bool:
    return "causal" in Path(path).stem


def headdim(path: Path) -> int:
    return 192 if "hd192" in Path(path).stem else 128


def check_shape(path: Path, shape: AttnShape) -> None:
    stem = Path(path).stem
    if shape.headdim != headdim(path):
        raise ValueError(f"AITER kernel {stem} needs headdim {headdim(path)}, shape has {shape.headdim} (use --headdim)")
    if shape.causal != is_causal(path):
        raise ValueError(f"AITER kernel {stem} is {'causal' if is_causal(path) else 'non-causal'}, shape causal={shape.causal}")
    if "bf16" in stem and shape.dtype != "bf16":
        raise ValueError(f"AITER kernel {stem} is BF16; the shape's dtype is {shape.dtype!r} (pass a bf16 shape)")


def grid(path: Path, shape: AttnShape) -> tuple[int, int, int]:
    """Launch grid of ``fmha_fwd_v3_kernel::launch_kernel`` (batch mode)."""
    ts_qo = TS_QO[headdim(path)]
    tg_div = 2 if is_causal(path) else 1
    return (math.ceil(math.ceil(shape.seqlen_q / ts_qo) / tg_div), shape.heads, shape.batch)


def workgroup_size(path: Path) -> int:
    return BLOCK[headdim(path)]


def kernargs(program: Program, path: Path, shape: AttnShape) -> bytes:
    """The packed ``fmha_fwd_v3_args`` for ``shape`` (module docstring), laid out by the code
    object's metadata. Every named field must be known; unknown names raise ValueError."""
    args = program.descriptor.args
    if not args:
        raise ValueError(f"{path}: the code object has no .args metadata to lay out kernel arguments")
    esize = 2  # bf16 / fp16 elements
    b, h, hk, sq, sk, d, dv = (shape.batch, shape.heads, shape.heads_k, shape.seqlen_q, shape.seqlen_k,
                               shape.headdim, shape.headdim_v)
    q_row, k_row, v_row, o_row = h * d, hk * d, hk * dv, h * dv  # BSHD strides (elements)
    tune_opt = 5
    if shape.causal and (h % 8 != 0 or sq > 16384):
        tune_opt -= 2
    values = {
        "R": _POINTERS["R"], "Q": _POINTERS["Q"], "K": _POINTERS["K"], "V": _POINTERS["V"], "LSE": _POINTERS["LSE"],
        "scalar": struct.unpack("<I", struct.pack("<f", 1.0 / math.sqrt(d)))[0],
        "seq_len": sq, "kv_seq_len": sk,
        "Seqs": q_row * esize, "Ts": TS_QO[headdim(path)] * q_row * esize, "Hs": d * esize, "Bs": sq * q_row * esize,
        "gqa": h // hk,
        "k_Seqs": k_row * esize, "k_Hs": d * esize, "k_Bs": sk * k_row * esize,
        "v_Seqs": v_row * esize, "v_Hs": dv * esize, "v_Bs": sk * v_row * esize,
        "r_Seqs": o_row * esize, "r_Hs": dv * esize, "r_Bs": sq * o_row * esize,
        "msk_opt": tune_opt, "lse": 1, "qk_head_dim": d, "v_head_dim": dv, "q_head_num": h,
        "lse_Hs": sq * 4,
        "ptr_qseq": 0, "ptr_kseq": 0, "ptr_qseq_padding": 0, "ptr_kseq_padding": 0,
    }
    size = max(a.offset + a.size for a in args)
    size = max(size, program.descriptor.kernarg_size)
    buf = bytearray(size)
    for a in args:
        if a.name == "pad":
            continue
        if a.name not in values:
            raise ValueError(f"{path}: kernel argument {a.name!r} has no known value (update zyfa.kernels.aiter)")
        fmt = {4: "<I", 8: "<Q"}.get(a.size)
        if fmt is None:
            raise ValueError(f"{path}: kernel argument {a.name!r} has unsupported size {a.size}")
        struct.pack_into(fmt, buf, a.offset, values[a.name])
    return bytes(buf)
