"""``zyfa-trace analyze`` and ``zyfa-trace export`` through the real dispatcher."""

import json

import pytest

from zyfa.cli.trace_main import main
from zyfa.trace.schema import Trace, TraceMeta


def r(wave, unit, start, end, opcode="v_add_f32", **kw):
    rec = dict(cu=0, simd=0, wave=wave, slot=wave, opcode=opcode, unit=unit, issue=start, start=start, end=end,
               stall=0)
    rec.update(kw)
    return rec


@pytest.fixture
def saved(tmp_path):
    """Model trace: w0 MFMA [0,64), w1 VALU [0,48) -> busy 100 %, overlap 75 %. Hardware trace: MFMA [0,64) of 128."""
    mfma = "v_mfma_f32_32x32x64_f8f6f4"
    model = Trace.from_records([r(0, "MFMA", 0, 64, mfma)] + [r(1, "VALU", t, t + 4) for t in range(0, 48, 4)],
                               TraceMeta(kernel="zyfa-fp8", arch="gfx950", source="model", clock_mhz=2400.0))
    hw = Trace.from_records([r(0, "MFMA", 0, 64, mfma), r(0, "SALU", 127, 128)],
                            TraceMeta(kernel="aiter", arch="gfx950", source="rocprof-att", clock_mhz=2100.0))
    return model.save(tmp_path / "model"), hw.save(tmp_path / "hw")


def test_analyze_table(saved, capsys):
    assert main(["analyze", str(saved[0])]) == 0
    out = capsys.readouterr().out
    assert "zyfa-fp8 [gfx950, simulated (cycle model), 2400 MHz]: 13 records, window whole = cycles [0, 64)" in out
    lines = {line.split()[0]: line.split()[1:] for line in out.splitlines()[3:] if line.strip()}
    assert lines["mfma_busy"] == ["100.0", "%"] and lines["pingpong_overlap"] == ["75.0", "%"]


def test_analyze_compare_json(saved, capsys):
    assert main(["analyze", str(saved[0]), "--compare", str(saved[1]), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [t["label"] for t in doc["traces"]] == ["simulated (cycle model)", "hardware (rocprof-att)"]
    busy = next(m for m in doc["metrics"] if m["metric"] == "mfma_busy")
    assert busy["a"] == 1.0 and busy["b"] == 0.5 and busy["diff"] == -0.5


def test_analyze_md_tables_and_window(saved, capsys):
    assert main(["analyze", str(saved[0]), "--window", "0:32", "--format", "md", "--tables"]) == 0
    out = capsys.readouterr().out
    assert "| pingpong_overlap | 100.0 % |" in out  # [0,32) of the MFMA is all under w1's VALU
    assert "pingpong_overlap_per_simd:" in out and "| cu | simd | mfma_cycles | overlap_cycles |" in out


def test_analyze_errors(saved, tmp_path, capsys):
    assert main(["analyze", str(tmp_path / "missing.parquet")]) == 2
    assert "no such trace file" in capsys.readouterr().err
    assert main(["analyze", str(saved[0]), "--window", "9:3"]) == 2
    assert "window end must be greater" in capsys.readouterr().err
    assert main(["analyze", str(saved[0]), "--format", "csv", "--tables"]) == 2
    assert "--tables needs" in capsys.readouterr().err


def test_export(saved, tmp_path, capsys):
    out_json, out_csv, out_md = tmp_path / "e" / "t.json", tmp_path / "e" / "m.csv", tmp_path / "e" / "m.md"
    assert main(["export", str(saved[0]), "--perfetto", str(out_json), "--csv", str(out_csv), "--md", str(out_md)]) == 0
    printed = capsys.readouterr().out
    assert "simulated (cycle model)" in printed and str(out_json) in printed
    events = json.loads(out_json.read_text())["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == 13 + 1  # 13 records + the MFMA on the pipe track
    assert "mfma_busy,fraction,1.0," in out_csv.read_text()
    assert "| mfma_busy | 100.0 % |" in out_md.read_text() and "valu_by_class:" in out_md.read_text()
    assert main(["export", str(saved[0])]) == 2
    assert "nothing to do" in capsys.readouterr().err
