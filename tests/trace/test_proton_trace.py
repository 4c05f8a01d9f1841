"""Proton Chrome traces -> trace schema, and the warp-group metrics, on a real H200 capture.

The capture (tests/data/proton/README.md says how it was made) has 64 CTAs x 2 sampled warps
(0 and 4) x 17 key blocks on average per warp = 2176 events per scope.
"""

import gzip
import json
from pathlib import Path

import pytest

from zyfa.shapes import AttnShape
from zyfa.trace import proton
from zyfa.trace.errors import TracerUnavailable
from zyfa.trace.schema import Trace, TraceError

DATA = Path(__file__).resolve().parents[1] / "data" / "proton"
CHROME = DATA / "triton-fp8-b1h4s2048-causal.chrome_trace.gz"
META = dict(kernel="triton-fp8", arch="sm_90", shape={"batch": 1, "heads": 4, "heads_k": 4, "seqlen_q": 2048,
                                                      "seqlen_k": 2048, "headdim": 128, "headdim_v": 128})


def ev(name, ts, dur, core=3, cta=7, warp=4, freq=1000.0):
    return {"name": name, "ph": "X", "ts": ts, "dur": dur, "pid": f"_attn_fwd_fp8 Core{core} CTA{cta}",
            "tid": f"warp {warp} (line 0)", "args": {"Frequency (MHz)": freq}}


@pytest.fixture(scope="module")
def real():
    return proton.trace_from_chrome(CHROME, META, clock_mhz=1980.0)


def test_real_capture_converts(real):
    df = real.df
    assert len(df) == 6528
    assert df["opcode"].value_counts().to_dict() == {"qk": 2176, "softmax": 2176, "pv": 2176}
    assert set(df["unit"]) == {"REGION"} and (df["region"] == df["opcode"]).all()
    assert set(df["simd"]) == {0, 1} and set(df["slot"]) == {0}  # warps 0 and 4: groups 0 and 1
    assert df["cu"].nunique() == 64 and df["pc"].isna().all() and df["stall_reason"].isna().all()
    assert (df["end"] >= df["start"]).all() and (df["issue"] == df["start"]).all()
    assert real.meta.source == "proton" and real.meta.simulated is False


def test_real_capture_matches_the_h200_conversion(real):
    on_device = Trace.load(DATA / "triton-fp8-proton.parquet")
    assert on_device.df["start"].tolist() == real.df["start"].tolist()
    assert on_device.df["wave"].tolist() == real.df["wave"].tolist()


def test_real_capture_phase_order_per_warp(real):
    # in each warp the scopes follow qk -> softmax -> pv, one set per key block
    for _, g in real.df.groupby(["cu", "wave"]):
        names = g.sort_values("start")["opcode"].tolist()
        assert names == ["qk", "softmax", "pv"] * (len(names) // 3)
        assert g.groupby("opcode")["iteration"].max().nunique() == 1


def test_records_cycles_and_location_by_hand():
    events = [ev("qk", 10.0, 0.5), ev("softmax", 10.5, 0.25), ev("pv", 10.75, 1.0),
              ev("qk", 12.0, 0.5, warp=0), ev("bogus", 0.0, 9.0)]
    recs = proton.records_from_chrome(events)
    assert [r["opcode"] for r in recs] == ["qk", "qk", "softmax", "pv"]  # sorted by warp, then time
    warp0, qk4, sm4, pv4 = recs
    # cycles = us * Frequency(MHz), relative to the earliest scope start (10.0 us)
    assert (qk4["start"], qk4["end"]) == (0, 500)
    assert (sm4["start"], sm4["end"]) == (500, 750)
    assert (pv4["start"], pv4["end"]) == (750, 1750)
    assert (warp0["start"], warp0["end"]) == (2000, 2500)
    assert (qk4["cu"], qk4["simd"], qk4["slot"], qk4["wave"]) == (3, 1, 0, 7 * 32 + 4)
    assert (warp0["simd"], warp0["wave"]) == (0, 7 * 32)


def _trace(events, tmp_path):
    path = tmp_path / "t.chrome_trace"
    path.write_text(json.dumps({"traceEvents": events}))
    return proton.trace_from_chrome(path, META)


def test_busy_and_overlap_by_hand(tmp_path):
    # group 1 (warp 4): qk [0,100) softmax [100,300) pv [300,400); group 0 (warp 0): qk [100,200)
    # softmax [200,300) pv [300,350). Span of group 1 = 400, its tensor-core busy = 100 + 100 = 200.
    t = _trace([ev("qk", 0.0, 0.1), ev("softmax", 0.1, 0.2), ev("pv", 0.3, 0.1),
                ev("qk", 0.1, 0.1, warp=0), ev("softmax", 0.2, 0.1, warp=0), ev("pv", 0.3, 0.05, warp=0)], tmp_path)
    busy = proton.tensor_core_phase_busy(t).set_index("simd")
    assert busy.loc[1, "span"] == 400 and busy.loc[1, "busy"] == 200 and busy.loc[1, "busy_fraction"] == 0.5
    assert busy.loc[0, "span"] == 250 and busy.loc[0, "busy"] == 150
    ov = proton.tensor_core_overlap(t).iloc[0]
    # group 0's qk [100,200) overlaps group 1's softmax [100,300): 100; group 1's tc vs group 0's
    # softmax [200,300): none. Softmax total = 200 + 100.
    assert ov["overlap"] == 100 and ov["softmax"] == 300 and ov["overlap_fraction"] == pytest.approx(1 / 3)


def test_phase_cycles_by_hand(tmp_path):
    t = _trace([ev("qk", 0.0, 0.1), ev("softmax", 0.1, 0.2), ev("pv", 0.3, 0.1),
                ev("qk", 1.0, 0.3), ev("softmax", 1.3, 0.2), ev("pv", 1.5, 0.5)], tmp_path)
    stats = proton.phase_cycles(t).set_index("scope")
    assert list(stats.index) == ["qk", "softmax", "pv"]
    assert stats.loc["qk", "count"] == 2 and stats.loc["qk", "mean"] == 200
    assert stats.loc["softmax", "median"] == 200 and stats.loc["pv", "mean"] == 300


def test_real_metrics_are_fractions(real):
    busy = proton.tensor_core_phase_busy(real)
    assert len(busy) == 128 and busy["busy_fraction"].between(0, 1).all()
    ov = proton.tensor_core_overlap(real)
    assert len(ov) == 64 and ov["overlap_fraction"].between(0, 1).all()


def test_bad_files_raise_trace_error(tmp_path):
    with pytest.raises(TraceError, match="traceEvents"):
        _trace([ev("bogus", 0.0, 1.0)], tmp_path)
    bad = dict(ev("qk", 0.0, 1.0), pid="no core here")
    with pytest.raises(TraceError, match="Core"):
        _trace([bad], tmp_path)
    truncated = tmp_path / "x.chrome_trace.gz"
    truncated.write_bytes(gzip.compress(b'{"traceEvents": [')[:-3])
    with pytest.raises(TraceError):
        proton.trace_from_chrome(truncated, META)


def test_config_validation():
    with pytest.raises(ValueError, match="sampled_warps"):
        proton.ProtonConfig(sampled_warps=())
    with pytest.raises(ValueError, match="outside"):
        proton.ProtonConfig(num_warps=4, sampled_warps=(0, 4))
    with pytest.raises(ValueError, match="buffer_size"):
        proton.ProtonConfig(buffer_size=-1)
    assert proton.ProtonConfig(sampled_warps=(1,)).mode == "default:sampling_strategy=selective:sampling_options=1"


def test_without_gpu_points_to_cycle_model():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(TracerUnavailable, match="cycle model"):
        proton.run_kernel_trace("triton-fp8", AttnShape(), "/tmp/unused")
    with pytest.raises(ValueError, match="no Proton scopes"):
        proton.run_kernel_trace("zyfa-fp8", AttnShape(), "/tmp/unused")
