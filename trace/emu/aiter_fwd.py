"""AITER's real gfx950 BF16 forward code objects (``fmha_v3_fwd``) in the emulator.

The code object, its disassembly and its kernel-argument layout come from the cycle model's
resolver (``zyfa.kernels.aiter``: the ``amd-aiter`` wheel, ``fmha_fwd_v3_args`` values as
AITER's host dispatcher sets them); the five pointer arguments (R, Q, K, V, LSE) are replaced
by this emulator's buffers (each followed by ``_TAIL_ROWS`` zero rows). Tensors are BSHD bf16, LSE (b, h, s_q) fp32 natural log. The
reference is ``zyfa.numerics.bf16_attention``.
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
    """Run AITER code object ``name`` (e.g. ``fwd_hd128_bf16_causal``) on ``shape``.

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
    inputs = make_inputs(shape, seed)
    b, sq, h, dv = shape.batch, shape.seqlen_q, shape.heads, shape.headdim_v
    host = {"Q": inputs["q"], "K": inputs["k"], "V": inputs["v"],
            "R": torch.zeros(b, sq, h, dv, dtype=torch.bfloat16),
            "LSE": torch.zeros(b, h, sq, dtype=torch.float32)}
    memory = Memory()
    args = bytearray(aiter.kernargs(cdna4_program, path, shape))
    addresses = {}
    for arg in cdna4_program.descriptor.args:
        if arg.name in host:
            tensor = host[arg.name].contiguous()
            raw = tensor.view(torch.int16 if tensor.element_size() == 2 else torch.int32).numpy()
            addresses[arg.name] = memory.put(raw, tail=_TAIL_ROWS * raw.nbytes // raw.shape[1])
            struct.pack_into("<Q", args, arg.offset, addresses[arg.name])
    start = time.perf_counter()
    stats = run_kernel(program, Launch(aiter.grid(path, shape), (spec.workgroup_size, 1, 1)),
                       bytes(args), memory, quantum=quantum)
    seconds = time.perf_counter() - start
    out = torch.from_numpy(memory.get(addresses["R"], host["R"].numel() * 2).view(np.int16).copy())
    lse = torch.from_numpy(memory.get(addresses["LSE"], host["LSE"].numel() * 4).view(np.float32)
                           .copy())
    ref_out, ref_lse = numerics.bf16_attention(inputs["q"], inputs["k"], inputs["v"],
                                               causal=shape.causal)
    return EmulationResult(f"aiter:{name}", shape, out.view(torch.bfloat16).reshape(b, sq, h, dv),
                           lse.reshape(b, h, sq), ref_out, ref_lse, stats, seconds, inputs,
                           "zyfa.numerics.bf16_attention(block=64)")
