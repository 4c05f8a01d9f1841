"""Branch outcomes of the real data path, for the cycle model's data-dependent branches.

The cycle model computes scalar values but not vector data, so a branch on a vector compare
(AITER v4's ``v_cmp_nge_f32 vcc, s92, v193`` + ``s_cbranch_vccnz label_rollback_overflow_*``)
needs a policy (:class:`zyfa.trace.cdna4.sim.SimConfig`). :func:`measured_branch_policy` runs the
kernel in the functional emulator on a small shape of the same kernel (batch 1, one head, at
most 1024 queries and keys, Gaussian inputs from ``seed``: the distribution of the calibration
set) and returns, per conditional branch, the direction its executions took, as the model's
``branch_policy`` (instruction address -> "taken"/"not-taken") for the branches on ``vcc`` or
``exec``. A branch whose executions went both ways gets the majority direction; the report says
how many did. What this does not capture: outcomes that change with the sequence length past the
small shape, or with data other than the Gaussian distribution.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from zyfa.shapes import AttnShape
from zyfa.trace.emu.attention import emulate_kernel

SMALL_SEQLEN = 1024  # emulated sequence length cap: b1 h1 s1024 takes ~5 s on the 2-core box


@dataclass(frozen=True)
class BranchOutcome:
    pc: int  # instruction address in the cycle model's program
    text: str
    runs: int  # wave executions in the emulated run
    taken: int

    @property
    def direction(self) -> str:
        return "taken" if 2 * self.taken > self.runs else "not-taken"


def small_shape(shape: AttnShape) -> AttnShape:
    """The emulated stand-in for ``shape``: batch 1, one head (and one KV head), sequence lengths
    capped at :data:`SMALL_SEQLEN`, the same head dims, dtype and masking."""
    return AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=min(shape.seqlen_q, SMALL_SEQLEN),
                     seqlen_k=min(shape.seqlen_k, SMALL_SEQLEN), headdim=shape.headdim,
                     headdim_v=shape.headdim_v, dtype=shape.dtype, causal=shape.causal)


# (kernel, shape) -> the cycle model's instructions of that launch (each with .opcode, .pc, .text), e.g.
# ``lambda k, s: zyfa.trace.cdna4.launch.prepare(k, s).program.instructions``: passed in by the caller,
# since the emulator does not import the cycle model (trace/emu/README.md)
ModelProgram = Callable[[str, AttnShape], Sequence]


def branch_outcomes(kernel, shape: AttnShape, model_program: ModelProgram,
                    seed: int = 0) -> tuple[AttnShape, list[BranchOutcome]]:
    """Emulate ``kernel`` on :func:`small_shape` of ``shape``; every conditional branch the run
    executed, with its address in the cycle model's program of the same kernel."""
    small = small_shape(shape)
    result = emulate_kernel(kernel, small, seed=seed)
    insts = model_program(kernel, small)
    out = []
    for index, runs in sorted(result.stats.branch_runs.items()):
        inst = insts[index]
        if not inst.opcode.startswith("s_cbranch"):
            raise AssertionError(f"emulator instruction {index} is a branch but the model's is {inst.text!r}")
        out.append(BranchOutcome(inst.pc, inst.text, runs, int(result.stats.branch_taken[index])))
    return small, out


def measured_branch_policy(kernel, shape: AttnShape, model_program: ModelProgram,
                           seed: int = 0) -> tuple[dict, str]:
    """(pc -> direction of every executed branch on ``vcc``/``exec``, one line saying what was run
    and what they did). Only those: they follow vector data the scalar model does not compute;
    a scalar branch (a loop back-edge) follows the model's own values at the real shape, not the
    small run's count."""
    small, outcomes = branch_outcomes(kernel, shape, model_program, seed)
    vector = [o for o in outcomes if o.text.split()[0].endswith(("vccz", "vccnz", "execz", "execnz"))]
    mixed = [o for o in vector if 0 < o.taken < o.runs]
    text = (f"branch outcomes from the functional emulator (b1 h1 s{small.seqlen_q}, Gaussian inputs, seed "
            f"{seed}): {len(vector)} vcc/exec branch sites ran {sum(o.runs for o in vector)} times, "
            f"{sum(o.taken for o in vector)} taken"
            + (f"; {len(mixed)} sites went both ways (majority direction used)" if mixed else ""))
    return {o.pc: o.direction for o in vector}, text
