"""What an emulated attention kernel computed, against the numerics reference, and its inputs.

Shared by :mod:`zyfa.trace.emu.attention` (our kernels) and :mod:`zyfa.trace.emu.aiter_fwd`
(AITER's code objects).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from zyfa import numerics
from zyfa.shapes import AttnShape
from zyfa.trace.emu.machine import Stats


@dataclass
class EmulationResult:
    """Values a kernel computed in the emulator, the numerics reference, and counters.

    ``out`` (b, s_q, h, d_v) bfloat16 and ``lse`` (b, h, s_q) float32 from the kernel;
    ``ref_out``/``ref_lse`` from ``zyfa.numerics`` on the same inputs. ``bitwise_fraction``:
    fraction of output elements whose bf16 bits equal the reference; ``max_abs_err``: largest
    |out - ref_out|; ``max_lse_err`` likewise for finite lse. ``stats``: executed instructions per
    opcode and LDS bank-conflict cycles per instruction index. ``seconds``: emulation wall time.
    """

    kernel: str
    shape: AttnShape
    out: torch.Tensor
    lse: torch.Tensor
    ref_out: torch.Tensor
    ref_lse: torch.Tensor
    stats: Stats
    seconds: float
    inputs: dict = field(default_factory=dict)
    reference: str = ""

    def __str__(self) -> str:
        executed = sum(self.stats.executed.values())
        return (f"{self.kernel} on {self.shape}: output bit-identical to {self.reference} for "
                f"{100 * self.bitwise_fraction:.3f}% of elements, max |out - ref| "
                f"{self.max_abs_err:.3g}, max |lse - ref| {self.max_lse_err:.3g}; {executed} "
                f"wave instructions, {self.lds_conflict_cycles} LDS bank-conflict cycles; "
                f"emulated in {self.seconds:.1f} s")

    @property
    def bitwise_fraction(self) -> float:
        a = self.out.view(torch.int16)
        b = self.ref_out.view(torch.int16)
        return float((a == b).double().mean())

    @property
    def max_abs_err(self) -> float:
        return float((self.out.float() - self.ref_out.float()).abs().max())

    @property
    def max_lse_err(self) -> float:
        both = torch.isfinite(self.ref_lse) & torch.isfinite(self.lse)
        if not bool(both.any()):
            return 0.0
        return float((self.lse - self.ref_lse)[both].abs().max())

    @property
    def lds_conflict_cycles(self) -> int:
        return int(sum(self.stats.lds_conflict_cycles.values()))


def make_inputs(shape: AttnShape, seed: int = 0, granularity: str = "head") -> dict:
    """Gaussian q, k, v (FA layout), quantised per (batch, kv head) for fp8 kernels
    (``granularity="tensor"``: one scale per tensor, as AITER's Python FP8 API passes them)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(shape.batch, shape.seqlen_q, shape.heads, shape.headdim, generator=g)
    k = torch.randn(shape.batch, shape.seqlen_k, shape.heads_k, shape.headdim, generator=g)
    v = torch.randn(shape.batch, shape.seqlen_k, shape.heads_k, shape.headdim_v, generator=g)
    if shape.dtype == "bf16":
        return {"q": q.bfloat16(), "k": k.bfloat16(), "v": v.bfloat16()}
    q8, dq = numerics.quantize_fp8(q, granularity, nheads_k=shape.heads_k)
    k8, dk = numerics.quantize_fp8(k, granularity)
    v8, dv = numerics.quantize_fp8(v, granularity)
    return {"q": q8, "k": k8, "v": v8, "q_descale": dq, "k_descale": dk, "v_descale": dv}
