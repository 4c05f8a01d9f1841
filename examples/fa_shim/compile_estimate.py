"""How many Triton compiles and autotuner runs FlashAttention's upstream tests cost through the shim (CPU).

Used by ``zyfa_fa_select`` when ``ZYFA_FA_ESTIMATE=1`` (``run_upstream_tests.sh CHECKOUT --collect-only``
works without a GPU: torch.cuda's capability query, which both test files call at import, then answers
sm_90). For each selected case it derives the shapes and strides of the tensors the test passes
(transcribed from the test bodies: batch, heads, head dims, packed layouts, FA3's dv values), runs
the shim's column split and zyfa's Triton launch functions on meta tensors with the kernels replaced
by a recorder, and keys every launch with Triton's own argument specialisation
(``native_specialize_impl``: an int is ``1``, ``% 16 == 0`` or neither, unless the kernel leaves it
unspecialised). Two modes are counted:

- default: the autotuner runs once per length bucket (``_common.BucketedAutotune``: power-of-two
  buckets of both lengths, the rest of the kernel's autotune key, dtypes) and compiles every candidate
  of the problem's tier at that launch's specialisation; a later launch in a tuned bucket compiles
  only the winner, at most once per specialisation and bucket (an upper bound: two buckets may share
  a winner);
- fixed (``ZYFA_TRITON_FIXED_CONFIG=1``): one compile per specialisation of the length-agnostic twin.

The counts are an estimate: pointer alignment is taken as 16-byte (torch allocations and the views the
tests make are), and this machine's Triton may specialise slightly differently from the GPU's.
"""

from __future__ import annotations

import collections
import os

import torch
from triton.backends.compiler import BaseBackend
from triton.runtime.jit import native_specialize_impl

from zyfa.interface import MAX_HEADDIM
from zyfa.kernels.triton import _common, attn_bf16, attn_fp8


def fake_cuda_capability() -> None:
    """Let the test files import without a GPU (they read the capability at module level): sm_90."""
    if not torch.cuda.is_available():
        torch.cuda.get_device_capability = lambda device=None: (9, 0)


def _qkv(batch, seqlen_q, seqlen_k, nheads, nheads_k, d, dv, dtype, packed=None):
    """Meta q, k, v with the layouts the tests build: separate, ``kv`` (b, s, 2, h, d) or ``qkv`` (b, s, 3, h, d)."""
    meta = dict(device="meta", dtype=dtype)
    if packed == "qkv":
        return torch.empty(batch, seqlen_q, 3, nheads, d, **meta).unbind(dim=2)
    q = torch.empty(batch, seqlen_q, nheads, d, **meta)
    if packed == "kv":
        return (q, *torch.empty(batch, seqlen_k, 2, nheads_k, d, **meta).unbind(dim=2))
    return q, torch.empty(batch, seqlen_k, nheads_k, d, **meta), torch.empty(batch, seqlen_k, nheads_k, dv, **meta)


def calls(item) -> list[tuple]:
    """The (q, k, v, causal) flash_attn_func calls of one upstream test case (forward only)."""
    p = item.callspec.params
    name, d, dtype, causal = item.originalname, p.get("d"), p["dtype"], p["causal"]
    path = str(item.fspath)
    if name == "test_flash_attn_qkvpacked":  # FA2
        return [(*_qkv(4, p["seqlen"], p["seqlen"], 9, 9, d, d, dtype, "qkv"), causal)]
    nk = {"mha": None, "mqa": 1, "gqa": 2}[p["mha_type"]]
    if os.sep + "hopper" + os.sep in path:  # FA3: batch 9 (2 past 2048 keys), 6 heads, several dv
        sq, sk = p["seqlen_q"], p["seqlen_k"]
        dv_vals = [128, d] if 128 < d <= 192 else ([256, 512, d] if d <= 64 else [d])
        if dtype == torch.float8_e4m3fn:
            dv_vals = [d]
        return [(*_qkv(9 if sk <= 2048 else 2, sq, sk, 6, nk or 6, d, dv, dtype), causal) for dv in dv_vals]
    heads = 6 if p.get("softcap", 0.0) == 0.0 else 4  # FA2 test_flash_attn_output
    return [(*_qkv(4, p["seqlen_q"], p["seqlen_k"], heads, nk or heads, d, d, dtype,
                   "kv" if p["kvpacked"] else None), causal)]


class _Recorder:
    """Stands in for a Triton kernel: ``kernel[grid](*args, **kwargs)`` records the launch, with the
    autotune bucket (``_common.BucketedAutotune.key``) for the autotuned kernels."""

    def __init__(self, kernel, launches, name, bucketed=None):
        self.kernel, self.launches, self.name, self.bucketed = kernel, launches, name, bucketed

    def __getitem__(self, grid):
        def record(*args, **kwargs):
            bucket = self.bucketed.key(args, kwargs) if self.bucketed else None
            self.launches.append((self.name, self.kernel, args, kwargs, bucket))
        return record


def _spec(jit_fn, args) -> tuple:
    out = []
    for param, arg in zip(jit_fn.params, args):
        if isinstance(arg, torch.Tensor):
            out.append(str(arg.dtype))  # meta tensors: address 0, i.e. 16-byte aligned as on the GPU
        elif isinstance(arg, int) and not isinstance(arg, bool):
            out.append(native_specialize_impl(BaseBackend, arg, False, not param.do_not_specialize, True))
        else:
            out.append(type(arg).__name__)
    return tuple(out)


def launches(items, fixed: bool) -> list[tuple]:
    """Every kernel launch of ``items``: (kernel name, JIT function, args, kwargs), with fixed mode on or off."""
    recorded: list[tuple] = []
    saved = {(m, n): getattr(m, n) for m, n in ((attn_bf16, "_attn_fwd_bf16_bucketed"),
                                                (attn_bf16, "_attn_fwd_bf16_any_len"),
                                                (attn_fp8, "_attn_fwd_fp8_bucketed"), (attn_fp8, "_attn_fwd_fp8_any_len"))}
    old_env = os.environ.get(_common.FIXED_CONFIG_ENV)
    old_arch = _common.device_arch
    try:
        for (module, name), kernel in saved.items():
            bucketed = kernel if isinstance(kernel, _common.BucketedAutotune) else None
            jit = bucketed.kernel.fn if bucketed else kernel
            setattr(module, name, _Recorder(jit, recorded, name, bucketed))
        os.environ[_common.FIXED_CONFIG_ENV] = "1" if fixed else "0"
        _common.device_arch = lambda device=None: "sm_90"  # the H200's tier tables
        for item in items:
            for q, k, v, causal in calls(item):
                for i in range(0, v.shape[-1], MAX_HEADDIM):  # the shim's column blocks of V
                    vb = v[..., i:i + MAX_HEADDIM]
                    scale = q.shape[-1] ** -0.5
                    if q.dtype == torch.float8_e4m3fn:
                        ones = torch.ones(q.shape[0], k.shape[2], device="meta")
                        attn_fp8.attention_fp8(q, k, vb, scale, causal, ones, ones, ones, transpose_v=True,
                                               recipe="zyfa-v2")
                    else:
                        attn_bf16.attention_bf16(q, k, vb, scale, causal)
    finally:
        for (module, name), kernel in saved.items():
            setattr(module, name, kernel)
        _common.device_arch = old_arch
        if old_env is None:
            os.environ.pop(_common.FIXED_CONFIG_ENV, None)
        else:
            os.environ[_common.FIXED_CONFIG_ENV] = old_env
    return recorded


def estimate(items) -> dict:
    """Compiles and autotuner runs in the default and the fixed mode for the selected ``items``."""
    result = {"cases": len(items)}
    compiled, tuned = set(), set()  # (kernel, specialisation, config) compiled; buckets tuned
    for name, jit, args, kwargs, bucket in launches(items, fixed=False):
        named = dict(zip([p.name for p in jit.params], args), **kwargs)
        spec = (name, _spec(jit, args), tuple(sorted(kwargs.items())))
        tier = _common.tier_configs(name.startswith("_attn_fwd_fp8"), "sm_90", named["HEAD_DIM_PAD"],
                                    named["HEAD_DIM_V_PAD"])
        if (name, bucket) not in tuned:  # the bucket's first launch times (so compiles) every candidate
            tuned.add((name, bucket))
            compiled.update((spec, c) for c in tier)
        elif not all((spec, c) in compiled for c in tier):  # later ones compile the bucket's winner
            compiled.add((spec, bucket))
    result["default_compiles"] = len(compiled)
    result["default_autotune_runs"] = len(tuned)
    fixed = {(name, _spec(jit, args), tuple(sorted((k, str(v)) for k, v in kwargs.items())))
             for name, jit, args, kwargs, _ in launches(items, fixed=True)}
    result["fixed_compiles"] = len(fixed)
    per = collections.Counter(name for name, _, _ in fixed)
    result["fixed_compiles_per_kernel"] = dict(per)
    return result
