"""Which AITER baseline our kernels are compared with by default (CLI, UI, model table, README).

:func:`default_pairs` answers with what resolves here:

- AITER's real FP8 causal forward (``aiter:fwd_hd128_fp8_causal``) resolvable (an installed aiter
  built from source, or ``ZYFA_AITER_DIR`` / ``--aiter-dir`` naming a ROCm/aiter checkout):
  one pair, ``zyfa-fp8`` vs that object;
- otherwise (a PyPI-only install: the ``amd-aiter`` wheel ships the BF16 objects only) two pairs:
  ``zyfa-bf16`` vs AITER's real BF16 causal forward, and ``zyfa-fp8`` vs ``aiter-like-fp8``, which
  is *our reconstruction* of AITER v3 FP8's loop in our generator, not AITER's code; each pair
  says so in its ``label``.
"""

from __future__ import annotations

from dataclasses import dataclass

from zyfa.kernels import aiter

REAL_FP8 = "aiter:fwd_hd128_fp8_causal"
REAL_BF16 = "aiter:fwd_hd128_bf16_causal"
# our kernels that stand in for AITER code, with what a reader must be told wherever they are shown
RECONSTRUCTIONS = {"aiter-like-fp8": "aiter-like-fp8: OUR RECONSTRUCTION of AITER v3 FP8, not AITER's code"}


@dataclass(frozen=True)
class Pair:
    ours: str
    baseline: str
    label: str  # what the baseline is, for the reader
    real: bool  # True: the baseline is AITER's own code object


def default_pairs() -> tuple[list[Pair], str]:
    """(pairs, why): the default comparisons and one sentence saying which baseline is shown."""
    try:
        known = aiter.catalog()
    except aiter.AiterUnavailable as exc:
        known, reason = {}, str(exc)
    else:
        reason = ""
    if REAL_FP8.removeprefix("aiter:") in known:
        return ([Pair("zyfa-fp8", REAL_FP8, "AITER's real v3 FP8 causal forward", True)],
                f"baseline: AITER's real {REAL_FP8} ({known[REAL_FP8.removeprefix('aiter:')].source})")
    why = (f"AITER's real FP8 object is not resolvable here ({reason or 'not in the amd-aiter wheel'}; set "
           f"{aiter.ENV_DIR} or --aiter-dir to a ROCm/aiter checkout)")
    pairs = [Pair("zyfa-fp8", "aiter-like-fp8", RECONSTRUCTIONS["aiter-like-fp8"], False)]
    if REAL_BF16.removeprefix("aiter:") in known:
        pairs.insert(0, Pair("zyfa-bf16", REAL_BF16, "AITER's real v3 BF16 causal forward (amd-aiter wheel)", True))
    return pairs, why
