"""Analyzer metrics on small hand-built traces whose answers are worked out by hand in comments."""

import math

import numpy as np
import pytest

import zyfa.analyzer as za
from zyfa.trace.schema import Trace, TraceError, TraceMeta

FP8 = "v_mfma_f32_32x32x64_f8f6f4"  # 2*32*32*64 = 131072 flop
BF16 = "v_mfma_f32_32x32x16_bf16"  # 2*32*32*16 = 32768 flop
OPS = {"MFMA": FP8, "VALU": "v_add_f32", "TRANS": "v_exp_f32", "SALU": "s_add_u32"}


def meta(**kw):
    base = dict(kernel="toy", arch="gfx950", source="model", clock_mhz=2000.0)
    base.update(kw)
    return TraceMeta(**base)


def r(wave, unit, start, end, simd=0, opcode=None, issue=None, **kw):
    rec = dict(cu=0, simd=simd, wave=wave, slot=wave, opcode=opcode or OPS[unit], unit=unit,
               issue=start if issue is None else issue, start=start, end=end, stall=0)
    rec.update(kw)
    return rec


def ops(wave, unit, first, count, length, **kw):
    return [r(wave, unit, first + i * length, first + (i + 1) * length, **kw) for i in range(count)]


@pytest.fixture
def pingpong():
    """Two waves, one SIMD, whole window [0, 256).

    MFMA: w0 [0,64), w1 [64,128), w0 [128,192) -> busy 192/256 = 75 %, idle 25 %.
    Other-wave VALU/TRANS under each MFMA: w0's [0,64) by w1 VALU [0,64) = 64; w1's [64,128) by w0
    VALU [64,112) = 48; w0's [128,192) by w1 TRANS [128,160) = 32 (w0's own VALU [176,192) does not
    count) -> 144/192 = 75 %.
    """
    recs = [r(0, "MFMA", 0, 64), r(1, "MFMA", 64, 128), r(0, "MFMA", 128, 192)]
    recs += ops(1, "VALU", 0, 16, 4) + ops(0, "VALU", 64, 12, 4) + ops(1, "TRANS", 128, 2, 16)
    recs += ops(0, "VALU", 176, 4, 4) + ops(1, "VALU", 192, 16, 4)
    return Trace.from_records(recs, meta())


def test_acceptance_idle_25_overlap_75(pingpong):
    s = za.summary(pingpong)
    assert s["cycles"] == 256
    assert s["mfma_busy"] == pytest.approx(0.75)
    assert s["mfma_idle"] == pytest.approx(0.25)
    assert s["pingpong_overlap"] == pytest.approx(0.75)
    assert s["simds"] == 1 and s["waves"] == 2
    # 53 records; distinct issue cycles: 16 + 12 + 2 + 4 + 16 = 50 (the MFMAs share cycles 0, 64, 128)
    assert s["issue_per_wave"] == pytest.approx(53 / (2 * 256))
    assert s["issue_utilisation"] == pytest.approx(50 / 256)
    # 3 x 131072 flop in 256 cycles at 2000 MHz (0.128 us) = 3.072 TFLOP/s; x 1024 gfx950 SIMDs
    assert s["mfma_flops_total"] == 3 * 131072
    assert s["tflops"] == pytest.approx(3.072)
    assert s["tflops_device"] == pytest.approx(3.072 * 1024)
    assert s["handovers"] == 2 and s["handover_gap_mean"] == 0
    assert s["blocks"] == 0 and s["valu_cycles_per_block"] is None  # no iteration column


def test_cycle_windows(pingpong):
    # [64, 192): MFMA busy 128/128; overlap (48 + 32) / 128
    for window in ((64, 192), "64:192", [64, 192]):
        assert za.mfma_busy(pingpong, window) == pytest.approx(1.0)
        assert za.pingpong_overlap(pingpong, window) == pytest.approx(80 / 128)
    # [32, 96): half of each of the first two MFMAs, both fully under the other wave's VALU
    assert za.mfma_busy(pingpong, (32, 96)) == pytest.approx(1.0)
    assert za.pingpong_overlap(pingpong, (32, 96)) == pytest.approx(1.0)
    assert za.mfma_flops_total(pingpong, (32, 96)) == pytest.approx(131072)
    # a window past the end: nothing busy, no MFMA to overlap
    assert za.mfma_busy(pingpong, (1000, 1100)) == 0.0
    assert za.pingpong_overlap(pingpong, (1000, 1100)) is None


def test_per_wave_overlap(pingpong):
    # w0's MFMAs: 128 cycles, 64 + 32 under w1's work; w1's MFMA: 64 cycles, 48 under w0's VALU
    table = za.pingpong_overlap_per_wave(pingpong)
    assert table[["cu", "wave", "mfma_cycles", "overlap_cycles"]].values.tolist() == [[0, 0, 128, 96], [0, 1, 64, 48]]
    assert table["pingpong_overlap"].tolist() == pytest.approx([0.75, 0.75])


def test_per_simd_tables():
    # SIMD 0: MFMA [0,100) of 100 cycles; SIMD 1: MFMA [0,50) -> 100 %, 50 %, overall 150/200 = 75 %
    recs = [r(0, "MFMA", 0, 100), r(4, "MFMA", 0, 50, simd=1), r(5, "VALU", 0, 20, simd=1)]
    t = Trace.from_records(recs, meta())
    table = za.mfma_busy_per_simd(t)
    assert table[["cu", "simd"]].values.tolist() == [[0, 0], [0, 1]]
    assert table["mfma_busy"].tolist() == pytest.approx([1.0, 0.5])
    assert table["mfma_idle"].tolist() == pytest.approx([0.0, 0.5])
    assert za.mfma_busy(t) == pytest.approx(0.75)
    over = za.pingpong_overlap_per_simd(t)
    assert over["overlap_cycles"].tolist() == [0, 20]  # wave 5 VALU under wave 4's MFMA on SIMD 1
    assert math.isclose(over["pingpong_overlap"][1], 20 / 50)
    assert za.pingpong_overlap(t) == pytest.approx(20 / 150)


def test_overlap_three_waves_union_of_others():
    # w0 MFMA [0,100). Others: w1 VALU [0,40), w2 TRANS [20,60), w1 TRANS [50,70), w2 VALU [80,90)
    # -> union [0,70) + [80,90) = 80 cycles. w0's own VALU [60,80) is not counted. 80/100.
    recs = [r(0, "MFMA", 0, 100), r(1, "VALU", 0, 40), r(2, "TRANS", 20, 60), r(1, "TRANS", 50, 70),
            r(2, "VALU", 80, 90), r(0, "VALU", 60, 80)]
    t = Trace.from_records(recs, meta())
    assert za.pingpong_overlap(t) == pytest.approx(0.8)


def test_one_wave_has_no_pingpong():
    t = Trace.from_records([r(0, "MFMA", 0, 64), r(0, "VALU", 4, 36)], meta())
    s = za.summary(t)
    assert s["mfma_busy"] == 1.0 and s["pingpong_overlap"] == 0.0
    assert s["handovers"] == 0 and s["handover_gap_mean"] is None


def test_empty_trace():
    t = Trace.from_records([], meta())
    s = za.summary(t)
    assert set(s) == set(za.METRICS)
    assert s["cycles"] == 0 and s["simds"] == 0 and s["blocks"] == 0 and s["handovers"] == 0
    for name in ("mfma_busy", "mfma_idle", "pingpong_overlap", "valu_cycles_per_block", "stall_fraction",
                 "issue_utilisation", "tflops", "tflops_device", "handover_gap_mean"):
        assert s[name] is None, name
    assert za.steady_window(t) == (0, 0)
    assert len(za.stall_breakdown(t)) == 0 and len(za.valu_by_class(t)) == 0


def test_overlapping_records_on_one_unit_are_rejected():
    with pytest.raises(TraceError, match="MFMA records overlap"):
        Trace.from_records([r(0, "MFMA", 0, 64), r(1, "MFMA", 32, 96)], meta())
    with pytest.raises(TraceError, match="VALU records overlap"):
        Trace.from_records([r(0, "VALU", 0, 8), r(1, "VALU", 4, 8)], meta())


def test_handover_gaps():
    # w0 [0,64) -> w1 [70,134): gap 6; w1 [134,198) same wave: no hand-over; -> w0 [200,264): gap 2
    recs = [r(0, "MFMA", 0, 64), r(1, "MFMA", 70, 134), r(1, "MFMA", 134, 198), r(0, "MFMA", 200, 264)]
    t = Trace.from_records(recs, meta())
    gaps = za.handover_gaps(t)
    assert gaps[["from_wave", "to_wave", "prev_end", "next_start", "gap"]].values.tolist() == \
        [[0, 1, 64, 70, 6], [1, 0, 198, 200, 2]]
    assert za.handover_gap_mean(t) == pytest.approx(4.0)
    hist = za.handover_gap_histogram(t)
    assert hist.values.tolist() == [[2, 1, 0.5], [6, 1, 0.5]]
    assert za.handovers(t, (65, 300)) == 1 and za.handover_gap_mean(t, (65, 300)) == 2.0


@pytest.fixture
def looped():
    """Two waves, one SIMD, iterations 0-3, iteration k = [100k, 100k+100) for both waves.

    w0: MFMA [0,64) fp8, 5 x v_max3 [64,84), v_exp (TRANS, 16 cycles) [84,100); iteration 0 has 9
        v_max3 [64,100) instead of 5.
    w1: 7 x v_pk_fma [0,28), MFMA bf16 [64,96), s_add [96,100).
    Steady window: iterations 1-2 of both waves -> [100, 300); 4 blocks inside.
    """
    recs = []
    for k in range(4):
        base = 100 * k
        n_max = 9 if k == 0 else 5
        recs += [r(0, "MFMA", base, base + 64, iteration=k)]
        recs += ops(0, "VALU", base + 64, n_max, 4, opcode="v_max3_f32", iteration=k)
        recs += [r(0, "TRANS", base + 84, base + 100, iteration=k)]
        recs += ops(1, "VALU", base, 7, 4, opcode="v_pk_fma_f32", iteration=k)
        recs += [r(1, "MFMA", base + 64, base + 96, opcode=BF16, iteration=k), r(1, "SALU", base + 96, base + 100,
                                                                                 iteration=k)]
    return Trace.from_records(recs, meta())


def test_steady_window_and_per_block(looped):
    assert za.steady_window(looped) == (100, 300)
    steady = za.summary(looped, "steady")
    assert steady["cycles"] == 200 and steady["blocks"] == 4
    assert steady["valu_ops_per_block"] == pytest.approx((5 + 5 + 7 + 7) / 4)
    assert steady["valu_cycles_per_block"] == pytest.approx(24.0)
    assert steady["trans_ops_per_block"] == pytest.approx(0.5)
    assert steady["trans_cycles_per_block"] == pytest.approx(8.0)
    assert steady["mfma_busy"] == pytest.approx((64 + 32) * 2 / 200)
    whole = za.summary(looped)
    assert whole["blocks"] == 8
    assert whole["valu_ops_per_block"] == pytest.approx((9 + 5 * 3 + 7 * 4) / 8)
    table = za.valu_by_class(looped, "steady")
    rows = {(u, c): (o, cyc) for u, c, o, cyc in table.itertuples(index=False)}
    assert rows == {("VALU", "fma"): (3.5, 14.0), ("VALU", "max"): (2.5, 10.0), ("TRANS", "exp"): (0.5, 8.0)}
    assert table["unit"].tolist() == ["VALU", "VALU", "TRANS"]


def test_steady_fallback_without_iterations():
    t = Trace.from_records([r(0, "SALU", 0, 10), r(0, "MFMA", 10, 74), r(0, "VALU", 80, 90)], meta())
    assert za.steady_window(t) == (10, 74)
    no_mfma = Trace.from_records([r(0, "SALU", 5, 10), r(0, "VALU", 80, 90)], meta())
    assert za.steady_window(no_mfma) == (5, 90)


def test_stalls():
    # issued in [0, 100): VALU 4+4 dependency, VALU 2 (null reason), MFMA 6 hazard; one outside the window
    recs = [r(0, "VALU", 10, 14, stall=4, stall_reason="dependency"), r(0, "VALU", 20, 24, stall=4,
                                                                           stall_reason="dependency"),
            r(1, "VALU", 30, 34, stall=2), r(1, "MFMA", 40, 104, stall=6, stall_reason="hazard"),
            r(1, "VALU", 150, 154, stall=10, stall_reason="waitcnt")]
    t = Trace.from_records(recs, meta())
    table = za.stall_breakdown(t, (0, 100))
    assert table[["unit", "reason", "stall_cycles", "records"]].values.tolist() == \
        [["VALU", "dependency", 8, 2], ["MFMA", "hazard", 6, 1], ["VALU", "unknown", 2, 1]]
    assert table["share"].tolist() == pytest.approx([8 / 16, 6 / 16, 2 / 16])
    assert za.stall_fraction(t, (0, 100)) == pytest.approx(16 / (2 * 100))


def test_issue_utilisation_counts_simd_cycles_once():
    # two waves issue at cycle 0 (counts once for the SIMD), one at cycle 1; window [0, 4)
    recs = [r(0, "SALU", 0, 1), r(1, "SALU", 0, 1), r(0, "VALU", 1, 4)]
    t = Trace.from_records(recs, meta())
    assert za.issue_utilisation(t) == pytest.approx(2 / 4)
    assert za.issue_per_wave(t) == pytest.approx(3 / (2 * 4))


def test_tflops_needs_clock_known_opcodes_and_arch():
    recs = [r(0, "MFMA", 0, 64)]
    assert za.tflops(Trace.from_records(recs, meta(clock_mhz=None))) is None
    assert za.tflops_device(Trace.from_records(recs, meta(arch="gfx942"))) is None
    # 131072 flop / (64 cycles / 1000 MHz) = 2.048 TFLOP/s
    assert za.tflops(Trace.from_records(recs, meta(clock_mhz=1000.0))) == pytest.approx(2.048)
    odd = Trace.from_records(recs + [r(0, "MFMA", 64, 80, opcode="v_mfma_mystery")], meta())
    assert za.tflops(odd) is None and za.mfma_flops_total(odd) is None
    assert za.unknown_mfma_opcodes(odd)["opcode"].tolist() == ["v_mfma_mystery"]
    # the scale-load prefix counts as zero flops, not unknown
    scaled = Trace.from_records(recs + [r(0, "MFMA", 64, 68, opcode="v_mfma_ld_scale_b32")], meta())
    assert za.mfma_flops_total(scaled) == 131072


def test_compare(pingpong):
    one = Trace.from_records([r(0, "MFMA", 0, 64), r(0, "VALU", 64, 128)], meta())
    table = za.compare(pingpong, one).set_index("metric")
    assert list(table.columns) == ["unit", "a", "b", "diff", "ratio"]
    assert table.loc["mfma_busy", "a"] == pytest.approx(0.75) and table.loc["mfma_busy", "b"] == pytest.approx(0.5)
    assert table.loc["mfma_busy", "diff"] == pytest.approx(-0.25)
    assert table.loc["mfma_busy", "ratio"] == pytest.approx(0.5 / 0.75)
    assert table.loc["cycles", "ratio"] == pytest.approx(128 / 256)
    assert np.isnan(table.loc["handover_gap_mean", "b"])  # no hand-over in a one-wave trace


def test_registry_names():
    for name in ("mfma_busy", "mfma_idle", "pingpong_overlap", "valu_cycles_per_block", "trans_cycles_per_block",
                 "issue_utilisation", "tflops", "cycles"):
        assert name in za.METRICS and za.METRICS[name].description
    for name in ("mfma_busy_per_simd", "pingpong_overlap_per_simd", "pingpong_overlap_per_wave", "handover_gaps",
                 "handover_gap_histogram", "stall_breakdown", "valu_by_class"):
        assert za.TABLES[name].unit == "table"


@pytest.mark.parametrize("window, error", [
    ("steadyish", ValueError), ((5, 5), ValueError), ((1.5, 3), TypeError), ("a:b", ValueError), (5, TypeError),
])
def test_bad_windows(pingpong, window, error):
    with pytest.raises(error, match="window"):
        za.summary(pingpong, window)


def test_bad_trace_argument():
    with pytest.raises(TypeError, match="Trace"):
        za.mfma_busy({"not": "a trace"})


def test_memo_is_bounded_and_consistent(pingpong):
    from zyfa.analyzer.arrays import MEMO_ENTRIES, arrays_of

    first = za.pingpong_overlap(pingpong, (64, 192))
    for start in range(MEMO_ENTRIES + 10):
        za.summary(pingpong, (start, start + 100))
    assert len(arrays_of(pingpong).memo) <= MEMO_ENTRIES
    assert za.pingpong_overlap(pingpong, (64, 192)) == first == pytest.approx(80 / 128)


def test_region_only_trace_has_no_instruction_metrics():
    # a Proton-style trace: two warp regions, no instructions -> no MFMA busy/idle claims
    recs = [dict(cu=0, simd=0, wave=0, slot=0, opcode="qk_dot", unit="REGION", issue=0, start=0, end=100, stall=0,
                 iteration=0),
            dict(cu=0, simd=0, wave=1, slot=1, opcode="pv_dot", unit="REGION", issue=50, start=50, end=120, stall=0,
                 iteration=0)]
    t = Trace.from_records(recs, TraceMeta(kernel="p", arch="sm_90", source="proton"))
    s = za.summary(t)
    assert s["cycles"] == 120 and s["waves"] == 2 and s["blocks"] == 2
    for name in ("mfma_busy", "mfma_idle", "pingpong_overlap", "valu_cycles_per_block", "issue_utilisation",
                 "stall_fraction", "mfma_flops_total", "tflops", "tflops_device"):
        assert s[name] is None, name


def test_cycles_by_region():
    # QK_0: MFMA [0,64); softmax_0: 3 VALU [64,76) + TRANS [76,92); one SALU without a region
    recs = [r(0, "MFMA", 0, 64, region="QK_0")] + ops(0, "VALU", 64, 3, 4, region="softmax_0")
    recs += [r(0, "TRANS", 76, 92, region="softmax_0"), r(1, "SALU", 2, 3)]
    t = Trace.from_records(recs, meta())
    assert za.cycles_by_region(t).values.tolist() == [
        ["(none)", "SALU", 1, 1], ["QK_0", "MFMA", 1, 64], ["softmax_0", "TRANS", 1, 16], ["softmax_0", "VALU", 3, 12]]
    # window [60, 70): the MFMA (issued at 0) is not counted; VALU issued at 64 and 68, clipped to 70
    assert za.cycles_by_region(t, (60, 70)).values.tolist() == [["softmax_0", "VALU", 2, 6]]
