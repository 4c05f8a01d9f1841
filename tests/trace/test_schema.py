"""Trace schema v1: construction, Parquet + JSON round trip, and every validation error."""

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from zyfa.trace.schema import (ARROW_SCHEMA, COLUMNS, SCHEMA_VERSION, UNITS, Trace, TraceError,
                               TraceMeta)

META = TraceMeta(kernel="toy", arch="gfx950", source="model", clock_mhz=2400.0,
                 shape={"seqlen_q": 256, "seqlen_k": 256, "heads": 2, "heads_k": 2},
                 grid=(2, 1, 1), workgroup_size=512, provenance={"command": "pytest"})


def rec(**kw):
    base = dict(cu=0, simd=0, wave=0, slot=0, opcode="v_add_f32", unit="VALU",
                issue=0, start=0, end=4, stall=0)
    base.update(kw)
    return base


def records():
    return [
        rec(opcode="v_mfma_f32_32x32x64_f8f6f4", unit="MFMA", issue=0, start=0, end=64, iteration=0, pc=0,
            operands="a[0:15], v[0:7], v[8:15], a[0:15]", region="QK_0"),
        rec(wave=1, slot=1, issue=2, start=4, end=8, stall=2, stall_reason="arbitration", iteration=0, pc=8),
        rec(wave=1, slot=1, opcode="v_exp_f32", unit="TRANS", issue=8, start=8, end=24, iteration=0, pc=16),
    ]


def test_contract_constants():
    assert SCHEMA_VERSION == 1
    assert list(COLUMNS) == ["cu", "simd", "wave", "slot", "pc", "opcode", "operands", "unit", "issue", "start",
                             "end", "stall", "stall_reason", "iteration", "region"]
    assert COLUMNS["issue"].type == pa.int64() and not COLUMNS["issue"].nullable
    assert COLUMNS["iteration"].type == pa.int32() and COLUMNS["iteration"].nullable
    assert set(UNITS) == {"MFMA", "VALU", "TRANS", "SALU", "SMEM", "LDS", "VMEM", "BRANCH", "BARRIER", "WAIT",
                          "MISC", "REGION"}
    assert ARROW_SCHEMA.field("pc").nullable and not ARROW_SCHEMA.field("cu").nullable


def test_from_records_dtypes_and_null_fill():
    t = Trace.from_records(records(), META)
    assert len(t) == 3
    assert str(t.df["cu"].dtype) == "int32[pyarrow]"
    assert str(t.df["start"].dtype) == "int64[pyarrow]"
    assert str(t.df["opcode"].dtype) == "string[pyarrow]"
    assert t.df["stall_reason"].isna().tolist() == [True, False, True]
    assert t.column("end").tolist() == [64, 8, 24]
    assert t.column("stall_reason", fill="").tolist() == ["", "arbitration", ""]
    with pytest.raises(ValueError, match="stall_reason"):
        t.column("stall_reason")


def test_dataframe_constructor_casts_losslessly_and_fills_nullable():
    df = pd.DataFrame(records()).drop(columns=["region", "operands", "pc"])  # int64 numpy columns
    t = Trace(df, META)
    assert t.table.schema.field("cu").type == pa.int32()
    assert t.df["region"].isna().all()
    df.loc[0, "cu"] = 2**40
    with pytest.raises(TraceError, match="'cu'"):
        Trace(df, META)


def test_round_trip(tmp_path):
    t = Trace.from_records(records(), META)
    path = t.save(tmp_path / "sub" / "toy")
    assert path == tmp_path / "sub" / "toy.parquet"
    sidecar = json.loads((tmp_path / "sub" / "toy.json").read_text())
    assert sidecar["schema_version"] == 1 and sidecar["source"] == "model" and sidecar["simulated"] is True
    for name in ("sub/toy.parquet", "sub/toy.json", "sub/toy"):
        back = Trace.load(tmp_path / name)
        assert back.meta == META
        pd.testing.assert_frame_equal(back.df, t.df)


def test_embedded_metadata_when_sidecar_lost(tmp_path):
    Trace.from_records(records(), META).save(tmp_path / "t.parquet")
    (tmp_path / "t.json").unlink()
    assert Trace.load(tmp_path / "t.parquet").meta.kernel == "toy"


def test_query_and_to_pandas():
    t = Trace.from_records(records(), META)
    sub = t.query("unit == 'VALU' or unit == 'TRANS'")
    assert len(sub) == 2 and sub.meta is t.meta
    assert sub.column("wave").tolist() == [1, 1]
    copy = t.to_pandas()
    copy.loc[0, "end"] = 1
    assert t.column("end")[0] == 64
    with pytest.raises(ValueError, match="expr"):
        t.query("")


def test_meta_validation_and_label():
    assert META.attn_shape.seqlen_q == 256 and META.label == "simulated (cycle model)"
    hw = TraceMeta(kernel="k", arch="gfx950", source="rocprof-att")
    assert hw.simulated is False and hw.label == "hardware (rocprof-att)"
    with pytest.raises(ValueError, match="Unknown source"):
        TraceMeta(kernel="k", arch="gfx950", source="nsight")
    with pytest.raises(ValueError, match="clock_mhz"):
        TraceMeta(kernel="k", arch="gfx950", source="model", clock_mhz=-1)
    with pytest.raises(ValueError, match="shape has unknown keys"):
        TraceMeta(kernel="k", arch="gfx950", source="model", shape={"seq": 1})
    with pytest.raises(ValueError, match="seqlen_q"):
        TraceMeta(kernel="k", arch="gfx950", source="model", shape={"seqlen_q": 0})
    with pytest.raises(ValueError, match="grid"):
        TraceMeta(kernel="k", arch="gfx950", source="model", grid=(0, 1, 1))
    with pytest.raises(ValueError, match="kernel"):
        TraceMeta(kernel="", arch="gfx950", source="model")
    with pytest.raises(ValueError, match="schema_version"):
        TraceMeta(kernel="k", arch="gfx950", source="model", schema_version=2)
    with pytest.raises(TypeError, match="meta"):
        Trace.from_records([], {"kernel": "k"})


@pytest.mark.parametrize("change, field, message", [
    ({"unit": "XDL"}, "unit", "unknown unit"),
    ({"start": -1}, "start", "start -1 < issue 0"),
    ({"end": 0, "start": 3, "issue": 3}, "end", "negative duration"),
    ({"stall": -2}, "stall", "negative stall"),
    ({"opcode": None}, "opcode", "lacks non-null"),
    ({"bogus": 1}, "bogus", "unknown key"),
])
def test_bad_rows(change, field, message):
    with pytest.raises(TraceError, match=message) as info:
        Trace.from_records([rec(**change)], META)
    assert info.value.field == field and info.value.file == "<memory>"


def test_overlap_on_one_unit_is_an_error_but_not_across_simds_or_units():
    ok = [rec(start=0, end=4), rec(wave=1, start=4, end=8), rec(simd=1, start=2, end=6),
          rec(unit="TRANS", start=0, end=16), rec(unit="MFMA", start=2, end=66), rec(start=5, end=5, issue=5)]
    assert len(Trace.from_records(ok, META)) == 6
    bad = ok + [rec(wave=2, unit="MFMA", issue=60, start=60, end=124)]
    with pytest.raises(TraceError, match=r"MFMA records overlap on cu 0 simd 0: row 4 \[2, 66\) and row 6"):
        Trace.from_records(bad, META)


def test_empty_trace(tmp_path):
    t = Trace.from_records([], META)
    assert len(t) == 0 and list(t.df.columns) == list(COLUMNS)
    assert len(Trace.load(t.save(tmp_path / "e"))) == 0


def write_raw(tmp_path, table, meta=None):
    pq.write_table(table, tmp_path / "raw.parquet")
    (tmp_path / "raw.json").write_text(json.dumps(meta if meta is not None else META.to_dict()))
    return tmp_path / "raw.parquet"


def test_load_missing_column(tmp_path):
    table = Trace.from_records(records(), META).table.drop_columns(["region"])
    with pytest.raises(TraceError, match=r"raw.parquet: field 'region': missing column"):
        Trace.load(write_raw(tmp_path, table))


def test_load_wrong_dtype(tmp_path):
    table = Trace.from_records(records(), META).table
    table = table.set_column(table.column_names.index("start"), "start", table.column("start").cast(pa.float64()))
    with pytest.raises(TraceError, match=r"field 'start': wrong dtype double, expected int64"):
        Trace.load(write_raw(tmp_path, table))


def test_load_negative_duration(tmp_path):
    table = Trace.from_records(records(), META).table
    table = table.set_column(table.column_names.index("end"), "end", pa.array(np.array([64, 3, 24])))
    with pytest.raises(TraceError, match=r"raw.parquet: field 'end': row 1"):
        Trace.load(write_raw(tmp_path, table))


def test_load_unknown_schema_version(tmp_path):
    meta = dict(META.to_dict(), schema_version=7)
    with pytest.raises(TraceError, match=r"raw.json: field 'schema_version'"):
        Trace.load(write_raw(tmp_path, Trace.from_records(records(), META).table, meta))


def test_load_unknown_metadata_key_and_bad_value(tmp_path):
    table = Trace.from_records(records(), META).table
    with pytest.raises(TraceError, match=r"field 'colour': unknown metadata key"):
        Trace.load(write_raw(tmp_path, table, dict(META.to_dict(), colour="red")))
    with pytest.raises(TraceError, match=r"field 'source'"):
        Trace.load(write_raw(tmp_path, table, dict(META.to_dict(), source="gpu")))


def test_load_truncated_files(tmp_path):
    path = Trace.from_records(records(), META).save(tmp_path / "t")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match=r"t.parquet: field '<file>': unreadable or truncated"):
        Trace.load(path)
    path.write_bytes(data)
    sidecar = tmp_path / "t.json"
    sidecar.write_text(sidecar.read_text()[:20])
    with pytest.raises(TraceError, match=r"t.json: field '<metadata>': unreadable or truncated"):
        Trace.load(path)
    with pytest.raises(TraceError, match="no such trace file"):
        Trace.load(tmp_path / "missing.parquet")
    sidecar.unlink()
    sidecar.mkdir()  # a sidecar that cannot be read as a file
    with pytest.raises(TraceError, match=r"t.json: field '<metadata>': a directory, not a regular JSON sidecar"):
        Trace.load(path)
    sidecar.rmdir()
    sidecar.write_text("{}")
    (tmp_path / "notes.md").write_text("# not a trace")
    with pytest.raises(TraceError, match=r"notes.md: field '<file>': not a trace file"):
        Trace.load(tmp_path / "notes.md")
    sidecar.unlink()
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({k: v[:20] for k, v in table.schema.metadata.items()}), path)
    with pytest.raises(TraceError, match=r"t.parquet: field '<metadata>': unreadable or truncated embedded metadata"):
        Trace.load(path)


def test_save_converts_numpy_metadata_and_rejects_objects(tmp_path):
    meta = TraceMeta(kernel="k", arch="gfx950", source="model", extra={"cycles": np.int64(7), "v": np.arange(2)})
    back = Trace.load(Trace.from_records(records(), meta).save(tmp_path / "n"))
    assert back.meta.extra == {"cycles": 7, "v": [0, 1]}
    bad = TraceMeta(kernel="k", arch="gfx950", source="model", extra={"obj": object()})
    with pytest.raises(TraceError, match="n2.json: field 'extra': metadata is not JSON-serialisable"):
        Trace.from_records(records(), bad).save(tmp_path / "n2")


def test_codes_same_from_memory_and_from_file(tmp_path):
    t = Trace.from_records(records(), META)
    back = Trace.load(t.save(tmp_path / "c"))
    for trace in (t, back):
        codes, values = trace.codes("stall_reason")
        assert [None if c < 0 else values[c] for c in codes] == [None, "arbitration", None]
        codes, values = trace.codes("unit")
        assert [values[c] for c in codes] == ["MFMA", "VALU", "TRANS"]
    with pytest.raises(KeyError, match="string column"):
        t.codes("start")
