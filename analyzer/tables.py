"""The analyzer's numbers, each with its source: MFMA flops per instruction, per-arch sizes, and the
opcode classes that VALU/TRANS work is grouped by.

Sources:
  [isa]   AMD CDNA4 ISA guide: an MxNxK MFMA computes an MxN += MxK * KxN product, 2*M*N*K flop
          (one multiply + one add per term); the mnemonic spells M, N and K.
  [card]  /work/shared/design/README.md section 2 (MI355X data sheet: 256 CUs, 4 SIMDs per CU;
          the flops/inst column there is 2*M*N*K for every MFMA it lists).
  [h200]  NVIDIA H200 (GH100) data: 132 SMs, 4 warp schedulers (sub-partitions) per SM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

# -- MFMA flops per instruction --------------------------------------------------------------------
# v_mfma_<dst>_<M>x<N>x<K>[_<blocks>b]_<src> and v_smfmac_* (sparse: the mnemonic's K is the
# dense-equivalent K, so the same formula counts the flops of the dense product it stands for).
# Blocked MFMAs (..._4b, ..._16b) compute that many independent products. [isa]
_MFMA_SHAPE = re.compile(r"^v_(?:mfma|smfmac)(?:_scale)?_[a-z0-9]+_(\d+)x(\d+)x(\d+)(?:_(\d+)b(?:_|$))?")

# explicit rows, checked against the design card [card]; the regex above covers the rest
MFMA_FLOPS: dict[str, int] = {
    "v_mfma_f32_32x32x64_f8f6f4": 2 * 32 * 32 * 64,  # [card] 16 passes
    "v_mfma_f32_16x16x128_f8f6f4": 2 * 16 * 16 * 128,  # [card] 8 passes
    "v_mfma_scale_f32_32x32x64_f8f6f4": 2 * 32 * 32 * 64,  # [card] same as unscaled
    "v_mfma_scale_f32_16x16x128_f8f6f4": 2 * 16 * 16 * 128,  # [isa]
    "v_mfma_f32_32x32x16_bf16": 2 * 32 * 32 * 16,  # [card] 8 passes
    "v_mfma_f32_16x16x32_bf16": 2 * 16 * 16 * 32,  # [card] 4 passes
    "v_mfma_ld_scale_b32": 0,  # [isa] loads the E8M0 scales of the next scaled MFMA; no arithmetic
}


def mfma_flops(opcode: str) -> Optional[int]:
    """Flops of one MFMA/SMFMAC instruction (2*M*N*K*blocks), or None for a mnemonic we cannot read."""
    if opcode in MFMA_FLOPS:
        return MFMA_FLOPS[opcode]
    match = _MFMA_SHAPE.match(opcode)
    if not match:
        return None
    m, n, k = (int(x) for x in match.group(1, 2, 3))
    blocks = int(match.group(4) or 1)
    return 2 * m * n * k * blocks


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
    ArchInfo("gfx950", 256, 4, "[card] MI355X"),
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
