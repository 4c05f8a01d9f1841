"""The HIP launcher against a C shim (gcc) that exports the same HIP symbols and records the launch.

No MI355X exists here: this proves the ctypes calling sequence, the packed argument buffer and
the error paths, not the kernel on hardware.
"""

import ctypes
import shutil
import subprocess

import pytest
import torch

from zyfa.backends import AttentionArgs
from zyfa.kernels.gfx950 import kernargs as ka
from zyfa.kernels.gfx950.backend import (HipError, HipRuntime, Launcher, head_constants, plan_launch,
                                         unsupported_reason)

SHIM = r"""
#include <stdint.h>
#include <stddef.h>
#include <string.h>
static unsigned char args_[4096];
static size_t size_;
static unsigned dims_[7];
static void *stream_;
static char name_[256];
static int loads_, launches_;
#define MODULE ((void *)0x1000)
#define FUNCTION ((void *)0x2000)
int hipModuleLoadData(void **module, const void *image) {
    const unsigned char *p = image;
    uint16_t machine;
    if (!module || !p || memcmp(p, "\x7f" "ELF", 4) != 0) return 1;      /* hipErrorInvalidValue */
    memcpy(&machine, p + 18, 2);
    if (machine != 224) return 200;                                       /* EM_AMDGPU, else hipErrorInvalidImage */
    *module = MODULE; loads_++; return 0;
}
int hipModuleGetFunction(void **function, void *module, const char *name) {
    if (module != MODULE) return 400;                                     /* hipErrorInvalidHandle */
    strncpy(name_, name, sizeof name_ - 1); *function = FUNCTION; return 0;
}
int hipModuleLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
    size_t size;
    if (f != FUNCTION) return 400;
    if (params != NULL || extra == NULL) return 1;
    if (extra[0] != (void *)1 || extra[2] != (void *)2 || extra[4] != (void *)3) return 1;
    size = *(size_t *)extra[3];
    if (size == 0 || size > sizeof args_) return 1;
    memcpy(args_, extra[1], size); size_ = size;
    dims_[0] = gx; dims_[1] = gy; dims_[2] = gz; dims_[3] = bx; dims_[4] = by; dims_[5] = bz; dims_[6] = shared;
    stream_ = stream; launches_++; return 0;
}
const char *hipGetErrorString(int e) {
    return e == 1 ? "hipErrorInvalidValue" : e == 200 ? "hipErrorInvalidImage" : e == 400 ? "hipErrorInvalidHandle" : "?";
}
size_t shim_args(unsigned char *out) { memcpy(out, args_, size_); return size_; }
void shim_dims(unsigned *out) { memcpy(out, dims_, sizeof dims_); }
void *shim_stream(void) { return stream_; }
const char *shim_name(void) { return name_; }
int shim_loads(void) { return loads_; }
int shim_launches(void) { return launches_; }
"""


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not installed: the HIP shim cannot be built")
    if not (shutil.which("llvm-mc-22") and shutil.which("ld.lld-22")):
        pytest.skip("llvm-mc-22/ld.lld-22 not installed: no code object to load")
    d = tmp_path_factory.mktemp("hipshim")
    (d / "shim.c").write_text(SHIM)
    lib = d / "libhipshim.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", str(d / "shim.c"), "-o", str(lib)], check=True)
    c = ctypes.CDLL(str(lib))
    c.shim_args.restype = ctypes.c_size_t
    c.shim_stream.restype = ctypes.c_void_p
    c.shim_name.restype = ctypes.c_char_p
    return str(lib), c


def _args(q, k, v, causal=True, recipe="zyfa-v1", **kw):
    return AttentionArgs(q=q, k=k, v=v, softmax_scale=q.shape[-1] ** -0.5, causal=causal, window_size=(-1, -1),
                         softcap=0.0, alibi_slopes=None, q_descale=kw.get("dq"), k_descale=kw.get("dk"),
                         v_descale=kw.get("dv"), recipe=recipe)


def _fp8(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(torch.float8_e4m3fn)


def test_launch_records_exact_argument_buffer(shim):
    path, c = shim
    b, sq, sk, h, hk, d = 2, 300, 520, 4, 2, 128
    q, k, v = _fp8(b, sq, h, d), _fp8(b, sk, hk, d, seed=1), _fp8(b, sk, hk, d, seed=2)
    dq = torch.full((b, hk), 0.5)
    args = _args(q, k, v, dq=dq)
    plan = plan_launch(args)
    launcher = Launcher(HipRuntime(path))
    out, lse = launcher.run(plan, stream=0x5150)
    assert out is plan.out and out.shape == (b, sq, h, d) and out.dtype == torch.bfloat16
    assert lse.shape == (b, h, sq) and lse.dtype == torch.float32
    dims = (ctypes.c_uint * 7)()
    c.shim_dims(dims)
    assert list(dims) == [2, 4, 2, 512, 1, 1, 0]  # ceil(300/256) query blocks, heads, batch; 512 threads
    assert c.shim_stream() == 0x5150 and c.shim_name() == b"zyfa_fp8_v1"
    buf = (ctypes.c_ubyte * 4096)()
    assert c.shim_args(buf) == 128
    recorded = ka.unpack(bytes(buf[:128]))
    vt, hconst = plan.keepalive
    assert recorded["q"] == q.data_ptr() and recorded["k"] == k.data_ptr() and recorded["vt"] == vt.data_ptr()
    assert recorded["o"] == out.data_ptr() and recorded["lse"] == lse.data_ptr() and recorded["hconst"] == hconst.data_ptr()
    assert (recorded["seqlen_q"], recorded["seqlen_k"], recorded["heads_k"]) == (300, 520, 2)
    assert recorded["mask_offset"] == 520 - 300 and recorded["inv_group"] == 0.5
    assert (recorded["q_stride_s"], recorded["q_stride_h"], recorded["q_stride_b"]) == (h * d, d, sq * h * d)
    assert recorded["vt_stride_d"] == 640 and recorded["vt_stride_h"] == 128 * 640  # keys padded to 5 x 128
    assert recorded["o_stride_s"] == h * d * 2 and recorded["lse_stride_h"] == sq * 4
    # V^T holds v transposed, zero beyond seqlen_k
    assert torch.equal(vt[1, 0, 5, :sk].float(), v[1, :, 0, 5].float()) and not vt[..., sk:].float().any()
    # head constants: t = fp32(fp32(scale * log2e) * dq*dk), T8 = 8t, dv = 1
    t = torch.tensor(d ** -0.5, dtype=torch.float32) * torch.tensor(1.4426950408889634, dtype=torch.float32) * 0.5
    assert torch.equal(hconst[..., 0], t.expand(b, hk)) and torch.equal(hconst[..., 1], 8 * hconst[..., 0])
    assert torch.equal(hconst[..., 2], torch.ones(b, hk))
    launcher.run(plan_launch(_args(q, k, v, causal=False)))
    c.shim_args(buf)
    assert ka.unpack(bytes(buf[:128]))["mask_offset"] == ka.NO_MASK
    assert c.shim_loads() == 1 and c.shim_launches() == 2  # the module is loaded once
    # recipe zyfa-v2 launches the spec v2 kernel (its own code object), same arguments
    plan_v2 = plan_launch(_args(q, k, v, recipe="zyfa-v2", dq=dq))
    launcher.run(plan_v2)
    assert plan_v2.kernel == "zyfa-fp8-v2" and c.shim_name() == b"zyfa_fp8_v2" and c.shim_loads() == 2
    c.shim_args(buf)
    assert bytes(buf[:128]) == plan_v2.kernargs


def test_hip_errors_are_reported(shim):
    path, _ = shim
    rt = HipRuntime(path)
    with pytest.raises(HipError, match="hipModuleLaunchKernel failed with HIP error 400: hipErrorInvalidHandle"):
        rt.launch(ctypes.c_void_p(0x9999), (1, 1, 1), 64, b"\0" * 16)
    elf_x86 = bytearray(b"\x7fELF" + bytes(60))
    elf_x86[18:20] = (62).to_bytes(2, "little")
    with pytest.raises(HipError, match="hipErrorInvalidImage"):
        rt.load_module(bytes(elf_x86))
    with pytest.raises(ValueError, match="ELF code object"):
        rt.load_module(b"not elf")
    with pytest.raises(ValueError, match="grid must be positive"):
        rt.launch(ctypes.c_void_p(0x2000), (0, 1, 1), 64, b"\0")
    with pytest.raises(HipError, match="cannot load the HIP runtime"):
        HipRuntime("/nonexistent/libamdhip64.so")


def test_grid_and_pair_argument_agree():
    """recipe zyfa-folded launches zyfa-fp8, whose workgroup x also runs query block blocks-1-x where
    the kernel argument says so: the grid must halve exactly then. v2 (unpaired) keeps one block per
    workgroup and tells the kernel 0 on the same shape."""
    big = [_fp8(8, 512, 32, 128, seed=s) for s in range(3)]  # 2 blocks x 32 heads x 8 = 512 > 256 CUs
    small = [_fp8(1, 512, 2, 128, seed=s) for s in range(3)]
    cases = [(big, "zyfa-folded", "zyfa-fp8", (1, 32, 8), 1), (big, "zyfa-v2", "zyfa-fp8-v2", (2, 32, 8), 0),
             (small, "zyfa-folded", "zyfa-fp8", (2, 2, 1), 0)]
    for (q, k, v), recipe, kernel, grid, pair in cases:
        plan = plan_launch(_args(q, k, v, recipe=recipe))
        assert (plan.kernel, plan.grid, ka.unpack(plan.kernargs)["pair_query_blocks"]) == (kernel, grid, pair)


def test_plan_rejects_bad_inputs():
    q, k, v = _fp8(1, 64, 2, 128), _fp8(1, 64, 2, 128), _fp8(1, 64, 2, 128)
    with pytest.raises(ValueError, match="head dims 64/64 not generated"):
        plan_launch(_args(_fp8(1, 64, 2, 64), _fp8(1, 64, 2, 64), _fp8(1, 64, 2, 64)))
    misaligned = _fp8(1, 64, 2, 136)[..., 8:]
    with pytest.raises(ValueError, match="q must be 16-byte aligned"):
        plan_launch(_args(misaligned, k, v))
    with pytest.raises(ValueError, match="dtype torch.float16 not supported"):
        plan_launch(_args(q.half(), k.half(), v.half()))
    assert "ROCm" in unsupported_reason(_args(q, k, v))  # this box has a CPU torch
    bf = plan_launch(_args(q.bfloat16(), k.bfloat16(), v.bfloat16()))
    assert bf.kernel == "zyfa-bf16" and torch.equal(head_constants(_args(q.bfloat16(), k.bfloat16(), v.bfloat16()))[..., 2],
                                                     torch.ones(1, 2))


def test_flash_attn_func_explains_missing_device():
    import zyfa
    q = _fp8(1, 64, 2, 128)
    with pytest.raises(NotImplementedError, match="gfx950.*ROCm"):
        zyfa.flash_attn_func(q, q, q, causal=True, backend="gfx950")
