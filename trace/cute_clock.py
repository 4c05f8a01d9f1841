"""Per-warpgroup regions of the CuTe DSL Hopper FP8 kernel from its in-kernel clock64 stamps.

``zyfa.kernels.hopper.attn_fp8_sm90.attention_fp8_sm90(..., timeline=T)`` runs a kernel variant in
which both consumer warpgroups of every CTA write ``clock64()`` into ``T[cta, wg, j, event]``
(int64, ``(ctas, 2, n_blocks + 2, 4)``, zero where nothing ran). Events of key block j: 0 = the
warpgroup's turn begins (it issues QK^T of block j and PV of block j-1 next), 1 = S_j is ready,
2 = PV of block j-1 is done, 3 = the softmax of block j (and the merge of PV j-1) is done;
column ``n_blocks`` holds the last PV (0 issued, 2 done), column ``n_blocks + 1`` the SM id. The
``n128`` kernel variant stamps per 128-key tile instead (j = tile; event 2 = PV of block a of tile
j-1 done; the columns past its last tile stay zero).

Mapping to schema v1 (docs/trace-schema.md), one row per region, with the scope names of
:mod:`zyfa.trace.proton` so its metrics apply unchanged: ``qk`` = [0, 1] of block j, ``pv`` (of
block j-1) = [0 of block j, 2 of block j], ``softmax`` = [1, 3] of block j. ``cu`` = SM id,
``simd`` = warp group in the CTA (1, 2), ``wave`` = CTA * 32 + first warp of the group, ``slot`` = 0,
``unit`` = ``REGION``, times in SM clock cycles relative to the earliest stamp of that SM,
``iteration`` = key block. Caveat as for Proton: a region is where the stamps landed in the
scheduled code (ptxas orders clock reads, not the instructions around them), not a unit's busy time.
"""

from __future__ import annotations

from typing import Iterable, Optional

import numpy as np

from zyfa.trace.proton import MAX_WARPS, WARPS_PER_GROUP
from zyfa.trace.schema import Trace, TraceError, TraceMeta

EVENTS = ("turn", "s_ready", "pv_prev_done", "softmax_done")


def records_from_stamps(stamps: np.ndarray, ctas: Iterable[int]) -> list[dict]:
    """Schema records of the chosen CTAs from a ``(ctas, 2, n_blocks + 2, 4)`` stamp array."""
    stamps = np.asarray(stamps, dtype=np.int64)
    if stamps.ndim != 4 or stamps.shape[1] != 2 or stamps.shape[3] != len(EVENTS) or stamps.shape[2] < 2:
        raise ValueError(f"stamps must be (ctas, 2, n_blocks + 2, {len(EVENTS)}), got {stamps.shape}")
    nb = stamps.shape[2] - 2
    rows: list[dict] = []
    for cta in ctas:
        if not 0 <= cta < stamps.shape[0]:
            raise ValueError(f"CTA {cta} is outside the {stamps.shape[0]} CTAs of the stamp array")
        for wg in range(2):
            st = stamps[cta, wg]
            visited = [j for j in range(nb) if st[j, 0] != 0]
            sm = int(st[nb + 1, 0])
            base = dict(cu=sm, simd=wg + 1, wave=cta * MAX_WARPS + WARPS_PER_GROUP * (wg + 1), slot=0, pc=None,
                        operands=None, unit="REGION", stall=0, stall_reason=None)

            def region(name, start, end, j):
                rows.append(dict(base, opcode=name, region=name, issue=int(start), start=int(start),
                                 end=int(max(end, start)), iteration=j))
            for j in visited:
                region("qk", st[j, 0], st[j, 1], j)
                region("softmax", st[j, 1], st[j, 3], j)
                if j > 0:
                    region("pv", st[j, 0], st[j, 2], j - 1)
            if visited and st[nb, 0] != 0:
                region("pv", st[nb, 0], st[nb, 2], visited[-1])
    if not rows:
        return rows
    t0: dict[int, int] = {}
    for r in rows:
        t0[r["cu"]] = min(t0.get(r["cu"], r["start"]), r["start"])
    for r in rows:
        for key in ("issue", "start", "end"):
            r[key] -= t0[r["cu"]]
    return rows


def trace_from_stamps(stamps: np.ndarray, ctas: Iterable[int], meta_fields: dict,
                      clock_mhz: Optional[float] = None) -> Trace:
    """A :class:`zyfa.trace.schema.Trace` (source ``cute-clock``) of the chosen CTAs."""
    records = records_from_stamps(stamps, ctas)
    if not records:
        raise TraceError("<stamps>", "stamps", "no stamped key block in the chosen CTAs")
    meta = TraceMeta(source="cute-clock", clock_mhz=clock_mhz, simulated=False, **meta_fields)
    return Trace.from_records(records, meta)
