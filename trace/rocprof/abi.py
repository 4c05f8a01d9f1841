"""ctypes mirror of the rocprofiler-sdk thread-trace C API, per release (``zyfa.trace.rocprof.abi``).

Headers followed (ROCm/rocprofiler-sdk, now ROCm/rocm-systems projects/rocprofiler-sdk):

* ``rocprofiler-sdk/fwd.h``, ``registration.h``, ``context.h``, ``agent.h``, ``callback_tracing.h``
  (stable since 0.5: handles, ``rocprofiler_force_configure``, code-object callback tracing);
* ``experimental/thread-trace/{core,dispatch}.h`` (the thread-trace service; three shader-data
  callback ABIs, see :data:`RELEASES`);
* ``experimental/thread-trace/trace_decoder{,_types}.h`` and rocprof-trace-decoder 0.1.3's
  ``include/trace_decoder_types.h`` (decoder records; identical layouts).

Unions passed *by value* (``rocprofiler_user_data_t``) are declared as ``c_uint64``: same size and
x86-64 argument class, and ctypes refuses by-value structs that contain unions.
"""

from __future__ import annotations

import ctypes as C
from dataclasses import dataclass
from typing import Optional

# -- handles and small structs (fwd.h) -----------------------------------------------------------


class Handle(C.Structure):
    """``rocprofiler_{context,agent,queue,counter,thread_trace_decoder}_id_t``: ``{uint64_t handle}``."""

    _fields_ = [("handle", C.c_uint64)]


class CorrelationId(C.Structure):
    """``rocprofiler_(async_)correlation_id_t``: ``{uint64_t internal; rocprofiler_user_data_t external}``."""

    _fields_ = [("internal", C.c_uint64), ("external", C.c_uint64)]


class ClientId(C.Structure):
    """``rocprofiler_client_id_t`` (registration.h)."""

    _fields_ = [("name", C.c_char_p), ("handle", C.c_uint32)]


ClientFinalize = C.CFUNCTYPE(None, ClientId)
ToolInitialize = C.CFUNCTYPE(C.c_int, ClientFinalize, C.c_void_p)
ToolFinalize = C.CFUNCTYPE(None, C.c_void_p)


class ToolConfigureResult(C.Structure):
    """``rocprofiler_tool_configure_result_t``; ``size`` = sizeof, for ABI checks by the SDK."""

    _fields_ = [("size", C.c_size_t), ("initialize", ToolInitialize), ("finalize", ToolFinalize),
                ("tool_data", C.c_void_p)]


# returns rocprofiler_tool_configure_result_t*: declared void* (ctypes callbacks return simple types only)
ConfigureFunc = C.CFUNCTYPE(C.c_void_p, C.c_uint32, C.c_char_p, C.c_uint32, C.POINTER(ClientId))


class AgentPrefix(C.Structure):
    """The stable head of ``rocprofiler_agent_v0_t``: ``size, id, type``.

    ``rocprofiler_query_available_agents`` accepts any ``agent_size <= sizeof(rocprofiler_agent_v0_t)``
    (agent.cpp), so asking for this prefix is valid on every release.
    """

    _fields_ = [("size", C.c_uint64), ("id", Handle), ("type", C.c_int32)]


AGENT_INFO_VERSION_0 = 1  # rocprofiler_agent_version_t
AGENT_TYPE_GPU = 2  # rocprofiler_agent_type_t: NONE, CPU, GPU
QueryAgentsCallback = C.CFUNCTYPE(C.c_int, C.c_int, C.POINTER(C.c_void_p), C.c_size_t, C.c_void_p)

# -- code-object callback tracing (callback_tracing.h) --------------------------------------------
CALLBACK_TRACING_CODE_OBJECT = 10  # rocprofiler_callback_tracing_kind_t (append-only enum)
CODE_OBJECT_LOAD = 1  # rocprofiler_code_object_operation_t
CALLBACK_PHASE_LOAD = 1  # rocprofiler_callback_phase_t: LOAD == ENTER (UNLOAD == EXIT == 2)
STORAGE_TYPE_FILE, STORAGE_TYPE_MEMORY = 1, 2  # HSA_VEN_AMD_LOADER_CODE_OBJECT_STORAGE_TYPE_*


class CallbackTracingRecord(C.Structure):
    """``rocprofiler_callback_tracing_record_t`` (passed by value)."""

    _fields_ = [("context_id", Handle), ("thread_id", C.c_uint64), ("correlation_id", CorrelationId),
                ("kind", C.c_int32), ("operation", C.c_int32), ("phase", C.c_int32), ("payload", C.c_void_p)]


class CodeObjectLoadData(C.Structure):
    """``rocprofiler_callback_tracing_code_object_load_data_t`` up to the storage union."""

    _fields_ = [("size", C.c_uint64), ("code_object_id", C.c_uint64), ("rocp_agent", Handle),
                ("hsa_agent", Handle), ("uri", C.c_char_p), ("load_base", C.c_uint64), ("load_size", C.c_uint64),
                ("load_delta", C.c_int64), ("storage_type", C.c_int32),
                ("storage", C.c_uint64),  # int storage_file, or uint64_t memory_base
                ("memory_size", C.c_uint64)]


CallbackTracingCallback = C.CFUNCTYPE(None, CallbackTracingRecord, C.POINTER(C.c_uint64), C.c_void_p)

# -- thread-trace service (experimental/thread-trace/core.h, dispatch.h) --------------------------
# rocprofiler_thread_trace_parameter_type_t
PARAM_TARGET_CU, PARAM_SHADER_ENGINE_MASK, PARAM_BUFFER_SIZE, PARAM_SIMD_SELECT = 0, 1, 2, 3
CONTROL_NONE, CONTROL_START_AND_STOP = 0, 3  # rocprofiler_thread_trace_control_flags_t
SHADER_DATA_FLAG_END, SHADER_DATA_FLAG_GPU_FULL, SHADER_DATA_FLAG_CPU_FULL = 1, 2, 4


class ThreadTraceParameter(C.Structure):
    """``rocprofiler_thread_trace_parameter_t``: type, then a 16-byte union (value | counter_id, simd_mask:4)."""

    _fields_ = [("type", C.c_int32), ("value", C.c_uint64), ("simd_mask_word", C.c_uint64)]


DispatchCallback = C.CFUNCTYPE(C.c_int, Handle, Handle, CorrelationId, C.c_uint64, C.c_uint64, C.c_void_p,
                               C.POINTER(C.c_uint64))


class ThreadTraceTimestamp(C.Structure):
    _fields_ = [("gpu_clock", C.c_uint64), ("system_clock", C.c_uint64)]


class ShaderDataArgs(C.Structure):
    """``rocprofiler_thread_trace_shader_data_t`` (the by-value bundle of the newest ABI)."""

    _fields_ = [("size", C.c_uint64), ("data", C.c_void_p), ("data_size", C.c_uint64),
                ("shader_engine_id", C.c_int64), ("chunk_index", C.c_uint64), ("read_offset", C.c_uint64),
                ("agent", Handle), ("flags", C.c_int32), ("start_timestamp", ThreadTraceTimestamp),
                ("end_timestamp", ThreadTraceTimestamp)]


# the three shader-data callback signatures, by ABI name
SHADER_CALLBACKS = {
    # (agent, shader_engine_id, data, data_size, userdata)
    "args5": C.CFUNCTYPE(None, Handle, C.c_int64, C.c_void_p, C.c_size_t, C.c_uint64),
    # (agent, shader_engine_id, data, data_size, flags, userdata)
    "args6_flags": C.CFUNCTYPE(None, Handle, C.c_int64, C.c_void_p, C.c_size_t, C.c_int32, C.c_uint64),
    # (rocprofiler_thread_trace_shader_data_t args, userdata)
    "struct": C.CFUNCTYPE(None, ShaderDataArgs, C.c_uint64),
}


@dataclass(frozen=True)
class Release:
    """One rocprofiler-sdk release range and the thread-trace ABI it exposes.

    ``shader_callback`` is a key of :data:`SHADER_CALLBACKS`, or None where zyfa does not support
    the release (the reason is ``note``). ``guess`` marks a version boundary that no changelog
    states; override it with ``ZYFA_ROCPROF_SHADER_ABI`` when a real library disagrees.
    """

    first: tuple[int, int, int]
    last: Optional[tuple[int, int, int]]  # exclusive; None = open-ended
    shader_callback: Optional[str]
    source: str
    note: str = ""
    guess: bool = False

    def __post_init__(self):
        if self.shader_callback is not None and self.shader_callback not in SHADER_CALLBACKS:
            raise ValueError(f"Unknown shader_callback: {self.shader_callback!r}; expected one of {sorted(SHADER_CALLBACKS)}")
        if self.last is not None and self.last <= self.first:
            raise ValueError(f"Release: last {self.last} must be after first {self.first}")

    def covers(self, version: tuple[int, int, int]) -> bool:
        return self.first <= version and (self.last is None or version < self.last)


RELEASES: tuple[Release, ...] = (
    Release((0, 0, 0), (1, 0, 0), None,
            "rocprofiler-sdk 0.5/0.6 (ROCm 6.3/6.4): amd_detail/thread_trace*.h",
            note="pre-release ATT API (rocprofiler_att_* names, no agent argument, no decoder wrapper) and no "
                 "gfx950 support; thread trace on MI355X needs rocprofiler-sdk >= 1.0.0 (ROCm 7.0)"),
    Release((1, 0, 0), (1, 3, 0), "args5",
            "rocprofiler-sdk 1.0.0-1.1.x (ROCm 7.0-7.2): experimental/thread-trace/core.h; ROCprofiler-SDK "
            "1.1.0 API reference 'Thread trace' documents the 5-argument shader callback"),
    Release((1, 3, 0), (1, 4, 0), "args6_flags",
            "experimental/thread-trace/core.h revision with rocprofiler_thread_trace_shader_data_flags_t and "
            "PARAMETER_BUFFERING_MODE (a flags argument before userdata)", guess=True),
    Release((1, 4, 0), None, "struct",
            "experimental/thread-trace/core.h (rocm-systems develop): rocprofiler_thread_trace_shader_data_t "
            "by value, PARAMETER_NUM_BUFFERS", guess=True),
)

# -- decoder records (trace_decoder_types.h) -----------------------------------------------------
RECORD_GFXIP, RECORD_OCCUPANCY, RECORD_PERFEVENT, RECORD_WAVE, RECORD_INFO = 0, 1, 2, 3, 4
RECORD_REALTIME, RECORD_RT_FREQUENCY = 7, 8  # rocprof-trace-decoder >= 0.1.3
INFO_NAMES = {1: "DATA_LOST", 2: "STITCH_INCOMPLETE", 3: "WAVE_INCOMPLETE"}


class DecoderPc(C.Structure):
    _fields_ = [("addr", C.c_uint64), ("marker_id", C.c_uint64)]


class DecoderOccupancy(C.Structure):
    _fields_ = [("pc", DecoderPc), ("time", C.c_uint64), ("reserved", C.c_uint8), ("cu", C.c_uint8),
                ("simd", C.c_uint8), ("wave_id", C.c_uint8), ("start", C.c_uint32, 1), ("_rsvd", C.c_uint32, 31)]


class DecoderWaveState(C.Structure):
    _fields_ = [("type", C.c_int32), ("duration", C.c_int32)]


class DecoderInst(C.Structure):
    _fields_ = [("category", C.c_uint32, 8), ("stall", C.c_uint32, 24), ("duration", C.c_int32),
                ("time", C.c_int64), ("pc", DecoderPc)]


class DecoderWave(C.Structure):
    _fields_ = [("cu", C.c_uint8), ("simd", C.c_uint8), ("wave_id", C.c_uint8), ("contexts", C.c_uint8),
                ("_rsvd1", C.c_uint32), ("_rsvd2", C.c_uint32), ("_rsvd3", C.c_uint32),
                ("begin_time", C.c_int64), ("end_time", C.c_int64),
                ("timeline_size", C.c_uint64), ("instructions_size", C.c_uint64),
                ("timeline_array", C.POINTER(DecoderWaveState)), ("instructions_array", C.POINTER(DecoderInst))]


class DecoderRealtime(C.Structure):
    """``rocprofiler_thread_trace_decoder_realtime_t``: a shader-clock / realtime-clock pair."""

    _fields_ = [("shader_clock", C.c_int64), ("realtime_clock", C.c_uint64), ("reserved", C.c_uint64)]


DecoderCallback = C.CFUNCTYPE(None, C.c_int, C.c_void_p, C.c_uint64, C.c_void_p)

STATUS_SUCCESS = 0  # rocprofiler_status_t


def release_for(version: tuple[int, int, int], override: Optional[str] = None) -> Release:
    """The :class:`Release` row covering ``version``; ``override`` forces a shader-callback ABI."""
    if override is not None:
        if override not in SHADER_CALLBACKS:
            raise ValueError(f"ZYFA_ROCPROF_SHADER_ABI must be one of {sorted(SHADER_CALLBACKS)}, got {override!r}")
        return Release(version, None, override, f"forced by ZYFA_ROCPROF_SHADER_ABI={override}")
    for release in RELEASES:
        if release.covers(version):
            return release
    raise ValueError(f"no release row covers rocprofiler-sdk {version}")  # unreachable: rows tile [0, inf)
