"""Per-instruction listing and the "why" of a cycle difference, over schema-v1 traces.

Pure functions (no UI): the web UI's instruction view and headline call them; they read only
:class:`~zyfa.trace.schema.Trace` and the analyzer's windows.

* :func:`instruction_listing`: one row per instruction of the program (``pc``), like RGP's or
  rocprof-compute-viewer's instruction timing view: executions, busy and latency cycles, stall
  cycles by reason, and the instruction's share of all stall + busy cycles.
* :func:`region_of`: the schedule region of each record: the ``region`` column where the
  generator recorded it, else its :func:`loop_part`: ``prologue``, ``loop``, ``epilogue`` from the
  loop structure (the ``iteration`` column and each wave's time order), so AITER code objects and
  ATT-imported hardware traces are grouped too, and any two traces can be compared part by part.
* :func:`mfma_pipe_budget` and :func:`explain`: the MFMA pipe's time per key block split into
  terms that add up exactly, and two traces' terms ranked by how much of the cycle difference
  each explains; :func:`pipe_intervals`: the cycle ranges behind one term (what a UI shades).
* :func:`iteration_phases`: per main-loop iteration, one wave's MFMA phase, one wave's softmax
  (VALU + TRANS) phase and the MFMA pipe's idle cycles at hand-overs between waves.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from zyfa.analyzer.arrays import arrays_of
from zyfa.analyzer.metrics import blocks
from zyfa.analyzer.window import WindowSpec, resolve_window
from zyfa.trace.schema import Trace

PROLOGUE, LOOP, EPILOGUE = "prologue", "loop", "epilogue"


def loop_part(trace: Trace) -> np.ndarray:
    """Each record's part of the loop structure (object array of ``prologue``, ``loop``,
    ``epilogue``), whatever the ``region`` column says: comparable between any two traces.

    ``loop`` for an instruction (pc) that executes in more than one main-loop iteration; any other
    record by when its wave issues it: ``prologue`` before the wave's first loop record,
    ``epilogue`` after its last, ``loop`` in between (code the loop branches to out of line,
    which a generator may place after the loop: zyfa-bf16's second wave per SIMD loads its first
    tile from there before its loop starts, and the pc alone called that the epilogue). A wave
    without loop records falls back to the pc: ``prologue`` before the loop's first pc, else
    ``epilogue`` (records without a pc: before or after the first loop record's issue).
    """
    key = "analyzer.listing.loop_part"
    if key in trace.cache:
        return trace.cache[key]
    n = len(trace)
    it = trace.column("iteration", fill=-1) if n else np.empty(0, np.int64)
    pc = trace.column("pc", fill=-1) if n else np.empty(0, np.int64)
    issue = trace.column("issue") if n else np.empty(0, np.int64)
    frame = pd.DataFrame({"pc": pc, "it": it})
    iters_per_pc = frame[frame.pc >= 0].groupby("pc")["it"].nunique()
    loop_pcs = set(iters_per_pc.index[iters_per_pc > 1])
    in_loop = np.fromiter((p in loop_pcs for p in pc), bool, n) if loop_pcs else np.zeros(n, bool)
    if in_loop.any():
        first_pc = min(loop_pcs)
        first_issue = issue[in_loop].min()
        before = np.where(pc >= 0, pc < first_pc, issue < first_issue)
        after = ~before
        cu, simd, wv = (trace.column(c).astype(np.int64) for c in ("cu", "simd", "wave"))
        wave = pd.Series((cu << 42) | (simd << 21) | wv)  # one key per (cu, simd, wave)
        span = pd.DataFrame({"wave": wave[in_loop].to_numpy(), "issue": issue[in_loop]}).groupby("wave")["issue"]
        first = wave.map(span.min()).to_numpy(dtype=np.float64)  # NaN: the wave has no loop record
        last = wave.map(span.max()).to_numpy(dtype=np.float64)
        timed = ~np.isnan(first)
        before = np.where(timed, issue < first, before)
        after = np.where(timed, issue > last, after)
    else:
        before, after = np.ones(n, bool), np.zeros(n, bool)
    part = np.where(in_loop, LOOP, np.where(before, PROLOGUE, np.where(after, EPILOGUE, LOOP))).astype(object)
    trace.cache[key] = part
    return part


def region_of(trace: Trace) -> np.ndarray:
    """Region name per record (object array): the ``region`` column where it is set (the
    generator's cluster names), else :func:`loop_part`."""
    key = "analyzer.listing.region_of"
    if key in trace.cache:
        return trace.cache[key]
    n = len(trace)
    region = np.asarray(trace.table.column("region").to_pandas(), dtype=object) if n else np.empty(0, object)
    missing = pd.isna(region)
    if missing.any():
        region = np.where(missing, loop_part(trace), region)
    trace.cache[key] = region
    return region


def instruction_listing(trace: Trace, window: WindowSpec = "whole") -> pd.DataFrame:
    """One row per instruction (``pc``) over the records issued in W, in program order.

    Columns: ``pc``, ``opcode``, ``operands`` and ``unit`` (of its first execution), ``region``
    (:func:`region_of`) and ``part`` (:func:`loop_part`), the most frequent of each, ``executions`` (records), ``busy`` (Σ end - start:
    cycles its unit was occupied), ``latency`` (mean end - issue), ``stall`` (Σ stall: cycles its
    wave waited before issuing it), ``stall_<reason>`` per reason present, and ``share``: the
    instruction's stall + busy over the sum of stall + busy of all instructions in W.
    Records without a pc (Proton regions) are grouped by (opcode, operands) with ``pc = -1``.
    """
    w = resolve_window(trace, window)
    empty = ["pc", "opcode", "operands", "unit", "region", "part", "executions", "busy", "latency", "stall", "share"]
    if len(trace) == 0:
        return pd.DataFrame(columns=empty)
    issue = trace.column("issue")
    rec = np.flatnonzero((issue >= w.start) & (issue < w.end))
    if rec.size == 0:
        return pd.DataFrame(columns=empty)
    cols = trace.table.select(["pc", "opcode", "operands", "unit", "stall_reason"]).take(rec).to_pandas()
    frame = pd.DataFrame({
        "pc": cols["pc"].fillna(-1).astype(np.int64).to_numpy(), "opcode": cols["opcode"].astype(object).to_numpy(),
        "operands": cols["operands"].astype(object).fillna("").to_numpy(), "unit": cols["unit"].astype(object).to_numpy(),
        "region": region_of(trace)[rec], "part": loop_part(trace)[rec],
        "busy": (trace.column("end") - trace.column("start"))[rec],
        "latency": (trace.column("end") - issue)[rec], "stall": trace.column("stall")[rec],
        "reason": cols["stall_reason"].astype(object).fillna("unknown").to_numpy(),
    })
    keys = ["pc"] if (frame["pc"] >= 0).all() else ["pc", "opcode", "operands"]
    g = frame.groupby(keys, sort=True)
    out = g.agg(**{k: (k, "first") for k in ("opcode", "operands", "unit") if k not in keys},
                executions=("busy", "size"), busy=("busy", "sum"), latency=("latency", "mean"),
                stall=("stall", "sum")).reset_index()
    # most frequent region and loop part per instruction (ties: the name first in sort order)
    for col in ("region", "part"):
        counts = frame.groupby([*keys, col]).size().reset_index(name="n")
        counts = counts.sort_values([*keys, "n"], ascending=[True] * len(keys) + [False], kind="stable")
        out = out.merge(counts.drop_duplicates(keys)[[*keys, col]], on=keys, how="left")
    out = out[["pc", "opcode", "operands", "unit", "region", "part", "executions", "busy", "latency", "stall"]]
    stalled = frame[frame["stall"] > 0]
    if len(stalled):
        by_reason = stalled.pivot_table(index=keys, columns="reason", values="stall", aggfunc="sum", fill_value=0)
        by_reason.columns = [f"stall_{r}" for r in by_reason.columns]
        out = out.merge(by_reason.reset_index(), on=keys, how="left")
        for c in by_reason.columns:
            out[c] = out[c].fillna(0).astype(np.int64)
    total = float((out["stall"] + out["busy"]).sum())
    out["share"] = (out["stall"] + out["busy"]) / total if total else np.nan
    return out.reset_index(drop=True)


def occurrences(trace: Trace, pc: int, opcode: Optional[str] = None) -> np.ndarray:
    """Rows (record numbers) of every execution of the instruction at ``pc`` (for ``pc = -1``,
    records without a pc whose opcode is ``opcode``)."""
    pcs = trace.column("pc", fill=-1)
    hit = pcs == int(pc)
    if int(pc) < 0 and opcode is not None:
        hit &= np.asarray(trace.table.column("opcode").to_pandas(), dtype=object) == opcode
    return np.flatnonzero(hit)


# -- the MFMA pipe's time per key block, and the "why" of a difference ------------------------------------

BUDGET_TERMS = {
    "mfma_busy": "MFMA pipe busy (matrix work)",
    "handover_gap": "MFMA pipe idle at a hand-over between waves (the partner's softmax/VALU phase not done)",
    "same_wave_gap": "MFMA pipe idle between two MFMAs of one wave (dependency, waitcnt, loads)",
    "edge": "MFMA pipe idle before the first / after the last MFMA of the window",
}


def mfma_pipe_budget(trace: Trace, window: WindowSpec = "steady") -> dict[str, Optional[float]]:
    """The MFMA pipes' time in W per key block, split into terms that add up exactly.

    Per SIMD, its MFMA records ordered by start (they do not overlap: schema rule) and clipped to
    W cover ``busy`` cycles; the gaps between consecutive ones are ``handover_gap`` when the two
    MFMAs belong to different waves and ``same_wave_gap`` otherwise; ``edge`` is the rest of W
    (before the first, after the last). Summed over SIMDs and divided by :func:`blocks` (key blocks
    fully inside W): the terms add up to ``total = simds x |W| / blocks``, the SIMD-cycles one key
    block costs. All None when W holds no complete block or the trace has no MFMA.
    """
    a = arrays_of(trace)
    w = resolve_window(trace, window)
    n_blocks = blocks(trace, w)
    keys = ["total", *BUDGET_TERMS]
    mf, s, e, same_simd, gap, handover = _mfma_sequence(trace, w)
    if not n_blocks or mf.size == 0 or a.n_simd == 0:
        return dict.fromkeys(keys)
    busy = float((e - s).sum())
    hand = float(gap[handover].sum())
    same = float(gap[~handover].sum())
    total = float(a.n_simd * (w.end - w.start))
    per = 1.0 / n_blocks
    return {"total": total * per, "mfma_busy": busy * per, "handover_gap": hand * per, "same_wave_gap": same * per,
            "edge": (total - busy - hand - same) * per}


def _mfma_sequence(trace: Trace, w):
    """Each SIMD's MFMA records in W ordered by start (``mf``, rows), clipped to W (``s``, ``e``);
    for each consecutive pair: whether both are on one SIMD, the idle gap between them (0 across
    SIMDs) and whether it is a hand-over (two waves)."""
    a = arrays_of(trace)
    mf = np.flatnonzero(a.unit_mask("MFMA") & (a.end > w.start) & (a.start < w.end))
    mf = mf[np.lexsort((a.start[mf], a.simd_id[mf]))]
    s, e = np.clip(a.start[mf], w.start, w.end), np.clip(a.end[mf], w.start, w.end)
    same_simd = a.simd_id[mf[1:]] == a.simd_id[mf[:-1]]
    gap = np.where(same_simd, np.maximum(s[1:] - e[:-1], 0), 0)
    handover = same_simd & (a.wave_id[mf[1:]] != a.wave_id[mf[:-1]])
    return mf, s, e, same_simd, gap, handover


def pipe_intervals(trace: Trace, term: str, window: WindowSpec = "steady") -> pd.DataFrame:
    """The cycle ranges behind one term of :func:`mfma_pipe_budget` in W, as ``[start, end)`` on
    the row of a wave: ``mfma_busy`` each MFMA (clipped to W); ``handover_gap`` and
    ``same_wave_gap`` each gap before an MFMA, on that MFMA's wave; ``edge`` each SIMD's cycles
    before its first / after its last MFMA, on that MFMA's wave (a SIMD without MFMA has no wave
    to draw on and is left out, though the budget counts it). Their lengths summed over SIMDs and
    divided by the blocks in W are the budget's term (``edge``: up to those SIMDs).

    Columns: cu, simd, wave, start, end.
    """
    if term not in BUDGET_TERMS:
        raise ValueError(f"term must be one of {list(BUDGET_TERMS)}, got {term!r}")
    a = arrays_of(trace)
    w = resolve_window(trace, window)
    mf, s, e, same_simd, gap, handover = _mfma_sequence(trace, w)
    if term == "mfma_busy":
        rows, x0, x1 = mf, s, e
    elif term in ("handover_gap", "same_wave_gap"):
        pick = np.flatnonzero((gap > 0) & (handover if term == "handover_gap" else same_simd & ~handover))
        rows, x0, x1 = mf[pick + 1], e[pick], s[pick + 1]
    else:  # edge: before each SIMD's first MFMA, after its last
        first = np.r_[True, ~same_simd] if mf.size else np.zeros(0, bool)
        last = np.r_[~same_simd, True] if mf.size else np.zeros(0, bool)
        rows = np.r_[mf[first], mf[last]]
        x0 = np.r_[np.full(int(first.sum()), w.start), e[last]]
        x1 = np.r_[s[first], np.full(int(last.sum()), w.end)]
    keep = x1 > x0
    rows, x0, x1 = rows[keep], x0[keep], x1[keep]
    return pd.DataFrame({"cu": a.cu[rows], "simd": a.simd[rows], "wave": a.wave[rows],
                         "start": x0.astype(np.int64), "end": x1.astype(np.int64)})


PHASES = {
    "mfma_phase": "one wave's MFMA busy cycles on the key block (mean over the waves that ran it)",
    "softmax_phase": "one wave's VALU + TRANS busy cycles on the key block (its softmax; in a ping-pong it runs "
                     "while the partner wave's MFMA phase does)",
    "handover_gap": "MFMA pipe idle at hand-overs between waves, before an MFMA of the key block (mean per SIMD): "
                    "the partner's softmax phase was not done",
}


def iteration_phases(trace: Trace, window: WindowSpec = "whole") -> pd.DataFrame:
    """Per main-loop iteration (key block) in W: the :data:`PHASES` in cycles.

    Records count by issue in W and by their ``iteration``; records without one are left out. A
    ping-pong hides the softmax phase under the partner's MFMA phase while it is the shorter one;
    where it is longer, the difference shows up as hand-over gap. Columns: iteration, mfma_phase,
    softmax_phase, handover_gap; empty without ``iteration`` or MFMA.
    """
    cols = ["iteration", *PHASES]
    a = arrays_of(trace)
    w = resolve_window(trace, window)
    it = trace.column("iteration", fill=-1) if len(trace) else np.empty(0, np.int64)
    inside = (a.issue >= w.start) & (a.issue < w.end) & (it >= 0)
    mfma, soft = a.unit_mask("MFMA"), a.unit_mask("VALU", "TRANS")
    if not (inside & mfma).any():
        return pd.DataFrame(columns=cols)
    busy = (a.end - a.start).astype(np.float64)

    def per_wave(mask: np.ndarray) -> pd.Series:
        rows = np.flatnonzero(mask)
        frame = pd.DataFrame({"iteration": it[rows], "wave": a.wave_id[rows], "busy": busy[rows]})
        return frame.groupby(["iteration", "wave"])["busy"].sum().groupby("iteration").mean()

    mf, _, _, _, gap, handover = _mfma_sequence(trace, w)
    at_handover = handover & (gap > 0)
    nxt = mf[1:][at_handover]  # the MFMA after each gap: its key block owns the gap
    hand = pd.DataFrame({"iteration": it[nxt], "gap": gap[at_handover].astype(np.float64)})
    hand = hand[hand["iteration"] >= 0].groupby("iteration")["gap"].sum() / max(a.n_simd, 1)
    iterations = np.unique(it[inside])
    out = pd.DataFrame({"mfma_phase": per_wave(inside & mfma), "softmax_phase": per_wave(inside & soft),
                        "handover_gap": hand}).reindex(iterations).fillna(0.0)
    out.index.name = "iteration"
    return out.reset_index()[cols]


def explain(a: Trace, b: Trace, window: WindowSpec = "steady") -> pd.DataFrame:
    """Why B's key block costs more (or fewer) cycles than A's: the terms of :func:`mfma_pipe_budget`
    ranked by how much of the difference each explains.

    Columns: term, meaning, a, b, diff (= b - a, SIMD-cycles per key block), share (diff / total
    diff; the shares add up to 1 because the terms add up to the total), ranked by |diff|.
    Empty when either trace has no budget.
    """
    ba, bb = mfma_pipe_budget(a, window), mfma_pipe_budget(b, window)
    cols = ["term", "meaning", "a", "b", "diff", "share"]
    if ba["total"] is None or bb["total"] is None:
        return pd.DataFrame(columns=cols)
    total_diff = bb["total"] - ba["total"]
    rows = [{"term": t, "meaning": m, "a": ba[t], "b": bb[t], "diff": bb[t] - ba[t],
             "share": (bb[t] - ba[t]) / total_diff if total_diff else np.nan} for t, m in BUDGET_TERMS.items()]
    out = pd.DataFrame(rows, columns=cols)
    out = out.iloc[np.argsort(-np.abs(out["diff"].to_numpy()), kind="stable")].reset_index(drop=True)
    total = {"term": "total", "meaning": "SIMD-cycles per key block (the sum of the terms)", "a": ba["total"],
             "b": bb["total"], "diff": total_diff, "share": 1.0 if total_diff else np.nan}
    return pd.concat([out, pd.DataFrame([total])], ignore_index=True)


def unit_work_diff(a: Trace, b: Trace, window: WindowSpec = "steady") -> pd.DataFrame:
    """Busy cycles per key block by unit and region in both traces and their difference: what the
    waves do instead (a larger softmax phase shows here as VALU/TRANS cycles in ``softmax_*``).

    Columns: region, unit, a, b, diff (= b - a), ranked by |diff|. Records issued in W; a key block
    as in :func:`blocks`.
    """
    def per_block(t: Trace) -> pd.Series:
        w = resolve_window(t, window)
        n = blocks(t, w)
        issue = t.column("issue")
        rec = np.flatnonzero((issue >= w.start) & (issue < w.end))
        frame = pd.DataFrame({"region": region_of(t)[rec],
                              "unit": np.asarray(t.table.column("unit").to_pandas(), dtype=object)[rec],
                              "cycles": (t.column("end") - t.column("start"))[rec]})
        sums = frame.groupby(["region", "unit"])["cycles"].sum()
        return sums / n if n else sums * np.nan

    sa, sb = per_block(a), per_block(b)
    out = pd.concat({"a": sa, "b": sb}, axis=1).fillna(0.0)
    out["diff"] = out["b"] - out["a"]
    out = out.reset_index()
    return out.iloc[np.argsort(-np.abs(out["diff"].to_numpy()), kind="stable")].reset_index(drop=True)
