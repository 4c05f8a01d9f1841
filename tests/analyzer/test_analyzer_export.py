"""Perfetto trace-event export (checked against a JSON schema of the format) and metric reports."""

import json

import jsonschema
import pytest

from zyfa.analyzer.perfetto import PIPE_TID, trace_events, write_perfetto
from zyfa.analyzer.report import format_value, render, summary_frame
from zyfa.trace.schema import Trace, TraceMeta

# Chrome trace-event format (the subset we emit): metadata M, complete X, async b/e
EVENT_SCHEMA = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "traceEvents": {"type": "array", "items": {
            "type": "object",
            "required": ["ph", "pid", "tid", "name"],
            "properties": {
                "ph": {"enum": ["M", "X", "b", "e"]},
                "pid": {"type": "integer", "minimum": 0},
                "tid": {"type": "integer", "minimum": 0},
                "name": {"type": "string", "minLength": 1},
                "ts": {"type": "number", "minimum": 0},
                "dur": {"type": "number", "minimum": 0},
                "cat": {"type": "string"},
                "id": {"type": "string"},
                "args": {"type": "object"},
            },
            "allOf": [
                {"if": {"properties": {"ph": {"const": "X"}}}, "then": {"required": ["ts", "dur", "cat"]}},
                {"if": {"properties": {"ph": {"enum": ["b", "e"]}}}, "then": {"required": ["ts", "id", "cat"]}},
                {"if": {"properties": {"ph": {"const": "M"}}}, "then": {
                    "required": ["args"],
                    "properties": {"name": {"enum": ["process_name", "process_sort_index", "thread_name",
                                                     "thread_sort_index"]}}}},
            ],
        }},
    },
}

META = TraceMeta(kernel="toy", arch="gfx950", source="model", clock_mhz=2000.0)


def r(wave, unit, start, end, simd=0, opcode="v_add_f32", **kw):
    rec = dict(cu=0, simd=simd, wave=wave, slot=wave, opcode=opcode, unit=unit, issue=start, start=start,
               end=end, stall=0)
    rec.update(kw)
    return rec


@pytest.fixture
def small():
    recs = [r(0, "MFMA", 10, 74, opcode="v_mfma_f32_32x32x64_f8f6f4", iteration=0, region="QK_0"),
            r(1, "VALU", 10, 14, stall=2, stall_reason="dependency"),
            r(1, "LDS", 14, 114, opcode="ds_read_b128"), r(1, "LDS", 20, 120, opcode="ds_read_b128"),
            r(4, "MFMA", 12, 76, simd=1, opcode="v_mfma_f32_32x32x64_f8f6f4")]
    return Trace.from_records(recs, META)


def test_trace_events_schema_and_layout(small, tmp_path):
    path = write_perfetto(small, tmp_path / "out" / "t.json")
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, EVENT_SCHEMA)
    events = doc["traceEvents"]
    names = {(e["pid"], e["args"]["name"]) for e in events if e["name"] in ("process_name", "thread_name")}
    assert (1, "CU 0 SIMD 0") in names and (2, "CU 0 SIMD 1") in names
    assert (1, "MFMA pipe") in names and (1, "wave 0 MFMA") in names and (1, "wave 1 memory") in names
    slices = [e for e in events if e["ph"] == "X"]
    # 5 records + 2 MFMA copies on the pipe threads; one LDS overlaps the other -> async pair
    assert len(slices) == 6 and sum(e["ph"] == "b" for e in events) == 1 and sum(e["ph"] == "e" for e in events) == 1
    mfma = [e for e in slices if e["pid"] == 1 and e["tid"] == PIPE_TID]
    # ts measured from the first issue (cycle 10), in us at 2000 MHz: 64 cycles = 0.032 us
    assert mfma == [{"name": "v_mfma_f32_32x32x64_f8f6f4", "cat": "MFMA", "pid": 1, "tid": PIPE_TID, "ph": "X",
                     "ts": 0.0, "dur": pytest.approx(0.032),
                     "args": {"issue": 10, "start": 10, "end": 74, "stall": 0, "iteration": 0, "region": "QK_0"}}]
    valu = next(e for e in slices if e["cat"] == "VALU")
    assert valu["args"]["stall_reason"] == "dependency" and valu["dur"] == pytest.approx(0.002)
    begin = next(e for e in events if e["ph"] == "b")
    end = next(e for e in events if e["ph"] == "e")
    assert begin["id"] == end["id"] and begin["args"]["start"] == 20
    assert end["ts"] - begin["ts"] == pytest.approx(100 / 2000)
    assert doc["otherData"]["label"] == "simulated (cycle model)"


def test_trace_events_window_and_no_clock(small):
    doc = trace_events(Trace(small.table, TraceMeta(kernel="t", arch="gfx950", source="rocprof-att")), (76, 200))
    jsonschema.validate(doc, EVENT_SCHEMA)
    slices = [e for e in doc["traceEvents"] if e["ph"] in ("X", "b")]
    assert sorted(e["args"]["start"] for e in slices) == [14, 20]  # only the two LDS reach past cycle 76
    assert doc["otherData"]["time_unit"].startswith("cycles")
    lds = next(e for e in slices if e["args"]["start"] == 14)
    assert lds["ts"] == 4.0 and lds["dur"] == 100.0  # 1 cycle = 1 unit without a clock


def test_empty_trace_exports_valid_json():
    doc = trace_events(Trace.from_records([], META))
    jsonschema.validate(doc, EVENT_SCHEMA)
    assert doc["traceEvents"] == []


def test_format_value():
    assert format_value(0.25, "fraction") == "25.0 %"
    assert format_value(896.0, "cycles") == "896"
    assert format_value(6.5, "count") == "6.50"
    assert format_value(None, "cycles") == "n/a"
    assert format_value(3.072, "TFLOP/s") == "3.07"
    with pytest.raises(ValueError, match="unit"):
        format_value(1.0, "parsecs")


def test_render_formats(small):
    text = render(small, "whole", "table")
    assert text.startswith("toy [gfx950, simulated (cycle model), 2000 MHz]: 5 records, "
                           "window whole = cycles [10, 120)")
    # SIMD 0: MFMA [10,74) = 64; SIMD 1: [12,76) = 64 -> 128 / (2 x 110)
    busy_line = next(line for line in text.splitlines() if line.startswith("mfma_busy "))
    assert busy_line.split()[-2:] == [f"{100 * 128 / 220:.1f}", "%"]
    md = render(small, "whole", "md", other=small)
    assert "| metric | a | b | b - a | b / a |" in md and "| mfma_busy | 58.2 % | 58.2 % | +0.0 pp | 1.000x |" in md
    csv = render(small, "whole", "csv").splitlines()
    assert csv[0] == "metric,unit,value,description,kernel,label,window_start,window_end"
    assert csv[1].startswith("cycles,cycles,110.0,") and csv[1].endswith(",toy,simulated (cycle model),10,120")
    csv = render(small, "whole", "csv", other=small).splitlines()
    assert csv[0] == ("metric,unit,a,b,diff,ratio,a_kernel,a_label,a_window_start,a_window_end,"
                      "b_kernel,b_label,b_window_start,b_window_end")
    doc = json.loads(render(small, "whole", "json"))
    assert doc["traces"][0]["simulated"] is True and doc["traces"][0]["window"] == [10, 120]
    values = {m["metric"]: m["value"] for m in doc["metrics"]}
    assert values["mfma_busy"] == pytest.approx(128 / 220) and values["handover_gap_mean"] is None
    assert values["valu_cycles_per_block"] == 0.0  # one block (wave 0, iteration 0) without VALU
    assert list(summary_frame(small)["metric"])[:1] == ["cycles"]
    with pytest.raises(ValueError, match="fmt"):
        render(small, "whole", "xml")
    with pytest.raises(TypeError, match="other"):
        render(small, "whole", "table", other="b.parquet")
