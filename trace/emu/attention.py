"""Run a registered attention kernel (``zyfa.kernels.registry``) in the emulator and compare it
with the numerics emulator ``zyfa.numerics`` (docs/numerics.md).

Buffers follow ``zyfa.kernels.gfx950.kernargs``: q/k (b, s, h, d) fp8 or bf16, V transposed to
(b, h_k, d_v, sk_pad) with zero-padded keys, bf16 output, fp32 natural-log lse (b, h, s_q), and
per-(batch, kv head) constants ``[t, 8t, dv, 0]``; they are placed at the addresses of
``kernargs.default_addresses(shape)``, the map ``spec.kernargs(shape)`` encodes.
"""

from __future__ import annotations

import time
from typing import Optional

import numpy as np
import torch

from zyfa import numerics
from zyfa.kernels import registry
from zyfa.kernels.gfx950 import kernargs as ka
from zyfa.shapes import AttnShape
from zyfa.trace.emu.aiter_fwd import emulate_aiter
from zyfa.trace.emu.errors import EmulationError
from zyfa.trace.emu.launch import program_for
from zyfa.trace.emu.machine import Launch, run_kernel
from zyfa.trace.emu.result import EmulationResult, make_inputs
from zyfa.trace.emu.state import Memory


def _constants(shape: AttnShape, inputs: dict, softmax_scale: float) -> np.ndarray:
    """[t, 8t, dv, 0] per (batch, kv head), t = fp32(fp32(scale*LOG2E) * fp32(dq*dk))."""
    c = torch.tensor(softmax_scale, dtype=torch.float32) * torch.tensor(numerics.LOG2E_F32, dtype=torch.float32)
    if shape.dtype == "bf16":
        t = c.expand(shape.batch, shape.heads_k)
        dv = torch.ones(shape.batch, shape.heads_k)
    else:
        t = c * (inputs["q_descale"] * inputs["k_descale"])
        dv = inputs["v_descale"]
    consts = torch.stack([t, t * 8, dv, torch.zeros_like(t)], dim=-1)
    return consts.to(torch.float32).contiguous().numpy()


def reference_variant(config: dict) -> str:
    """The ``zyfa.numerics`` variant a generated kernel's configuration computes: Lean P with
    block scaling = "zyfa"; spec v2's Lean P = "zyfa-v2"; Lean P folded into the QK MFMA = "zyfa-folded"; exact exp2 with block scaling (and the rounded-P row sum) =
    "roundedsum"; exact exp2 without block scaling (AITER v3) = "naive"."""
    softmax, scaling = config.get("softmax", "lean"), config.get("scaling", "block")
    if softmax == "lean":
        return "zyfa"
    if softmax == "lean-v2":
        return "zyfa-v2"
    if softmax == "folded":
        return "zyfa-folded"
    return "roundedsum" if scaling == "block" else "naive"


def _raw(x: torch.Tensor) -> np.ndarray:
    view = torch.uint8 if x.element_size() == 1 else torch.int16
    return x.contiguous().view(view).numpy()


def emulate_kernel(kernel, shape: AttnShape, inputs: Optional[dict] = None, seed: int = 0,
                   softmax_scale: Optional[float] = None, quantum: Optional[int] = 1
                   ) -> EmulationResult:
    """Run registered kernel ``kernel`` (a name, a ``KernelSpec`` or ``aiter:NAME`` for AITER's
    v3 BF16 and FP8 forward code objects, see :mod:`zyfa.trace.emu.aiter_fwd`) on ``shape`` in the emulator.

    ``inputs``: dict as :func:`make_inputs` returns (q, k, v and, for fp8, the three descales);
    default: Gaussian data from ``seed``. The reference is ``zyfa.numerics.zyfa_fp8_attention``
    (fp8, variant from :func:`reference_variant`) or ``bf16_attention`` (bf16) on the same
    inputs. ``quantum``: wave interleaving (``machine._run_group``); the default 1 runs the
    waves of a workgroup round-robin one instruction at a time, None runs each to its next
    barrier. A race-free kernel gives the same bits under both. Exact-softmax kernels (``naive``, bf16) rescale their running max once per key tile
    (``build.meta["keys_per_tile"]``), so their reference runs with that block size; the
    block-scaled variants use the spec's 64-key blocks.
    """
    if not isinstance(shape, AttnShape):
        raise TypeError(f"shape must be a zyfa.shapes.AttnShape, got {type(shape).__name__}")
    if isinstance(kernel, str) and kernel.startswith("aiter:"):
        if inputs is not None or softmax_scale is not None:
            raise ValueError("aiter: kernels take generated inputs and the default softmax_scale")
        return emulate_aiter(kernel.removeprefix("aiter:"), shape, seed, quantum)
    spec = registry.get_kernel(kernel) if isinstance(kernel, str) else kernel
    if spec.dtype != shape.dtype:
        raise ValueError(f"kernel {spec.name!r} takes dtype {spec.dtype!r}, shape has {shape.dtype!r}")
    build = spec.build(shape)
    if build.asm is None:
        raise EmulationError(f"kernel {spec.name!r} has no assembly text to emulate")
    inputs = make_inputs(shape, seed) if inputs is None else inputs
    scale = shape.headdim ** -0.5 if softmax_scale is None else float(softmax_scale)
    text = build.asm + ("\n" + build.meta["metadata"] if "metadata" in build.meta else "")
    program = program_for(text)

    memory = Memory()
    addresses = ka.default_addresses(shape, base=Memory.BASE)
    sizes = ka.tensor_bytes(shape)
    pad = ka.sk_pad(shape.seqlen_k)
    v = inputs["v"].permute(0, 2, 3, 1)  # (b, hk, dv, sk)
    vt = torch.zeros(*v.shape[:3], pad, dtype=v.dtype)
    vt[..., : shape.seqlen_k] = v
    host = {"q": _raw(inputs["q"]), "k": _raw(inputs["k"]), "vt": _raw(vt),
            "hconst": _constants(shape, inputs, scale)}
    for name in ("q", "k", "vt", "o", "lse", "hconst"):
        memory.place(addresses[name], sizes[name])
        if name in host:
            memory.write(addresses[name], host[name])
    args = spec.kernargs(shape)
    start = time.perf_counter()
    stats = run_kernel(program, Launch(tuple(spec.grid(shape)), (spec.workgroup_size, 1, 1)),
                       args, memory, quantum=quantum)
    seconds = time.perf_counter() - start
    b, sq, h, dv = shape.batch, shape.seqlen_q, shape.heads, shape.headdim_v
    out = torch.from_numpy(memory.get(addresses["o"], sizes["o"]).view(np.int16).copy()) \
        .view(torch.bfloat16).reshape(b, sq, h, dv)
    lse = torch.from_numpy(memory.get(addresses["lse"], sizes["lse"]).view(np.float32).copy()) \
        .reshape(b, h, sq)
    variant = reference_variant(build.meta.get("config", {})) if shape.dtype == "fp8" else "bf16"
    # exact-softmax kernels update the running max once per key tile: the reference's online
    # softmax uses the same block; block-scaled variants keep the spec's 64-key blocks
    block = build.meta.get("keys_per_tile", 64) if variant in ("naive", "bf16") else 64
    if shape.dtype == "fp8":
        ref_out, ref_lse = numerics.zyfa_fp8_attention(
            inputs["q"], inputs["k"], inputs["v"], inputs["q_descale"], inputs["k_descale"],
            inputs["v_descale"], causal=shape.causal, softmax_scale=scale, variant=variant,
            block=block)
    else:
        ref_out, ref_lse = numerics.bf16_attention(inputs["q"], inputs["k"], inputs["v"],
                                                   causal=shape.causal, softmax_scale=scale,
                                                   block=block)
    reference = (f"zyfa.numerics.zyfa_fp8_attention(variant={variant!r}, block={block})"
                 if shape.dtype == "fp8" else f"zyfa.numerics.bf16_attention(block={block})")
    return EmulationResult(spec.name, shape, out, lse, ref_out, ref_lse, stats, seconds, inputs,
                           reference)
