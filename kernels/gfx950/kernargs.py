"""The kernel-argument struct of every generated kernel (one layout for all variants).

The kernel reads these 128 bytes with two ``s_load_dwordx16`` from its kernarg pointer. Tensor
layouts (element strides in bytes are passed explicitly, so any row-strided tensor works):

  q      (batch, seqlen_q, heads, headdim)      fp8 e4m3 / bf16
  k      (batch, seqlen_k, heads_k, headdim)    fp8 e4m3 / bf16
  vt     (batch, heads_k, headdim_v, sk_pad)    V transposed, keys padded with zeros to a
                                                multiple of 128 (the launcher builds it)
  o      (batch, seqlen_q, heads, headdim_v)    bf16 output
  lse    (batch, heads, seqlen_q)               fp32, natural log
  hconst (batch, heads_k, 4)                    fp32 [t, T8 = 8t, dv, 0] per docs/numerics.md:
                                                t = fp32(fp32(softmax_scale*LOG2E) * fp32(dq*dk));
                                                bf16: t = fp32(softmax_scale*LOG2E), dv = 1
"""

from __future__ import annotations

import struct
from typing import Optional

import numpy as np

from zyfa.gfx950 import timing
from zyfa.kernels.gfx950.schedule import ROWS_PER_WG
from zyfa.shapes import AttnShape

# (name, struct format, meaning); offsets follow from the order (all naturally aligned).
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("q", "Q", "address of q"),
    ("k", "Q", "address of k"),
    ("vt", "Q", "address of V^T"),
    ("o", "Q", "address of the bf16 output"),
    ("lse", "Q", "address of softmax_lse"),
    ("hconst", "Q", "address of the per-(batch, kv head) constants"),
    ("seqlen_q", "I", "query rows"),
    ("seqlen_k", "I", "key rows"),
    ("heads_k", "I", "kv heads"),
    ("inv_group", "f", "fp32(heads_k / heads): kv head = floor((head + 0.5) * inv_group)"),
    ("q_stride_s", "I", "bytes between query rows"),
    ("q_stride_h", "I", "bytes between heads of q"),
    ("q_stride_b", "I", "bytes between batches of q"),
    ("k_stride_s", "I", "bytes between key rows"),
    ("k_stride_h", "I", "bytes between kv heads of k"),
    ("k_stride_b", "I", "bytes between batches of k"),
    ("vt_stride_d", "I", "bytes between head-dim rows of V^T (sk_pad * element size)"),
    ("vt_stride_h", "I", "bytes between kv heads of V^T"),
    ("vt_stride_b", "I", "bytes between batches of V^T"),
    ("o_stride_s", "I", "bytes between output rows"),
    ("o_stride_h", "I", "bytes between heads of the output"),
    ("o_stride_b", "I", "bytes between batches of the output"),
    ("lse_stride_h", "I", "bytes between heads of lse"),
    ("lse_stride_b", "I", "bytes between batches of lse"),
    ("mask_offset", "i", "causal: seqlen_k - seqlen_q (bottom-right); non-causal: 2^30"),
    ("pair_query_blocks", "I", "1: a kernel built with KernelConfig.pair_query_blocks runs two query blocks "
                               "per workgroup (paired(shape)); 0: one (kernels without it ignore the field)"),
)
FORMAT = "<" + "".join(fmt for _, fmt, _ in FIELDS)
KERNARG_SIZE = struct.calcsize(FORMAT)
NO_MASK = 1 << 30
BLOCK_N = 128
_POINTERS = {name for name, fmt, _ in FIELDS if fmt == "Q"}


def field_offset(name: str) -> int:
    offset = 0
    for field_name, fmt, _ in FIELDS:
        if field_name == name:
            return offset
        offset += struct.calcsize("<" + fmt)
    raise KeyError(f"no kernel argument named {name!r}")


def sk_pad(seqlen_k: int) -> int:
    return -(-seqlen_k // BLOCK_N) * BLOCK_N


def strides(shape: AttnShape) -> dict[str, int]:
    """Byte strides of contiguous tensors in the layouts of the module docstring."""
    e = 1 if shape.dtype == "fp8" else 2
    sq, sk, h, hk, d, dv = shape.seqlen_q, shape.seqlen_k, shape.heads, shape.heads_k, shape.headdim, shape.headdim_v
    pad = sk_pad(sk)
    return {
        "q_stride_s": h * d * e, "q_stride_h": d * e, "q_stride_b": sq * h * d * e,
        "k_stride_s": hk * d * e, "k_stride_h": d * e, "k_stride_b": sk * hk * d * e,
        "vt_stride_d": pad * e, "vt_stride_h": dv * pad * e, "vt_stride_b": hk * dv * pad * e,
        "o_stride_s": h * dv * 2, "o_stride_h": dv * 2, "o_stride_b": sq * h * dv * 2,
        "lse_stride_h": sq * 4, "lse_stride_b": h * sq * 4,
    }


def tensor_bytes(shape: AttnShape) -> dict[str, int]:
    """Size in bytes of every tensor the kernel touches."""
    st = strides(shape)
    return {"q": shape.batch * st["q_stride_b"], "k": shape.batch * st["k_stride_b"],
            "vt": shape.batch * st["vt_stride_b"], "o": shape.batch * st["o_stride_b"],
            "lse": shape.batch * st["lse_stride_b"], "hconst": shape.batch * shape.heads_k * 16}


def default_addresses(shape: AttnShape, base: int = 1 << 32) -> dict[str, int]:
    """A documented virtual address map for tracers and emulators that have no real buffers:
    tensors laid out in FIELDS order from ``base``, each 4 KiB aligned."""
    addresses, cursor = {}, base
    for name, size in tensor_bytes(shape).items():
        addresses[name] = cursor
        cursor += -(-size // 4096) * 4096
    return addresses


def paired(shape: AttnShape, pair: Optional[bool] = None) -> bool:
    """Whether a kernel built with ``KernelConfig.pair_query_blocks`` runs two query blocks per
    workgroup on ``shape`` (``pair`` forces it): only when one block per workgroup would make
    more workgroups than the chip has CUs (one workgroup per CU fits: VGPR-limited). Pairing
    evens out the causal work per workgroup, which pays once workgroups queue for CUs; below
    that it only doubles the longest workgroup (cycle model, b1 h32 s1K causal: 617 -> 383
    TFLOP/s at 2400 MHz with pairing forced)."""
    if pair is not None:
        return bool(pair)
    blocks = -(-shape.seqlen_q // ROWS_PER_WG)
    return blocks * shape.heads * shape.batch > timing.param("cus")


def pack(shape: AttnShape, addresses: Optional[dict[str, int]] = None,
         stride_overrides: Optional[dict[str, int]] = None, pair: Optional[bool] = None) -> bytes:
    """Packed kernel arguments for ``shape``; ``addresses`` maps q, k, vt, o, lse, hconst to
    device addresses (default: :func:`default_addresses`), ``stride_overrides`` replaces
    contiguous strides (the launcher passes the real tensors' strides), ``pair`` forces
    :func:`paired` (the grid must agree: ``zyfa.kernels.gfx950.grid``)."""
    if not isinstance(shape, AttnShape):
        raise TypeError(f"shape must be a zyfa.shapes.AttnShape, got {type(shape).__name__}")
    addresses = default_addresses(shape) if addresses is None else addresses
    missing = _POINTERS - set(addresses)
    if missing:
        raise ValueError(f"addresses is missing {sorted(missing)}")
    values = {**strides(shape), **(stride_overrides or {})}
    values.update({name: int(addresses[name]) for name in _POINTERS})
    values.update({
        "seqlen_q": shape.seqlen_q, "seqlen_k": shape.seqlen_k, "heads_k": shape.heads_k,
        "inv_group": float(np.float32(shape.heads_k) / np.float32(shape.heads)),
        "mask_offset": shape.seqlen_k - shape.seqlen_q if shape.causal else NO_MASK,
        "pair_query_blocks": int(paired(shape, pair)),
    })
    for name, fmt, _ in FIELDS:
        value = values[name]
        limit = {"Q": 1 << 64, "I": 1 << 32}.get(fmt)
        if limit is not None and not 0 <= value < limit:
            raise ValueError(f"kernel argument {name}={value} does not fit its {8 if fmt == 'Q' else 4}-byte field "
                             "(tensors must stay below 4 GiB per batch item)")
        if name in _POINTERS and value % 16:
            raise ValueError(f"kernel argument {name}=0x{value:x} must be 16-byte aligned")
    return struct.pack(FORMAT, *(values[name] for name, _, _ in FIELDS))


def unpack(buffer: bytes) -> dict:
    """Inverse of :func:`pack` (for tests, the launcher shim and emulators)."""
    if len(buffer) != KERNARG_SIZE:
        raise ValueError(f"kernel arguments are {KERNARG_SIZE} bytes, got {len(buffer)}")
    return dict(zip((name for name, _, _ in FIELDS), struct.unpack(FORMAT, buffer)))


def metadata_args() -> list[str]:
    """The ``.args`` list of the code object's amdhsa metadata (YAML lines)."""
    lines, offset = [], 0
    for name, fmt, _ in FIELDS:
        size = struct.calcsize("<" + fmt)
        if fmt == "Q":
            lines.append(f"      - {{ .name: {name}, .offset: {offset}, .size: 8, .value_kind: global_buffer, "
                         ".address_space: global }")
        else:
            lines.append(f"      - {{ .name: {name}, .offset: {offset}, .size: {size}, .value_kind: by_value }}")
        offset += size
    return lines
