"""clock64 stamps of the CuTe DSL Hopper kernel -> trace schema rows, and the Proton metrics on them."""

import numpy as np
import pytest

from zyfa.trace.cute_clock import records_from_stamps, trace_from_stamps
from zyfa.trace.proton import phase_cycles, tensor_core_overlap


def _stamps():
    # 2 CTAs, 3 key blocks; CTA 1 on SM 7: warpgroup 0 computes while warpgroup 1 waits, then swaps
    st = np.zeros((2, 2, 5, 4), dtype=np.int64)
    for wg, shift in ((0, 0), (1, 50)):
        for j in range(3):
            t = 1000 + 100 * j + shift
            st[1, wg, j] = (t, t + 20, t + 30, t + 60)  # turn, S ready, PV(j-1) done, softmax done
        st[1, wg, 3] = (1300 + shift, 0, 1330 + shift, 0)  # last PV
        st[1, wg, 4, 0] = 7
    return st


def test_regions_follow_the_stamps():
    rows = records_from_stamps(_stamps(), [1])
    names = sorted((r["simd"], r["opcode"], r["iteration"]) for r in rows)
    assert names.count((1, "qk", 0)) == 1 and names.count((2, "pv", 2)) == 1
    assert len(rows) == 2 * (3 + 3 + 3)  # per warpgroup: 3 qk, 3 softmax, 2 + 1 pv
    qk0 = next(r for r in rows if r["simd"] == 1 and r["opcode"] == "qk" and r["iteration"] == 0)
    assert (qk0["start"], qk0["end"], qk0["cu"]) == (0, 20, 7)  # relative to the SM's first stamp
    pv1 = next(r for r in rows if r["simd"] == 1 and r["opcode"] == "pv" and r["iteration"] == 1)
    assert (pv1["start"], pv1["end"]) == (200, 230)  # issued with block 2, done at its event 2


def test_trace_and_overlap_metric():
    trace = trace_from_stamps(_stamps(), [1], dict(kernel="zyfa-cute-fp8", arch="sm_90"), clock_mhz=1980.0)
    assert trace.meta.source == "cute-clock" and not trace.meta.simulated
    ov = tensor_core_overlap(trace)
    assert len(ov) == 1 and 0.0 < ov["overlap_fraction"].iloc[0] <= 1.0
    assert set(phase_cycles(trace)["scope"]) == {"qk", "softmax", "pv"}


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match="stamps must be"):
        records_from_stamps(np.zeros((2, 3, 4)), [0])
    with pytest.raises(ValueError, match="outside"):
        records_from_stamps(_stamps(), [5])


def test_the_web_ui_timeline_reads_it():
    timeline = pytest.importorskip("zyfa.webui.timeline")
    trace = trace_from_stamps(_stamps(), [1], dict(kernel="zyfa-cute-fp8", arch="sm_90"))
    assert len(timeline.tracks(trace)) == 2  # one track per consumer warp group of the SM
    assert timeline.iterations(trace) == [0, 1, 2]
