"""AITER's real gfx950 forward code objects (``fmha_v3_fwd``, BF16 and FP8) in the emulator.

The code object, its disassembly and its kernel-argument layout come from the cycle model's
resolver (``zyfa.kernels.aiter``: the ``amd-aiter`` wheel or a ROCm/aiter checkout, the field
values AITER's host dispatcher sets); the pointer arguments (O, Q, K, V, LSE and, for FP8, the
three descales) are replaced by this emulator's buffers, found by field name in
``aiter.layout`` (each tensor followed by ``_TAIL_ROWS`` zero rows). Tensors are BSHD (bf16, or
float8_e4m3fn with one fp32 descale per tensor, as AITER's Python FP8 API passes them), O bf16,
LSE (b, h, s_q) fp32 natural log. The references are ``zyfa.numerics.bf16_attention`` and, for
FP8, ``zyfa.numerics.zyfa_fp8_attention(variant="naive")``: AITER v3's numerics (running fp32
max, exact exp2, P unscaled to e4m3, l from the unrounded p), both in blocks of the object's key
tile (``ts_kv`` of ``fmha_fwd.csv``: bf16 hd128 64, hd192 128; fp8 hd128 128, hd256 64).
"""

from __future__ import annotations

import struct
import time

import numpy as np
import torch

from zyfa import numerics
from zyfa.gfx950 import isa
from zyfa.kernels import aiter
from zyfa.shapes import AttnShape
from zyfa.trace.emu.asm import from_cdna4_program
from zyfa.trace.emu.machine import Launch, Program, run_kernel
from zyfa.trace.emu.result import EmulationResult, make_inputs
from zyfa.trace.emu.state import Memory

_PROGRAMS: dict[str, tuple] = {}
# Measured: with seqlen_k not a multiple of the key tile, the kernel loads K/V rows past
# seqlen_k (its buffer descriptors admit them) and multiplies them by P = 0; bytes there that
# decode to NaN/Inf make 0 * NaN = NaN outputs. Each tensor gets one key tile of zero rows after
# it, as a padded allocation would.
_TAIL_ROWS = 128


def _program(name: str):
    if name not in _PROGRAMS:
        path = aiter.resolve(name)
        cdna4_program = isa.disassemble(path)
        _PROGRAMS[name] = (path, cdna4_program, Program(from_cdna4_program(cdna4_program)))
    return _PROGRAMS[name]


def emulate_aiter(name: str, shape: AttnShape, seed: int = 0, quantum: int | None = 1
                  ) -> EmulationResult:
    """Run AITER code object ``name`` (e.g. ``fwd_hd128_bf16_causal``, ``fwd_hd128_fp8_causal``)
    on ``shape`` (its dtype must be the object's).

    ``quantum`` as in :func:`zyfa.trace.emu.attention.emulate_kernel`. AITER's causal kernel
    needs the default interleaving: run to barrier (None), rows 193-255 of the first query tile
    come out wrong when a workgroup takes two tiles (measured at b1 h1 s512), consistent with
    LDS reuse between barriers that relies on timing.
    """
    if not isinstance(shape, AttnShape):
        raise TypeError(f"shape must be a zyfa.shapes.AttnShape, got {type(shape).__name__}")
    path, cdna4_program, program = _program(name)
    spec = aiter.spec(f"aiter:{name}")
    spec.check(shape)
    b, sq, h, dv = shape.batch, shape.seqlen_q, shape.heads, shape.headdim_v
    fp8 = shape.dtype == "fp8"
    inputs = make_inputs(shape, seed, granularity="tensor")
    host = {"ptr_q": inputs["q"], "ptr_k": inputs["k"], "ptr_v": inputs["v"],
            "ptr_o": torch.zeros(b, sq, h, dv, dtype=torch.bfloat16),
            "ptr_lse": torch.zeros(b, h, sq, dtype=torch.float32)}
    if fp8:  # one fp32 descale per tensor (strides 0 in the kernel arguments)
        host |= {f"ptr_{t}_descale": inputs[f"{t}_descale"][:1, :1].contiguous() for t in "qkv"}
    memory = Memory()
    args = bytearray(aiter.kernargs(cdna4_program, path, shape))
    addresses = {}
    for field, offset, _ in aiter.layout(cdna4_program, path):
        if field.startswith(("ptr_qseq", "ptr_kseq")) and aiter.for_path(path).group:
            # group (varlen) mode: seqstart arrays of b + 1 int32, every sequence the shape's length
            length = shape.seqlen_q if field.startswith("ptr_qseq") else shape.seqlen_k
            struct.pack_into("<Q", args, offset, memory.put(np.arange(b + 1, dtype=np.int32) * length))
        elif field in host:
            raw = _raw(host[field])
            tail = _TAIL_ROWS * raw.nbytes // raw.shape[1] if raw.ndim > 2 else 0
            addresses[field] = memory.put(raw, tail=tail)
            struct.pack_into("<Q", args, offset, addresses[field])
    start = time.perf_counter()
    stats = run_kernel(program, Launch(aiter.grid(path, shape), (spec.workgroup_size, 1, 1)),
                       bytes(args), memory, quantum=quantum)
    seconds = time.perf_counter() - start
    out = torch.from_numpy(memory.get(addresses["ptr_o"], host["ptr_o"].numel() * 2).view(np.int16).copy())
    lse = torch.from_numpy(memory.get(addresses["ptr_lse"], host["ptr_lse"].numel() * 4).view(np.float32)
                           .copy())
    if aiter.for_path(path).group:  # varlen lse is (heads, total_q): to (b, h, s_q)
        lse = lse.reshape(h, b, sq).permute(1, 0, 2).contiguous()
    block = aiter.for_path(path).ts_kv  # the running max moves once per key tile: the reference's block
    if fp8:
        ref_out, ref_lse = numerics.zyfa_fp8_attention(
            inputs["q"], inputs["k"], inputs["v"], inputs["q_descale"], inputs["k_descale"], inputs["v_descale"],
            causal=shape.causal, variant="naive", block=block)
        reference = f"zyfa.numerics.zyfa_fp8_attention(variant='naive', block={block})"
    else:
        ref_out, ref_lse = numerics.bf16_attention(inputs["q"], inputs["k"], inputs["v"], causal=shape.causal,
                                                   block=block)
        reference = f"zyfa.numerics.bf16_attention(block={block})"
    return EmulationResult(f"aiter:{name}", shape, out.view(torch.bfloat16).reshape(b, sq, h, dv),
                           lse.reshape(b, h, sq), ref_out, ref_lse, stats, seconds, inputs, reference)



def _raw(x: torch.Tensor) -> np.ndarray:
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[x.element_size()]
    return x.contiguous().view(view).numpy()
