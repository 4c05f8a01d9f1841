"""MFMA pipe cycles for hardware records (``zyfa.trace.rocprof.timing``).

Thread trace on gfx9 times the issue of an MFMA, not the matrix pipe finishing it. The schema
defines an MFMA record's ``end`` as ``start + passes * 4``; the pass counts come from the one
sourced timing table of the project, :mod:`zyfa.gfx950.timing` (no numbers here).
"""

from __future__ import annotations

from zyfa.gfx950.timing import op_class
from zyfa.trace.rocprof.records import MfmaCycles


def model_mfma_cycles() -> MfmaCycles:
    """``opcode -> cycles`` for MFMA mnemonics from the CDNA4 timing table (None for other units)."""
    def cycles(opcode: str):
        cls = op_class(opcode)
        return cls.cycles if cls.unit == "MFMA" else None

    return cycles
