"""Sweeps never lose or mix up results: parts named by content, resume recomputes exactly the
missing points, one spec per folder, a lock against a second sweep, names confined, the whole
spec checked before anything runs, Ctrl-C one line. Points are evaluated in-process by a fake
evaluator (the Ray path is covered by test_sweep.py)."""

import json
import os
import re

import pytest

from zyfa import sweep
from zyfa.cli.trace_main import main

SPEC = {
    "sweep": {"name": "safe", "mode": "grid", "objective": "tflops"},
    "shape": {"seqlen": ["1k", "2k"], "heads": 2},
    "params": {"softmax": ["lean", "exact"], "schedule": ["pingpong", "serial"]},
}


@pytest.fixture
def calls(monkeypatch):
    """Evaluates points in-process with a fake evaluator; returns the list of evaluated point ids."""
    evaluated = []

    def fake(shape, params):
        return {"tflops": float(len(params["softmax"]) + int(shape["seqlen"][0])), "mfma_busy": 0.5}

    def run_points(points, evaluator, store, address="local", workers=None, progress=True, flush_every=2):
        rows = []
        for i in range(0, len(points), flush_every):
            chunk = [sweep.evaluate(evaluator, p) for p in points[i:i + flush_every]]
            evaluated.extend(r["point_id"] for r in chunk)
            store.append(chunk)
            rows += chunk
        return rows

    monkeypatch.setattr(sweep, "resolve_evaluator", lambda name: fake)
    monkeypatch.setattr(sweep, "run_points", run_points)
    return evaluated


def _spec(**changes):
    data = json.loads(json.dumps(SPEC))
    for dotted, value in changes.items():
        section, key = dotted.split(".")
        data[section][key] = value
    return sweep.spec_from_dict(data)


def _snapshot(folder):
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and p.name != sweep.LOCK_FILE}


def test_resume_recomputes_exactly_the_missing_points(tmp_path, calls):
    spec = _spec()
    out = tmp_path / "s"
    first = sweep.run_sweep(spec, out, progress=False)
    assert len(first) == 8 and len(calls) == 8
    parts = sorted((out / "parts").glob("part-*.parquet"))
    assert len(parts) == 4 and all(len(p.stem) == len("part-") + 16 for p in parts)  # content-hash names
    lost = parts[1]
    lost_ids = set(sweep.pd.read_parquet(lost)["point_id"])
    kept = {p: p.read_bytes() for p in parts if p != lost}
    lost.unlink()
    calls.clear()
    again = sweep.run_sweep(spec, out, progress=False)
    assert set(calls) == lost_ids and len(calls) == 2     # exactly the missing points
    assert len(again) == 8 and set(again["point_id"]) == set(first["point_id"])
    for part, data in kept.items():                          # no part was replaced
        assert part.read_bytes() == data
    calls.clear()
    assert len(sweep.run_sweep(spec, out, progress=False)) == 8 and calls == []


def test_a_different_spec_is_refused_and_forced_runs_rank_only_their_points(tmp_path, calls):
    out = tmp_path / "s"
    sweep.run_sweep(_spec(), out, progress=False)
    before = _snapshot(out)
    other = _spec(**{"params.schedule": ["serial"]})
    with pytest.raises(sweep.SweepError, match=r"different spec \(differs in params\).*--force"):
        sweep.run_sweep(other, out, progress=False)
    assert _snapshot(out) == before
    results = sweep.run_sweep(other, out, progress=False, force=True)
    assert len(results) == 4 and set(results["param.schedule"]) == {"serial"}
    assert json.loads((out / "spec.json").read_text())["params"]["schedule"] == ["serial"]


@pytest.mark.parametrize("user_files", [
    {"spec.json": '{"mine": 1}'}, {"best.json": "{}", "results.parquet": "not mine"}, {"notes.txt": "x"},
    {"spec.json": "not json at all"}, {"spec.json": "[" * 200 + "]" * 200},
])
def test_a_folder_that_is_not_a_sweep_is_refused_untouched(tmp_path, calls, user_files):
    out = tmp_path / "mine"
    out.mkdir()
    for name, text in user_files.items():
        (out / name).write_text(text)
    with pytest.raises(sweep.SweepError, match="not a sweep folder.*--force"):
        sweep.run_sweep(_spec(), out, progress=False)
    assert {p.name: p.read_text() for p in out.iterdir()} == user_files  # not even a lock file added
    assert calls == []


def test_output_that_is_a_file_is_refused(tmp_path, calls):
    out = tmp_path / "file"
    out.write_text("keep")
    with pytest.raises(sweep.SweepError, match="exists and is not a directory"):
        sweep.run_sweep(_spec(), out, progress=False)
    assert out.read_text() == "keep"


def test_a_second_sweep_in_the_same_folder_is_refused(tmp_path, calls):
    out = tmp_path / "s"
    with sweep.folder_lock(out):
        with pytest.raises(sweep.SweepError, match="another sweep is running"):
            sweep.run_sweep(_spec(), out, progress=False)
    assert calls == []
    assert len(sweep.run_sweep(_spec(), out, progress=False)) == 8  # the lock is released


BAD_NAMES = ["/tmp/evil", "../up", "a/b", ".hidden", "", " x", "a" * 101, "x\x00y", "..", "-flag"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_sweep_names_are_confined(name):
    with pytest.raises(sweep.SweepError, match="sweep.name .* must be a plain name"):
        _spec(**{"sweep.name": name})


# (field, value, message): every one is refused by spec_from_dict, before any point runs
BAD_FIELDS = [
    ("sweep.name", 5, "sweep.name must be str"),
    ("sweep.name", ["a"], "sweep.name must be str"),
    ("sweep.mode", ["grid"], "sweep.mode must be str"),
    ("sweep.mode", 1, "sweep.mode must be str"),
    ("sweep.mode", "annealing", "unknown sweep.mode"),
    ("sweep.objective", "speed", r"unknown sweep.objective 'speed'; cycle-model returns tflops"),
    ("sweep.objective", "error", "unknown sweep.objective 'error'"),
    ("sweep.objective", "kernel", "unknown sweep.objective 'kernel'"),
    ("sweep.objective", 3, "sweep.objective must be str"),
    ("sweep.objective", None, "sweep.objective must be str"),
    ("sweep.evaluator", ["cycle-model"], "sweep.evaluator must be str"),
    ("sweep.evaluator", "gpu", "unknown sweep.evaluator 'gpu'"),
    ("sweep.budget", "10", "sweep.budget must be int"),
    ("sweep.budget", 2.5, "sweep.budget must be int"),
    ("sweep.budget", True, "sweep.budget must be int"),
    ("sweep.seed", "0", "sweep.seed must be int"),
    ("sweep.seed", 1.5, "sweep.seed must be int"),
    ("sweep.seed", None, "sweep.seed must be int"),
    ("sweep.maximise", "no", "sweep.maximise must be bool"),
    ("sweep.maximise", 0, "sweep.maximise must be bool"),
    ("sweep.colour", "red", "unknown sweep field"),
    ("shape.heads", "two", "shape.heads must be int"),
    ("shape.heads", 2.0, "shape.heads must be int"),
    ("shape.heads", True, "shape.heads must be int"),
    ("shape.heads", -2, "AttnShape.heads must be a positive int"),
    ("shape.heads", 10**30, "over 2147483647"),
    ("shape.batch", 2**31, "over 2147483647"),
    ("shape.seqlen", "99999999999k", "over 2147483647"),
    ("shape.causal", "yes", "shape.causal must be bool"),
    ("shape.causal", 1, "shape.causal must be bool"),
    ("shape.dtype", 8, "shape.dtype must be str"),
    ("shape.dtype", "fp4", "dtype must be 'fp8' or 'bf16'"),
    ("shape.seqlen", 1.5, "shape.seqlen must be str or int"),
    ("shape.seqlen", "12q", "bad sequence length"),
    ("shape.seqlen", {"a": 1}, "shape.seqlen must be str or int"),
    ("shape.seqlen", [None], "shape.seqlen must be str or int"),
    ("shape.volume", 3, "unknown shape field"),
    ("params.softmax", [], "params.softmax has no candidate values"),
    ("params.softmax", [["lean"]], "params.softmax must be str or int or float or bool"),
    ("params.softmax", [{"a": 1}], "params.softmax must be str or int or float or bool"),
    ("params.softmax", {"lean": 1}, "params.softmax must be a value or a list"),
    ("params.softmax", [None], "params.softmax must be str or int or float or bool"),
    ("params.softmax", ["lean", "lean"], "params.softmax lists a value twice"),
    ("params.tile", [64, 128], r"unknown parameter\(s\) params.tile; cycle-model takes dtype"),
    ("params.Softmax", ["lean"], r"unknown parameter\(s\) params.Softmax"),
]


@pytest.mark.parametrize("field,value,message", BAD_FIELDS, ids=[f"{f}={v!r}"[:40] for f, v, _ in BAD_FIELDS])
def test_bad_spec_fields_are_named_before_running(field, value, message):
    with pytest.raises(sweep.SweepError, match=message):
        _spec(**{field: value})


@pytest.mark.parametrize("section,value,message", [
    ("sweep", ["x"], r"\[sweep\] must be dict"), ("shape", 3, r"\[shape\] must be dict"),
    ("params", "lean", r"\[params\] must be dict"), ("baseline", ["exact"], r"\[baseline\] must be dict"),
    ("baseline", {"tile": 64}, "baseline names parameters not in"),
    ("baseline", {"softmax": ["lean"]}, "baseline.softmax must be str or int or float or bool"),
    ("extra", {}, "unknown section"),
])
def test_bad_spec_sections(section, value, message):
    data = json.loads(json.dumps(SPEC))
    data[section] = value
    with pytest.raises(sweep.SweepError, match=message):
        sweep.spec_from_dict(data)


def test_random_mode_needs_a_budget():
    with pytest.raises(sweep.SweepError, match="sweep.budget must be a positive int for mode 'random'"):
        _spec(**{"sweep.mode": "random"})


SPEC_TEXT = ('[sweep]\nname = "cli"\nobjective = "tflops"\n[shape]\nseqlen = "1k"\nheads = 2\n'
             '[params]\nsoftmax = ["lean", "exact"]\n')

# spec file contents (bytes) or a special kind, and the message of the one-line error
BAD_SPEC_FILES = [
    ("not utf-8", SPEC_TEXT.encode("utf-16"), "not UTF-8"),
    ("latin-1", SPEC_TEXT.replace("cli", "caf\xe9").encode("latin-1"), "not UTF-8"),
    ("binary", bytes(range(256)), "not UTF-8"),
    ("bad toml", b"[sweep\nname=", "cannot parse"),
    ("deep toml", b"a = " + b"[" * 5000 + b"]" * 5000, "cannot parse"),
    ("empty", b"", "params.* is empty"),
    ("array section", b"sweep = [1, 2]\n[params]\nsoftmax='lean'", r"\[sweep\] must be dict"),
    ("objective", SPEC_TEXT.replace('"tflops"', '"joules"').encode(), "unknown sweep.objective 'joules'"),
    ("param", SPEC_TEXT.replace("softmax", "warp").encode(), r"params.warp"),
    ("name", SPEC_TEXT.replace('"cli"', '"../../etc"').encode(), "must be a plain name"),
    ("abs name", SPEC_TEXT.replace('"cli"', '"/tmp/x"').encode(), "must be a plain name"),
    ("budget type", SPEC_TEXT.replace('objective', 'budget = "3"\nobjective').encode(), "sweep.budget must be int"),
    ("too big", b"#" * (2**20 + 1), "over the 1048576-byte limit"),
]


def _cli(tmp_path, capsys, *args):
    code = main(["sweep", *map(str, args), "--quiet", "--no-traces"])
    captured = capsys.readouterr()
    return code, captured.err


@pytest.mark.parametrize("name,data,message", BAD_SPEC_FILES, ids=[c[0] for c in BAD_SPEC_FILES])
def test_cli_bad_spec_files_one_line_nothing_written(tmp_path, capsys, calls, name, data, message):
    spec = tmp_path / "spec.toml"
    spec.write_bytes(data)
    code, err = _cli(tmp_path, capsys, spec, "-o", tmp_path / "out")
    assert code == 2 and err.count("\n") == 1 and err.startswith("zyfa-trace sweep: ")
    assert re.search(message, err), err
    assert "Traceback" not in err and not (tmp_path / "out").exists() and calls == []


@pytest.mark.parametrize("kind", ["fifo", "dir", "dev-zero", "dangling"])
def test_cli_spec_that_is_not_a_regular_file(tmp_path, capsys, kind):
    spec = tmp_path / "spec.toml"
    if kind == "fifo":
        os.mkfifo(spec)
    elif kind == "dir":
        spec.mkdir()
    elif kind == "dev-zero":
        spec.symlink_to("/dev/zero")
    else:
        spec.symlink_to(tmp_path / "gone.toml")
    code, err = _cli(tmp_path, capsys, spec, "-o", tmp_path / "out")
    assert code == 2 and err.count("\n") == 1
    assert ("no such" in err) if kind == "dangling" else ("not a regular sweep spec" in err)


@pytest.mark.parametrize("args,message", [
    (["--workers", "0"], "--workers must be positive"), (["--workers", "-3"], "--workers must be positive"),
    (["--top", "0"], "--top must be positive"), (["--workers", "two"], "argument --workers: invalid int"),
    (["--top", "1.5"], "argument --top: invalid int"), (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_cli_bad_flags(tmp_path, capsys, calls, args, message):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC_TEXT)
    try:
        code = main(["sweep", str(spec), "-o", str(tmp_path / "out"), "--quiet", *args])
    except SystemExit as exc:  # argparse's usage errors leave through SystemExit, as from the console script
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists() and calls == []


def test_cli_ctrl_c_is_one_line_and_keeps_finished_points(tmp_path, capsys, monkeypatch, calls):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC_TEXT)
    real = sweep.run_points

    def interrupted(points, evaluator, store, *a, **k):
        real(points[:1], evaluator, store, flush_every=1)
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "run_points", interrupted)
    code, err = _cli(tmp_path, capsys, spec, "-o", tmp_path / "out")
    assert code == 130 and err.count("\n") == 1 and "interrupted" in err and "resume" in err
    assert len(list((tmp_path / "out" / "parts").glob("part-*.parquet"))) == 1
    monkeypatch.setattr(sweep, "run_points", real)
    calls.clear()
    code, _ = _cli(tmp_path, capsys, spec, "-o", tmp_path / "out")
    assert code == 0 and len(calls) == 1  # the other point only


def test_cli_refuses_foreign_folder_then_force(tmp_path, capsys, calls):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC_TEXT)
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.parquet").write_text("user data")
    code, err = _cli(tmp_path, capsys, spec, "-o", out)
    assert code == 2 and "not a sweep folder" in err and (out / "results.parquet").read_text() == "user data"
    code, _ = _cli(tmp_path, capsys, spec, "-o", out, "--force")
    assert code == 0 and len(calls) == 2
