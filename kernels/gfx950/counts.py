"""Static counts over a generated instruction stream (per 32-query x 128-key tile of one wave).

``tile_counts(generated)`` reads the first loop iteration's clusters of wave group 0 and sums,
by opcode, the cycles each unit is busy, using the cycle model's timing table
(``zyfa.gfx950.timing.op_class``: passes x 4 cycles; transcendentals go to the TRANS unit).
Definitions:
  valu_cycles   VALU-unit cycles of softmax_j (or its three parts under the "aiter" schedule; mask
                and lazy rescale excluded: they run only on
                diagonal tiles / when a row max grows)
  trans_cycles  TRANS-unit cycles (v_exp_f32 ...) of softmax_j
  mask_cycles   VALU cycles of mask_j (diagonal and seqlen_k-edge tiles only)
  rowsum_valu_cycles  VALU cycles of rowsum_j and rowsum_carry_j (the row sum on the VALU,
                rowsum="valu", or block 1's, rowsum="split"; else 0)
  mfma          MFMA instructions of PV_j-1 + QK_j; mfma_rowsum: those writing the row-sum accumulator
  mfma_cycles   MFMA-pipe cycles of PV_j-1 + QK_j; rowsum_cycles: those of the row-sum MFMAs
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from zyfa.gfx950 import timing
from zyfa.kernels.gfx950.generator import Generated


@dataclass(frozen=True)
class TileCounts:
    valu_cycles: int
    trans_cycles: int
    mask_cycles: int
    mfma: int
    mfma_rowsum: int
    mfma_cycles: int
    valu_by_opcode: dict
    rowsum_cycles: int = 0
    rowsum_valu_cycles: int = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


# the softmax of one tile: one cluster, or the "aiter" schedule's three (schedule.aiter_schedule)
SOFTMAX_CLUSTERS = ("softmax_j", "softmax_max_j", "softmax_exp_j", "softmax_cvt_j")


def _cluster_insts(generated: Generated, name: str, group: int = 0) -> list:
    for cl in generated.clusters:
        if cl["name"] == name and cl["group"] == group:
            return [i for i in generated.instructions[cl["first"]:cl["last"] + 1] if i.cluster == name]
    raise ValueError(f"{generated.config.name} has no cluster {name!r} for wave group {group}")


def _cycles(insts, unit: str) -> tuple[int, Counter]:
    total, by_opcode = 0, Counter()
    for inst in insts:
        cls = timing.op_class(inst.opcode)
        if cls.unit == unit:
            total += cls.cycles
            by_opcode[inst.opcode] += cls.cycles
    return total, by_opcode


def tile_counts(generated: Generated) -> TileCounts:
    if not isinstance(generated, Generated):
        raise TypeError(f"generated must be a zyfa.kernels.gfx950.generator.Generated, got {type(generated).__name__}")
    names = {cl["name"] for cl in generated.clusters}
    parts = [name for name in SOFTMAX_CLUSTERS if name in names] or ["softmax_j"]
    softmax = [inst for name in parts for inst in _cluster_insts(generated, name)]
    valu, by_opcode = _cycles(softmax, "VALU")
    trans, trans_ops = _cycles(softmax, "TRANS")
    mask, _ = _cycles(_cluster_insts(generated, "mask_j"), "VALU")
    mma = _cluster_insts(generated, "PV_j-1") + _cluster_insts(generated, "QK_j")
    mfma_cycles, _ = _cycles(mma, "MFMA")
    mfma = [i for i in mma if i.opcode.startswith("v_mfma")]
    rowsum_reg = "rowsum_accumulator"
    rowsum_insts = [i for i in mfma if str(i.operands[0]) == generated.registers.get(rowsum_reg)]
    rowsum_cycles, _ = _cycles(rowsum_insts, "MFMA")
    rowsum_valu = 0
    for name in ("rowsum_carry_j", "rowsum_j"):  # rowsum="split" / "valu"
        if any(cl["name"] == name for cl in generated.clusters):
            rowsum_valu += _cycles(_cluster_insts(generated, name), "VALU")[0]
    return TileCounts(valu, trans, mask, len(mfma), len(rowsum_insts), mfma_cycles, dict(by_opcode + trans_ops),
                      rowsum_cycles, rowsum_valu)
