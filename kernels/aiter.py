"""AITER's gfx950 attention forward code objects as cycle-model inputs (``--kernel aiter:NAME``).

Names: a v3 object by its stem (``aiter:fwd_hd128_fp8_causal``), a v4 object by folder and stem
(``aiter:fmha_v4_fwd/fwd_hd128_fp8``). Code objects are never vendored; they are looked up, in
this order, in

1. an installed ``aiter`` package (``aiter_meta/hsa/gfx950/...`` or ``hsa/gfx950/...``);
2. the folder named by ``--aiter-dir`` / the ``ZYFA_AITER_DIR`` environment variable: an AITER
   source tree (or any folder holding ``hsa/gfx950/fmha_v3_fwd``, ``fmha_v4_fwd``) -- the FP8 and
   v4 objects live only in the ROCm/aiter repository and in aiter installed from source;
3. the PyPI ``amd-aiter`` wheel (0.1.7.post2.dev18 ships the BF16 v3 objects only), downloaded
   once with ``pip download --no-deps amd-aiter`` into ``~/.cache/zyfa/aiter``.

Kernel facts (dtype, head dims, mask, batch/group mode, query/key tile) come from the
``fmha_fwd.csv`` / ``fmha_v4_fwd.csv`` AITER ships beside the objects; the wheel has no CSV, so
there they come from its ``codegen.py`` selector table, ``FmhaFwdV3Buf<fmha_fwd_kernel_selector<
DataType, HDim, MaskType, kIsSEQPad, kIsHDPad, kStoreLSE, GPUArch[, ..., group]>>`` ->
``"<file>.co"`` (:func:`selectors`), with the tiles of its ``FmhaFwdV3Ts``. They become the
kernel's :class:`zyfa.kernels.spec.KernelSpec` (:func:`spec`), never a guess from the file name.

Kernel arguments, packed as AITER's host code packs them, laid out by the code object's own
``.args`` metadata (every named field must have a value here, or :func:`kernargs` raises naming
the fields):

- v3 (``fmha_fwd_v3_args``; ROCm/aiter ``csrc/cpp_itfs/mha_fwd.cu`` ``init_fmha_fwd_v3_args``):
  the BF16 objects name the fields ``R, Q, K, V, LSE, seq_len, Seqs, ...``; the FP8 objects
  ``ptr_o, ptr_q, ..., s_seq_len, s_Seqs, ...`` plus ``ptr_{q,k,v}_descale`` and
  ``s_descale_{q,k,v}_{Bs,Hs}``. Strides are bytes: input strides x ``in_bpe`` (2 for bf16, **1**
  for ``fp8bf16``), output strides x 2 (bf16 output), ``s_lse_Hs`` = seqlen_q x 4, ``s_Ts`` =
  ts_qo x row stride. ``s_opt`` = 5, minus 2 for causal when heads % 8 != 0 or seqlen_q > 16384.
  Per-tensor descales (the Python FP8 API passes shape-[1] tensors): non-null pointers, strides 0.
  Grid ``(ceil(ceil(s_q / ts_qo) / tg_div), heads, batch)``, tg_div = 2 for causal (a workgroup
  takes a pair of query tiles); group mode ``(heads, batch, ceil(...) / tg_div)`` with
  ``ptr_qseq``/``ptr_kseq`` (and the ``_padding`` twins) = the ``seqstart`` arrays (b + 1 int32,
  placed in the kernel-argument segment after the struct so the scalar model can read them),
  packed ``(total tokens, heads, dim)`` tensors with every batch stride 0 and ``s_lse_Hs`` =
  total_q x 4 (``asm_mha_varlen_fwd.cu``; with the BSHD batch strides the FP8 group objects read
  the second sequence from the wrong rows, found in the functional emulator).
  Block 512 threads (256 for hd192/hd128).
- v4 (``FmhaV4Kernarg``, 656 bytes, one raw ``_kernarg_raw`` block in the metadata; ROCm/aiter
  ``csrc/py_itfs_cu/asm_mha_v4_fwd.cu``): the same field order in 16-byte slots, strides in
  elements of the tensor (1-byte FP8: bytes), output strides x 2, ``s_gqa`` = 1 (MHA only),
  ``s_opt`` = 5, ``s_lse`` = 0, scalar descales (strides 0). Grid ``(ceil(s_q / ts_qo), heads,
  batch)``, block 512. Dense, non-causal, heads_k == heads only.

Tensors are laid out BSHD (``(batch, seqlen, heads, headdim)``, the ``flash_attn_func`` layout).

Data-dependent branches: the v3 objects have none the scalar model cannot decide. v4 has six
``s_cbranch_vccnz label_rollback_overflow_*`` after ``v_cmp_nge_f32 vcc, s92, v193`` (a row maximum
past the lazy-rescale threshold): the model's ``unknown_branch`` policy decides them; ``not-taken``
(the default: no rollback, the steady state) and ``taken`` (rollback on every tile) bound the real
data path (README, "How far to trust the model", has both figures); the functional emulator
measures it (``zyfa.trace.emu.branches``, ``zyfa-trace kernel --unknown-branch emulated``): on
Gaussian inputs none of them jumps.
"""

from __future__ import annotations

import csv
import functools
import importlib.util
import math
import os
import re
import struct
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from zyfa.gfx950.isa import Program, disassemble
from zyfa.kernels.spec import KernelBuild, KernelSpec
from zyfa.shapes import AttnShape
from zyfa.gfx950.scalar import KERNARG_BASE  # where the scalar model places the kernel-argument segment

CACHE = Path(os.environ.get("ZYFA_CACHE", Path.home() / ".cache" / "zyfa")) / "aiter"
ENV_DIR = "ZYFA_AITER_DIR"
SUBDIR = "aiter_meta/hsa/gfx950/fmha_v3_fwd"
FAMILIES = ("fmha_v3_fwd", "fmha_v4_fwd")
V4_STRUCT_BYTES = 656  # static_assert(sizeof(FmhaV4Kernarg) == 656) in asm_mha_v4_fwd.cu
# Addresses the model gives the tensors (never dereferenced by the timed model).
_POINTERS = {"o": 0x7E00_0000_0000, "q": 0x7E10_0000_0000, "k": 0x7E20_0000_0000, "v": 0x7E30_0000_0000,
             "lse": 0x7E40_0000_0000, "q_descale": 0x7E50_0000_0000, "k_descale": 0x7E50_0000_0100,
             "v_descale": 0x7E50_0000_0200}
# codegen.py (wheel): FmhaFwdV3Ts tiles per QK head dim, DataType names, the selector table
TS = {128: (256, 64), 192: (128, 128)}  # hdim_q -> (ts_qo, ts_kv)
HEADDIM_V = {128: 128, 192: 128}  # V head dim of each QK head dim (fmha_fwd_hd192_hd128_* in codegen.py)
DTYPES = {"FmhaFwdBf16": "bf16"}  # codegen.py DataType -> AttnShape dtype (its FmhaFwdFp16 rows are commented out)
_SELECTOR = re.compile(r"FmhaFwdV3Buf<fmha_fwd_kernel_selector<\s*(\w+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,([^>]*)>>"
                       r"[^\"]*\"([\w.]+\.co)\"")
# v4 format ids (AttentionFormat in asm_mha_v4_fwd.cu) the model runs: FP8 e4m3 only
_V4_FORMATS = {3: "fp8"}


class AiterUnavailable(RuntimeError):
    """No AITER code objects: no installed package, no ZYFA_AITER_DIR folder, no wheel."""


@dataclass(frozen=True)
class AiterKernel:
    """One AITER forward code object and its facts (from the CSV beside it)."""

    name: str  # what follows "aiter:"
    path: Path
    family: str  # "fmha_v3_fwd" or "fmha_v4_fwd"
    dtype: str  # shape dtype it takes: "bf16" or "fp8"
    hdim_q: int
    hdim_v: int
    causal: bool
    group: bool
    ts_qo: int
    ts_kv: int
    symbol: str
    source: str  # where it was found: "installed", "ZYFA_AITER_DIR", "wheel"

    @property
    def workgroup_size(self) -> int:
        return 256 if (self.hdim_q, self.hdim_v) == (192, 128) else 512  # bdx in fmha_fwd_v3 / v4

    @property
    def in_bpe(self) -> int:
        return 1 if self.dtype == "fp8" else 2


# -- where the objects are --------------------------------------------------------------------------
def _installed_roots() -> list[Path]:
    try:
        spec = importlib.util.find_spec("aiter")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    out = []
    for root in map(Path, spec.submodule_search_locations):
        out += [root / "hsa/gfx950", root.parent / "aiter_meta/hsa/gfx950", root.parent / "hsa/gfx950"]
    return out


def _dir_roots(folder: Path) -> list[Path]:
    folder = Path(folder)
    return [folder / "hsa/gfx950", folder / "aiter_meta/hsa/gfx950", folder / "gfx950", folder]


def _wheel_root(download: bool) -> Optional[Path]:
    target = CACHE / "x" / SUBDIR
    if target.is_dir() and any(target.glob("*.co")):
        return target.parent
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
        return None
    with zipfile.ZipFile(wheels[-1]) as wheel:
        members = [m for m in wheel.namelist() if m.startswith(SUBDIR + "/")]
        if not members:
            raise AiterUnavailable(f"{wheels[-1].name} has no {SUBDIR}/ folder")
        wheel.extractall(CACHE / "x", members)
    return target.parent


def use_dir(aiter_dir: Optional[str]) -> Optional[Path]:
    """The CLIs' ``--aiter-dir`` (or, without it, ``ZYFA_AITER_DIR``) checked up front: a folder
    that does not exist is a ValueError naming where it came from, not a run whose AITER rows all
    end up "skipped". ``--aiter-dir`` is exported as ``ZYFA_AITER_DIR`` (absolute) for the lookups
    below, worker processes included. Returns the folder, or None when neither is set (an empty
    ``ZYFA_AITER_DIR`` counts as unset, as shells do)."""
    if aiter_dir is not None:
        if not str(aiter_dir).strip():
            raise ValueError("--aiter-dir: empty path (leave the option out to use $ZYFA_AITER_DIR)")
        folder, source = aiter_dir, "--aiter-dir"
    else:
        folder, source = os.environ.get(ENV_DIR) or None, ENV_DIR
        if folder is None:
            return None
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise ValueError(f"{source} {folder}: no such folder")
    os.environ[ENV_DIR] = str(path.resolve())
    return path.resolve()


def search_roots(aiter_dir: Optional[str] = None, download: bool = True) -> list[tuple[str, Path]]:
    """(source, gfx950 folder) in lookup order; ``aiter_dir`` overrides ``ZYFA_AITER_DIR``."""
    roots = [("installed", r) for r in _installed_roots()]
    folder = aiter_dir or os.environ.get(ENV_DIR)
    if folder:
        if not Path(folder).is_dir():
            raise AiterUnavailable(f"{'--aiter-dir' if aiter_dir else ENV_DIR} {folder}: no such folder")
        roots += [(ENV_DIR, r) for r in _dir_roots(Path(folder))]
    wheel = _wheel_root(download)
    if wheel is not None:
        roots.append(("wheel", wheel))
    return [(src, r) for src, r in roots if any((r / f).is_dir() for f in FAMILIES)]


def selectors(folder: Path) -> dict[str, dict]:
    """Code-object stem -> ``{"dtype", "headdim", "causal", "group"}`` from ``folder/codegen.py``'s
    ``FmhaFwdV3Buf`` table (the wheel's; module docstring). Unknown data types are left out."""
    return _selectors(str(folder))


@functools.lru_cache(maxsize=4)
def _selectors(folder: str) -> dict[str, dict]:
    path = Path(folder) / "codegen.py"
    if not path.is_file():
        return {}
    out = {}
    for m in _SELECTOR.finditer(path.read_text()):
        dtype_name, hdim, mask, rest, filename = m.groups()
        if dtype_name in DTYPES:
            out[Path(filename).stem] = {"dtype": DTYPES[dtype_name], "headdim": int(hdim), "causal": int(mask) != 0,
                                        "group": rest.rstrip().endswith("true")}
    return out


def _read_csv(folder: Path, family: str) -> list[dict]:
    """The CSV rows beside the objects; without a CSV (the wheel), rows made from codegen.py."""
    name = "fmha_fwd.csv" if family == "fmha_v3_fwd" else "fmha_v4_fwd.csv"
    path = folder / name
    if path.is_file():
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    if family != "fmha_v3_fwd":
        return []
    rows = []
    for stem, f in selectors(folder).items():
        ts_qo, ts_kv = TS[f["headdim"]]
        rows.append({"dtype": f["dtype"], "hdim_q": f["headdim"], "hdim_v": HEADDIM_V[f["headdim"]],
                     "mask": 2 if f["causal"] else 0, "mode": int(f["group"]), "ts_qo": ts_qo, "ts_kv": ts_kv,
                     "knl_name": stem, "co_name": f"{stem}.co"})
    return rows


def _facts(row: dict, family: str, path: Path, source: str) -> Optional[AiterKernel]:
    stem = path.stem
    name = stem if family == "fmha_v3_fwd" else f"{family}/{stem}"
    if family == "fmha_v3_fwd":
        dtype = {"bf16": "bf16", "fp8bf16": "fp8"}.get(row["dtype"])
    else:
        fmt = {int(row["q_format"]), int(row["k_format"]), int(row["v_format"])}
        scales = {int(row["q_scale_mode"]), int(row["k_scale_mode"]), int(row["v_scale_mode"])}
        dtype = _V4_FORMATS.get(fmt.pop()) if len(fmt) == 1 and scales == {1} else None  # 1: F32PerTensor
    if dtype is None:
        return None
    return AiterKernel(name=name, path=path, family=family, dtype=dtype, hdim_q=int(row["hdim_q"]),
                       hdim_v=int(row["hdim_v"]), causal=int(row["mask"]) != 0, group=int(row["mode"]) == 1,
                       ts_qo=int(row["ts_qo"]), ts_kv=int(row["ts_kv"]), symbol=row["knl_name"], source=source)


def catalog(aiter_dir: Optional[str] = None, download: bool = True) -> dict[str, AiterKernel]:
    """Every AITER forward object the model can run, by name (first root that has it wins).
    Objects whose CSV row names a format the model does not run (v4 FP4/FP6/INT8/MX) are left out."""
    out: dict[str, AiterKernel] = {}
    roots = search_roots(aiter_dir, download)
    if not roots:
        raise AiterUnavailable(f"no AITER code objects: no installed aiter package, {ENV_DIR} unset or without "
                               f"hsa/gfx950/fmha_v3_fwd, and no amd-aiter wheel in {CACHE}")
    for source, root in roots:
        for family in FAMILIES:
            folder = root / family
            if not folder.is_dir():
                continue
            for row in _read_csv(folder, family):
                path = folder / row["co_name"]
                if not path.is_file():
                    continue
                kernel = _facts(row, family, path, source)
                if kernel is not None and kernel.name not in out:
                    out[kernel.name] = kernel
    return out


def code_object_dir(download: bool = True) -> Path:
    """Folder of the first root's fmha v3 forward ``.co`` files (downloads the wheel once)."""
    for _, root in search_roots(download=download):
        if (root / "fmha_v3_fwd").is_dir():
            return root / "fmha_v3_fwd"
    raise AiterUnavailable(f"no AITER fmha_v3_fwd folder: no installed aiter, {ENV_DIR} unset, no wheel in {CACHE}")


def available(aiter_dir: Optional[str] = None) -> list[str]:
    """Names usable as ``aiter:NAME``."""
    return sorted(catalog(aiter_dir))


def lookup(name: str, aiter_dir: Optional[str] = None) -> AiterKernel:
    """The :class:`AiterKernel` of ``aiter:NAME`` (``NAME`` with or without ``.co``)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"aiter kernel name must be a non-empty string, got {name!r}")
    stem = name.removeprefix("aiter:").removesuffix(".co")
    known = catalog(aiter_dir)
    if stem not in known:
        raise ValueError(f"unknown AITER kernel {stem!r}; available here: {', '.join(sorted(known))}"
                         + ("" if any(k.dtype == "fp8" for k in known.values()) else
                            f" (the FP8 and v4 objects are not in the amd-aiter wheel: point {ENV_DIR} or "
                            "--aiter-dir at a ROCm/aiter checkout)"))
    return known[stem]


def resolve(name: str, aiter_dir: Optional[str] = None) -> Path:
    """Path of ``aiter:NAME``."""
    return lookup(name, aiter_dir).path


def for_path(path) -> AiterKernel:
    """Facts of a code object given by path: the CSV row beside it naming its file."""
    path = Path(path).resolve()
    family = path.parent.name if path.parent.name in FAMILIES else "fmha_v3_fwd"
    for row in _read_csv(path.parent, family):
        if row["co_name"] == path.name:
            kernel = _facts(row, family, path, "path")
            if kernel is not None:
                return kernel
    raise ValueError(f"{path}: no row for {path.name} in the fmha_fwd.csv / fmha_v4_fwd.csv beside it "
                     "(or a format the model does not run): its shape, mask and tile are unknown")


def _info(kernel) -> AiterKernel:
    return kernel if isinstance(kernel, AiterKernel) else for_path(kernel)


def is_fmha_v3(program: Program) -> bool:
    """Whether a program's metadata has a fmha_fwd_v3_args layout (either naming)."""
    names = {a.name for a in program.descriptor.args}
    return ({"Q", "K", "V", "seq_len", "kv_seq_len", "Ts", "gqa", "msk_opt"} <= names
            or {"ptr_q", "ptr_k", "ptr_v", "s_seq_len", "s_kv_seq_len", "s_Ts", "s_gqa", "s_opt"} <= names)


def is_aiter_fwd(program: Program) -> bool:
    """An fmha v3 layout, or v4's single raw ``FmhaV4Kernarg`` block."""
    raw = [(a.name, a.offset, a.size) for a in program.descriptor.args] == [("_kernarg_raw", 0, V4_STRUCT_BYTES)]
    return raw or is_fmha_v3(program)


def spec(name: str) -> KernelSpec:
    """The :class:`KernelSpec` of ``aiter:NAME`` (or of an AITER forward code object's path)."""
    k = for_path(name) if Path(name).suffix == ".co" and Path(name).is_file() else lookup(name)
    meta = {"code_object": str(k.path.resolve()), "aiter_source": k.source, "aiter_family": k.family,
            "group_mode": k.group,
            # the query-tile axis of the host code's grid (grid() below): no probing needed
            "work_axis": 2 if k.group and k.family == "fmha_v3_fwd" else 0,
            # every workgroup along it does the same work: non-causal, or causal with the host code's
            # pairing of query tiles i and tiles-1-i (tg_div = 2)
            "uniform_work": True}
    mode = ("causal" if k.causal else "non-causal") + (", group mode" if k.group else "")
    return KernelSpec(
        name=name if name.startswith("aiter:") else k.path.stem,
        description=f"AITER gfx950 {k.family} {k.dtype} hd{k.hdim_q}/{k.hdim_v} {mode} ({k.source}: {k.path})",
        build=lambda shape: KernelBuild(name=name, code_object=k.path, meta=dict(meta)),
        kernargs=lambda shape: kernargs(disassemble(k.path), k, shape),
        grid=lambda shape: grid(k, shape),
        workgroup_size=k.workgroup_size,
        dtype=k.dtype, causal=k.causal, headdim=k.hdim_q, headdim_v=k.hdim_v,
    )


def is_causal(kernel) -> bool:
    return _info(kernel).causal


def headdim(kernel) -> int:
    return _info(kernel).hdim_q


def check_shape(kernel, shape: AttnShape) -> None:
    k = _info(kernel)
    if (shape.headdim, shape.headdim_v) != (k.hdim_q, k.hdim_v):
        raise ValueError(f"AITER kernel {k.name} needs headdim {k.hdim_q} (v {k.hdim_v}), shape has "
                         f"{shape.headdim} (v {shape.headdim_v}) (use --headdim)")
    if shape.causal != k.causal:
        raise ValueError(f"AITER kernel {k.name} is {'causal' if k.causal else 'non-causal'}, shape causal={shape.causal}")
    if shape.dtype != k.dtype:
        raise ValueError(f"AITER kernel {k.name} takes {k.dtype} inputs; the shape's dtype is {shape.dtype!r}")
    if k.family == "fmha_v4_fwd" and shape.heads_k != shape.heads:
        raise ValueError(f"AITER kernel {k.name} is MHA only (heads_k == heads); the shape has "
                         f"{shape.heads}/{shape.heads_k} heads")


def grid(kernel, shape: AttnShape) -> tuple[int, int, int]:
    """Launch grid of the host code (``get_grid_dim`` in mha_fwd.cu; v4: asm_mha_v4_fwd.cu)."""
    k = _info(kernel)
    tiles = math.ceil(shape.seqlen_q / k.ts_qo)
    if k.family == "fmha_v4_fwd":
        return (tiles, shape.heads, shape.batch)
    pairs = math.ceil(tiles / (2 if k.causal else 1))
    if k.group:
        return (shape.heads, shape.batch, pairs)
    return (pairs, shape.heads, shape.batch)


def workgroup_size(kernel) -> int:
    return _info(kernel).workgroup_size


def _f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _values(k: AiterKernel, shape: AttnShape, seqstart_q: int, seqstart_k: int) -> dict:
    """Field values by their FP8/v4 names (``s_*``/``ptr_*``)."""
    b, h, hk, sq, sk, d, dv = (shape.batch, shape.heads, shape.heads_k, shape.seqlen_q, shape.seqlen_k,
                               shape.headdim, shape.headdim_v)
    inb, outb = k.in_bpe, 2
    q_row, k_row, v_row, o_row = h * d, hk * d, hk * dv, h * dv  # BSHD strides (elements)
    v4 = k.family == "fmha_v4_fwd"
    tune_opt = 5
    if not v4 and shape.causal and (h % 8 != 0 or sq > 16384):
        tune_opt -= 2
    ptrs = {"ptr_o": _POINTERS["o"], "ptr_q": _POINTERS["q"], "ptr_k": _POINTERS["k"], "ptr_v": _POINTERS["v"],
            "ptr_lse": 0 if v4 else _POINTERS["lse"]}
    group = k.group
    # group (varlen) mode: packed (total tokens, heads, dim) tensors found through the seqstart
    # arrays, every batch stride 0, lse (heads, total_q) (asm_mha_varlen_fwd.cu)
    per_batch = 0 if group else 1
    return {
        **ptrs,
        "scalar": _f32_bits(1.0 / math.sqrt(d)),
        "s_seq_len": sq, "s_kv_seq_len": sk,
        "s_Seqs": q_row * inb, "s_Ts": k.ts_qo * q_row * inb, "s_Hs": d * inb, "s_Bs": per_batch * sq * q_row * inb,
        "s_gqa": h // hk,
        "s_k_Seqs": k_row * inb, "s_k_Hs": d * inb, "s_k_Bs": per_batch * sk * k_row * inb,
        "s_v_Seqs": v_row * inb, "s_v_Hs": dv * inb, "s_v_Bs": per_batch * sk * v_row * inb,
        "s_o_Seqs": o_row * outb, "s_o_Hs": dv * outb, "s_o_Bs": per_batch * sq * o_row * outb,
        "s_opt": tune_opt, "s_lse": 0 if v4 else 1, "s_qk_head_dim": d, "s_v_head_dim": dv, "s_q_head_num": h,
        "s_lse_Hs": 0 if v4 else (b if group else 1) * sq * 4,
        "ptr_qseq": seqstart_q if group else 0, "ptr_kseq": seqstart_k if group else 0,
        "ptr_qseq_padding": seqstart_q if group else 0, "ptr_kseq_padding": seqstart_k if group else 0,
        "ptr_q_descale": _POINTERS["q_descale"] if k.dtype == "fp8" else 0,
        "ptr_k_descale": _POINTERS["k_descale"] if k.dtype == "fp8" else 0,
        "ptr_v_descale": _POINTERS["v_descale"] if k.dtype == "fp8" else 0,
        "s_descale_q_Bs": 0, "s_descale_q_Hs": 0, "s_descale_k_Bs": 0, "s_descale_k_Hs": 0,
        "s_descale_v_Bs": 0, "s_descale_v_Hs": 0,
    }


# BF16 v3 objects name the same fields without the s_/ptr_ prefixes
_BF16_NAMES = {"R": "ptr_o", "Q": "ptr_q", "K": "ptr_k", "V": "ptr_v", "LSE": "ptr_lse", "msk_opt": "s_opt",
               "lse": "s_lse", "gqa": "s_gqa", "r_Seqs": "s_o_Seqs", "r_Hs": "s_o_Hs", "r_Bs": "s_o_Bs",
               "lse_Hs": "s_lse_Hs", "scalar": "scalar"}
# v4: FmhaV4Kernarg field order, each field in a 16-byte slot (pointer 8 B, scalar 4 B)
V4_FIELDS = ("ptr_o", "ptr_q", "ptr_k", "ptr_v", "ptr_lse", "scalar", "s_seq_len", "s_Seqs", "s_Ts", "s_Hs", "s_Bs",
             "s_gqa", "s_k_Seqs", "s_k_Hs", "s_k_Bs", "s_opt", "s_lse", "s_kv_seq_len", "s_qk_head_dim",
             "s_v_head_dim", "s_q_head_num", "s_v_Seqs", "s_v_Hs", "s_v_Bs", "s_o_Seqs", "s_o_Hs", "s_o_Bs",
             "ptr_qseq", "ptr_kseq", "s_lse_Hs", "ptr_qseq_padding", "ptr_kseq_padding", "ptr_q_descale",
             "ptr_k_descale", "ptr_v_descale", "s_descale_q_Bs", "s_descale_q_Hs", "s_descale_k_Bs",
             "s_descale_k_Hs", "s_descale_v_Bs", "s_descale_v_Hs")


def field_name(name: str) -> str:
    """The FP8/v4 name of a v3 field (``Seqs`` -> ``s_Seqs``, ``R`` -> ``ptr_o``)."""
    if name in _BF16_NAMES:
        return _BF16_NAMES[name]
    if name.startswith(("s_", "ptr_")):
        return name
    return f"s_{name}"


def layout(program: Program, kernel) -> list[tuple[str, int, int]]:
    """(field, offset, size) of every named kernel argument. A v3 object's ``.args`` metadata is
    used as is; a v4 object's single ``_kernarg_raw`` block of 656 bytes is split into the
    ``FmhaV4Kernarg`` slots. Anything else raises ValueError naming the fields."""
    k = _info(kernel)
    args = [a for a in program.descriptor.args if a.name != "pad"]
    if not args:
        raise ValueError(f"{k.path}: the code object has no .args metadata to lay out kernel arguments")
    if k.family == "fmha_v4_fwd":
        if [(a.name, a.offset, a.size) for a in args] != [("_kernarg_raw", 0, V4_STRUCT_BYTES)]:
            raise ValueError(f"{k.path}: kernel arguments {[(a.name, a.offset, a.size) for a in args]} are not "
                             f"the FmhaV4Kernarg block ('_kernarg_raw', 0, {V4_STRUCT_BYTES}); layout unknown")
        return [(f, 16 * i, 8 if f.startswith("ptr_") else 4) for i, f in enumerate(V4_FIELDS)]
    return [(field_name(a.name), a.offset, a.size) for a in args]


def kernargs(program: Program, kernel, shape: AttnShape) -> bytes:
    """The packed kernel arguments for ``shape`` (module docstring), laid out by the code object's
    metadata. Unknown field names raise ValueError listing them: never a zero-filled run."""
    k = _info(kernel)
    check_shape(k, shape)
    fields = layout(program, k)
    size = max(max(off + sz for _, off, sz in fields), program.descriptor.kernarg_size)
    size = -(-size // 16) * 16
    # group mode: the seqstart arrays (b + 1 int32 each) after the struct, inside the segment
    seqstart_q = KERNARG_BASE + size
    seqstart_k = seqstart_q + 4 * (shape.batch + 1)
    values = _values(k, shape, seqstart_q, seqstart_k)
    unknown = [f for f, _, _ in fields if f not in values]
    if unknown:
        raise ValueError(f"{k.path}: kernel argument(s) {', '.join(unknown)} have no known value "
                         "(a layout zyfa.kernels.aiter does not know; update it from AITER's host code)")
    buf = bytearray(size + (8 * (shape.batch + 1) if k.group else 0))
    for f, off, sz in fields:
        fmt = {4: "<I", 8: "<Q"}.get(sz)
        if fmt is None:
            raise ValueError(f"{k.path}: kernel argument {f!r} has unsupported size {sz}")
        struct.pack_into(fmt, buf, off, values[f])
    if k.group:
        for i in range(shape.batch + 1):
            struct.pack_into("<I", buf, size + 4 * i, i * shape.seqlen_q)
            struct.pack_into("<I", buf, size + 4 * (shape.batch + 1) + 4 * i, i * shape.seqlen_k)
    return bytes(buf)
