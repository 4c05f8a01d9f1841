"""Timeline data: tracks, iteration spans, decimation and MFMA-busy/overlap strips, hand-computed."""

from __future__ import annotations

import numpy as np
import pytest

from zyfa.trace.schema import Trace, TraceMeta
from zyfa.webui.timeline import (View, coverage, extent, iteration_span, iterations, rows_in_view, segments, strip,
                                 tracks)


def test_tracks_and_extent(make_trace):
    t = make_trace(simds=2, iterations=3)  # phase 64 cycles, 2 phases per iteration
    assert [tr.label for tr in tracks(t)] == ["CU0 S0 w0", "CU0 S0 w1", "CU0 S1 w2", "CU0 S1 w3"]
    assert extent(t) == (0, 3 * 2 * 64)
    assert iterations(t) == [0, 1, 2]


def test_iteration_span(make_trace):
    t = make_trace(iterations=3)
    assert iteration_span(t, 1) == (128, 256)
    with pytest.raises(ValueError, match="iteration 7 is not in the trace"):
        iteration_span(t, 7)
    with pytest.raises(TypeError, match="iteration must be an int"):
        iteration_span(t, "1")


def test_full_detail_under_budget(make_trace):
    t = make_trace(iterations=3)
    seg, decimated = segments(t, View(0, 384, budget=1000))
    assert not decimated
    assert len(seg) == len(t) == 2 * 2 * 3 * (4 + 8)
    assert (seg["count"] == 1).all() and sorted(seg["row"]) == list(range(len(t)))
    # a zoom to [100, 140) keeps exactly the records touching it
    seg, _ = segments(t, View(100, 140, budget=1000))
    start, end = t.column("start"), t.column("end")
    assert sorted(seg["row"]) == [int(r) for r in np.flatnonzero((end > 100) & (start < 140))]


def test_decimation_merges_gaps_below_one_bin(make_trace):
    t = make_trace(iterations=3)
    # 64 cycles per bin: the 64-cycle gaps between one wave's MFMA phases are kept
    seg, decimated = segments(t, View(0, 768, budget=10, bins=12))
    assert decimated
    w0 = seg[seg["track"] == 0].sort_values("start")
    mfma = w0[w0["unit"] == "MFMA"]
    assert mfma[["start", "end", "count", "busy"]].values.tolist() == [[0, 64, 4, 64], [128, 192, 4, 64],
                                                                        [256, 320, 4, 64]]
    valu = w0[w0["unit"] == "VALU"]
    assert valu[["start", "end", "count", "busy"]].values.tolist() == [[64, 96, 8, 32], [192, 224, 8, 32],
                                                                        [320, 352, 8, 32]]
    assert len(seg) == 4 * 6 and (seg["row"] == -1).all()
    # 100 cycles per bin: those gaps vanish, one MFMA segment per wave
    seg, _ = segments(t, View(0, 1200, budget=10, bins=12))
    mfma = seg[(seg["track"] == 0) & (seg["unit"] == "MFMA")]
    assert mfma[["start", "end", "count", "busy"]].values.tolist() == [[0, 320, 12, 192]]


def test_decimation_bounds_bar_count_on_a_large_trace(make_trace):
    t = make_trace(simds=4, iterations=400)  # 19200 records
    seg, decimated = segments(t, View(*extent(t), budget=4000, bins=800))
    assert decimated and len(seg) <= 8 * 2 * 800
    assert seg["count"].sum() == len(t)
    assert seg["busy"].sum() == int((t.column("end") - t.column("start")).sum())


def test_zero_length_records_drawn_one_cycle_wide():
    meta = TraceMeta(kernel="k", arch="gfx950", source="model")
    t = Trace.from_records([dict(cu=0, simd=0, wave=0, slot=0, opcode="s_nop", unit="WAIT", issue=5, start=5,
                                 end=5, stall=0)], meta)
    seg, _ = segments(t, View(0, 10))
    assert seg[["start", "end", "busy"]].values.tolist() == [[5, 6, 0]]


def test_coverage_of_overlapping_intervals():
    got = coverage(np.array([0, 5, 20]), np.array([10, 15, 30]), np.array([0, 10, 20, 30, 40]))
    assert got.tolist() == [10.0, 5.0, 10.0, 0.0]
    assert coverage(np.array([]), np.array([]), np.array([0, 1])).tolist() == [0.0]


def test_strip_busy_and_overlap(make_trace):
    t = make_trace(simds=2, iterations=3)
    st = strip(t, View(0, 768, bins=12))
    assert st.simds == ((0, 0), (0, 1))
    # MFMA alternates w0/w1 without gaps for 384 cycles
    assert st.mfma[0].tolist() == [1.0] * 6 + [0.0] * 6
    # each 64-cycle bin: one wave's MFMA overlaps the other's 8 x 4-cycle VALU = 32 cycles
    assert st.overlap[0].tolist() == [0.5] * 6 + [0.0] * 6


def test_strip_with_gaps(make_trace):
    t = make_trace(simds=1, iterations=1, valu_ops=24, gap=8)  # phase = 96 + 8 = 104
    st = strip(t, View(0, 208, bins=2))
    # w0 MFMA [0,64), w1 MFMA [104,168); the other wave's VALU covers [0,96) / [104,200)
    assert st.mfma[0].tolist() == pytest.approx([64 / 104, 64 / 104])
    assert st.overlap[0].tolist() == pytest.approx([64 / 104, 64 / 104])


def test_rows_in_view(make_trace):
    t = make_trace(simds=1, iterations=1)
    rows, total = rows_in_view(t, 60, 70, limit=3)
    start = t.column("start")
    # w0's last MFMA [48,64), w1's first MFMA [64,80), w0's VALU [64,68) and [68,72)
    assert total == 4
    assert [int(start[r]) for r in rows] == [48, 64, 64]
    with pytest.raises(ValueError, match="limit must be a non-negative int"):
        rows_in_view(t, 0, 1, limit=-1)


@pytest.mark.parametrize("kwargs, exc, message", [
    (dict(x0=10, x1=10), ValueError, "x1 .* must be greater than x0"),
    (dict(x0="a", x1=10), TypeError, "View.x0 must be a finite number"),
    (dict(x0=0, x1=float("inf")), TypeError, "View.x1 must be a finite number"),
    (dict(x0=0, x1=10, budget=0), ValueError, "View.budget must be a positive int"),
    (dict(x0=0, x1=10, bins=2.5), ValueError, "View.bins must be a positive int"),
])
def test_view_validation(kwargs, exc, message):
    with pytest.raises(exc, match=message):
        View(**kwargs)


def test_view_padded_covers_half_a_view_either_side_within_the_trace():
    padded = View(100, 200, budget=10, bins=20).padded((0, 1000), 0.5)
    assert (padded.x0, padded.x1, padded.budget, padded.bins) == (50, 250, 20, 40)
    assert padded.resolution == View(100, 200, bins=20).resolution  # same cycles per bin as the view
    assert (lambda v: (v.x0, v.x1, v.bins))(View(0, 100, bins=20).padded((0, 1000), 0.5)) == (0, 150, 30)
    assert (lambda v: (v.x0, v.x1))(View(-50, 50).padded((0, 1000), 0.5)) == (-50, 100)  # never narrower than the view
    assert (lambda v: (v.x0, v.x1))(View(100, 200).padded((0, 1000), 0)) == (100, 200)
    with pytest.raises(ValueError, match="pad must be a number of view widths"):
        View(0, 1).padded((0, 1), -1)
