"""run_kernel_trace: off ROCm a clear TracerUnavailable that names what was looked for and points to
the default cycle model; bad arguments rejected first (this machine has no ROCm and no GPU). Then
an end-to-end interface test against gcc-built stand-ins for librocprofiler-sdk.so and
libamdhip64.so (trace/rocprof/shim/): NOT run on an MI3xx."""

from __future__ import annotations

import ctypes
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

import zyfa.trace.rocprof as rocprof
from zyfa.kernels.registry import KernelBuild, KernelSpec
from zyfa.shapes import AttnShape
from zyfa.trace.errors import TracerUnavailable
from zyfa.trace.rocprof import ThreadTraceParams, check_available, run_kernel_trace
from zyfa.trace.rocprof.sdk import disassembly
from zyfa.trace.rocprof.tracer import _assemble, _buffer_bytes
from zyfa.trace.schema import Trace


def test_unavailable_names_all_three_libraries(tmp_path):
    env = {"ROCM_PATH": str(tmp_path / "rocm")}
    with pytest.raises(TracerUnavailable) as info:
        run_kernel_trace("zyfa-fp8", AttnShape(seqlen_q=256, seqlen_k=256), tmp_path / "out", env=env)
    msg = str(info.value)
    for lib in ("librocprofiler-sdk.so", "libamdhip64.so", "librocprof-trace-decoder.so"):
        assert f"{tmp_path}/rocm/lib/{lib}" in msg and f"/opt/rocm/lib/{lib}" in msg
    assert "ROCm >= 7.0" in msg and "--backend model" in msg and "cycle model" in msg
    assert not (tmp_path / "out").exists()  # nothing was built or written


def test_explicit_locations_are_reported(tmp_path):
    with pytest.raises(TracerUnavailable, match=f"{tmp_path}/sdk.so.*{tmp_path}/dec/librocprof-trace-decoder.so"):
        check_available(library=tmp_path / "sdk.so", decoder_dir=tmp_path / "dec", env={})


@pytest.mark.parametrize("kwargs,error,match", [
    ({"shape": (1, 2)}, TypeError, "shape must be a zyfa.shapes.AttnShape"),
    ({"out_dir": 3}, TypeError, "out_dir must be a str or Path"),
    ({"params": {"target_cu": 1}}, TypeError, "params must be ThreadTraceParams"),
    ({"kernel": "aiter:fwd_hd128_bf16_causal"}, ValueError, "launches registered kernels only.*import-att"),
    ({"kernel": "kernel.co"}, ValueError, "launches registered kernels only"),
])
def test_bad_arguments_first(tmp_path, kwargs, error, match):
    args = {"kernel": "zyfa-fp8", "shape": AttnShape(), "out_dir": tmp_path, **kwargs}
    with pytest.raises(error, match=match):
        run_kernel_trace(args.pop("kernel"), args.pop("shape"), args.pop("out_dir"), env={}, **args)


def test_buffer_bound():
    # b2 h8/2 s(128, 512) d(128, 64): 4 B * 2 * 512 * 8 * 128
    shape = AttnShape(batch=2, heads=8, heads_k=2, seqlen_q=128, seqlen_k=512, headdim=128, headdim_v=64)
    assert _buffer_bytes(shape) == 4 * 2 * 512 * 8 * 128
    # s 300 rounds up to 512 rows: 4 B * 1 * 512 * 1 * 128
    assert _buffer_bytes(AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=300, seqlen_k=300)) == 4 * 512 * 128
    assert ThreadTraceParams(target_cu=0).target_cu == 0


# -- end to end against the fake SDK + fake HIP (interface test; NOT run on an MI3xx) ---------------

SHIM = Path(rocprof.__file__).parent / "shim"
# tests/data/att/tiny_kernel.s (also used by test_rocprof_binding.py) plus its code-object metadata
META_ASM = (Path(__file__).resolve().parents[2] / "data" / "att" / "tiny_kernel.s").read_text() + """.amdgpu_metadata
---
amdhsa.kernels:
  - .args:
      - .address_space:  global
        .name:           out
        .offset:         0
        .size:           8
        .value_kind:     global_buffer
      - .name:           n
        .offset:         8
        .size:           4
        .value_kind:     by_value
    .group_segment_fixed_size: 0
    .kernarg_segment_align: 8
    .kernarg_segment_size: 16
    .max_flat_workgroup_size: 256
    .name:           tiny
    .private_segment_fixed_size: 0
    .sgpr_count:     8
    .symbol:         tiny.kd
    .vgpr_count:     40
    .wavefront_size: 64
amdhsa.target:   amdgcn-amd-amdhsa--gfx950
amdhsa.version:
  - 1
  - 2
...
.end_amdgpu_metadata
"""


def _toy(records) -> bytes:
    out = b"ZYFATOY1"
    for rec in records:
        out += struct.pack("<BBBBB3xIiqQ", *rec)
    return out


@pytest.fixture
def fake_rocm(tmp_path, monkeypatch):
    """$ROCM_PATH/lib with the fake SDK, the fake HIP and a decoder placeholder (the fake SDK's
    decoder wrapper does not load it)."""
    if not all(shutil.which(t) for t in ("gcc", "llvm-mc-22", "ld.lld-22", "llvm-objdump-22", "llvm-readelf-22")):
        pytest.skip("gcc / LLVM 22 tools not available")
    lib = tmp_path / "rocm" / "lib"
    lib.mkdir(parents=True)
    sdk = lib / "librocprofiler-sdk.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wl,-Bsymbolic", "-DZYFA_SHIM_ABI=5", "-o", str(sdk),
                    str(SHIM / "fake_rocprofiler_sdk.c")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wl,-Bsymbolic", "-o", str(lib / "libamdhip64.so"),
                    str(SHIM / "fake_hip.c"), "-ldl"], check=True)
    (lib / "librocprof-trace-decoder.so").write_bytes(b"")
    monkeypatch.setenv("ZYFA_FAKE_HIP_SDK", str(sdk))
    return tmp_path / "rocm"


def test_run_kernel_trace_end_to_end(fake_rocm, tmp_path, monkeypatch):
    spec = KernelSpec(name="tiny", description="six-instruction test kernel",
                      build=lambda shape: KernelBuild(name="tiny", asm=META_ASM, symbol="tiny"),
                      kernargs=lambda shape: struct.pack("<QI4x", 0, shape.seqlen_q),
                      grid=lambda shape: (shape.seqlen_q // 128, 2, 1), workgroup_size=256)
    # the toy "hardware" stream: one wave on CU 1 / SIMD 0 / slot 1 runs every instruction once
    probe = tmp_path / "probe"
    probe.mkdir()
    pcs = sorted(disassembly(_assemble(META_ASM, probe / "tiny.co", {}).read_bytes(), env={}))
    assert len(pcs) == 6
    timing = [(1, 0, 4), (9, 30, 34), (6, 0, 4), (6, 2, 8), (9, 0, 8), (9, 0, 4)]  # category, stall, duration
    records, t = [(1, 1, 0, 1, 0, 0, 0, 100, 0)], 100
    for pc, (cat, stall, dur) in zip(pcs, timing):
        records.append((2, 0, 0, 0, cat, stall, dur, t, pc))
        t += dur
    records.append((3, 0, 0, 0, 0, 0, 0, t + 10, 0))
    records += [(4, 0, 0, 0, 0, 0, 0, 0, 0), (4, 0, 0, 0, 0, 0, 0, 2_400_000, 100_000)]  # 2.4M cycles in 1 ms
    se0 = tmp_path / "se0.toy"
    se0.write_bytes(_toy(records))
    monkeypatch.setenv("ZYFA_FAKE_HIP_SE0", str(se0))

    shape = AttnShape(batch=1, heads=2, heads_k=2, seqlen_q=256, seqlen_k=256, headdim=128, headdim_v=128)
    out = tmp_path / "out"
    trace = run_kernel_trace(spec, shape, out, env={"ROCM_PATH": str(fake_rocm)},
                             params=ThreadTraceParams(target_cu=1))

    hip = ctypes.CDLL(str(fake_rocm / "lib" / "libamdhip64.so"))
    hip.fakehip_last_ptr.restype = ctypes.c_uint64
    hip.fakehip_malloc_bytes.restype = ctypes.c_uint64
    hip.fakehip_function.restype = ctypes.c_char_p
    buf = (ctypes.c_uint8 * 64)()
    assert hip.fakehip_kernargs(buf, 64) == 16
    ptr, n = struct.unpack("<QI4x", bytes(buf[:16]))
    assert ptr == hip.fakehip_last_ptr() != 0 and n == 256  # the global_buffer arg was patched, by-value kept
    assert hip.fakehip_malloc_bytes() == 4 * 1 * 256 * 2 * 128 and hip.fakehip_memset_value() == 0
    assert [hip.fakehip_dim(i) for i in range(6)] == [2, 2, 1, 256, 1, 1]
    assert hip.fakehip_function() == b"tiny" and hip.fakehip_state() == 7  # init, synchronize, free

    assert [r["opcode"] for r in trace.table.to_pylist()] == [
        "s_load_dwordx2", "s_waitcnt", "v_mfma_f32_32x32x64_f8f6f4", "v_exp_f32", "s_nop", "s_endpgm"]
    assert trace.df["pc"].tolist() == [pc - pcs[0] for pc in pcs]  # bytes from the entry of "tiny"
    assert trace.df["issue"].tolist() == [100, 134, 138, 144, 150, 158]  # time + stall
    assert trace.df["end"].tolist()[2] == 138 + 64  # MFMA: 16 passes from the cdna4 table
    assert (trace.meta.source, trace.meta.kernel, trace.meta.grid, trace.meta.workgroup_size) == \
        ("rocprof-att", "tiny", (2, 2, 1), 256)
    assert trace.meta.extra["dispatches"] == [(11, 12)]  # (kernel_id, dispatch_id) the shim reported
    assert trace.meta.provenance["shader_callback_abi"] == "args5"
    assert trace.meta.clock_mhz == 2400.0  # from the decoder's clock pairs
    assert (out / "tiny_se0.att").read_bytes() == se0.read_bytes()
    assert len(Trace.load(out / "tiny.parquet")) == 6
