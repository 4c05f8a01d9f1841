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

What a code object computes (dtype, head dim, mask) comes from the same ``codegen.py``'s
selector table, ``FmhaFwdV3Buf<fmha_fwd_kernel_selector<DataType, HDim, MaskType, kIsSEQPad,
kIsHDPad, kStoreLSE, GPUArch[, ..., group]>>`` -> ``"<file>.co"`` (:func:`selectors`), and
becomes the kernel's :class:`zyfa.kernels.spec.KernelSpec` (:func:`spec`), never a guess from
the file name.

Tensors are laid out BSHD (``(batch, seqlen, heads, headdim)``, the ``flash_attn_func`` layout).
"""

from __future__ import annotations

import functools
import math
import os
import re
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Optional

from zyfa.gfx950.isa import Program, disassemble
from zyfa.kernels.spec import KernelBuild, KernelSpec
from zyfa.shapes import AttnShape

CACHE = Path(os.environ.get("ZYFA_CACHE", Path.home() / ".cache" / "zyfa")) / "aiter"
SUBDIR = "aiter_meta/hsa/gfx950/fmha_v3_fwd"
TS_QO = {128: 256, 192: 128}  # FmhaFwdV3Ts in codegen.py
BLOCK = {128: 512, 192: 256}  # bdx in launch_kernel
HEADDIM_V = {128: 128, 192: 128}  # V head dim of each QK head dim (fmha_fwd_hd192_hd128_* in codegen.py)
DTYPES = {"FmhaFwdBf16": "bf16"}  # codegen.py DataType -> AttnShape dtype (its FmhaFwdFp16 rows are commented out)
_SELECTOR = re.compile(r"FmhaFwdV3Buf<fmha_fwd_kernel_selector<\s*(\w+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,([^>]*)>>"
                       r"[^\"]*\"([\w.]+\.co)\"")
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


def selectors(folder: Path) -> dict[str, dict]:
    """Code-object stem -> ``{"dtype", "headdim", "causal", "group"}`` from ``folder/codegen.py``'s
    ``FmhaFwdV3Buf`` table (module docstring). Unknown data types are left out."""
    return _selectors(str(folder))


@functools.lru_cache(maxsize=4)
def _selectors(folder: str) -> dict[str, dict]:
    path = Path(folder) / "codegen.py"
    if not path.is_file():
        raise AiterUnavailable(f"{path} is missing: the kernels' data type, head dim and mask are read from it")
    out = {}
    for m in _SELECTOR.finditer(path.read_text()):
        dtype_name, hdim, mask, rest, filename = m.groups()
        if dtype_name in DTYPES:
            out[Path(filename).stem] = {"dtype": DTYPES[dtype_name], "headdim": int(hdim), "causal": int(mask) != 0,
                                        "group": rest.rstrip().endswith("true")}
    return out


def facts(path: Path) -> dict:
    """What the code object at ``path`` computes (:func:`selectors` of its folder)."""
    path = Path(path)
    table = selectors(path.parent)
    if path.stem not in table:
        raise ValueError(f"{path}: not in the FmhaFwdV3Buf table of {path.parent / 'codegen.py'}: its data type, "
                         "head dim and mask are unknown")
    return table[path.stem]


def spec(name: str) -> KernelSpec:
    """The :class:`KernelSpec` of ``aiter:NAME`` (or of an fmha v3 code object's path)."""
    path = Path(name) if Path(name).suffix == ".co" and Path(name).is_file() else resolve(name)
    f = facts(path)
    return KernelSpec(
        name=name if name.startswith("aiter:") else path.stem,
        description="AITER gfx950 fmha v3 forward code object (amd-aiter wheel)",
        build=lambda shape: KernelBuild(name=name, code_object=path, meta={"code_object": str(path.resolve())}),
        kernargs=lambda shape: kernargs(disassemble(path), path, shape),
        grid=lambda shape: grid(path, shape),
        workgroup_size=BLOCK[f["headdim"]],
        dtype=f["dtype"], causal=f["causal"], headdim=f["headdim"], headdim_v=HEADDIM_V[f["headdim"]],
    )


def grid(path: Path, shape: AttnShape) -> tuple[int, int, int]:
    """Launch grid of ``fmha_fwd_v3_kernel::launch_kernel`` (batch mode)."""
    f = facts(path)
    ts_qo = TS_QO[f["headdim"]]
    tg_div = 2 if f["causal"] else 1
    return (math.ceil(math.ceil(shape.seqlen_q / ts_qo) / tg_div), shape.heads, shape.batch)


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
        "Seqs": q_row * esize, "Ts": TS_QO[facts(path)["headdim"]] * q_row * esize, "Hs": d * esize, "Bs": sq * q_row * esize,
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
