"""gfx950 AOT builds of the Triton kernels on the CPU, registered for the cycle model."""

import re
import shutil
import struct

import pytest

pytest.importorskip("triton")
if shutil.which("llvm-readelf-22") is None:
    pytest.skip("llvm-readelf-22 (Debian llvm-22) is needed to read the code object's kernarg layout",
                allow_module_level=True)

from zyfa.kernels.registry import get_kernel  # noqa: E402
from zyfa.kernels.triton import aot  # noqa: E402
from zyfa.shapes import AttnShape  # noqa: E402

SHAPE = AttnShape(batch=2, heads=4, heads_k=2, seqlen_q=300, seqlen_k=500, headdim=128, headdim_v=128, causal=True)


@pytest.fixture(scope="module")
def fp8():
    spec = get_kernel("triton-fp8")
    return spec, spec.build(SHAPE)


@pytest.fixture(scope="module")
def bf16():
    spec = get_kernel("triton-bf16")
    shape = SHAPE.with_(dtype="bf16")
    return spec, spec.build(shape), shape


def test_fp8_build_uses_fp8_and_scaled_mfma(fp8):
    spec, build = fp8
    mnemonics = set(re.findall(r"\bv_mfma\w*", build.asm))
    assert "v_mfma_f32_32x32x64_f8f6f4" in mnemonics  # QK^T
    assert "v_mfma_scale_f32_32x32x64_f8f6f4" in mnemonics  # PV with P's E8M0 block scale
    assert build.code_object.read_bytes()[:4] == b"\x7fELF"
    assert build.symbol == "_attn_fwd_fp8" and spec.arch == "gfx950" and spec.dtype == "fp8"


def test_bf16_build_uses_bf16_mfma(bf16):
    _, build, _ = bf16
    assert any(m.endswith("_bf16") for m in re.findall(r"\bv_mfma\w*", build.asm))
    assert not re.search(r"f8f6f4", build.asm)


def test_fp8_kernargs_follow_triton_amd_layout(fp8):
    spec, build = fp8
    raw = spec.kernargs(SHAPE)
    # 9 pointers (Q K V Out Lse T DV NanK NanV), 20 i32, 2 scratch pointers: 72 + 80 + 16 bytes, then HIP's
    # hidden arguments, if the code object asks for any (filled as HIP would for the grid)
    assert len(raw) == build.meta["kernarg_size"]
    assert build.meta["args"][-1][2] == 148  # last explicit i32 (IMPRECISE_ACC is a constexpr)
    hidden = {kind: off for kind, off, _ in build.meta["hidden_args"]}
    if "hidden_block_count_x" in hidden:
        assert struct.unpack_from("<III", raw, hidden["hidden_block_count_x"]) == (3, 8, 1)
    offsets = {name: off for name, _, off in build.meta["args"]}
    q_addr = struct.unpack_from("<Q", raw, offsets["Q"])[0]
    assert q_addr == 1 << 32
    # K follows Q's 2*300*4*128 fp8 bytes rounded up to 4 KiB
    assert struct.unpack_from("<Q", raw, offsets["K"])[0] == (1 << 32) + 307200
    assert struct.unpack_from("<i", raw, offsets["SEQ_Q"])[0] == 300
    assert struct.unpack_from("<i", raw, offsets["SEQ_K"])[0] == 500
    assert struct.unpack_from("<i", raw, offsets["GROUP"])[0] == 2
    assert struct.unpack_from("<i", raw, offsets["stride_vs"])[0] == 1  # V read keys-contiguous
    assert struct.unpack_from("<i", raw, offsets["stride_qs"])[0] == 4 * 128
    assert struct.unpack_from("<QQ", raw, 152) == (0, 0)  # scratch pointers


def test_grid_and_workgroup(fp8, bf16):
    spec, _ = fp8
    assert spec.grid(SHAPE) == (3, 8, 1)  # ceil(300 / 128) query tiles, batch * heads
    assert spec.workgroup_size == 512  # 8 waves of 64
    bspec, build, shape = bf16
    raw = bspec.kernargs(shape)
    offsets = {name: off for name, _, off in build.meta["args"]}
    assert abs(struct.unpack_from("<f", raw, offsets["t"])[0] - 128 ** -0.5 * 1.4426950408889634) < 1e-6


def test_variant_validation():
    with pytest.raises(ValueError, match="kernel"):
        aot.AotVariant("int8")
    with pytest.raises(ValueError, match="block_m"):
        aot.AotVariant("fp8", block_m=0)
