"""The analyzer's numbers, each with its source: per-arch sizes and the opcode classes that
VALU/TRANS work is grouped by. MFMA flops per instruction are the machine description's
(:func:`zyfa.gfx950.isa.mfma_flops`), as the cycle model counts them.

Sources:
  [card]  ../shared/design/README.md section 2 (MI355X data sheet: 256 CUs, 4 SIMDs per CU),
          as the cycle model's parameters ``cus`` and ``simds_per_cu`` (zyfa.gfx950.timing) state it.
  [h200]  NVIDIA H200 (GH100) data: 132 SMs, 4 warp schedulers (sub-partitions) per SM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from zyfa.gfx950 import timing


# -- per-arch sizes ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArchInfo:
    """Execution-unit counts of one device, for scaling per-SIMD rates to the whole device."""

    name: str
    compute_units: int
    simds_per_cu: int
    source: str

    def __post_init__(self):
        if self.compute_units <= 0 or self.simds_per_cu <= 0:
            raise ValueError(f"ArchInfo({self.name}): unit counts must be positive")

    @property
    def simds(self) -> int:
        return self.compute_units * self.simds_per_cu


ARCHS: dict[str, ArchInfo] = {a.name: a for a in (
    ArchInfo("gfx950", int(timing.param("cus")), int(timing.param("simds_per_cu")), "[card] MI355X (zyfa.gfx950.timing)"),
    ArchInfo("sm_90", 132, 4, "[h200] H200 SXM"),
)}

# -- opcode classes for VALU/TRANS breakdowns ------------------------------------------------------------
# first match wins; anything unmatched is reported under its own mnemonic stem (v_xxx_...) -> "xxx"
OPCODE_CLASSES: tuple[tuple[str, re.Pattern], ...] = tuple((name, re.compile(rx)) for name, rx in (
    ("exp", r"^v_exp_"),
    ("log", r"^v_log_"),
    ("rcp/rsq/sqrt", r"^v_(rcp|rsq|sqrt)_"),
    ("max", r"^v_(pk_)?max"),
    ("min", r"^v_(pk_)?min"),
    ("fma", r"^v_(pk_)?(fma|fmac|mad|mac)"),
    ("add/sub", r"^v_(pk_)?(add|sub)"),
    ("mul", r"^v_(pk_)?mul"),
    ("cvt", r"^v_cvt"),
    ("mov", r"^v_(mov|accvgpr|readlane|writelane|readfirstlane)"),
    ("perm/shift", r"^v_(perm|alignbyte|alignbit|lshl|lshr|ashr|bfe|bfi|and|or|xor|not)"),
    ("cmp/cndmask", r"^v_(cmp|cndmask)"),
))


def opcode_class(opcode: str) -> str:
    """The class an opcode is counted under in per-block VALU/TRANS breakdowns."""
    for name, pattern in OPCODE_CLASSES:
        if pattern.match(opcode):
            return name
    parts = opcode.split("_")
    return parts[1] if len(parts) > 1 and parts[0] == "v" else opcode
