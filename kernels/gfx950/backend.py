"""Backend ``"gfx950"``: launch the generated code objects on ROCm torch tensors through HIP (ctypes).

Path of one call: validate the inputs (dtype, head dims, strides, 16-byte alignment) ->
build V^T (keys padded with zeros to a multiple of 128) and the per-(batch, kv head) constants
-> pack the 128-byte kernel-argument struct (:mod:`zyfa.kernels.gfx950.kernargs`) -> launch
with ``hipModuleLaunchKernel`` and the packed buffer (``HIP_LAUNCH_PARAM_BUFFER_POINTER``) on the
current torch stream. The code object is loaded once per kernel with ``hipModuleLoadData``.

Tested here only against a C shim exporting the same HIP symbols (no MI355X in this project).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from dataclasses import dataclass
from typing import Optional

import torch

from zyfa.backends import AttentionArgs, Backend, register_backend
from zyfa.kernels.gfx950 import build_for, config_for, grid
from zyfa.kernels.gfx950 import kernargs as ka
from zyfa.kernels.gfx950.schedule import WAVES
from zyfa.shapes import AttnShape

LOG2E = 1.4426950408889634
HIP_LAUNCH_PARAM_BUFFER_POINTER = 0x01
HIP_LAUNCH_PARAM_BUFFER_SIZE = 0x02
HIP_LAUNCH_PARAM_END = 0x03
# fp8: the kernel whose bits are recipe zyfa-v1 (zyfa-fp8 is the folded recipe, docs/numerics.md);
# KERNEL_FOR_RECIPE picks the FP8 kernel by the call's recipe
KERNEL_FOR_DTYPE = {torch.float8_e4m3fn: "zyfa-fp8-v1", torch.bfloat16: "zyfa-bf16"}
# recipe (docs/numerics.md) -> generated kernel; "zyfa-folded" is zyfa-fp8, the kernel the cycle
# model's headline times (Lean P folded into the QK MFMA, query blocks paired on large grids)
KERNEL_FOR_RECIPE = {"zyfa-v1": "zyfa-fp8-v1", "zyfa-v2": "zyfa-fp8-v2", "zyfa-folded": "zyfa-fp8"}


class HipError(RuntimeError):
    """A HIP runtime call failed; the message names the call and HIP's error string."""


class HipRuntime:
    """The four HIP entry points the launcher needs, from ``libamdhip64`` (or a test shim)."""

    def __init__(self, library: Optional[str] = None):
        path = library or ctypes.util.find_library("amdhip64") or "libamdhip64.so"
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as err:
            raise HipError(f"cannot load the HIP runtime {path!r} ({err}); install ROCm or pass library=") from None
        vp, u = ctypes.c_void_p, ctypes.c_uint
        self.lib.hipModuleLoadData.argtypes = [ctypes.POINTER(vp), vp]
        self.lib.hipModuleGetFunction.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_char_p]
        self.lib.hipModuleLaunchKernel.argtypes = [vp, u, u, u, u, u, u, u, vp, ctypes.POINTER(vp), ctypes.POINTER(vp)]
        self.lib.hipGetErrorString.argtypes = [ctypes.c_int]
        self.lib.hipGetErrorString.restype = ctypes.c_char_p
        for name in ("hipModuleLoadData", "hipModuleGetFunction", "hipModuleLaunchKernel"):
            getattr(self.lib, name).restype = ctypes.c_int

    def _check(self, call: str, status: int) -> None:
        if status != 0:
            text = self.lib.hipGetErrorString(status)
            raise HipError(f"{call} failed with HIP error {status}: {text.decode() if text else 'unknown'}")

    def load_module(self, image: bytes) -> tuple[ctypes.c_void_p, ctypes.Array]:
        """Module handle for a code-object image (the image buffer is returned to keep it alive)."""
        if not isinstance(image, (bytes, bytearray)) or image[:4] != b"\x7fELF":
            raise ValueError("image must be the bytes of an ELF code object")
        buf = ctypes.create_string_buffer(bytes(image), len(image))
        module = ctypes.c_void_p()
        self._check("hipModuleLoadData", self.lib.hipModuleLoadData(ctypes.byref(module), buf))
        return module, buf

    def get_function(self, module: ctypes.c_void_p, symbol: str) -> ctypes.c_void_p:
        function = ctypes.c_void_p()
        self._check("hipModuleGetFunction", self.lib.hipModuleGetFunction(ctypes.byref(function), module, symbol.encode()))
        return function

    def launch(self, function: ctypes.c_void_p, grid: tuple[int, int, int], block: int, args: bytes,
               stream: int = 0) -> None:
        """hipModuleLaunchKernel with the kernel arguments as one packed buffer."""
        for name, value in (("grid", grid), ("block", (block,))):
            if any(not isinstance(x, int) or x <= 0 for x in value):
                raise ValueError(f"{name} must be positive ints, got {value!r}")
        buf = ctypes.create_string_buffer(bytes(args), len(args))
        size = ctypes.c_size_t(len(args))
        extra = (ctypes.c_void_p * 5)(HIP_LAUNCH_PARAM_BUFFER_POINTER, ctypes.cast(buf, ctypes.c_void_p),
                                      HIP_LAUNCH_PARAM_BUFFER_SIZE, ctypes.cast(ctypes.pointer(size), ctypes.c_void_p),
                                      HIP_LAUNCH_PARAM_END)
        status = self.lib.hipModuleLaunchKernel(function, *grid, block, 1, 1, 0, ctypes.c_void_p(stream), None, extra)
        self._check("hipModuleLaunchKernel", status)


# -- launch plan (pure: no device needed) ------------------------------------------------------------------
@dataclass(frozen=True)
class LaunchPlan:
    """Everything one launch needs, derived from validated tensors."""

    kernel: str
    shape: AttnShape
    grid: tuple[int, int, int]
    block: int
    kernargs: bytes
    out: torch.Tensor
    lse: torch.Tensor
    keepalive: tuple  # V^T and the head constants, which must outlive the launch


def _check_layout(name: str, x: torch.Tensor) -> None:
    if x.stride(-1) != 1:
        raise ValueError(f"{name} must have a contiguous last dimension, got strides {tuple(x.stride())}")
    row_bytes = [s * x.element_size() for s in x.stride()[:-1]]
    if x.data_ptr() % 16 or any(b % 16 for b in row_bytes):
        raise ValueError(f"{name} must be 16-byte aligned with row strides a multiple of 16 bytes "
                         f"(data_ptr % 16 = {x.data_ptr() % 16}, byte strides {row_bytes}); call .contiguous()")


def unsupported_reason(args: AttentionArgs, check_device: bool = True) -> Optional[str]:
    """Why the gfx950 kernels cannot run these inputs, or None."""
    if check_device:
        if getattr(torch.version, "hip", None) is None:
            return "needs a ROCm build of PyTorch (torch.version.hip is None)"
        if args.q.device.type != "cuda":
            return f"needs tensors on a ROCm device, got {args.q.device}"
        arch = torch.cuda.get_device_properties(args.q.device).gcnArchName
        if not arch.startswith("gfx950"):
            return f"the generated kernels are gfx950 (MI350X/MI355X) code; this device is {arch}"
    if args.q.dtype not in KERNEL_FOR_DTYPE:
        return f"dtype {args.q.dtype} not supported (float8_e4m3fn or bfloat16)"
    if args.headdim_v != 128 or args.headdim not in ((128, 192) if args.is_fp8 else (128,)):
        return (f"head dims {args.headdim}/{args.headdim_v} not generated (fp8: 128/128 or MLA 192/128; "
                "bf16: 128/128)")
    if args.is_local or args.softcap or args.alibi_slopes is not None:
        return "sliding windows, softcap and ALiBi are not implemented in the gfx950 kernels"
    if args.seqlen_q == 0 or args.seqlen_k == 0:
        return "empty sequences"
    return None


def head_constants(args: AttentionArgs) -> torch.Tensor:
    """(batch, heads_k, 4) float32 [t, 8t, dv, 0] with t = fp32(fp32(scale*LOG2E) * fp32(dq*dk))."""
    b, hk, dev = args.batch, args.nheads_k, args.q.device
    base = torch.tensor(args.softmax_scale, dtype=torch.float32) * torch.tensor(LOG2E, dtype=torch.float32)
    ones = torch.ones(b, hk, dtype=torch.float32, device=dev)
    if args.is_fp8:
        dq = args.q_descale if args.q_descale is not None else ones
        dk = args.k_descale if args.k_descale is not None else ones
        dv = args.v_descale if args.v_descale is not None else ones
        t = base.to(dev) * (dq * dk)
    else:
        t, dv = base.to(dev) * ones, ones
    return torch.stack([t, 8 * t, dv, torch.zeros_like(t)], dim=-1).contiguous()


def plan_launch(args: AttentionArgs) -> LaunchPlan:
    """Validate layouts and build the kernel arguments (device independent; the launch needs HIP)."""
    reason = unsupported_reason(args, check_device=False)
    if reason is not None:
        raise ValueError(f"gfx950 backend: {reason}")
    q, k, v = args.q, args.k, args.v
    for name, x in (("q", q), ("k", k), ("v", v)):
        _check_layout(name, x)
    shape = AttnShape(batch=args.batch, heads=args.nheads, heads_k=args.nheads_k, seqlen_q=args.seqlen_q,
                      seqlen_k=args.seqlen_k, headdim=args.headdim, headdim_v=args.headdim_v, causal=args.causal,
                      dtype="fp8" if args.is_fp8 else "bf16")
    pad = ka.sk_pad(args.seqlen_k)
    vt = torch.zeros(args.batch, args.nheads_k, args.headdim_v, pad, dtype=v.dtype, device=v.device)
    vt[..., :args.seqlen_k] = v.permute(0, 2, 3, 1)
    hconst = head_constants(args)
    out = torch.empty(args.batch, args.seqlen_q, args.nheads, args.headdim_v, dtype=torch.bfloat16, device=q.device)
    lse = torch.empty(args.batch, args.nheads, args.seqlen_q, dtype=torch.float32, device=q.device)
    e = q.element_size()
    strides = {
        "q_stride_s": q.stride(1) * e, "q_stride_h": q.stride(2) * e, "q_stride_b": q.stride(0) * e,
        "k_stride_s": k.stride(1) * e, "k_stride_h": k.stride(2) * e, "k_stride_b": k.stride(0) * e,
    }
    addresses = {"q": q.data_ptr(), "k": k.data_ptr(), "vt": vt.data_ptr(), "o": out.data_ptr(),
                 "lse": lse.data_ptr(), "hconst": hconst.data_ptr()}
    kernel = KERNEL_FOR_RECIPE[args.recipe] if args.is_fp8 else KERNEL_FOR_DTYPE[q.dtype]
    # one decision for the kernel argument and the grid: a kernel built with pair_query_blocks runs
    # blocks x and blocks-1-x in workgroup x only where both say so (kernargs.paired)
    config = config_for(kernel, shape)
    pair = config.pair_query_blocks and ka.paired(shape)
    packed = ka.pack(shape, addresses, strides, pair=pair)
    return LaunchPlan(kernel, shape, grid(shape, config, pair=pair), WAVES * 64, packed, out, lse, (vt, hconst))


class Launcher:
    """Loads each kernel's code object once and launches plans."""

    def __init__(self, runtime: HipRuntime):
        self.runtime = runtime
        self._functions: dict = {}

    def function(self, kernel: str, shape: AttnShape):
        built = build_for(kernel, shape)
        key = (kernel, built.code_object)
        if key not in self._functions:
            module, image = self.runtime.load_module(built.code_object.read_bytes())
            self._functions[key] = (self.runtime.get_function(module, built.symbol), module, image)
        return self._functions[key][0]

    def run(self, plan: LaunchPlan, stream: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        function = self.function(plan.kernel, plan.shape)
        self.runtime.launch(function, plan.grid, plan.block, plan.kernargs, stream)
        return plan.out, plan.lse


@functools.lru_cache(maxsize=1)
def _default_launcher() -> Launcher:
    return Launcher(HipRuntime())


def forward(args: AttentionArgs) -> tuple[torch.Tensor, torch.Tensor]:
    plan = plan_launch(args)
    stream = torch.cuda.current_stream(args.q.device).cuda_stream
    out, lse = _default_launcher().run(plan, stream)
    return out.to(args.q.dtype) if not args.is_fp8 else out, lse


register_backend(Backend(
    name="gfx950",
    forward=forward,
    unsupported=unsupported_reason,
    # Opt-in (backend="gfx950") until it has run on an MI355X: below every other backend, so
    # "auto" never picks kernels that were only verified in the functional emulator.
    priority=-10,
    description="generated gfx950 assembly (zyfa-fp8-v1 / zyfa-fp8-v2 / zyfa-fp8 by recipe, zyfa-bf16) launched through HIP; "
                "MI350X/MI355X only",
    recipes=tuple(KERNEL_FOR_RECIPE),
))
