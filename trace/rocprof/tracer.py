"""Hardware thread trace of one of our kernels on an MI3xx (``zyfa.trace.rocprof.tracer``).

:func:`run_kernel_trace` is the ``rocprof`` backend of ``zyfa-trace kernel``. It needs, in this
process: ``librocprofiler-sdk.so`` (>= 1.0, ROCm 7.0), ``librocprof-trace-decoder.so`` and
``libamdhip64.so``; when any is missing it raises :class:`TracerUnavailable` naming everything it
looked for, before doing any work. On a GPU machine it:

1. registers the process as a rocprofiler-sdk tool (``rocprofiler_force_configure``) *before* HIP
   initialises (README.md, "Registration");
2. builds the kernel's code object (``KernelSpec.build``; assembly text is assembled with LLVM);
3. loads it with ``hipModuleLoadData``, allocates one zero-filled device buffer for every
   ``global_buffer`` kernel argument (sized for the largest Q/K/V/O tensor of the shape, in fp32),
   patches their addresses into ``KernelSpec.kernargs(shape)`` at the offsets the code object's
   metadata gives, and launches once with ``hipModuleLaunchKernel`` while thread trace is armed;
4. decodes each shader engine's data (region and iteration filled from the kernel's schedule
   clusters or labels, as the cycle model does), writes ``<kernel>_se<N>.att`` (raw SQTT, re-decodable) and
   the code object beside the trace, and returns the trace (also saved as ``<out_dir>/<kernel>``).

Inputs are zeros: fine for instruction identity and the static schedule, but data-dependent clock
behaviour (operand toggling, see the design notes) is not reproduced.
"""

from __future__ import annotations

import ctypes as C
import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

from zyfa.gfx950.isa import disassemble
from zyfa.kernels.registry import KernelSpec, get_kernel
from zyfa.shapes import AttnShape
from zyfa.trace.errors import TracerUnavailable
from zyfa.trace.rocprof.records import RegionMap, annotate, wave_records
from zyfa.trace.rocprof.sdk import (DECODER_LIBRARY, FALLBACK_HINT, SDK_LIBRARY, ThreadTraceParams,
                                    ThreadTraceSession, TraceDecoder, load_sdk, locate)
from zyfa.trace.rocprof.timing import model_mfma_cycles
from zyfa.trace.schema import Trace, TraceMeta

HIP_LIBRARY = "libamdhip64.so"
# hip_runtime_api.h: HIP_LAUNCH_PARAM_BUFFER_POINTER / _BUFFER_SIZE / _END
LAUNCH_BUFFER_POINTER, LAUNCH_BUFFER_SIZE, LAUNCH_END = 1, 2, 3


def check_available(library=None, decoder_dir=None, hip_library=None, env: Optional[dict] = None) -> None:
    """Raise TracerUnavailable listing every missing library and where it was looked for."""
    missing = []
    for name, explicit in ((SDK_LIBRARY, library), (HIP_LIBRARY, hip_library),
                           (DECODER_LIBRARY, None if decoder_dir is None else Path(decoder_dir) / DECODER_LIBRARY)):
        path, looked = locate(name, explicit, env)
        if path is None:
            missing.append(f"{name} (looked in: {', '.join(looked)})")
    if missing:
        raise TracerUnavailable("rocprofiler thread trace needs an MI3xx GPU with ROCm >= 7.0; not found: "
                                + "; ".join(missing) + ". " + FALLBACK_HINT)


# -- HIP through ctypes --------------------------------------------------------------------------

class _Hip:
    """The few HIP module-API calls a launch needs; every error names the call and hipGetErrorString."""

    def __init__(self, path: Path):
        self.lib = C.CDLL(str(path))
        self.lib.hipGetErrorString.restype = C.c_char_p
        self.lib.hipModuleLaunchKernel.argtypes = [C.c_void_p] + [C.c_uint] * 7 + [C.c_void_p, C.c_void_p,
                                                                                   C.POINTER(C.c_void_p)]

    def __call__(self, name: str, *args) -> None:
        status = getattr(self.lib, name)(*args)
        if status != 0:
            raise RuntimeError(f"{name} failed: hipError {status} ({self.lib.hipGetErrorString(status).decode()})")


SEQ_PAD = 256  # kernels pad key/query blocks up to 256 rows (gfx950 generator: 256-row workgroups, 128-key tiles)


def _buffer_bytes(shape: AttnShape) -> int:
    """Upper bound for every pointer argument: the largest Q/K/V/O/LSE tensor of ``shape`` in fp32,
    with sequence lengths rounded up to :data:`SEQ_PAD` (padded V^T and per-head constants fit too)."""
    seq = -(-max(shape.seqlen_q, shape.seqlen_k) // SEQ_PAD) * SEQ_PAD
    return 4 * shape.batch * seq * max(shape.heads, shape.heads_k) * max(shape.headdim, shape.headdim_v)


def _launch(hip: _Hip, image: bytes, symbol: str, kernargs: bytes, pointer_offsets: list[int],
            grid: tuple[int, int, int], block: int, buffer_bytes: int) -> None:
    hip("hipInit", 0)
    module, function = C.c_void_p(), C.c_void_p()
    hip("hipModuleLoadData", C.byref(module), C.c_char_p(image))
    hip("hipModuleGetFunction", C.byref(function), module, symbol.encode())
    args = bytearray(kernargs)
    buffers = []
    for offset in pointer_offsets:
        ptr = C.c_void_p()
        hip("hipMalloc", C.byref(ptr), C.c_size_t(buffer_bytes))
        hip("hipMemset", ptr, 0, C.c_size_t(buffer_bytes))
        buffers.append(ptr)
        args[offset:offset + 8] = (ptr.value or 0).to_bytes(8, "little")
    arg_buf = (C.c_char * len(args)).from_buffer(args)
    size = C.c_size_t(len(args))
    extra = (C.c_void_p * 5)(LAUNCH_BUFFER_POINTER, C.addressof(arg_buf), LAUNCH_BUFFER_SIZE, C.addressof(size),
                             LAUNCH_END)
    hip("hipModuleLaunchKernel", function, *grid, block, 1, 1, 0, None, None, extra)
    hip("hipDeviceSynchronize")
    for ptr in buffers:
        hip("hipFree", ptr)
    hip("hipModuleUnload", module)


# -- building the code object --------------------------------------------------------------------

def _assemble(asm: str, out: Path, env: dict) -> Path:
    roots = [Path(env["ROCM_PATH"])] if env.get("ROCM_PATH") else []
    tools = [(str(r / "llvm/bin/llvm-mc"), str(r / "llvm/bin/ld.lld")) for r in roots + [Path("/opt/rocm")]]
    tools.append(("llvm-mc-22", "ld.lld-22"))
    for mc, lld in tools:
        if shutil.which(mc) and shutil.which(lld):
            obj = out.with_suffix(".o")
            for cmd in ([mc, "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx950", "-filetype=obj", "-o", str(obj), "-"],
                        [lld, "-shared", "-o", str(out), str(obj)]):
                proc = subprocess.run(cmd, input=asm if cmd[0] == mc else None, capture_output=True, text=True)
                if proc.returncode != 0:
                    raise ValueError(f"{Path(cmd[0]).name} failed on the kernel assembly: {proc.stderr.strip()[:2000]}")
            return out
    raise TracerUnavailable(f"no llvm-mc/ld.lld to assemble the kernel. {FALLBACK_HINT}")


def _resolve(kernel):
    if isinstance(kernel, KernelSpec):
        return kernel
    if not isinstance(kernel, str) or not kernel:
        raise TypeError(f"run_kernel_trace: kernel must be a registered kernel name or a KernelSpec, got {kernel!r}")
    return get_kernel(kernel)


# -- the tracer ----------------------------------------------------------------------------------

def run_kernel_trace(kernel, shape: AttnShape, out_dir, *, params: Optional[ThreadTraceParams] = None,
                     library=None, decoder_dir=None, hip_library=None, env: Optional[dict] = None) -> Trace:
    """Thread-trace one launch of ``kernel`` for ``shape`` on this machine's GPU.

    Args:
        kernel: a registered kernel name (``zyfa.kernels.registry``) or a ``KernelSpec``.
        shape: the problem (:class:`zyfa.shapes.AttnShape`); sizes the grid, kernargs and buffers.
        out_dir: folder for ``<kernel>.parquet/.json``, the raw ``<kernel>_se<N>.att`` files and the code object.
        params: thread-trace parameters (default :class:`ThreadTraceParams`: CU 1 of SE 0, all SIMDs).
        library, decoder_dir, hip_library: explicit locations (default: ``$ROCM_PATH/lib``,
            ``/opt/rocm/lib``, the ldconfig cache).

    Returns:
        The hardware trace (``source="rocprof-att"``, cycles in shader clocks; ``clock_mhz`` from the
        decoder's shader/realtime clock pairs when it reports them, else None).

    Raises:
        TracerUnavailable: no rocprofiler-sdk >= 1.0 / trace decoder / HIP here, or the process is
            past the point where it can register as a tool. Use the cycle model instead.
        TypeError, ValueError: bad arguments (checked before anything else).
        RuntimeError: the launch or decoding failed, or no wave ran on the traced CU.
    """
    if not isinstance(shape, AttnShape):
        raise TypeError(f"run_kernel_trace: shape must be a zyfa.shapes.AttnShape, got {type(shape).__name__}")
    if not isinstance(out_dir, (str, Path)):
        raise TypeError(f"run_kernel_trace: out_dir must be a str or Path, got {type(out_dir).__name__}")
    if isinstance(kernel, str) and (kernel.startswith("aiter:") or Path(kernel).suffix in (".co", ".hsaco", ".s")):
        raise ValueError(f"run_kernel_trace: kernel {kernel!r}: the rocprof tracer launches registered kernels only "
                         "(it allocates the buffers their kernel-argument metadata names); trace AITER or other code "
                         "objects with rocprofv3 --att around their own launcher, then zyfa-trace import-att")
    params = ThreadTraceParams() if params is None else params
    if not isinstance(params, ThreadTraceParams):
        raise TypeError(f"run_kernel_trace: params must be ThreadTraceParams, got {type(params).__name__}")
    env = dict(os.environ) if env is None else env
    check_available(library, decoder_dir, hip_library, env)

    sdk = load_sdk(library, env)
    session = ThreadTraceSession(sdk, params).register()  # before HIP initialises
    spec = _resolve(kernel)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    build = spec.build(shape)
    co_path = Path(build.code_object) if build.code_object else _assemble(build.asm, out / f"{spec.name}.co", env)
    program = disassemble(co_path, build.symbol)
    pointers = [a.offset for a in program.descriptor.args if a.value_kind == "global_buffer"]
    hip = _Hip(locate(HIP_LIBRARY, hip_library, env)[0])
    grid = tuple(spec.grid(shape))
    with session.tracing():
        _launch(hip, co_path.read_bytes(), program.name, spec.kernargs(shape), pointers, grid,
                spec.workgroup_size, _buffer_bytes(shape))
    if not session.dispatches:
        raise RuntimeError("rocprof tracer: the launch produced no traced dispatch (was the kernel dispatched?)")

    decoder = TraceDecoder(sdk, decoder_dir, env)
    try:
        for code in session.code_objects.values():
            decoder.load_code_object(code, env)
        waves = []
        for se, data in session.shader_engine_data().items():
            (out / f"{spec.name}_se{se}.att").write_bytes(data)
            waves += decoder.decode(se, data)
    finally:
        decoder.close()
    if not waves:
        raise RuntimeError(f"rocprof tracer: no wave of {spec.name} ran on traced CU {params.target_cu} "
                           f"(shader-engine mask {params.shader_engine_mask:#x}); launch more workgroups or pick "
                           "another target_cu / a wider mask")
    records, stats = wave_records(waves, model_mfma_cycles())
    annotate(records, RegionMap.from_build(build))
    meta = TraceMeta(
        kernel=spec.name, arch=spec.arch, source="rocprof-att", clock_mhz=decoder.clock_mhz(),
        shape=dataclasses.asdict(shape), grid=grid,
        workgroup_size=spec.workgroup_size, simulated=False,
        provenance={"command": " ".join(sys.argv), "rocprofiler_sdk": sdk.version_text, "sdk_path": str(sdk.path),
                    "shader_callback_abi": sdk.release.shader_callback, "code_object": str(co_path)},
        extra={"thread_trace": dataclasses.asdict(params), "dispatches": session.dispatches,
               "waves": stats["waves"], "unmapped_records": stats["unmapped"], "mfma_end": stats["mfma_end"],
               "decoder_info": decoder.infos, "buffer_full_shader_engines": session.buffer_full(),
               "inputs": "zero-filled device buffers", "pc": stats["pc"],
               "end": "issue completion (gfx9 thread trace times issue, not execution)"},
    )
    trace = Trace.from_records(records, meta)
    trace.save(out / spec.name)
    return trace
