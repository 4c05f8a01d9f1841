"""Trace readers never hang, never read unbounded data and never traceback on bad files; writers
are atomic. Every bad input is one TraceError naming the file and field."""

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from zyfa.trace import safeio, schema
from zyfa.trace.schema import Trace, TraceError, TraceMeta

META = TraceMeta(kernel="toy", arch="gfx950", source="model", clock_mhz=2400.0)


def _rec(**kw):
    base = dict(cu=0, simd=0, wave=0, slot=0, opcode="v_add_f32", unit="VALU", issue=0, start=0, end=4, stall=0)
    base.update(kw)
    return base


@pytest.fixture
def saved(tmp_path):
    return Trace.from_records([_rec(), _rec(wave=1, issue=4, start=4, end=8)], META).save(tmp_path / "t")


def _deep(n):
    return "[" * n + "]" * n


def _nested_meta(n):
    meta = json.loads((json.dumps(META.to_dict())))
    meta["extra"] = json.loads(_deep(n)) if n < 500 else None
    return json.dumps(meta) if n < 500 else json.dumps(meta)[:-1] + ', "extra": ' + _deep(n) + "}"


# (id, how to damage the saved trace, field, message)
def _sidecar(text):
    return lambda p: p.with_suffix(".json").write_bytes(text if isinstance(text, bytes) else text.encode())


def _replace(target, kind):
    def damage(p):
        path = p if target == "parquet" else p.with_suffix(".json")
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "dir":
            path.mkdir()
        elif kind == "zero":
            path.symlink_to("/dev/zero")
        elif kind == "null":
            path.symlink_to("/dev/null")
        elif kind == "dangling":
            path.symlink_to(path.parent / "nowhere")
    return damage


CASES = [
    ("parquet fifo", _replace("parquet", "fifo"), "<file>", "a FIFO, not a regular trace file"),
    ("parquet dir", _replace("parquet", "dir"), "<file>", "a directory, not a regular trace file"),
    ("parquet /dev/zero", _replace("parquet", "zero"), "<file>", "a character device, not a regular trace file"),
    ("parquet /dev/null", _replace("parquet", "null"), "<file>", "a character device, not a regular trace file"),
    ("parquet dangling", _replace("parquet", "dangling"), "<file>", "no such trace file"),
    ("sidecar fifo", _replace("json", "fifo"), "<metadata>", "a FIFO, not a regular JSON sidecar"),
    ("sidecar dir", _replace("json", "dir"), "<metadata>", "a directory, not a regular JSON sidecar"),
    ("sidecar /dev/zero", _replace("json", "zero"), "<metadata>", "a character device, not a regular JSON sidecar"),
    ("sidecar /dev/null", _replace("json", "null"), "<metadata>", "a character device"),
    ("sidecar dangling", _replace("json", "dangling"), "<metadata>", "no such JSON sidecar"),
    ("sidecar 65 deep", _sidecar(_nested_meta(65)), "<metadata>", "nested too deeply"),
    ("sidecar 100k deep", _sidecar(_nested_meta(100_000)), "<metadata>", "nested too deeply"),
    ("sidecar bare deep list", _sidecar(_deep(200_000)), "<metadata>", "nested too deeply"),
    ("sidecar utf-16", _sidecar(json.dumps(META.to_dict()).encode("utf-16")), "<metadata>", "not UTF-8"),
    ("sidecar latin-1", _sidecar(b'{"kernel": "caf\xe9"}'), "<metadata>", "not UTF-8"),
    ("sidecar list", _sidecar("[1, 2]"), "<metadata>", "expected a JSON object, got list"),
    ("sidecar number", _sidecar("42"), "<metadata>", "expected a JSON object, got int"),
    ("sidecar null", _sidecar("null"), "<metadata>", "expected a JSON object, got NoneType"),
    ("sidecar string", _sidecar('"toy"'), "<metadata>", "expected a JSON object, got str"),
    ("sidecar empty", _sidecar(""), "<metadata>", "unreadable or truncated JSON sidecar"),
    ("sidecar truncated", _sidecar('{"kernel": "to'), "<metadata>", "unreadable or truncated JSON sidecar"),
    ("sidecar NaN literal", _sidecar('{"schema_version": NaN}'), "schema_version", "unknown schema_version"),
    ("sidecar version 2", _sidecar('{"schema_version": 2}'), "schema_version", "unknown schema_version 2"),
    ("sidecar no kernel", _sidecar('{"schema_version": 1, "arch": "gfx950", "source": "model"}'), "kernel",
     "missing required metadata key"),
    ("sidecar unknown key", _sidecar('{"schema_version": 1, "kernel": "k", "arch": "a", "source": "model", "x": 1}'),
     "x", "unknown metadata key"),
    ("parquet empty", lambda p: p.write_bytes(b""), "<file>", "unreadable or truncated Parquet"),
    ("parquet text", lambda p: p.write_text("cu,simd\n0,0\n"), "<file>", "unreadable or truncated Parquet"),
    ("parquet random", lambda p: p.write_bytes(os.urandom(4096)), "<file>", "unreadable or truncated Parquet"),
    ("parquet truncated", lambda p: p.write_bytes(p.read_bytes()[:100]), "<file>", "unreadable or truncated Parquet"),
]


@pytest.mark.parametrize("name,damage,field,message", CASES, ids=[c[0] for c in CASES])
def test_bad_trace_files(saved, name, damage, field, message):
    damage(saved)
    with pytest.raises(TraceError, match=message) as info:
        Trace.load(saved)
    assert info.value.field == field
    assert str(saved.parent) in str(info.value)  # names the file


@pytest.mark.parametrize("which,limit_name", [("json", "MAX_JSON_BYTES"), ("parquet", "MAX_TRACE_BYTES")])
def test_size_limits(saved, monkeypatch, which, limit_name):
    monkeypatch.setattr(schema, limit_name, 64)
    with pytest.raises(TraceError, match="over the 64-byte limit"):
        Trace.load(saved)


def _embedded(tmp_path, metadata: bytes):
    table = Trace.from_records([_rec()], META).table.replace_schema_metadata({schema.META_KEY: metadata})
    pq.write_table(table, tmp_path / "e.parquet")
    return tmp_path / "e.parquet"


@pytest.mark.parametrize("metadata,message", [
    (_deep(100_000).encode(), "embedded metadata nested too deeply"),
    (b"\xff\xfe{", "embedded metadata is not UTF-8"),
    (b"{", "unreadable or truncated embedded metadata"),
    (b"[]", "expected a JSON object"),
])
def test_bad_embedded_metadata(tmp_path, metadata, message):
    with pytest.raises(TraceError, match=message):
        Trace.load(_embedded(tmp_path, metadata))


@pytest.mark.parametrize("record,field,message", [
    (_rec(cu=-1), "cu", "negative cu id -1"),
    (_rec(simd=-3), "simd", "negative simd id -3"),
    (_rec(wave=-1), "wave", "negative wave id"),
    (_rec(slot=-2), "slot", "negative slot id"),
    (_rec(issue=2**70, start=2**70, end=2**70), "<records>", "cannot build the table"),
    (_rec(end=2**64), "<records>", "cannot build the table"),
    (_rec(cu=2**40), "<records>", "cannot build the table"),
    (_rec(issue="soon"), "<records>", "cannot build the table"),
    (_rec(end=4.5), "end", "4.5 is not an integer"),
    (_rec(cu=1.0), "cu", "1.0 is not an integer"),
    (_rec(unit="GPU"), "unit", "unknown unit 'GPU'"),
    (_rec(start=5, end=4), "end", "negative duration"),
    (_rec(issue=3, start=2), "start", "start 2 < issue 3"),
    (_rec(stall=-1), "stall", "negative stall"),
    (_rec(opcode=None), "opcode", "lacks non-null field"),
])
def test_bad_records(record, field, message):
    with pytest.raises(TraceError, match=message) as info:
        Trace.from_records([record], META)
    assert info.value.field == field


def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path, monkeypatch):
    path = Trace.from_records([_rec()], META).save(tmp_path / "t")
    before = path.read_bytes(), path.with_suffix(".json").read_bytes()

    def broken(table, where, *a, **k):
        open(where, "wb").write(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        Trace.from_records([_rec(end=9)], META).save(tmp_path / "t")
    assert (path.read_bytes(), path.with_suffix(".json").read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json", "t.parquet"]


def test_written_files_get_the_usual_permissions(tmp_path):
    path = safeio.write_text(tmp_path / "x.txt", "hi")
    assert path.stat().st_mode & 0o777 == 0o666 & ~safeio._UMASK


@pytest.mark.parametrize("kind", ["input", "exists", "dir", "outside", "force"])
def test_check_output(tmp_path, kind):
    target = tmp_path / "out.json"
    if kind == "input":
        target.write_text("x")
        (tmp_path / "link.json").symlink_to(target)
        with pytest.raises(safeio.SafeIOError, match="is an input of this command"):
            safeio.check_output(tmp_path / "link.json", force=True, inputs=[target])
    elif kind == "exists":
        target.write_text("x")
        with pytest.raises(safeio.SafeIOError, match="exists; pass --force"):
            safeio.check_output(target)
    elif kind == "dir":
        target.mkdir()
        with pytest.raises(safeio.SafeIOError, match="not a regular file"):
            safeio.check_output(target, force=True)
    elif kind == "outside":
        with pytest.raises(safeio.SafeIOError, match="is outside"):
            safeio.check_output(tmp_path / "sub" / ".." / ".." / "escape.json", within=tmp_path / "sub")
    else:
        target.write_text("x")
        assert safeio.check_output(target, force=True) == target


def test_read_json_depth_limit_is_exact(tmp_path):
    (tmp_path / "ok.json").write_text(_deep(64))
    (tmp_path / "deep.json").write_text(_deep(65))
    assert safeio.read_json(tmp_path / "ok.json") is not None
    with pytest.raises(safeio.SafeIOError, match="nested too deeply"):
        safeio.read_json(tmp_path / "deep.json")
