"""Chrome / Perfetto trace-event JSON export (opens in ui.perfetto.dev and chrome://tracing).

Layout: one process per ``(cu, simd)`` ("CU 0 SIMD 1"); in it a thread "MFMA pipe" with every
wave's MFMA records (the SIMD's matrix-core timeline; idle gaps are visible), then per wave one
thread per lane: MFMA, VALU, TRANS, scalar (SALU SMEM BRANCH BARRIER WAIT MISC), memory (LDS
VMEM) and region (Proton scopes). Each record is a complete event (``ph: "X"``) named by its
opcode, ``cat`` = unit, ``ts``/``dur`` in microseconds = cycles / clock_mhz, measured from the
trace's first issue; ``args`` hold the cycle numbers, stall, iteration, region and operands.
Records that would overlap an earlier slice on the same thread (e.g. memory operations in
flight together) are written as async begin/end pairs (``ph: "b"``/``"e"``) instead, which the
viewers stack on their own rows. Without ``clock_mhz`` one cycle is written as one microsecond
and ``otherData.time_unit`` says so.
"""

from __future__ import annotations

import contextlib
import gc
import json
from pathlib import Path
from typing import Any

import numpy as np

from zyfa.analyzer.arrays import UNIT_CODES, arrays_of
from zyfa.analyzer.intervals import dense_ids, grouped_cummax
from zyfa.analyzer.window import WindowSpec, resolve_window
from zyfa.trace.safeio import write_text
from zyfa.trace.schema import UNITS, Trace

LANES = ("MFMA", "VALU", "TRANS", "scalar", "memory", "region")
LANE_OF_UNIT = {"MFMA": "MFMA", "VALU": "VALU", "TRANS": "TRANS", "SALU": "scalar", "SMEM": "scalar",
                "BRANCH": "scalar", "BARRIER": "scalar", "WAIT": "scalar", "MISC": "scalar", "LDS": "memory",
                "VMEM": "memory", "REGION": "region"}
PIPE_TID = 1  # the per-SIMD "MFMA pipe" thread; wave lanes follow


def _tid(slot: np.ndarray, lane: np.ndarray) -> np.ndarray:
    return PIPE_TID + 1 + slot * len(LANES) + lane


def trace_events(trace: Trace, window: WindowSpec = "whole") -> dict[str, Any]:
    """The trace as a Chrome trace-event JSON object (``{"traceEvents": [...], ...}``).

    Only records whose ``[start, end)`` meets the window are exported (all of them for "whole").
    """
    with _gc_paused():
        return _trace_events(trace, window)


@contextlib.contextmanager
def _gc_paused():
    """Pause the cyclic garbage collector: building millions of acyclic event dicts otherwise
    triggers collections that scan them all again and again (about half the build time)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _trace_events(trace: Trace, window: WindowSpec) -> dict[str, Any]:
    a = arrays_of(trace)
    w0, w1 = resolve_window(trace, window)
    clock = trace.meta.clock_mhz
    per_us = clock if clock else 1.0
    rows = np.flatnonzero((a.start < w1) & ((a.end > w0) | ((a.start == a.end) & (a.start >= w0))))
    lane_code = np.array([LANES.index(LANE_OF_UNIT[u]) for u in UNITS], np.int64)
    # each wave's slot within its SIMD: its rank among the SIMD's waves
    pair, n_pair = dense_ids(a.simd_id * max(a.n_wave, 1) + a.wave_id)
    pair_key = np.zeros(n_pair, np.int64)
    pair_key[pair] = a.simd_id * max(a.n_wave, 1) + a.wave_id
    pair_simd, pair_wave = pair_key // max(a.n_wave, 1), pair_key % max(a.n_wave, 1)
    pair_slot = np.arange(n_pair) - np.searchsorted(pair_simd, pair_simd, side="left")
    events: list[dict] = []
    for s in range(a.n_simd):
        cu, simd = (int(x) for x in a.simd_keys[s])
        events.append({"ph": "M", "name": "process_name", "pid": s + 1, "tid": 0,
                       "args": {"name": f"CU {cu} SIMD {simd}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": s + 1, "tid": 0, "args": {"sort_index": s}})
        events.append({"ph": "M", "name": "thread_name", "pid": s + 1, "tid": PIPE_TID,
                       "args": {"name": "MFMA pipe"}})
    for s, w, slot in zip(pair_simd.tolist(), pair_wave.tolist(), pair_slot.tolist()):
        for lane_index, lane in enumerate(LANES):
            tid = int(_tid(np.int64(slot), np.int64(lane_index)))
            events.append({"ph": "M", "name": "thread_name", "pid": s + 1, "tid": tid,
                           "args": {"name": f"wave {int(a.wave_keys[w, 1])} {lane}"}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": s + 1, "tid": tid,
                           "args": {"sort_index": tid}})

    # -- slices: the wave lanes plus a copy of every MFMA on the pipe thread ----------------------
    pid = a.simd_id[rows] + 1
    tid = _tid(pair_slot[pair[rows]], lane_code[a.unit[rows]])
    mfma = a.unit[rows] == UNIT_CODES["MFMA"]
    ev_rows = np.concatenate((rows, rows[mfma]))
    ev_pid = np.concatenate((pid, pid[mfma]))
    ev_tid = np.concatenate((tid, np.full(int(mfma.sum()), PIPE_TID, np.int64)))
    start, end = a.start[ev_rows], a.end[ev_rows]
    order = np.lexsort((start, ev_tid, ev_pid))
    ev_rows, ev_pid, ev_tid, start, end = ev_rows[order], ev_pid[order], ev_tid[order], start[order], end[order]
    # a slice that starts before an earlier slice of its thread has ended becomes an async pair
    new_track = np.ones(ev_rows.size, bool)
    new_track[1:] = (ev_pid[1:] != ev_pid[:-1]) | (ev_tid[1:] != ev_tid[:-1])
    as_async = ~new_track & (start < _running_max_per_track(end, new_track))

    names = np.array(a.opcodes, dtype=object)[a.opcode[ev_rows]].tolist() if ev_rows.size else []
    units = np.array(list(UNITS), dtype=object)[a.unit[ev_rows]].tolist() if ev_rows.size else []
    ts = ((start - a.t0) / per_us).tolist()
    dur = ((end - start) / per_us).tolist()
    # args: the cycle numbers, then each optional column where the record has a value (in this order)
    args = [{"issue": i, "start": s_, "end": e_, "stall": st}
            for i, s_, e_, st in zip(a.issue[ev_rows].tolist(), start.tolist(), end.tolist(), a.stall[ev_rows].tolist())]
    for name in ("stall_reason", "iteration", "region", "operands", "pc"):
        column = trace.table.column(name).take(ev_rows)
        if column.null_count == len(column):
            continue
        values = column.to_pylist()
        if column.null_count:
            valid = np.flatnonzero(column.is_valid().to_numpy(zero_copy_only=False)).tolist()
            for i in valid:
                args[i][name] = values[i]
        else:
            for arg, value in zip(args, values):
                arg[name] = value
    slices = [{"name": n, "cat": u, "pid": p, "tid": t, "ph": "X", "ts": ts_i, "dur": dur_i, "args": arg}
              for n, u, p, t, ts_i, dur_i, arg in zip(names, units, ev_pid.tolist(), ev_tid.tolist(), ts, dur, args)]
    # overlapping slices become async begin/end pairs, in place
    for i in np.flatnonzero(as_async).tolist():
        ev = slices[i]
        row = f"r{ev_rows[i]}"
        slices[i] = ({"name": ev["name"], "cat": ev["cat"], "pid": ev["pid"], "tid": ev["tid"], "ph": "b",
                      "ts": ev["ts"], "id": row, "args": ev["args"]},
                     {"name": ev["name"], "cat": ev["cat"], "pid": ev["pid"], "tid": ev["tid"], "ph": "e",
                      "ts": ev["ts"] + ev["dur"], "id": row})
    if as_async.any():
        for ev in slices:
            if isinstance(ev, tuple):
                events.extend(ev)
            else:
                events.append(ev)
    else:
        events.extend(slices)
    meta = trace.meta
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "kernel": meta.kernel, "arch": meta.arch, "source": meta.source, "label": meta.label,
            "clock_mhz": clock, "window_cycles": [int(w0), int(w1)], "first_issue_cycle": int(a.t0),
            "time_unit": "microseconds (cycles / clock_mhz)" if clock else "cycles (no clock_mhz in the trace)",
        },
    }


def _running_max_per_track(end: np.ndarray, new_track: np.ndarray) -> np.ndarray:
    """For each slice: the largest end of the earlier slices on its thread (rows sorted by track, start)."""
    previous = np.full(end.size, np.iinfo(np.int64).min)
    if end.size:
        same = ~new_track[1:]
        previous[1:][same] = grouped_cummax(end, new_track)[:-1][same]
    return previous


def write_perfetto(trace: Trace, path: str | Path, window: WindowSpec = "whole") -> Path:
    """Write :func:`trace_events` to ``path`` (JSON; temporary file + rename); returns the path."""
    return write_text(path, json.dumps(trace_events(trace, window), separators=(",", ":")))
