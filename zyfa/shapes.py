"""Attention problem shapes, shape shorthands (``32k``) and the FLOP convention.

TFLOP/s convention (FlashAttention / the design notes): ``4 * b * h * s_q * s_k * d / time``,
halved for causal attention. With d_qk != d_v (MLA) the two matrix products are counted
separately: ``2 * b * h * s_q * s_k * (d_qk + d_v)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

_SHORTHAND = re.compile(r"^(\d+)([kK]?)$")
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class AttnShape:
    """One causal/non-causal prefill attention problem."""

    batch: int = 1
    heads: int = 32
    heads_k: int = 32
    seqlen_q: int = 32768
    seqlen_k: int = 32768
    headdim: int = 128
    headdim_v: int = 128
    causal: bool = True
    dtype: str = "fp8"  # "fp8" (e4m3) or "bf16"

    def __post_init__(self):
        for name in ("batch", "heads", "heads_k", "seqlen_q", "seqlen_k", "headdim", "headdim_v"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"AttnShape.{name} must be a positive int, got {value!r}")
            if value > INT32_MAX:
                raise ValueError(f"AttnShape.{name} = {value} is over {INT32_MAX} (kernel arguments are 32-bit)")
        if self.heads % self.heads_k:
            raise ValueError(f"AttnShape: heads ({self.heads}) must be a multiple of heads_k ({self.heads_k})")
        if self.dtype not in ("fp8", "bf16"):
            raise ValueError(f"AttnShape.dtype must be 'fp8' or 'bf16', got {self.dtype!r}")

    @property
    def flops(self) -> float:
        """Matrix FLOPs of the forward pass (causal: half of the full matrix)."""
        total = 2.0 * self.batch * self.heads * self.seqlen_q * self.seqlen_k * (self.headdim + self.headdim_v)
        return total / 2 if self.causal else total

    def tflops(self, seconds: float) -> float:
        if seconds <= 0:
            raise ValueError(f"time must be positive, got {seconds}")
        return self.flops / seconds / 1e12

    def with_(self, **changes) -> "AttnShape":
        return replace(self, **changes)

    def __str__(self) -> str:
        d = f"d{self.headdim}" if self.headdim == self.headdim_v else f"d{self.headdim}/{self.headdim_v}"
        h = f"h{self.heads}" if self.heads == self.heads_k else f"h{self.heads}/{self.heads_k}"
        s = f"s{self.seqlen_q}" if self.seqlen_q == self.seqlen_k else f"sq{self.seqlen_q}/sk{self.seqlen_k}"
        return f"b{self.batch} {h} {s} {d} {'causal' if self.causal else 'full'} {self.dtype}"


def parse_seqlen(text: str) -> int:
    """``"32k"`` -> 32768, ``"4096"`` -> 4096."""
    match = _SHORTHAND.match(str(text).strip())
    if not match:
        raise ValueError(f"bad sequence length {text!r}: use an integer or a multiple of 1024 written like '32k'")
    value = int(match.group(1)) * (1024 if match.group(2) else 1)
    if value <= 0:
        raise ValueError(f"sequence length must be positive, got {text!r}")
    return value


def parse_shape(seqlen: str, **overrides) -> AttnShape:
    """Shape for ``--shape 32k`` plus keyword overrides (``batch=4, heads=64`` ...)."""
    s = parse_seqlen(seqlen)
    fields = {k: v for k, v in overrides.items() if v is not None}
    if "heads" in fields and "heads_k" not in fields:
        fields["heads_k"] = fields["heads"]
    if "headdim" in fields and "headdim_v" not in fields:
        fields["headdim_v"] = fields["headdim"]
    return AttnShape(seqlen_q=s, seqlen_k=s, **fields)
