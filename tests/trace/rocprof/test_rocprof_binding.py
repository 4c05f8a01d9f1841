"""Interface tests of the ctypes binding to rocprofiler-sdk thread trace (zyfa.trace.rocprof.sdk).

NOT run on an MI3xx: no AMD GPU exists here. The library under test is
``trace/rocprof/shim/fake_rocprofiler_sdk.c``, compiled by these tests with gcc, which exports the
rocprofiler-sdk symbols with the headers' signatures and calls the tool's callbacks as the real
library does (registration through rocprofiler_force_configure -> configure -> initialize; code-
object load callback; dispatch callback; shader-data callback in chunks whose buffers are
overwritten and freed after each call; decoder records). What this proves: ctypes signatures and
struct layouts agree with a C compiler's reading of the same declarations for all three shader-
data callback ABIs, callbacks stay alive, data is copied in time, and error statuses surface as
TracerUnavailable / RocprofilerError. What it cannot prove: that the real library behaves as the
shim (the version boundaries marked guess=True in abi.RELEASES in particular).
"""

from __future__ import annotations

import ctypes
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

import zyfa.trace.rocprof as rocprof
from zyfa.trace.errors import TracerUnavailable
from zyfa.trace.rocprof import abi
from zyfa.trace.rocprof.records import wave_records
from zyfa.trace.rocprof.sdk import (RocprofilerError, ThreadTraceParams, ThreadTraceSession, TraceDecoder,
                                    disassembly, kernel_entries, load_sdk)

SHIM_SRC = Path(rocprof.__file__).parent / "shim" / "fake_rocprofiler_sdk.c"
# the kernel in tests/data/att/tiny_kernel.s (also used by test_rocprof_tracer.py)
TINY_ASM = (Path(__file__).resolve().parents[2] / "data" / "att" / "tiny_kernel.s").read_text()
# llvm-objdump-22 places .text of this object at 0x1300 (checked in test_disassembly)
PC = {"s_load": 0x1300, "s_waitcnt": 0x1308, "mfma": 0x130C, "v_exp": 0x1314, "s_nop": 0x1318, "s_endpgm": 0x131C}


def _compile(tmp: Path, abi_number: int, name: str) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc not available")
    out = tmp / f"lib{name}.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wl,-Bsymbolic", f"-DZYFA_SHIM_ABI={abi_number}",
                    "-o", str(out), str(SHIM_SRC)], check=True)
    return out


@pytest.fixture(scope="module")
def shim_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("shim")


@pytest.fixture(scope="module")
def code_object(tmp_path_factory) -> bytes:
    if not (shutil.which("llvm-mc-22") and shutil.which("ld.lld-22") and shutil.which("llvm-objdump-22")):
        pytest.skip("llvm-mc-22 / ld.lld-22 / llvm-objdump-22 not available")
    d = tmp_path_factory.mktemp("co")
    (d / "tiny.s").write_text(TINY_ASM)
    subprocess.run(["llvm-mc-22", "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx950", "-filetype=obj", "-o",
                    str(d / "tiny.o"), str(d / "tiny.s")], check=True)
    subprocess.run(["ld.lld-22", "-shared", "-o", str(d / "tiny.co"), str(d / "tiny.o")], check=True)
    return (d / "tiny.co").read_bytes()


def toy(*records) -> bytes:
    """The shim's toy shader-data stream: magic + 32-byte records (see the shim's header comment)."""
    out = b"ZYFATOY1"
    for kind, cu, simd, slot, category, stall, duration, time, vaddr in records:
        out += struct.pack("<BBBBB3xIiqQ", kind, cu, simd, slot, category, stall, duration, time, vaddr)
    return out


def begin(cu, simd, slot, time):
    return (1, cu, simd, slot, 0, 0, 0, time, 0)


def inst(category, stall, duration, time, vaddr):
    return (2, 0, 0, 0, category, stall, duration, time, vaddr)


def end(time):
    return (3, 0, 0, 0, 0, 0, 0, time, 0)


UNPLACED = 2 ** 64 - 1
SE0 = toy(begin(1, 2, 3, 500),
          inst(1, 0, 4, 500, PC["s_load"]),
          inst(9, 40, 44, 504, PC["s_waitcnt"]),
          inst(6, 0, 4, 548, PC["mfma"]),  # the decoder's category for MFMA is VALU (6)
          inst(6, 3, 8, 552, PC["v_exp"]),
          inst(6, 0, 4, 560, UNPLACED),
          inst(9, 0, 4, 564, PC["s_endpgm"]),
          end(600))
SE1 = toy(begin(1, 0, 0, 700), inst(9, 0, 4, 700, PC["s_endpgm"]), end(720),
          (4, 0, 0, 0, 0, 0, 0, 1000, 5000), (4, 0, 0, 0, 0, 0, 0, 2_101_000, 105_000))  # clock pairs


def _shim_controls(path: Path):
    lib = ctypes.CDLL(str(path))
    lib.shim_param.restype = ctypes.c_uint64
    lib.shim_loaded_code_object.restype = ctypes.c_uint64
    lib.shim_run_dispatch.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_char_p,
                                      ctypes.c_uint64, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64]
    return lib


# -- ABI selection -------------------------------------------------------------------------------

@pytest.mark.parametrize("version,expected", [
    ((1, 0, 0), "args5"), ((1, 1, 0), "args5"), ((1, 2, 9), "args5"),
    ((1, 3, 0), "args6_flags"), ((1, 3, 5), "args6_flags"), ((1, 4, 1), "struct"), ((2, 0, 0), "struct"),
    ((0, 6, 0), None),
])
def test_release_table(version, expected):
    assert abi.release_for(version).shader_callback == expected


def test_release_override_and_errors():
    assert abi.release_for((1, 0, 0), "struct").shader_callback == "struct"
    with pytest.raises(ValueError, match="ZYFA_ROCPROF_SHADER_ABI must be one of"):
        abi.release_for((1, 0, 0), "args7")
    with pytest.raises(ValueError, match="Unknown shader_callback"):
        abi.Release((1, 0, 0), None, "bogus", "x")


def test_struct_sizes_match_the_headers():
    """Byte sizes implied by the header declarations on x86-64 (fields + alignment, counted by hand)."""
    sizes = {abi.ThreadTraceParameter: 24, abi.CallbackTracingRecord: 56, abi.CodeObjectLoadData: 88,
             abi.ShaderDataArgs: 96, abi.DecoderOccupancy: 32, abi.DecoderInst: 32, abi.DecoderWave: 64,
             abi.ToolConfigureResult: 32, abi.AgentPrefix: 24}
    assert {t.__name__: ctypes.sizeof(t) for t in sizes} == {t.__name__: n for t, n in sizes.items()}


# -- locating and loading ------------------------------------------------------------------------

def test_missing_library_names_every_place(tmp_path):
    with pytest.raises(TracerUnavailable) as info:
        load_sdk(env={"ROCM_PATH": str(tmp_path / "rocm")})
    msg = str(info.value)
    assert f"{tmp_path}/rocm/lib/librocprofiler-sdk.so" in msg and "/opt/rocm/lib/librocprofiler-sdk.so" in msg
    assert "ldconfig cache" in msg and "--backend model" in msg and "import-att" in msg
    with pytest.raises(TracerUnavailable, match="nope.so"):
        load_sdk(tmp_path / "nope.so")


def test_pre_1_0_sdk_is_refused(shim_dir):
    path = _compile(shim_dir, 5, "fake_old")
    _shim_controls(path).shim_set_version(0, 6, 0)
    with pytest.raises(TracerUnavailable, match=r"rocprofiler-sdk 0\.6\.0 .*pre-release ATT API.*>= 1\.0\.0 \(ROCm 7\.0\)"):
        load_sdk(path)


def test_library_without_the_api(tmp_path):
    src = tmp_path / "empty.c"
    src.write_text("int unrelated(void) { return 0; }\n")
    lib = tmp_path / "libempty.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    with pytest.raises(TracerUnavailable, match="does not export rocprofiler_get_version"):
        load_sdk(lib)


# -- a whole session, once per shader-data ABI -----------------------------------------------------

@pytest.mark.parametrize("abi_number,version,callback", [
    (5, (1, 1, 0), "args5"), (6, (1, 3, 2), "args6_flags"), (7, (1, 4, 0), "struct"),
])
def test_session_collects_and_decodes(shim_dir, code_object, abi_number, version, callback):
    path = _compile(shim_dir, abi_number, f"fake{abi_number}")
    shim = _shim_controls(path)
    shim.shim_set_version(*version)
    sdk = load_sdk(path, env={})
    assert (sdk.version, sdk.release.shader_callback) == (version, callback)

    params = ThreadTraceParams(target_cu=3, simd_select=0x5, buffer_size=64 << 20, shader_engine_mask=0x3)
    session = ThreadTraceSession(sdk, params).register()
    assert shim.shim_init_status() == 0 and shim.shim_context_started() == 1
    assert session.agents == [200]  # the GPU of the shim's two agents (the other is a CPU)
    assert [shim.shim_param(t) for t in range(4)] == [3, 0x3, 64 << 20, 0x5]  # target CU, SE mask, size, SIMDs

    # not armed: the code object is recorded, the dispatch is not traced
    assert shim.shim_run_dispatch(code_object, len(code_object), 0x7F0000, SE0, len(SE0), SE1, len(SE1), 13) == 0
    assert session.dispatches == [] and session.chunks == {}
    assert session.code_objects[5].data == code_object  # copied before the shim scribbled over its buffer
    assert session.code_objects[5].load_base == 0x7F0000

    with session.tracing():
        calls = shim.shim_run_dispatch(code_object, len(code_object), 0x7F0000, SE0, len(SE0), SE1, len(SE1), 13)
    assert calls == 3 and session.dispatches == [(11, 12)]
    assert session.shader_engine_data() == {0: SE0, 1: SE1}  # split at byte 13, rejoined, copied in time
    assert session.buffer_full() == ([] if callback == "args5" else [1])  # SE1 came flagged GPU_BUFFER_FULL

    decoder = TraceDecoder(sdk, decoder_dir=shim_dir)
    decoder.load_code_object(session.code_objects[5])
    assert shim.shim_loaded_code_object() == 5
    waves0 = decoder.decode(0, session.shader_engine_data()[0])
    waves1 = decoder.decode(1, session.shader_engine_data()[1])
    assert decoder.gfxip == 9 and decoder.occupancy_starts == 2 and decoder.realtime_hz == 100_000_000
    # 2_100_000 shader cycles over 100_000 realtime ticks at 100 MHz (1 ms) = 2100 MHz
    assert decoder.clock_pairs == [(1000, 5000), (2_101_000, 105_000)] and decoder.clock_mhz() == 2100.0
    assert decoder.infos == ["Stitch incomplete: code object not loaded"]
    (w,), (w1,) = waves0, waves1
    assert (w.se, w.cu, w.simd, w.slot, w.begin, w.end) == (0, 1, 2, 3, 500, 600)
    assert (w1.se, w1.begin, w1.end) == (1, 700, 720)
    assert [(i.time, i.category, i.stall, i.duration, i.vaddr) for i in w.instructions] == [
        (500, 1, 0, 4, 0x1300), (504, 9, 40, 44, 0x1308), (548, 6, 0, 4, 0x130C), (552, 6, 3, 8, 0x1314),
        (560, 6, 0, 4, None), (564, 9, 0, 4, 0x131C)]
    assert w.instructions[2].isa == "v_mfma_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[0:15]"

    records, stats = wave_records(waves0 + waves1, mfma_cycles=lambda op: 64 if op.startswith("v_mfma") else None)
    units = [(r["pc"], r["opcode"], r["unit"], r["issue"], r["end"]) for r in records if r["cu"] == 1]
    assert units == [(0, "s_load_dwordx2", "SMEM", 500, 504), (8, "s_waitcnt", "WAIT", 544, 548),
                     (12, "v_mfma_f32_32x32x64_f8f6f4", "MFMA", 548, 612), (20, "v_exp_f32", "TRANS", 555, 560),
                     (None, "<unmapped:VALU>", "VALU", 560, 564), (28, "s_endpgm", "MISC", 564, 568)]
    assert [r["cu"] for r in records if r["opcode"] == "s_endpgm"] == [1, 17]  # SE1's CU 1 -> 16 + 1
    assert stats["unmapped"] == 1
    decoder.close()
    assert decoder.handle.handle == 0


# -- error paths ---------------------------------------------------------------------------------

def test_error_paths(shim_dir, code_object):
    path = _compile(shim_dir, 5, "fake_errors")
    shim = _shim_controls(path)
    sdk = load_sdk(path, env={})

    session = ThreadTraceSession(sdk)
    with pytest.raises(RuntimeError, match="call register\\(\\) first"):
        with session.tracing():
            pass

    shim.shim_set_locked(1)  # the runtime is already up: too late to register on this release
    with pytest.raises(TracerUnavailable, match="CONFIGURATION_LOCKED.*before the HIP/HSA runtime initialises"):
        session.register()
    shim.shim_set_locked(0)
    session = ThreadTraceSession(sdk).register()
    assert session.initialized

    shim.shim_set_storage_file(1)  # code object handed over as an open file descriptor
    assert shim.shim_run_dispatch(code_object, len(code_object), 0x1000, SE1, len(SE1), None, 0, 8) == 0
    assert session.code_objects[5].data == code_object and session.code_objects[5].load_base == 0x1000

    shim.shim_set_decoder_missing(1)
    with pytest.raises(TracerUnavailable, match="decoder_create.*ROCPROFILER_STATUS_ERROR_NOT_AVAILABLE"):
        TraceDecoder(sdk, decoder_dir=shim_dir)
    shim.shim_set_decoder_missing(0)
    decoder = TraceDecoder(sdk, decoder_dir=shim_dir)
    with pytest.raises(RocprofilerError, match=r"rocprofiler_trace_decode failed: status 1 \(ROCPROFILER_STATUS_ERROR\)"):
        decoder.decode(0, b"not a capture")
    with pytest.raises(RocprofilerError, match="rocprofiler_thread_trace_decoder_codeobj_load failed: status 1"):
        decoder.load_code_object(rocprof.sdk.CodeObject(1, 0, 4, b"junk", "x"))


def test_abi_override_from_environment(shim_dir):
    path = _compile(shim_dir, 5, "fake_env")
    _shim_controls(path).shim_set_version(1, 4, 0)
    assert load_sdk(path, env={}).release.shader_callback == "struct"
    assert load_sdk(path, env={"ZYFA_ROCPROF_SHADER_ABI": "args5"}).release.shader_callback == "args5"
    with pytest.raises(ValueError, match="ZYFA_ROCPROF_SHADER_ABI must be one of"):
        load_sdk(path, env={"ZYFA_ROCPROF_SHADER_ABI": "v2"})


def test_params_validation():
    assert ThreadTraceParams().as_array()[2].value == 96 << 20
    for kwargs, name in (({"target_cu": 16}, "target_cu"), ({"simd_select": 0}, "simd_select"),
                         ({"buffer_size": 1000}, "buffer_size"), ({"shader_engine_mask": 0}, "shader_engine_mask"),
                         ({"target_cu": True}, "target_cu")):
        with pytest.raises(ValueError, match=f"ThreadTraceParams.{name} must be an int in"):
            ThreadTraceParams(**kwargs)
    with pytest.raises(TypeError, match="params must be ThreadTraceParams"):
        ThreadTraceSession(object(), params={"target_cu": 1})


def test_disassembly(code_object):
    assert kernel_entries(code_object, env={}) == {0x1300: "tiny"}
    assert disassembly(code_object, env={}) == {
        0x1300: "s_load_dwordx2 s[4:5], s[0:1], 0x0", 0x1308: "s_waitcnt lgkmcnt(0)",
        0x130C: "v_mfma_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[0:15]",
        0x1314: "v_exp_f32_e32 v32, v33", 0x1318: "s_nop 7", 0x131C: "s_endpgm"}
    with pytest.raises(ValueError, match="ELF"):
        disassembly(b"\x00" * 16, env={})
