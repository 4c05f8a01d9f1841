"""ctypes binding to rocprofiler-sdk thread trace and its decoder (``zyfa.trace.rocprof.sdk``).

Pieces, in the order a trace uses them:

* :func:`load_sdk` finds ``librocprofiler-sdk.so`` (explicit path, ``$ROCM_PATH/lib``, ``/opt/rocm/lib``,
  the ``ldconfig`` cache), reads ``rocprofiler_get_version`` and picks the thread-trace ABI of that
  release (:data:`zyfa.trace.rocprof.abi.RELEASES`).
* :class:`ThreadTraceSession` registers this Python process as a rocprofiler-sdk tool with
  ``rocprofiler_force_configure`` (see README.md: it must run before the HIP/HSA runtime starts,
  except on SDK >= 1.3 which supports late start). Its ``initialize`` creates two contexts, as the
  SDK's own thread_trace sample does: one subscribed to code-object loads (the decoder needs the
  binaries), one with ``rocprofiler_configure_dispatch_thread_trace_service`` on every GPU agent and
  :class:`ThreadTraceParams`. Dispatches are traced only while :meth:`ThreadTraceSession.tracing`
  is active; shader-engine data arrives in the shader-data callback and is copied out at once.
* :class:`TraceDecoder` wraps the SDK's rocprof-trace-decoder entry points
  (``rocprofiler_thread_trace_decoder_create`` ... ``rocprofiler_trace_decode``) and turns decoder
  waves into :class:`zyfa.trace.rocprof.records.AttWave` with ISA text from the code objects.

Callback lifetimes: the SDK keeps every function pointer it is given until the process exits, so
a session (and its ctypes callback objects) is kept alive in :data:`_LIVE` forever; exceptions
inside callbacks cannot cross the C boundary and are stored in ``session.errors`` and re-raised by
the next Python-side call.
"""

from __future__ import annotations

import contextlib
import ctypes as C
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from zyfa.trace.errors import TracerUnavailable
from zyfa.trace.rocprof import abi
from zyfa.trace.rocprof.att_dir import entry_of
from zyfa.trace.rocprof.records import AttInstruction, AttWave

SDK_LIBRARY = "librocprofiler-sdk.so"
DECODER_LIBRARY = "librocprof-trace-decoder.so"
ABI_ENV = "ZYFA_ROCPROF_SHADER_ABI"
FALLBACK_HINT = ("Without an MI3xx GPU and ROCm >= 7.0 use the default tracer, the CDNA4 cycle model "
                 "(zyfa-trace kernel --backend model), or import a capture made elsewhere "
                 "(rocprofv3 --att -d DIR -- APP; zyfa-trace import-att DIR -o TRACE).")
_LIVE: list = []  # sessions the SDK holds callbacks of (never freed: the SDK may call them until exit)


class RocprofilerError(RuntimeError):
    """A rocprofiler-sdk call returned an error status; names the function and the status."""

    def __init__(self, function: str, status: int, text: str):
        self.function, self.status = function, status
        super().__init__(f"{function} failed: status {status} ({text})")


# -- locating libraries --------------------------------------------------------------------------

def search_dirs(env: Optional[dict] = None) -> list[Path]:
    """Directories searched for ROCm libraries, in order: ``$ROCM_PATH/lib``, ``/opt/rocm/lib``."""
    env = os.environ if env is None else env
    dirs = [Path(env["ROCM_PATH"]) / "lib"] if env.get("ROCM_PATH") else []
    dirs.append(Path("/opt/rocm/lib"))
    return list(dict.fromkeys(dirs))


def _ldconfig(name: str) -> Optional[Path]:
    exe = shutil.which("ldconfig") or ("/sbin/ldconfig" if Path("/sbin/ldconfig").exists() else None)
    if exe is None:
        return None
    try:
        listing = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in listing.splitlines():
        match = re.match(rf"^\s*{re.escape(name)}(\.\d+)*\s.*=>\s*(\S+)\s*$", line)
        if match:
            return Path(match.group(2))
    return None


def locate(name: str, explicit: Optional[str | Path] = None, env: Optional[dict] = None) -> tuple[Optional[Path], list[str]]:
    """Find a shared library: ``(path or None, [places looked])``."""
    if explicit is not None:
        path = Path(explicit)
        return (path if path.is_file() else None), [str(path)]
    looked = []
    for d in search_dirs(env):
        for candidate in sorted(d.glob(name + "*")) if d.is_dir() else []:
            if candidate.is_file():
                return candidate, looked + [str(d / name)]
        looked.append(str(d / name))
    found = _ldconfig(name)
    looked.append(f"ldconfig cache ({name})")
    return found, looked


def unavailable(what: str, looked: list[str]) -> TracerUnavailable:
    return TracerUnavailable(f"{what} not found (looked in: {', '.join(looked)}). "
                             + FALLBACK_HINT)


# -- the SDK library -----------------------------------------------------------------------------

# function -> (restype, argtypes) for the calls every supported release exports
_SIGNATURES = {
    "rocprofiler_get_version": (C.c_int, [C.POINTER(C.c_uint32)] * 3),
    "rocprofiler_get_status_string": (C.c_char_p, [C.c_int]),
    "rocprofiler_force_configure": (C.c_int, [abi.ConfigureFunc]),
    "rocprofiler_create_context": (C.c_int, [C.POINTER(abi.Handle)]),
    "rocprofiler_start_context": (C.c_int, [abi.Handle]),
    "rocprofiler_stop_context": (C.c_int, [abi.Handle]),
    "rocprofiler_query_available_agents": (C.c_int, [C.c_int, abi.QueryAgentsCallback, C.c_size_t, C.c_void_p]),
    "rocprofiler_configure_callback_tracing_service": (
        C.c_int, [abi.Handle, C.c_int, C.POINTER(C.c_int32), C.c_size_t, abi.CallbackTracingCallback, C.c_void_p]),
    "rocprofiler_thread_trace_decoder_create": (C.c_int, [C.POINTER(abi.Handle), C.c_char_p]),
    "rocprofiler_thread_trace_decoder_destroy": (None, [abi.Handle]),
    "rocprofiler_thread_trace_decoder_codeobj_load": (
        C.c_int, [abi.Handle, C.c_uint64, C.c_uint64, C.c_uint64, C.c_void_p, C.c_uint64]),
    "rocprofiler_trace_decode": (C.c_int, [abi.Handle, abi.DecoderCallback, C.c_void_p, C.c_uint64, C.c_void_p]),
    "rocprofiler_thread_trace_decoder_info_string": (C.c_char_p, [abi.Handle, C.c_int]),
}


class RocprofilerSdk:
    """A loaded ``librocprofiler-sdk.so`` with its version and thread-trace ABI (:class:`abi.Release`)."""

    def __init__(self, path: str | Path, env: Optional[dict] = None):
        env = os.environ if env is None else env
        self.path = Path(path)
        try:
            self.lib = C.CDLL(str(self.path), mode=C.RTLD_GLOBAL)
        except OSError as exc:
            raise TracerUnavailable(f"cannot load {self.path}: {exc}. {FALLBACK_HINT}") from exc
        for name, (restype, argtypes) in _SIGNATURES.items():
            try:
                fn = getattr(self.lib, name)
            except AttributeError:
                raise TracerUnavailable(f"{self.path} does not export {name} "
                                        f"(rocprofiler-sdk older than 1.0?). {FALLBACK_HINT}") from None
            fn.restype, fn.argtypes = restype, argtypes
        major, minor, patch = C.c_uint32(), C.c_uint32(), C.c_uint32()
        self.check("rocprofiler_get_version", self.lib.rocprofiler_get_version(C.byref(major), C.byref(minor), C.byref(patch)))
        self.version = (major.value, minor.value, patch.value)
        self.release = abi.release_for(self.version, env.get(ABI_ENV) or None)
        if self.release.shader_callback is None:
            raise TracerUnavailable(f"rocprofiler-sdk {self.version_text} at {self.path}: "
                                    f"{self.release.note}. {FALLBACK_HINT}")
        self.dispatch_configure = self._dispatch_configure()

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version))

    def _dispatch_configure(self):
        fn = self.lib.rocprofiler_configure_dispatch_thread_trace_service
        fn.restype = C.c_int
        fn.argtypes = [abi.Handle, abi.Handle, C.POINTER(abi.ThreadTraceParameter), C.c_size_t, abi.DispatchCallback,
                       abi.SHADER_CALLBACKS[self.release.shader_callback], C.c_void_p]
        return fn

    def status_text(self, status: int) -> str:
        text = self.lib.rocprofiler_get_status_string(status)
        return text.decode() if text else "unknown status"

    def check(self, function: str, status: int) -> None:
        if status != abi.STATUS_SUCCESS:
            raise RocprofilerError(function, status, self.status_text(status))


def load_sdk(library: Optional[str | Path] = None, env: Optional[dict] = None) -> RocprofilerSdk:
    """Locate and load rocprofiler-sdk; raises TracerUnavailable naming every place looked in."""
    path, looked = locate(SDK_LIBRARY, library, env)
    if path is None:
        raise unavailable(SDK_LIBRARY, looked)
    return RocprofilerSdk(path, env)


# -- thread-trace parameters ---------------------------------------------------------------------

@dataclass(frozen=True)
class ThreadTraceParams:
    """What the hardware traces (rocprofv3 --att-* options; ranges from the thread-trace guide).

    ``target_cu``: the CU (0-15) of each traced shader engine whose waves get instruction detail.
    ``simd_select``: gfx9 bitmask of SIMDs (0x1-0xF). ``buffer_size``: bytes of trace buffer shared by
    all traced shader engines (1 MiB - 2 GiB). ``shader_engine_mask``: shader engines to trace.
    """

    target_cu: int = 1
    simd_select: int = 0xF
    buffer_size: int = 96 << 20
    shader_engine_mask: int = 0x1

    def __post_init__(self):
        for name, lo, hi in (("target_cu", 0, 15), ("simd_select", 0x1, 0xF),
                             ("buffer_size", 1 << 20, 2 << 30), ("shader_engine_mask", 1, 2 ** 32 - 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise ValueError(f"ThreadTraceParams.{name} must be an int in [{lo:#x}, {hi:#x}], got {value!r}")

    def as_array(self) -> C.Array:
        rows = ((abi.PARAM_TARGET_CU, self.target_cu), (abi.PARAM_SHADER_ENGINE_MASK, self.shader_engine_mask),
                (abi.PARAM_BUFFER_SIZE, self.buffer_size), (abi.PARAM_SIMD_SELECT, self.simd_select))
        return (abi.ThreadTraceParameter * len(rows))(*(abi.ThreadTraceParameter(t, v, 0) for t, v in rows))


# -- the session: registration, services, collection ----------------------------------------------

@dataclass(frozen=True)
class CodeObject:
    """A code object the runtime loaded while the session listened (bytes copied at load time)."""

    load_id: int
    load_base: int
    load_size: int
    data: bytes
    uri: str


class ThreadTraceSession:
    """This process as a rocprofiler-sdk tool that thread-traces the dispatches inside :meth:`tracing`."""

    def __init__(self, sdk: RocprofilerSdk, params: ThreadTraceParams = ThreadTraceParams(), client_name: str = "zyfa"):
        if not isinstance(params, ThreadTraceParams):
            raise TypeError(f"ThreadTraceSession: params must be ThreadTraceParams, got {type(params).__name__}")
        self.sdk, self.params = sdk, params
        self.client_name = client_name.encode()
        self.context = abi.Handle(0)  # thread trace
        self.code_context = abi.Handle(0)  # code-object load callbacks
        self.agents: list[int] = []
        self.code_objects: dict[int, CodeObject] = {}
        self.chunks: dict[int, list[bytes]] = {}  # shader engine -> data in arrival order
        self.flags: dict[int, int] = {}  # shader engine -> OR of shader-data flags seen
        self.dispatches: list[tuple[int, int]] = []  # (kernel_id, dispatch_id) traced
        self.errors: list[str] = []
        self.initialized = False
        self._armed = False
        self._param_array = params.as_array()
        self._result = abi.ToolConfigureResult(C.sizeof(abi.ToolConfigureResult), abi.ToolInitialize(self._initialize),
                                               abi.ToolFinalize(self._finalize), None)
        self._callbacks = (
            abi.ConfigureFunc(self._configure),
            abi.CallbackTracingCallback(self._code_object),
            abi.DispatchCallback(self._dispatch),
            abi.SHADER_CALLBACKS[sdk.release.shader_callback](getattr(self, "_shader_" + sdk.release.shader_callback)),
            abi.QueryAgentsCallback(self._agents),
        )

    # registration ----------------------------------------------------------------------------
    def register(self) -> "ThreadTraceSession":
        """``rocprofiler_force_configure``: the SDK calls back ``configure`` then ``initialize``."""
        _LIVE.append(self)
        status = self.sdk.lib.rocprofiler_force_configure(self._callbacks[0])
        if status != abi.STATUS_SUCCESS:
            raise TracerUnavailable(
                f"rocprofiler_force_configure failed with status {status} "
                f"({self.sdk.status_text(status)}). With rocprofiler-sdk {self.sdk.version_text} the tool must "
                "register before the HIP/HSA runtime initialises: create the session before any GPU work in "
                f"this process (README.md, 'Registration'). {FALLBACK_HINT}")
        self._raise_callback_errors()
        if not self.initialized:
            raise TracerUnavailable("rocprofiler-sdk accepted the tool but never called "
                                    f"its initialize function. {FALLBACK_HINT}")
        return self

    def _configure(self, version, runtime_version, priority, client_id):
        client_id.contents.name = self.client_name
        return C.addressof(self._result)

    def _initialize(self, finalize_func, tool_data) -> int:
        try:
            lib, check = self.sdk.lib, self.sdk.check
            # two contexts, as rocprofiler-sdk's thread_trace sample: code-object tracing and thread trace
            for ctx in (self.code_context, self.context):
                check("rocprofiler_create_context", lib.rocprofiler_create_context(C.byref(ctx)))
            check("rocprofiler_query_available_agents",
                  lib.rocprofiler_query_available_agents(abi.AGENT_INFO_VERSION_0, self._callbacks[4],
                                                         C.sizeof(abi.AgentPrefix), None))
            if not self.agents:
                raise TracerUnavailable(f"rocprofiler-sdk reports no GPU agent. {FALLBACK_HINT}")
            ops = (C.c_int32 * 1)(abi.CODE_OBJECT_LOAD)
            check("rocprofiler_configure_callback_tracing_service",
                  lib.rocprofiler_configure_callback_tracing_service(self.code_context,
                                                                     abi.CALLBACK_TRACING_CODE_OBJECT,
                                                                     ops, 1, self._callbacks[1], None))
            for agent in self.agents:
                check("rocprofiler_configure_dispatch_thread_trace_service",
                      self.sdk.dispatch_configure(self.context, abi.Handle(agent), self._param_array,
                                                  len(self._param_array), self._callbacks[2], self._callbacks[3], None))
            for ctx in (self.code_context, self.context):
                check("rocprofiler_start_context", lib.rocprofiler_start_context(ctx))
            self.initialized = True
            return 0
        except Exception as exc:  # noqa: BLE001 - must not cross the C boundary
            self.errors.append(f"initialize: {exc}")
            return -1

    def _finalize(self, tool_data) -> None:
        self._armed = False

    def _agents(self, version, agents, count, user_data) -> int:
        for i in range(count):
            agent = C.cast(agents[i], C.POINTER(abi.AgentPrefix)).contents
            if agent.type == abi.AGENT_TYPE_GPU:
                self.agents.append(agent.id.handle)
        return abi.STATUS_SUCCESS

    # callbacks from the SDK ------------------------------------------------------------------
    def _code_object(self, record, user_data, callback_data) -> None:
        try:
            if (record.kind, record.operation, record.phase) != (abi.CALLBACK_TRACING_CODE_OBJECT, abi.CODE_OBJECT_LOAD,
                                                                 abi.CALLBACK_PHASE_LOAD):
                return
            load = C.cast(record.payload, C.POINTER(abi.CodeObjectLoadData)).contents
            if load.storage_type == abi.STORAGE_TYPE_MEMORY:
                data = C.string_at(load.storage, load.memory_size)
            elif load.storage_type == abi.STORAGE_TYPE_FILE:
                fd = load.storage & 0xFFFFFFFF  # the union's int storage_file
                data = os.pread(fd, os.fstat(fd).st_size, 0)
            else:
                raise ValueError(f"code object {load.code_object_id}: unknown storage type {load.storage_type}")
            self.code_objects[load.code_object_id] = CodeObject(load.code_object_id, load.load_base, load.load_size,
                                                                data, (load.uri or b"").decode(errors="replace"))
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"code object callback: {exc}")

    def _dispatch(self, agent, queue, correlation, kernel_id, dispatch_id, userdata_config, userdata_shader) -> int:
        if not self._armed:
            return abi.CONTROL_NONE
        self.dispatches.append((kernel_id, dispatch_id))
        return abi.CONTROL_START_AND_STOP

    def _store(self, se: int, data, size: int, flags: int = 0) -> None:
        try:
            if size:
                self.chunks.setdefault(int(se), []).append(C.string_at(data, size))
            self.flags[int(se)] = self.flags.get(int(se), 0) | flags
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"shader data callback: {exc}")

    def _shader_args5(self, agent, se, data, size, userdata) -> None:
        self._store(se, data, size)

    def _shader_args6_flags(self, agent, se, data, size, flags, userdata) -> None:
        self._store(se, data, size, flags)

    def _shader_struct(self, args, userdata) -> None:
        self._store(args.shader_engine_id, (args.data or 0) + args.read_offset, args.data_size - args.read_offset, args.flags)

    # collection ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def tracing(self) -> Iterator["ThreadTraceSession"]:
        """Thread-trace every dispatch launched (and completed) inside the block."""
        if not self.initialized:
            raise RuntimeError("ThreadTraceSession.tracing: call register() first")
        self._armed = True
        try:
            yield self
        finally:
            self._armed = False
        self._raise_callback_errors()

    def shader_engine_data(self) -> dict[int, bytes]:
        """All collected bytes per shader engine (chunks joined in arrival order)."""
        self._raise_callback_errors()
        return {se: b"".join(parts) for se, parts in sorted(self.chunks.items())}

    def buffer_full(self) -> list[int]:
        """Shader engines whose trace was cut short (GPU or CPU buffer full flags; newer ABIs only)."""
        mask = abi.SHADER_DATA_FLAG_GPU_FULL | abi.SHADER_DATA_FLAG_CPU_FULL
        return sorted(se for se, f in self.flags.items() if f & mask)

    def _raise_callback_errors(self) -> None:
        if self.errors:
            errors, self.errors = self.errors, []
            raise RuntimeError("rocprofiler-sdk callback(s) failed: " + "; ".join(errors))


# -- disassembly of code objects -----------------------------------------------------------------

_OBJDUMP_LINE = re.compile(r"^\s+([a-z][a-z0-9_]*\b.*?)\s*//\s*([0-9A-Fa-f]+):")
_OBJDUMP_FUNC = re.compile(r"^([0-9a-fA-F]+)\s.*\sF\s+\.text\s+[0-9a-fA-F]+\s+(?:\.\w+\s+)?(\S+)\s*$")


def objdump_tool(env: Optional[dict] = None) -> str:
    """ROCm's llvm-objdump, else an LLVM >= 22 one on PATH (knows gfx950)."""
    env = os.environ if env is None else env
    roots = [Path(env["ROCM_PATH"])] if env.get("ROCM_PATH") else []
    for root in roots + [Path("/opt/rocm")]:
        exe = root / "llvm" / "bin" / "llvm-objdump"
        if exe.is_file():
            return str(exe)
    for name in ("llvm-objdump-22", "llvm-objdump"):
        if shutil.which(name):
            return name
    raise TracerUnavailable("no llvm-objdump to disassemble the traced code objects "
                            f"(looked in $ROCM_PATH/llvm/bin, /opt/rocm/llvm/bin, PATH). {FALLBACK_HINT}")


def _objdump(code_object: bytes, flag: str, env: Optional[dict]) -> str:
    if not isinstance(code_object, (bytes, bytearray)) or not code_object.startswith(b"\x7fELF"):
        raise ValueError("disassembly: code_object must be the bytes of an ELF file")
    with tempfile.NamedTemporaryFile(suffix=".co") as f:
        f.write(code_object)
        f.flush()
        result = subprocess.run([objdump_tool(env), flag, f.name], capture_output=True, text=True)
    if result.returncode != 0:
        raise ValueError(f"llvm-objdump {flag} failed on the code object: {result.stderr.strip()}")
    return result.stdout


def disassembly(code_object: bytes, env: Optional[dict] = None) -> dict[int, str]:
    """``{ELF vaddr: instruction text}`` of every instruction of an AMDGPU code object."""
    text = _objdump(code_object, "-d", env)
    return {int(m.group(2), 16): m.group(1).strip() for m in map(_OBJDUMP_LINE.match, text.splitlines()) if m}


def kernel_entries(code_object: bytes, env: Optional[dict] = None) -> dict[int, str]:
    """``{ELF vaddr: name}`` of the function (kernel) symbols in ``.text``."""
    text = _objdump(code_object, "-t", env)
    return {int(m.group(1), 16): m.group(2) for m in map(_OBJDUMP_FUNC.match, text.splitlines()) if m}


# -- the decoder ---------------------------------------------------------------------------------

class TraceDecoder:
    """rocprof-trace-decoder through the SDK wrapper; :meth:`decode` gives :class:`AttWave` per shader engine."""

    def __init__(self, sdk: RocprofilerSdk, decoder_dir: Optional[str | Path] = None, env: Optional[dict] = None):
        self.sdk = sdk
        if decoder_dir is None:
            path, looked = locate(DECODER_LIBRARY, None, env)
            if path is None:
                raise unavailable(DECODER_LIBRARY, looked)
            decoder_dir = path.parent
        self.handle = abi.Handle(0)
        status = sdk.lib.rocprofiler_thread_trace_decoder_create(C.byref(self.handle), str(decoder_dir).encode())
        if status != abi.STATUS_SUCCESS:
            raise TracerUnavailable(f"rocprofiler_thread_trace_decoder_create({decoder_dir}) "
                                    f"failed: status {status} ({sdk.status_text(status)}); {DECODER_LIBRARY} is a "
                                    f"separate download for ROCm < 7.13. {FALLBACK_HINT}")
        self.isa: dict[tuple[int, int], str] = {}  # (load id, vaddr) -> text
        self.entries: dict[int, list[int]] = {}  # load id -> sorted kernel entry vaddrs
        self.infos: list[str] = []
        self.gfxip: Optional[int] = None
        self.occupancy_starts = 0
        self.clock_pairs: list[tuple[int, int]] = []  # (shader clock, realtime clock)
        self.realtime_hz: Optional[int] = None

    def load_code_object(self, code: CodeObject, env: Optional[dict] = None) -> None:
        buf = C.create_string_buffer(code.data, len(code.data))
        self.sdk.check("rocprofiler_thread_trace_decoder_codeobj_load",
                       self.sdk.lib.rocprofiler_thread_trace_decoder_codeobj_load(
                           self.handle, code.load_id, code.load_base, code.load_size, buf, len(code.data)))
        self.isa.update({(code.load_id, vaddr): text for vaddr, text in disassembly(code.data, env).items()})
        self.entries[code.load_id] = sorted(kernel_entries(code.data, env))

    def decode(self, shader_engine: int, data: bytes) -> list[AttWave]:
        """Decode one shader engine's capture (the decoder wants one SE per call)."""
        waves: list[AttWave] = []
        errors: list[str] = []

        def on_record(kind, events, count, userdata):
            try:
                if kind == abi.RECORD_GFXIP:
                    self.gfxip = events or 0  # the pointer value is the gfxip major
                elif kind == abi.RECORD_INFO:
                    infos = C.cast(events, C.POINTER(C.c_int))
                    self.infos += [self._info(infos[i]) for i in range(count)]
                elif kind == abi.RECORD_OCCUPANCY:
                    occ = C.cast(events, C.POINTER(abi.DecoderOccupancy))
                    self.occupancy_starts += sum(occ[i].start for i in range(count))
                elif kind == abi.RECORD_RT_FREQUENCY:
                    self.realtime_hz = C.cast(events, C.POINTER(C.c_uint64))[0]
                elif kind == abi.RECORD_REALTIME:
                    rt = C.cast(events, C.POINTER(abi.DecoderRealtime))
                    self.clock_pairs += [(rt[i].shader_clock, rt[i].realtime_clock) for i in range(count)]
                elif kind == abi.RECORD_WAVE:
                    arr = C.cast(events, C.POINTER(abi.DecoderWave))
                    waves.extend(self._wave(shader_engine, arr[i]) for i in range(count))
            except Exception as exc:  # noqa: BLE001
                errors.append(str(exc))

        callback = abi.DecoderCallback(on_record)
        buf = C.create_string_buffer(data, len(data))
        self.sdk.check("rocprofiler_trace_decode",
                       self.sdk.lib.rocprofiler_trace_decode(self.handle, callback, buf, len(data), None))
        if errors:
            raise RuntimeError("decoder callback failed: " + "; ".join(errors))
        return waves

    def clock_mhz(self) -> Optional[float]:
        """Shader clock over the capture, from the decoder's clock pairs (trace_decoder_types.h:
        ``delta(shader_clock) / delta(realtime_clock / RT_FREQUENCY)``, first to last pair); None
        without two pairs and the realtime frequency (decoder < 0.1.3, or ROCm < 7.1 aqlprofile)."""
        pairs = sorted(set(self.clock_pairs), key=lambda p: p[1])
        if not self.realtime_hz or len(pairs) < 2 or pairs[-1][1] == pairs[0][1]:
            return None
        seconds = (pairs[-1][1] - pairs[0][1]) / self.realtime_hz
        return (pairs[-1][0] - pairs[0][0]) / seconds / 1e6

    def _info(self, code: int) -> str:
        text = self.sdk.lib.rocprofiler_thread_trace_decoder_info_string(self.handle, code)
        return text.decode() if text else abi.INFO_NAMES.get(code, f"info {code}")

    def _wave(self, se: int, wave: abi.DecoderWave) -> AttWave:
        insts = []
        for j in range(wave.instructions_size):
            inst = wave.instructions_array[j]
            key = (inst.pc.marker_id, inst.pc.addr)
            placed = inst.pc.marker_id != 0 and key in self.isa
            insts.append(AttInstruction(time=inst.time, category=inst.category, stall=inst.stall,
                                        duration=inst.duration, vaddr=inst.pc.addr if placed else None,
                                        isa=self.isa[key] if placed else None,
                                        entry=entry_of(self.entries, inst.pc.marker_id, inst.pc.addr) if placed else None))
        return AttWave(se=se, cu=wave.cu, simd=wave.simd, slot=wave.wave_id, begin=wave.begin_time,
                       end=wave.end_time, instructions=tuple(insts))

    def close(self) -> None:
        if self.handle.handle:
            self.sdk.lib.rocprofiler_thread_trace_decoder_destroy(self.handle)
            self.handle = abi.Handle(0)
