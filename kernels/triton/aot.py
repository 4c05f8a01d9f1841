"""Ahead-of-time gfx950 builds of the Triton kernels, for the CDNA4 cycle model (no GPU needed).

``triton.compile`` runs Triton's AMD backend on this CPU for ``GPUTarget("hip", "gfx950", 64)``
and returns the AMDGCN assembly and the code object (hsaco). The FP8 build turns on
``SCALED_PV``: the PV product becomes ``tl.dot_scaled`` with P's per-64-key power of two as an
E8M0 scale, which the AMD backend lowers to ``v_mfma_scale_f32_32x32x64_f8f6f4`` (the write-up's
"removes the factor for free"); QK^T stays ``v_mfma_f32_32x32x64_f8f6f4``.

``SPECS`` describes ``triton-fp8`` and ``triton-bf16`` (registered by :mod:`zyfa.kernels.registry`). Kernel arguments
follow Triton's AMD calling convention as the code object's metadata lays it out: the kernel's
non-constexpr parameters in order (pointers 8 bytes, i32 4 bytes), then Triton's two scratch
pointers (global and profile scratch, null here), then the HIP hidden arguments the code uses
(``hidden_block_count_*`` ...), filled as the HIP runtime would for the
launch grid. Tensor addresses come from :func:`default_addresses` (a documented virtual map: no
real buffers exist on the CPU).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import struct
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from zyfa.kernels.spec import KernelBuild, KernelSpec
from zyfa.numerics import LEANP_BIAS_V2
from zyfa.shapes import AttnShape

ARCH = "gfx950"
WAVE_SIZE = 64
SCRATCH_POINTERS = 2  # Triton appends global_scratch and profile_scratch to every kernel
_CACHE = Path(os.environ.get("ZYFA_CACHE", Path.home() / ".cache" / "zyfa")) / "triton-aot"


@dataclass(frozen=True)
class AotVariant:
    """One gfx950 build: which kernel, its tile and the problem's compile-time dimensions."""

    kernel: str  # "fp8" or "bf16"
    headdim: int = 128
    headdim_v: int = 128
    causal: bool = True
    block_m: int = 128
    num_warps: int = 8
    num_stages: int = 2

    def __post_init__(self):
        if self.kernel not in ("fp8", "bf16"):
            raise ValueError(f"AotVariant.kernel must be 'fp8' or 'bf16', got {self.kernel!r}")
        for name in ("headdim", "headdim_v", "block_m", "num_warps", "num_stages"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"AotVariant.{name} must be a positive int, got {value!r}")

    @classmethod
    def for_shape(cls, kernel: str, shape: AttnShape) -> "AotVariant":
        return cls(kernel, shape.headdim, shape.headdim_v, shape.causal)

    @property
    def workgroup_size(self) -> int:
        return self.num_warps * WAVE_SIZE


@dataclass(frozen=True)
class AotKernel:
    """A compiled gfx950 kernel: assembly, code object, symbol, argument layout, resources."""

    variant: AotVariant
    asm: str
    hsaco: bytes
    symbol: str
    arg_names: tuple[str, ...]  # the non-constexpr parameters, in kernarg order
    arg_types: tuple[str, ...]  # Triton signature types ("*fp8e4nv", "i32")
    kernarg_offsets: tuple[int, ...]  # from the code object metadata, one per argument + scratch
    hidden_args: tuple[tuple[str, int, int], ...]  # (value_kind, offset, size) of HIP hidden arguments
    kernarg_size: int
    lds_bytes: int
    vgprs: int
    sgprs: int


def _kernel_fn(kernel: str):
    if kernel == "fp8":
        # lazy: the kernel modules import triton (an optional dependency); only a triton-* build needs it
        from zyfa.kernels.triton.attn_fp8 import _attn_fwd_fp8
        return _attn_fwd_fp8.fn
    from zyfa.kernels.triton.attn_bf16 import _attn_fwd_bf16  # lazy: as above
    return _attn_fwd_bf16.fn


def _constexprs(v: AotVariant) -> dict:
    from zyfa.kernels.triton._common import BLOCK_KEYS, padded_headdim  # lazy: imports triton (optional)
    fp8 = v.kernel == "fp8"
    const = dict(HEAD_DIM=v.headdim, HEAD_DIM_V=v.headdim_v, HEAD_DIM_PAD=padded_headdim(v.headdim, fp8),
                 HEAD_DIM_V_PAD=padded_headdim(v.headdim_v, fp8), IS_CAUSAL=v.causal, BLOCK_M=v.block_m,
                 BLOCK_N=BLOCK_KEYS, WARP_SPEC=False, INTERPRET=False)
    if fp8:
        const.update(ROWSUM_MMA=False, ACC_IN_DOT=False, SCALED_PV=True, PROTON=False, IMPRECISE_ACC=None,
                     RECIPE_V2=False, C2=LEANP_BIAS_V2)  # gfx950 AOT build: spec v1 (scaled MFMA for PV)
    return const


_POINTER_TYPES = {
    "fp8": {"Q": "*fp8e4nv", "K": "*fp8e4nv", "V": "*fp8e4nv", "Out": "*bf16", "Lse": "*fp32", "T": "*fp32", "DV": "*fp32",
            "NanK": "*i32", "NanV": "*i32"},
    "bf16": {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "Out": "*bf16", "Lse": "*fp32"},
}
_FLOAT_ARGS = {"t": "fp32"}  # bf16 kernel: t = softmax_scale * log2(e), by value


def _kernarg_layout(hsaco: bytes) -> tuple[list[tuple[str, int, int]], int]:
    """([(value_kind, offset, size)] of every argument, kernarg segment size) from the code object's
    AMDHSA metadata (``llvm-readelf-22 --notes``)."""
    _CACHE.mkdir(parents=True, exist_ok=True)
    path = _CACHE / f"{hashlib.sha256(hsaco).hexdigest()[:16]}.hsaco"
    path.write_bytes(hsaco)
    notes = subprocess.run(["llvm-readelf-22", "--notes", str(path)], capture_output=True, text=True,
                           check=True).stdout
    args_text = notes.split(".args:", 1)[1].split(".group_segment_fixed_size", 1)[0]
    entries = []
    for entry in args_text.split("\n      - ")[0:]:
        offset = re.search(r"\.offset:\s+(\d+)", entry)
        size = re.search(r"\.size:\s+(\d+)", entry)
        kind = re.search(r"\.value_kind:\s+(\w+)", entry)
        if offset and size and kind:
            entries.append((kind.group(1), int(offset.group(1)), int(size.group(1))))
    size = int(re.search(r"\.kernarg_segment_size:\s+(\d+)", notes).group(1))
    return entries, size


def _metadata_int(notes_key: str, notes: str) -> int:
    match = re.search(rf"\.{notes_key}:\s+(\d+)", notes)
    return int(match.group(1)) if match else -1


def _compile(kernel: str, const: dict, target: tuple, num_warps: int, num_stages: int,
             divisible: bool = False):
    """``triton.compile`` of one kernel for ``target`` (``("hip", "gfx950", 64)``, ``("cuda", 90, 128)``).

    ``divisible`` marks every pointer and stride argument 16-divisible, as Triton's launcher
    specialises them for contiguous tensors whose head dims are multiples of 16: that lets the
    compiler pipeline K/V loads through shared memory (``cp.async``), the largest footprint.
    Returns (compiled kernel, its argument names, their signature types).
    """
    # lazy: triton is an optional dependency (extras [gpu], [test]); only a triton-* build needs it
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = _kernel_fn(kernel)
    # constexpr parameters left out take their defaults (ASTSource would make them runtime ints)
    const = {**{p.name: p.default for p in fn.params if p.is_constexpr and p.has_default}, **const}
    pointers = _POINTER_TYPES[kernel]
    signature = {name: pointers.get(name) or ("constexpr" if name in const else _FLOAT_ARGS.get(name, "i32"))
                 for name in fn.arg_names}
    attrs = None
    if divisible:
        attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(fn.arg_names)
                 if signature[name].startswith("*") or (name.startswith("stride_") and signature[name] == "i32")}
    src = ASTSource(fn=fn, signature=signature, constexprs=const, attrs=attrs)
    compiled = triton.compile(src, target=GPUTarget(*target), options={"num_warps": num_warps, "num_stages": num_stages})
    return compiled, fn.arg_names, signature


@functools.lru_cache(maxsize=None)
def compile_gfx950(variant: AotVariant) -> AotKernel:
    """Compiles ``variant`` for gfx950 on this machine (Triton caches the result on disk)."""
    compiled, arg_names, signature = _compile(variant.kernel, _constexprs(variant), ("hip", ARCH, WAVE_SIZE),
                                              variant.num_warps, variant.num_stages)
    hsaco = compiled.asm["hsaco"]
    entries, size = _kernarg_layout(hsaco)
    explicit = [off for kind, off, _ in entries if not kind.startswith("hidden_")]
    hidden = tuple(e for e in entries if e[0].startswith("hidden_"))
    names = tuple(n for n in arg_names if signature[n] != "constexpr")
    if len(explicit) != len(names) + SCRATCH_POINTERS:
        raise RuntimeError(f"code object lists {len(explicit)} explicit kernel arguments, expected {len(names)} + "
                           f"{SCRATCH_POINTERS} scratch pointers (Triton's AMD calling convention changed?)")
    asm = compiled.asm["amdgcn"]
    return AotKernel(variant=variant, asm=asm, hsaco=hsaco, symbol=compiled.metadata.name, arg_names=names,
                     arg_types=tuple(signature[n] for n in names), kernarg_offsets=tuple(explicit),
                     hidden_args=hidden, kernarg_size=size, lds_bytes=int(compiled.metadata.shared),
                     vgprs=_metadata_int("vgpr_count", asm), sgprs=_metadata_int("sgpr_count", asm))


# -- Hopper (sm_90) builds: shared memory per tile config, checked on the CPU ----
HOPPER_TARGET = ("cuda", 90, 32)  # sm_90, 32 threads per warp (as Triton's CUDA driver reports it)
# Largest dynamic shared memory one block of an sm_90 GPU may opt into: 227 KB (CUDA C++ Programming
# Guide, "Technical Specifications per Compute Capability", compute capability 9.0), the value that
# Triton's OutOfResources message quotes on an H200 ("Hardware limit: 232448").
HOPPER_SMEM_PER_BLOCK = 232448


def hopper_shared_bytes(kernel: str, headdim: int, headdim_v: int, config, causal: bool = True,
                        recipe_v2: bool = True) -> int:
    """Shared memory (bytes) that ``config`` (a ``TileConfig``) asks for on sm_90 at these head dims.

    Compiles for Hopper on this machine (no GPU needed) with the launch specialisation that costs
    the most shared memory (16-divisible pointers and strides; the FP8 kernel's transposed V has
    key stride 1, as :func:`~zyfa.kernels.triton.attn_fp8.attention_fp8` launches it on CUDA).
    ``recipe_v2``: the FP8 kernel's ``zyfa-v2`` path (the default recipe) or v1.
    """
    from zyfa.kernels.triton._common import padded_headdim  # lazy: imports triton (optional)
    fp8 = kernel == "fp8"
    const = dict(HEAD_DIM=headdim, HEAD_DIM_V=headdim_v, HEAD_DIM_PAD=padded_headdim(headdim, fp8),
                 HEAD_DIM_V_PAD=padded_headdim(headdim_v, fp8), IS_CAUSAL=causal, INTERPRET=False,
                 **config.meta(fp8))
    if fp8:
        const.update(PROTON=False, stride_vs=1, RECIPE_V2=recipe_v2, MUL_RN_ASM=recipe_v2)  # as launched on CUDA
    compiled, _, _ = _compile(kernel, const, HOPPER_TARGET, config.num_warps, config.num_stages, divisible=True)
    return int(compiled.metadata.shared)


# -- launch description for a shape ----
def default_addresses(shape: AttnShape, kernel: str, base: int = 1 << 32) -> dict[str, int]:
    """Virtual addresses of the kernel's tensors (contiguous FA layout), each 4 KiB aligned from ``base``."""
    e = 1 if kernel == "fp8" else 2
    b, sq, sk, h, hk, d, dv = (shape.batch, shape.seqlen_q, shape.seqlen_k, shape.heads, shape.heads_k,
                               shape.headdim, shape.headdim_v)
    sizes = {"Q": b * sq * h * d * e, "K": b * sk * hk * d * e, "V": b * sk * hk * dv * e,
             "Out": b * sq * h * dv * 2, "Lse": b * h * sq * 4}
    if kernel == "fp8":
        sizes.update(T=b * hk * 4, DV=b * hk * 4, NanK=b * hk * 4, NanV=b * hk * dv * 4)
    addresses, cursor = {}, base
    for name, size in sizes.items():
        addresses[name] = cursor
        cursor += -(-size // 4096) * 4096
    return addresses


def argument_values(shape: AttnShape, kernel: str) -> dict[str, int | float]:
    """Every non-constexpr argument of the kernel for contiguous ``(b, s, h, d)`` tensors.

    Strides are in elements (Triton pointer arithmetic). The FP8 kernel reads V with keys
    contiguous (``(b, h_k, d_v, s_k)``, as the CUDA launcher's transposed copy).
    """
    b, sq, sk, h, hk, d, dv = (shape.batch, shape.seqlen_q, shape.seqlen_k, shape.heads, shape.heads_k,
                               shape.headdim, shape.headdim_v)
    values: dict[str, int | float] = dict(default_addresses(shape, kernel))
    values.update(stride_qb=sq * h * d, stride_qs=h * d, stride_qh=d,
                  stride_kb=sk * hk * d, stride_ks=hk * d, stride_kh=d,
                  stride_ob=sq * h * dv, stride_os=h * dv, stride_oh=dv,
                  stride_lb=h * sq, stride_lh=sq, H=h, GROUP=h // hk, SEQ_Q=sq, SEQ_K=sk)
    if kernel == "fp8":
        values.update(stride_vb=hk * dv * sk, stride_vs=1, stride_vh=dv * sk, stride_vd=sk, stride_tb=hk)
    else:
        values.update(stride_vb=sk * hk * dv, stride_vs=hk * dv, stride_vh=dv,
                      t=shape.headdim ** -0.5 * 1.4426950408889634)
    return values


def pack_kernargs(kernel: AotKernel, shape: AttnShape) -> bytes:
    """The kernarg segment (``kernel.kernarg_size`` bytes) for ``shape``, little-endian."""
    values = argument_values(shape, kernel.variant.kernel)
    buf = bytearray(kernel.kernarg_size)
    for name, typ, offset in zip(kernel.arg_names, kernel.arg_types, kernel.kernarg_offsets):
        fmt = "<Q" if typ.startswith("*") else "<f" if typ == "fp32" else "<i"
        struct.pack_into(fmt, buf, offset, values[name])
    for offset in kernel.kernarg_offsets[len(kernel.arg_names):]:
        struct.pack_into("<Q", buf, offset, 0)  # scratch pointers: the kernels use no scratch
    for kind, offset, size in kernel.hidden_args:
        value = _hidden_value(kind, kernel, shape)
        struct.pack_into({2: "<H", 4: "<I", 8: "<Q"}[size], buf, offset, value)
    return bytes(buf)


def _hidden_value(kind: str, kernel: AotKernel, shape: AttnShape) -> int:
    """What the HIP runtime writes into a hidden kernel argument for this launch (0 if unused)."""
    blocks = grid(shape, kernel.variant)
    if kind.startswith("hidden_block_count_"):
        return blocks["xyz".index(kind[-1])]
    if kind.startswith("hidden_group_size_"):
        return (kernel.variant.workgroup_size, 1, 1)["xyz".index(kind[-1])]
    if kind == "hidden_grid_dims":
        return 3 if blocks[2] > 1 else 2 if blocks[1] > 1 else 1
    if kind == "hidden_dynamic_lds_size":
        return kernel.lds_bytes
    return 0  # remainders (grid is a whole number of workgroups), global offsets, queue pointers


def grid(shape: AttnShape, variant: AotVariant) -> tuple[int, int, int]:
    """Workgroups: (query tiles, batch * heads, 1), as the CUDA/HIP launcher uses."""
    return (-(-shape.seqlen_q // variant.block_m), shape.batch * shape.heads, 1)


def build(kernel: str, shape: AttnShape) -> KernelBuild:
    """Compiles (or fetches) the gfx950 build of ``kernel`` for ``shape`` and writes its code object."""
    variant = AotVariant.for_shape(kernel, shape)
    k = compile_gfx950(variant)
    _CACHE.mkdir(parents=True, exist_ok=True)
    path = _CACHE / f"triton-{kernel}-{hashlib.sha256(k.hsaco).hexdigest()[:16]}.hsaco"
    if not path.exists():
        path.write_bytes(k.hsaco)
    meta = dict(variant=asdict(variant), lds_bytes=k.lds_bytes, vgprs=k.vgprs, sgprs=k.sgprs,
                kernarg_size=k.kernarg_size, args=list(zip(k.arg_names, k.arg_types, k.kernarg_offsets)),
                hidden_args=[list(h) for h in k.hidden_args],
                source="triton AOT (zyfa.kernels.triton.aot)")
    return KernelBuild(name=f"triton-{kernel}", asm=k.asm, code_object=path, symbol=k.symbol, meta=meta)


def _spec(kernel: str, description: str) -> KernelSpec:
    base = AotVariant(kernel)
    return KernelSpec(
        name=f"triton-{kernel}", description=description,
        build=lambda shape: build(kernel, shape),
        kernargs=lambda shape: pack_kernargs(compile_gfx950(AotVariant.for_shape(kernel, shape)), shape),
        grid=lambda shape: grid(shape, AotVariant.for_shape(kernel, shape)),
        workgroup_size=base.workgroup_size, dtype=kernel, arch=ARCH,
        causal=None)  # the build follows the shape's mask (AotVariant.for_shape)


SPECS = (_spec("fp8", "Triton FP8 kernel (ZYFA numerics, scaled-MFMA PV), AOT-compiled for gfx950"),
         _spec("bf16", "Triton BF16 kernel, AOT-compiled for gfx950"))
