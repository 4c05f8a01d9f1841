"""The 128-byte kernel-argument struct: layout, packing, address map and errors."""

import struct

import pytest

from zyfa.kernels.gfx950 import kernargs as ka
from zyfa.shapes import AttnShape


def test_layout_offsets():
    assert ka.KERNARG_SIZE == 128
    assert [ka.field_offset(n) for n in ("q", "hconst", "seqlen_q", "inv_group", "q_stride_s", "mask_offset")] == \
        [0, 40, 48, 60, 64, 120]
    with pytest.raises(KeyError, match="no kernel argument named 'x'"):
        ka.field_offset("x")


def test_pack_contiguous_gqa_shape():
    shape = AttnShape(batch=2, heads=6, heads_k=2, seqlen_q=100, seqlen_k=300, headdim=128, causal=True)
    addrs = {name: 0x1000 * (i + 1) for i, name in enumerate(("q", "k", "vt", "o", "lse", "hconst"))}
    buf = ka.pack(shape, addrs)
    f = ka.unpack(buf)
    assert (f["q"], f["hconst"]) == (0x1000, 0x6000)
    assert (f["seqlen_q"], f["seqlen_k"], f["heads_k"], f["mask_offset"]) == (100, 300, 2, 200)
    assert f["inv_group"] == struct.unpack("<f", struct.pack("<f", 1 / 3))[0]
    assert (f["q_stride_s"], f["q_stride_h"], f["q_stride_b"]) == (6 * 128, 128, 100 * 6 * 128)
    assert (f["k_stride_s"], f["k_stride_b"]) == (2 * 128, 300 * 2 * 128)
    assert (f["vt_stride_d"], f["vt_stride_h"], f["vt_stride_b"]) == (384, 128 * 384, 2 * 128 * 384)
    assert (f["o_stride_s"], f["o_stride_h"]) == (6 * 128 * 2, 256)
    assert (f["lse_stride_h"], f["lse_stride_b"]) == (400, 6 * 400)
    bf16 = ka.unpack(ka.pack(shape.with_(dtype="bf16", causal=False), addrs))
    assert bf16["q_stride_s"] == 6 * 128 * 2 and bf16["vt_stride_d"] == 768 and bf16["mask_offset"] == ka.NO_MASK


def test_default_addresses_are_disjoint_and_aligned():
    shape = AttnShape(batch=1, heads=2, heads_k=2, seqlen_q=300, seqlen_k=300)
    addrs, sizes = ka.default_addresses(shape), ka.tensor_bytes(shape)
    spans = sorted((addrs[n], addrs[n] + sizes[n]) for n in addrs)
    assert all(a % 4096 == 0 for a, _ in spans)
    assert all(end <= nxt for (_, end), (nxt, _) in zip(spans, spans[1:]))
    assert sizes["vt"] == 2 * 128 * 384 and sizes["hconst"] == 2 * 16
    assert ka.unpack(ka.pack(shape))["q"] == addrs["q"]


def test_pack_errors():
    shape = AttnShape(batch=1, heads=2, heads_k=2, seqlen_q=64, seqlen_k=64)
    good = ka.default_addresses(shape)
    with pytest.raises(ValueError, match="addresses is missing \\['lse'\\]"):
        ka.pack(shape, {k: v for k, v in good.items() if k != "lse"})
    with pytest.raises(ValueError, match="k=0x1008 must be 16-byte aligned"):
        ka.pack(shape, {**good, "k": 0x1008})
    with pytest.raises(ValueError, match="q_stride_b=.* does not fit"):
        ka.pack(shape, good, {"q_stride_b": 1 << 32})
    with pytest.raises(TypeError, match="AttnShape"):
        ka.pack((1, 2, 3))
    with pytest.raises(ValueError, match="are 128 bytes, got 3"):
        ka.unpack(b"abc")
