"""Pipeline metrics over a :class:`~zyfa.trace.schema.Trace`, registered by name.

Every metric takes ``(trace, window="whole")`` (see :mod:`zyfa.analyzer.window`) and is computed
over the cycle range ``W = [w0, w1)``. A record's interval ``[start, end)`` is clipped to ``W``
when cycles are measured; counts use the record's ``issue`` cycle (in ``W``) unless said otherwise.
Scalar metrics return a float, or None where the quantity is undefined (empty window, no MFMA,
no ``iteration`` column, no clock ...; instruction-level metrics are None for a trace of Proton
``REGION`` scopes only). Table metrics return a pandas DataFrame.

``METRICS`` (scalars, in report order) and ``TABLES`` map names to :class:`Metric` entries, so the
CLI and the web UI iterate them instead of naming functions.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import pandas as pd

from zyfa.analyzer.arrays import UNIT_CODES, Arrays, arrays_of
from zyfa.analyzer.intervals import Coverage, check_keyspace, count_distinct, sweep, union
from zyfa.analyzer.tables import ARCHS, opcode_class
from zyfa.analyzer.window import Window, WindowSpec, resolve_window
from zyfa.gfx950.isa import mfma_flops
from zyfa.trace.schema import Trace


@dataclass(frozen=True)
class Metric:
    """A registered metric: ``fn(trace, window)``; ``unit`` says how to print it."""

    name: str
    unit: str  # fraction | cycles | count | flop | TFLOP/s | table
    fn: Callable
    description: str

    def __post_init__(self):
        if self.unit not in ("fraction", "cycles", "count", "flop", "TFLOP/s", "table"):
            raise ValueError(f"Unknown metric unit: {self.unit!r}")


METRICS: dict[str, Metric] = {}
TABLES: dict[str, Metric] = {}


def _register(registry: dict, unit: str):
    def wrap(fn):
        # the description is the docstring's first paragraph, on one line
        first = (fn.__doc__ or fn.__name__).strip().split("\n\n")[0]
        registry[fn.__name__] = Metric(fn.__name__, unit, fn, " ".join(first.split()))
        return fn
    return wrap


def metric(unit: str):
    """Register a scalar metric under its function name."""
    return _register(METRICS, unit)


def table(fn):
    """Register a table metric under its function name."""
    return _register(TABLES, "table")(fn)


def instruction_level(fn):
    """Make a scalar metric None for traces without instruction records (only Proton REGION scopes, or empty)."""
    @functools.wraps(fn)
    def wrapped(trace: Trace, window: WindowSpec = "whole"):
        resolved = resolve_window(trace, window)
        return fn(trace, resolved) if arrays_of(trace).has_instructions else None
    return wrapped


def _setup(trace: Trace, window: WindowSpec) -> tuple[Arrays, int, int]:
    a = arrays_of(trace)
    w0, w1 = resolve_window(trace, window)
    return a, w0, w1


def _ratio(num: float, den: float) -> Optional[float]:
    return float(num) / float(den) if den else None


def _clipped(a: Arrays, mask: np.ndarray, w0: int, w1: int) -> tuple[np.ndarray, np.ndarray]:
    """Clipped [start, end) of the masked records, empty intervals where they miss W."""
    s = np.clip(a.start[mask], w0, w1)
    e = np.clip(a.end[mask], w0, w1)
    return s, np.maximum(e, s)


def _issued_in(a: Arrays, w0: int, w1: int) -> np.ndarray:
    return (a.issue >= w0) & (a.issue < w1)


def _simd_frame(a: Arrays) -> pd.DataFrame:
    return pd.DataFrame({"cu": a.simd_keys[:, 0], "simd": a.simd_keys[:, 1]})


# -- basic extent ------------------------------------------------------------------------------------

@metric("cycles")
def cycles(trace: Trace, window: WindowSpec = "whole") -> float:
    """Length of the window in cycles, ``w1 - w0``."""
    _, w0, w1 = _setup(trace, window)
    return float(w1 - w0)


@metric("count")
def simds(trace: Trace, window: WindowSpec = "whole") -> float:
    """Number of ``(cu, simd)`` pairs in the trace (the denominator of per-SIMD fractions)."""
    return float(arrays_of(trace).n_simd)


@metric("count")
def waves(trace: Trace, window: WindowSpec = "whole") -> float:
    """Number of ``(cu, wave)`` pairs in the trace (the denominator of per-wave fractions)."""
    return float(arrays_of(trace).n_wave)


# -- MFMA pipe busy / idle -----------------------------------------------------------------------------

def _mfma_cycles(a: Arrays, w0: int, w1: int) -> np.ndarray:
    mask = a.unit_mask("MFMA")
    s, e = _clipped(a, mask, w0, w1)
    return np.bincount(a.simd_id[mask], weights=e - s, minlength=a.n_simd)


def skipped_in(trace: Trace, a: Arrays, w0: int, w1: int) -> tuple[int, np.ndarray]:
    """Loop periods the tracer skipped (no records) strictly inside ``(w0, w1)``: ``(cycles, MFMA
    cycles per SIMD id)``. A cycle-model trace lists them in ``meta.extra["skipped_periods"]``
    (``at_cycle`` on the record timeline, ``cycles``, ``mfma_cycles`` per SIMD number of CU 0);
    other traces have none: ``(0, zeros)``."""
    busy = np.zeros(a.n_simd)
    total = 0
    skips = [x for x in (trace.meta.extra or {}).get("skipped_periods") or () if w0 < x["at_cycle"] < w1]
    if not skips:
        return total, busy
    column = {(int(cu), int(simd)): i for i, (cu, simd) in enumerate(a.simd_keys)}
    for x in skips:
        total += int(x["cycles"])
        for simd, cycles_ in enumerate(x["mfma_cycles"]):
            if (0, simd) in column:
                busy[column[(0, simd)]] += cycles_
    return total, busy


@table
def mfma_busy_per_simd(trace: Trace, window: WindowSpec = "whole") -> pd.DataFrame:
    """Per ``(cu, simd)``: ``mfma_cycles`` = |W ∩ ⋃ MFMA [start, end)| on that SIMD,
    ``mfma_busy`` = mfma_cycles / |W|, ``mfma_idle`` = 1 - mfma_busy.

    MFMA records of one SIMD never overlap (schema validation), so the union is the sum of the
    clipped durations. Every SIMD that has any record in the trace gets a row. Loop periods the
    tracer skipped inside W (:func:`skipped_in`) count in both: their cycles in |W|, their MFMA
    cycles in mfma_cycles, as a thread trace of the same run would see them.
    """
    a, w0, w1 = _setup(trace, window)
    skipped, skipped_busy = skipped_in(trace, a, w0, w1)
    busy = _mfma_cycles(a, w0, w1) + skipped_busy
    out = _simd_frame(a)
    out["mfma_cycles"] = busy
    length = w1 - w0 + skipped
    out["mfma_busy"] = busy / length if length else np.nan
    out["mfma_idle"] = 1.0 - out["mfma_busy"]
    return out


@metric("fraction")
@instruction_level
def mfma_busy(trace: Trace, window: WindowSpec = "whole") -> Optional[float]:
    """Fraction of SIMD-cycles in W with the MFMA pipe busy: Σ_simd mfma_cycles / (simds × |W|),
    skipped loop periods inside W included (see :func:`mfma_busy_per_simd`).

    None for an empty window or a trace without records.
    """
    a, w0, w1 = _setup(trace, window)
    skipped, skipped_busy = skipped_in(trace, a, w0, w1)
    return _ratio(_mfma_cycles(a, w0, w1).sum() + skipped_busy.sum(), a.n_simd * (w1 - w0 + skipped))


@metric("fraction")
def mfma_idle(trace: Trace, window: WindowSpec = "whole") -> Optional[float]:
    """1 - mfma_busy: fraction of SIMD-cycles in W with the MFMA pipe idle."""
    busy = mfma_busy(trace, window)
    return None if busy is None else 1.0 - busy


# -- ping-pong overlap -----------------------------------------------------------------------------------

def _work_coverage(a: Arrays) -> tuple[Coverage, Coverage]:
    """Window-independent half of the overlap metric, over VALU ∪ TRANS work of each SIMD.

    ``anyone``: keyed by simd, the cycles at least one wave works. ``alone``: keyed by (simd, wave),
    the cycles that wave is the only one working.
    """
    span = a.span
    n_wave = max(a.n_wave, 1)
    check_keyspace(a.n_simd * n_wave + 1, span)
    # each wave's own VALU ∪ TRANS busy time, keyed by (simd, wave)
    work = a.unit_mask("VALU", "TRANS")
    pair = a.simd_id[work] * n_wave + a.wave_id[work]
    ps, pe = union(pair * span + (a.start[work] - a.t0), pair * span + (a.end[work] - a.t0))
    pair_of = ps // span
    simd_of, wave_of = pair_of // n_wave, pair_of % n_wave
    # re-key by simd and sweep: segments with how many waves work and (if one) which
    offset = simd_of * span - pair_of * span
    seg_s, seg_e, count, label = sweep(ps + offset, pe + offset, wave_of + 1)
    solo = count == 1
    seg_simd = seg_s[solo] // span
    solo_pair = seg_simd * n_wave + (label[solo] - 1)
    solo_s = seg_s[solo] - seg_simd * span + solo_pair * span
    solo_e = seg_e[solo] - seg_simd * span + solo_pair * span
    order = np.argsort(solo_s, kind="stable")
    return Coverage(seg_s, seg_e), Coverage(solo_s[order], solo_e[order])


def _overlap(a: Arrays, w0: int, w1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per MFMA record: (row mask, cycles in W, of those the cycles another wave of its SIMD runs VALU/TRANS)."""
    def compute():
        anyone, alone = a.cached("work_coverage", lambda: _work_coverage(a))
        span, n_wave = a.span, max(a.n_wave, 1)
        # MFMA intervals clipped to W: covered by anyone, minus covered by their own wave alone
        mfma = a.unit_mask("MFMA")
        s, e = _clipped(a, mfma, w0, w1)
        simd = a.simd_id[mfma]
        pair = simd * n_wave + a.wave_id[mfma]
        rel_s, rel_e = s - a.t0, e - a.t0
        covered = (anyone.between(simd * span + rel_s, simd * span + rel_e)
                   - alone.between(pair * span + rel_s, pair * span + rel_e))
        return mfma, e - s, covered
    return a.cached(("overlap", w0, w1), compute)


def _overlap_by(a: Arrays, w0: int, w1: int, group: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(MFMA cycles, overlap cycles) summed per ``group`` id (simd_id or wave_id) of the MFMA records."""
    mfma, length, covered = _overlap(a, w0, w1)
    return (np.bincount(group[mfma], weights=length, minlength=n),
            np.bincount(group[mfma], weights=covered, minlength=n))


def _overlap_frame(out: pd.DataFrame, mfma_cycles: np.ndarray, overlap: np.ndarray) -> pd.DataFrame:
    out["mfma_cycles"] = mfma_cycles
    out["overlap_cycles"] = overlap
    out["pingpong_overlap"] = np.where(mfma_cycles > 0, overlap / np.maximum(mfma_cycles, 1), np.nan)
    return out


@table
def pingpong_overlap_per_simd(trace: Trace, window: WindowSpec = "whole") -> pd.DataFrame:
    """Per ``(cu, simd)``: ``mfma_cycles``, ``overlap_cycles`` and ``pingpong_overlap`` = overlap_cycles / mfma_cycles.

    overlap_cycles = Σ over MFMA records m (wave w) of |m ∩ W ∩ ⋃ VALU/TRANS [start, end) of the
    SIMD's waves other than w|.
    """
    a, w0, w1 = _setup(trace, window)
    return _overlap_frame(_simd_frame(a), *_overlap_by(a, w0, w1, a.simd_id, a.n_simd))


@table
def pingpong_overlap_per_wave(trace: Trace, window: WindowSpec = "whole") -> pd.DataFrame:
    """Per ``(cu, wave)``: ``mfma_cycles`` of that wave's MFMAs in W, ``overlap_cycles`` of those under
    other waves' VALU/TRANS, ``pingpong_overlap`` = their ratio.

    As :func:`pingpong_overlap_per_simd`, summed over one wave's MFMA records instead of a SIMD's.
    Waves without MFMA cycles get NaN.
    """
    a, w0, w1 = _setup(trace, window)
    out = pd.DataFrame({"cu": a.wave_keys[:, 0], "wave": a.wave_keys[:, 1]})
    return _overlap_frame(out, *_overlap_by(a, w0, w1, a.wave_id, a.n_wave))


@metric("fraction")
@instruction_level
def pingpong_overlap(trace: Trace, window: WindowSpec = "whole") -> Optional[float]:
    """Fraction of MFMA-busy cycles in W during which another wave of the same SIMD runs VALU or TRANS work.

    = Σ_simd overlap_cycles / Σ_simd mfma_cycles (see :func:`pingpong_overlap_per_simd`): for each
    MFMA record of wave w, the cycles of its clipped interval covered by the union of VALU/TRANS
    intervals of the other waves on its SIMD. 1.0 is perfect two-wave ping-pong; a wave's own VALU
    work under its own MFMA does not count. None without MFMA cycles in W.
    """
    a, w0, w1 = _setup(trace, window)
    _, length, covered = _overlap(a, w0, w1)
    return _ratio(covered.sum(), length.sum())


# -- MFMA hand-over ----------------------------------------------------------------------------------------

@table
def handover_gaps(trace: Trace, window: WindowSpec = "whole") -> pd.DataFrame:
    """MFMA hand-overs: consecutive MFMA records on one SIMD (ordered by start) that belong to different waves.

    ``gap`` = next.start - previous.end (cycles the MFMA pipe waited while changing hands; 0 is a
    seamless hand-over). Kept when the gap lies in W: previous.end >= w0 and next.start <= w1.
    Columns: cu, simd, from_wave, to_wave, prev_end, next_start, gap.
    """
    a, w0, w1 = _setup(trace, window)
    return a.cached(("handover_gaps", w0, w1), lambda: _handover_gaps(a, w0, w1)).copy()


def _handover_gaps(a: Arrays, w0: int, w1: int) -> pd.DataFrame:
    idx = np.flatnonzero(a.unit_mask("MFMA"))
    idx = idx[np.lexsort((a.start[idx], a.simd_id[idx]))]
    prev, nxt = idx[:-1], idx[1:]
    keep = ((a.simd_id[prev] == a.simd_id[nxt]) & (a.wave_id[prev] != a.wave_id[nxt])
            & (a.end[prev] >= w0) & (a.start[nxt] <= w1))
    prev, nxt = prev[keep], nxt[keep]
    return pd.DataFrame({"cu": a.cu[prev], "simd": a.simd[prev], "from_wave": a.wave[prev], "to_wave": a.wave[nxt],
                         "prev_end": a.end[prev], "next_start": a.start[nxt], "gap": a.start[nxt] - a.end[prev]})


@table
def handover_gap_histogram(trace: Trace, window: WindowSpec = "whole") -> pd.DataFrame:
    """Distribution of MFMA hand-over gaps in W: columns gap (cycles), count, share, ascending by gap."""
    gaps = handover_gaps(trace, window)["gap"]
    out = gaps.value_counts().sort_index().rename_axis("gap").reset_index(name="count")
    out["share"] = out["count"] / len(gaps) if len(gaps) else np.nan
    return out


@metric("count")
def handovers(trace: Trace, window: WindowSpec = "whole") -> float:
    """Number of MFMA hand-overs between waves in W (rows of :func:`handover_gaps`)."""
    return float(len(handover_gaps(trace, window)))


@metric("cycles")
def handover_gap_mean(trace: Trace, window: WindowSpec = "whole") -> Optional[float]:
    """Mean MFMA hand-over gap in cycles (see :func:`handover_gaps`); None without hand-overs."""
    gaps = handover_gaps(trace, window)["gap"]
    return float(gaps.mean()) if len(gaps) else None


# -- VALU / TRANS per key block ----------------------------------------------------------------------------

def _inside_blocks(a: Arrays, w0: int, w1: int) -> np.ndarray:
    b = a.blocks
    return (b.first_issue >= w0) & (b.last_end <= w1)


def _per_block(a: Arrays, w0: int, w1: int, unit: str) -> tuple[Optional[float], Optional[float]]:
    return a.cached(("per_block", unit, w0, w1), lambda: _per_block_compute(a, w0, w1, unit))


def _per_block_compute(a: Arrays, w0: int, w1: int, unit: str) -> tuple[Optional[float], Optional[float]]:
    inside = _inside_blocks(a, w0, w1)
    n = int(inside.sum())
    if n == 0:
        return None, None
    rec = a.unit_mask(unit) & (a.block >= 0)
    rec[rec] = inside[a.block[rec]]
    return rec.sum() / n, float((a.end[rec] - a.start[rec]).sum()) / n


@metric("count")
def blocks(trace: Trace, window: WindowSpec = "whole") -> float:
    """Number of blocks (``(cu, wave, iteration)`` triples) whose records all lie in W.

    Inside means first issue >= w0 and last end <= w1.
    """
    a, w0, w1 = _setup(trace, window)
    return float(_inside_blocks(a, w0, w1).sum())


@metric("count")
@instruction_level
def valu_ops_per_block(trace: Trace, window: WindowSpec = "whole") -> Optional[float]:
    """VALU instructions per block: VALU records of the blocks inside W / number of those blocks.

    A block is one wave's work for one main-loop iteration (one key block), from ``iteration``.
    None without ``iteration`` or without a block inside W.
    """
    a, w0, w1 = _setup(trace, window)
    return _per_block(a, w0, w1, "VALU")[0]


@metric("cycles")
@instruction_level
def valu_cycles_per_block(trace: Trace, window: WindowSpec = "whole") -> Optional[float]:
    """VALU cycles per block: Σ (end - start) of VALU records of the blocks inside W / their number.

    Reads as "224 VALU = 896 cycles" (224 ops x 4 cycles per wave64 op, per wave per iteration).
    """
    a, w0, w1 = _setup(trace, window)
    return _per_block(a, w0, w1, "VALU")[1]


@metric("count")
@instruction_level
def trans_ops_per_block(trace: Trace, window: WindowSpec = "whole") -> Optional[float]:
    """TRANS instructions per block (as valu_ops_per_block, unit TRANS)."""
    a, w0, w1 = _setup(trace, window)
    return _per_block(a, w0, w1, "TRANS")[0]


@metric("cycles")
@instruction_level
def trans_cycles_per_block(trace: Trace, window: WindowSpec = "whole") -> Optional[float]:
    """TRANS cycles per block (as valu_cycles_per_block, unit TRANS)."""
    a, w0, w1 = _setup(trace, window)
    return _per_block(a, w0, w1, "TRANS")[1]


@table
def valu_by_class(trace: Trace, window: WindowSpec = "whole") -> pd.DataFrame:
    """VALU and TRANS work per block by opcode class (``zyfa.analyzer.tables.opcode_class``).

    Columns: unit, op_class, ops_per_block, cycles_per_block (both over the blocks inside W, as in
    :func:`valu_cycles_per_block`), sorted by unit then cycles. Empty without blocks inside W.
    """
    a, w0, w1 = _setup(trace, window)
    columns = ["unit", "op_class", "ops_per_block", "cycles_per_block"]
    inside = _inside_blocks(a, w0, w1)
    n = int(inside.sum())
    if n == 0:
        return pd.DataFrame(columns=columns)
    rec = a.unit_mask("VALU", "TRANS") & (a.block >= 0)
    rec[rec] = inside[a.block[rec]]
    # per (unit, opcode) sums in numpy, then grouped by class over the few distinct opcodes
    n_op = max(len(a.opcodes), 1)
    key = (a.unit[rec] == UNIT_CODES["VALU"]).astype(np.int64) * n_op + a.opcode[rec]
    ops = np.bincount(key, minlength=2 * n_op)
    cyc = np.bincount(key, weights=a.end[rec] - a.start[rec], minlength=2 * n_op)
    used = np.flatnonzero(ops)
    frame = pd.DataFrame({"unit": np.where(used >= n_op, "VALU", "TRANS"),
                          "op_class": [opcode_class(a.opcodes[k % n_op]) for k in used],
                          "ops": ops[used], "cycles": cyc[used]})
    out = frame.groupby(["unit", "op_class"], as_index=False)[["ops", "cycles"]].sum()
    out["ops_per_block"] = out.pop("ops") / n
    out["cycles_per_block"] = out.pop("cycles") / n
    return out.sort_values(["unit", "cycles_per_block", "op_class"], ascending=[False, False, True],
                           ignore_index=True)[columns]


@table
def cycles_by_region(trace: Trace, window: WindowSpec = "whole") -> pd.DataFrame:
    """Work per schedule region (``region`` column: QK_j, softmax_j, PV_j-1 ...) and unit in W.

    Columns: region (``"(none)"`` where null), unit, instructions (records issued in W), cycles
    (Σ of their [start, end) clipped to W). Sorted by region, then cycles, largest first.
    """
    a, w0, w1 = _setup(trace, window)
    rec = _issued_in(a, w0, w1)
    s, e = _clipped(a, rec, w0, w1)
    units, regions, count, cyc = _by_unit_and(a.unit[rec], a.region[rec], a.regions + ["(none)"], e - s)
    out = pd.DataFrame({"region": regions, "unit": units, "instructions": count, "cycles": cyc.astype(np.int64)})
    return out.sort_values(["region", "cycles", "unit"], ascending=[True, False, True], ignore_index=True)


def _by_unit_and(unit: np.ndarray, code: np.ndarray, names: list, weights: np.ndarray
                 ) -> tuple[list, list, np.ndarray, np.ndarray]:
    """Records grouped by (unit, code of a string column): per group present, in key order, the unit
    name, the code's name, the record count and the sum of ``weights``. ``names`` has one more entry
    than the column's values: the name of code -1 (null)."""
    n = len(names)
    key = unit.astype(np.int64) * n + np.where(code < 0, n - 1, code)
    count = np.bincount(key, minlength=len(UNIT_CODES) * n)
    sums = np.bincount(key, weights=weights, minlength=len(UNIT_CODES) * n)
    used = np.flatnonzero(count)
    units = list(UNIT_CODES)
    return [units[k // n] for k in used], [names[k % n] for k in used], count[used], sums[used]


# -- stalls and issue ------------------------------------------------------------------------------------------

@table
def stall_breakdown(trace: Trace, window: WindowSpec = "whole") -> pd.DataFrame:
    """Stall cycles by unit and reason, over records issued in W with ``stall > 0``.

    Columns: unit, reason (``"unknown"`` where null), stall_cycles (Σ stall), records (how many
    stalled), share (of all stall cycles in W). Sorted by stall_cycles, largest first.
    """
    a, w0, w1 = _setup(trace, window)
    rec = _issued_in(a, w0, w1) & (a.stall > 0)
    units, reasons, count, cycles_ = _by_unit_and(a.unit[rec], a.reason[rec], a.reasons + ["unknown"], a.stall[rec])
    out = pd.DataFrame({"unit": units, "reason": reasons, "stall_cycles": cycles_.astype(np.int64), "records": count})
    total = out["stall_cycles"].sum()
    out["share"] = out["stall_cycles"] / total if total else np.nan
    return out.sort_values(["stall_cycles", "unit", "reason"], ascending=[False, True, True], ignore_index=True)


@metric("fraction")
@instruction_level
def stall_fraction(trace: Trace, window: WindowSpec = "whole") -> Optional[float]:
    """Σ stall of records issued in W / (waves × |W|): the fraction of wave-cycles spent waiting to issue."""
    a, w0, w1 = _setup(trace, window)
    return _ratio(a.stall[_issued_in(a, w0, w1)].sum(), a.n_wave * (w1 - w0))


@metric("fraction")
@instruction_level
def issue_utilisation(trace: Trace, window: WindowSpec = "whole") -> Optional[float]:
    """Fraction of SIMD-cycles in W in which the SIMD issued at least one instruction.

    = |{(simd, issue cycle)}| over non-REGION records issued in W / (simds × |W|).
    """
    a, w0, w1 = _setup(trace, window)
    rec = _issued_in(a, w0, w1) & (a.unit != UNIT_CODES["REGION"])
    slots = count_distinct(a.simd_id[rec] * a.span + (a.issue[rec] - a.t0))
    return _ratio(slots, a.n_simd * (w1 - w0))


@metric("fraction")
@instruction_level
def issue_per_wave(trace: Trace, window: WindowSpec = "whole") -> Optional[float]:
    """Instructions issued in W per wave-cycle: non-REGION records issued in W / (waves × |W|) (at most 1)."""
    a, w0, w1 = _setup(trace, window)
    rec = _issued_in(a, w0, w1) & (a.unit != UNIT_CODES["REGION"])
    return _ratio(rec.sum(), a.n_wave * (w1 - w0))


# -- throughput -----------------------------------------------------------------------------------------

def _flops(a: Arrays, w0: int, w1: int) -> Optional[float]:
    return a.cached(("flops", w0, w1), lambda: _flops_compute(a, w0, w1))


def _flops_compute(a: Arrays, w0: int, w1: int) -> Optional[float]:
    mask = a.unit_mask("MFMA")
    s, e = _clipped(a, mask, w0, w1)
    length = a.end[mask] - a.start[mask]
    weight = np.where(length > 0, (e - s) / np.maximum(length, 1), _issued_in(a, w0, w1)[mask])
    per_opcode = np.array([np.nan if (f := mfma_flops(op)) is None else f for op in a.opcodes] or [0.0])
    flops = per_opcode[a.opcode[mask]]
    counted = weight > 0
    if np.isnan(flops[counted]).any():
        return None
    return float((flops[counted] * weight[counted]).sum())


@table
def unknown_mfma_opcodes(trace: Trace, window: WindowSpec = "whole") -> pd.DataFrame:
    """MFMA-unit opcodes without a flops entry (``zyfa.gfx950.isa.mfma_flops``).

    Any of them in W makes mfma_flops_total, tflops and tflops_device None.
    """
    a = arrays_of(trace)
    mask = a.unit_mask("MFMA")
    names = sorted({a.opcodes[i] for i in np.unique(a.opcode[mask]) if mfma_flops(a.opcodes[i]) is None})
    return pd.DataFrame({"opcode": names})


@metric("flop")
@instruction_level
def mfma_flops_total(trace: Trace, window: WindowSpec = "whole") -> Optional[float]:
    """Matrix flops executed in W: Σ over MFMA records of flops/inst × |[start, end) ∩ W| / (end - start).

    flops/inst = 2·M·N·K (``zyfa.analyzer.tables``). None if an MFMA opcode in W has no entry.
    """
    a, w0, w1 = _setup(trace, window)
    return _flops(a, w0, w1)


@metric("TFLOP/s")
@instruction_level
def tflops(trace: Trace, window: WindowSpec = "whole") -> Optional[float]:
    """Achieved matrix TFLOP/s of the traced CUs in W: mfma_flops_total / (|W| / clock) / 1e12.

    None without ``meta.clock_mhz``, an empty window or unknown MFMA flops.
    """
    a, w0, w1 = _setup(trace, window)
    clock = trace.meta.clock_mhz
    flops = _flops(a, w0, w1)
    if clock is None or flops is None or w1 <= w0:
        return None
    return flops * clock / (w1 - w0) / 1e6


@metric("TFLOP/s")
def tflops_device(trace: Trace, window: WindowSpec = "whole") -> Optional[float]:
    """Device TFLOP/s if every SIMD of ``meta.arch`` ran like the traced ones in W.

    = mfma_flops_total / (simds × |W|) × (SIMDs of the device) × clock / 1e12, with unit counts from
    ``zyfa.analyzer.tables.ARCHS``. None for an unknown arch or where :func:`tflops` is None.
    """
    a, w0, w1 = _setup(trace, window)
    arch = ARCHS.get(trace.meta.arch)
    rate = tflops(trace, Window(w0, w1))
    if arch is None or rate is None or a.n_simd == 0:
        return None
    return rate / a.n_simd * arch.simds


# -- summary and compare ------------------------------------------------------------------------------------

def summary(trace: Trace, window: WindowSpec = "whole") -> dict[str, Optional[float]]:
    """Every scalar metric of :data:`METRICS` over one window, in registry order.

    Keys include cycles, mfma_busy, mfma_idle, pingpong_overlap, valu_cycles_per_block,
    trans_cycles_per_block, issue_utilisation, tflops; values are floats or None (undefined).
    """
    resolved = resolve_window(trace, window)
    return {name: m.fn(trace, resolved) for name, m in METRICS.items()}


def compare(a: Trace, b: Trace, window: WindowSpec = "whole") -> pd.DataFrame:
    """Two traces metric by metric: columns metric, unit, a, b, diff (= b - a), ratio (= b / a).

    Each trace gets its own window from the same spec (``"steady"`` is resolved per trace).
    Undefined values are NaN; ratio is NaN where a is 0.
    """
    sa, sb = summary(a, window), summary(b, window)
    va = np.array([np.nan if sa[n] is None else sa[n] for n in METRICS], float)
    vb = np.array([np.nan if sb[n] is None else sb[n] for n in METRICS], float)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(va != 0, vb / np.where(va != 0, va, 1), np.nan)
    return pd.DataFrame({"metric": list(METRICS), "unit": [m.unit for m in METRICS.values()],
                         "a": va, "b": vb, "diff": vb - va, "ratio": ratio})
