"""Trace store: only traces under the given directories/files open; uploads are validated."""

from __future__ import annotations

import base64
import os

import pytest

from zyfa.webui.store import TraceStore, UnsafePathError, UploadError


def _data_url(data: bytes) -> str:
    return "data:application/octet-stream;base64," + base64.b64encode(data).decode()


@pytest.fixture
def tree(tmp_path, make_trace):
    """tmp/traces/{zyfa,sub/aiter}.parquet (allowed dir) and tmp/outside/secret.parquet."""
    traces, outside = tmp_path / "traces", tmp_path / "outside"
    make_trace("zyfa-fp8").save(traces / "zyfa")
    make_trace("aiter-like-fp8", valu_ops=24).save(traces / "sub" / "aiter")
    make_trace("secret").save(outside / "secret")
    (traces / "notes.txt").write_text("not a trace")
    return traces, outside


def test_lists_and_loads_traces_under_the_directory(tree):
    traces, _ = tree
    store = TraceStore([traces])
    labels = sorted(e.label for e in store.entries())
    assert labels == ["sub/aiter.parquet", "zyfa.parquet"]
    kernels = sorted(store.get(e.id).meta.kernel for e in store.entries())
    assert kernels == ["aiter-like-fp8", "zyfa-fp8"]
    entry = next(e for e in store.entries() if e.label == "zyfa.parquet")
    assert store.get(entry.id) is store.get(entry.id)  # cached, loaded once


@pytest.mark.parametrize("name", ["../outside/secret.parquet", "sub/../../outside/secret.parquet",
                                  "notes.txt", "/etc/passwd", "zyfa.json", "missing.parquet", "", "a\x00b.parquet"])
def test_refuses_paths_outside_or_not_traces(tree, name):
    traces, _ = tree
    store = TraceStore([traces])
    with pytest.raises(UnsafePathError):
        store.resolve(name)


def test_refuses_absolute_path_outside_and_symlink_escape(tree):
    traces, outside = tree
    store = TraceStore([traces])
    with pytest.raises(UnsafePathError, match="only .parquet traces under the trace directories"):
        store.resolve(str(outside / "secret.parquet"))
    os.symlink(outside / "secret.parquet", traces / "link.parquet")
    with pytest.raises(UnsafePathError):
        store.resolve("link.parquet")
    assert "link.parquet" not in [e.label for e in store.entries()]
    with pytest.raises(UnsafePathError):  # a forged id from the browser is checked again
        store.get(f"file:{outside / 'secret.parquet'}")


def test_named_file_outside_dirs_is_allowed(tree):
    traces, outside = tree
    store = TraceStore([traces], [outside / "secret.parquet"])
    assert store.resolve(str(outside / "secret.parquet")) == (outside / "secret.parquet").resolve()
    assert store.get(store.open_path(str(outside / "secret.parquet"))).meta.kernel == "secret"
    assert store.open_path("sub/aiter.parquet").endswith("sub/aiter.parquet")
    assert store.resolve("secret.parquet") == (outside / "secret.parquet").resolve()  # by its file name


def test_unknown_id(tree):
    store = TraceStore([tree[0]])
    with pytest.raises(KeyError, match="unknown trace id"):
        store.get("sim:99")
    with pytest.raises(TypeError, match="trace id must be a string"):
        store.get(3)


def test_constructor_validation(tree, tmp_path):
    traces, _ = tree
    with pytest.raises(ValueError, match="does not exist or is not a directory"):
        TraceStore([tmp_path / "nope"])
    with pytest.raises(ValueError, match="must be a .parquet trace"):
        TraceStore([], [traces / "notes.txt"])
    with pytest.raises(ValueError, match="does not exist"):
        TraceStore([], [tmp_path / "gone.parquet"])
    with pytest.raises(TypeError, match="trace_dirs entries must be paths"):
        TraceStore([3])
    with pytest.raises(ValueError, match="max_upload_bytes must be a positive int"):
        TraceStore([], max_upload_bytes=0)


def test_upload_valid_trace(tree):
    traces, _ = tree
    store = TraceStore([traces])
    pq_bytes = (traces / "zyfa.parquet").read_bytes()
    js_bytes = (traces / "zyfa.json").read_bytes()
    trace_id = store.add_upload(["zyfa.parquet", "zyfa.json"], [_data_url(pq_bytes), _data_url(js_bytes)])
    assert trace_id.startswith("upload:")
    assert store.get(trace_id).meta.kernel == "zyfa-fp8"
    assert store.label(trace_id) == "upload: zyfa.parquet"
    assert trace_id in [e.id for e in store.entries()]
    # the Parquet alone also loads (metadata is embedded)
    assert store.get(store.add_upload("zyfa.parquet", _data_url(pq_bytes))).meta.kernel == "zyfa-fp8"


@pytest.mark.parametrize("names, payloads, message", [
    (["x.parquet"], [b"PAR1 this is not parquet"], "not a valid zyfa trace"),
    (["../x.parquet"], [b"x"], "plain name without directories"),
    (["x.csv"], [b"a,b"], "neither a .parquet trace nor its .json sidecar"),
    (["x.json"], [b"{}"], "no .parquet trace among the files"),
    (["x.parquet", "y.parquet"], [b"a", b"b"], "more than one .parquet"),
    ([], [], "expected one .parquet trace"),
])
def test_upload_rejects_malformed(tree, names, payloads, message):
    store = TraceStore([tree[0]])
    with pytest.raises(UploadError, match=message):
        store.add_upload(names, [_data_url(p) for p in payloads])


def test_upload_rejects_bad_base64_and_oversize(tree):
    store = TraceStore([tree[0]], max_upload_bytes=10)
    with pytest.raises(UploadError, match="not valid base64"):
        store.add_upload(["x.parquet"], ["data:application/octet-stream;base64,@@@"])
    with pytest.raises(UploadError, match="not a data URL"):
        store.add_upload(["x.parquet"], ["garbage"])
    with pytest.raises(UploadError, match="larger than the 10 byte limit"):
        store.add_upload(["x.parquet"], [_data_url(b"x" * 11)])
