"""Command-line bad-input matrix: every error is exactly one stderr line that names the file or
argument, exit code 2, no traceback (``--debug`` shows it), and no file is created or changed."""

import json
import os
import shutil
from pathlib import Path

import pytest

from zyfa.cli import accuracy_main, bench_main, export_cmd, trace_main
from zyfa.kernels import aiter
from zyfa.trace.cdna4 import fidelity, tracer
from zyfa.trace.rocprof import att_dir
from zyfa.trace.schema import Trace, TraceMeta

TINY = Path(__file__).resolve().parents[1] / "data" / "att" / "tiny"
DISPATCH = "ui_output_agent_2_dispatch_7"


def _rec(**kw):
    base = dict(cu=0, simd=0, wave=0, slot=0, opcode="v_add_f32", unit="VALU", issue=0, start=0, end=4, stall=0)
    base.update(kw)
    return base


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A folder holding trace t.parquet/t.json and an existing file old.json; cwd is the folder."""
    monkeypatch.chdir(tmp_path)
    Trace.from_records([_rec(), _rec(wave=1, issue=4, start=4, end=8)],
                       TraceMeta(kernel="toy", arch="gfx950", source="model")).save(tmp_path / "t")
    (tmp_path / "old.json").write_text("precious")
    return tmp_path


def _snapshot(folder):
    """Every entry under ``folder`` (links not followed): file bytes, link targets, kinds."""
    state = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            if path.is_symlink():
                state[str(path)] = ("link", os.readlink(path))
            elif path.is_file():
                state[str(path)] = ("file", path.read_bytes())
            else:
                state[str(path)] = ("dir" if path.is_dir() else "other", None)
    return state


def _cli(capsys, argv):
    try:
        code = trace_main.main(argv)
    except SystemExit as exc:  # argparse usage errors leave through SystemExit, as from the console script
        code = exc.code
    out = capsys.readouterr()
    return code, out.err


def _expect_one_line(code, err, *needles):
    assert code == 2, err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)


EXPORT_CASES = [
    ("perfetto onto parquet", ["--perfetto", "t.parquet"], ["t.parquet", "is an input"]),
    ("perfetto onto sidecar", ["--perfetto", "t.json"], ["t.json", "is an input"]),
    ("csv onto sidecar", ["--csv", "t.json"], ["t.json", "is an input"]),
    ("md onto parquet", ["--md", "t.parquet"], ["t.parquet", "is an input"]),
    ("csv onto ./parquet", ["--csv", "./t.parquet"], ["is an input"]),
    ("csv onto sub/../parquet", ["--csv", "sub/../t.parquet"], ["is an input"]),
    ("perfetto onto link", ["--perfetto", "link.json"], ["link.json", "is an input"]),
    ("perfetto onto sidecar force", ["--perfetto", "t.json", "--force"], ["is an input"]),
    ("csv onto parquet force", ["--csv", "t.parquet", "--force"], ["is an input"]),
    ("perfetto existing", ["--perfetto", "old.json"], ["old.json", "exists; pass --force"]),
    ("csv existing", ["--csv", "old.json"], ["old.json", "exists; pass --force"]),
    ("md existing", ["--md", "old.json"], ["old.json", "exists; pass --force"]),
    ("csv and md same", ["--csv", "r.txt", "--md", "r.txt"], ["--md r.txt: same file as --csv"]),
    ("perfetto and csv same", ["--perfetto", "r.txt", "--csv", "./r.txt"], ["same file as --perfetto"]),
    ("perfetto is a dir", ["--perfetto", "sub"], ["sub", "not a regular file"]),
    ("csv under a file", ["--csv", "old.json/x.csv"], ["old.json"]),
    ("no output", [], ["nothing to do"]),
    ("window", ["--csv", "w.csv", "--window", "zz"], ["window", "'zz'"]),
    ("window reversed", ["--csv", "w.csv", "--window", "9:3"], ["window end must be greater", "(9, 3)"]),
    ("window floats", ["--csv", "w.csv", "--window", "1.5:3"], ["window", "integer cycles"]),
]


@pytest.mark.parametrize("name,args,needles", EXPORT_CASES, ids=[c[0] for c in EXPORT_CASES])
def test_export_refuses(work, capsys, name, args, needles):
    (work / "sub").mkdir()
    (work / "link.json").symlink_to(work / "t.json")
    before = _snapshot(work)
    code, err = _cli(capsys, ["export", "t.parquet", *args])
    _expect_one_line(code, err, *needles)
    assert _snapshot(work) == before  # nothing created or changed


@pytest.mark.parametrize("trace,needles", [
    ("missing.parquet", ["missing.parquet", "no such trace file"]),
    ("old.json", ["old.json", "not a trace file"]),
    ("fifo.parquet", ["fifo.parquet", "a FIFO"]),
    ("zero.parquet", ["zero.parquet", "character device"]),
    ("dir.parquet", ["dir.parquet", "a directory"]),
    ("deep.parquet", ["deep.json", "nested too deeply"]),
])
@pytest.mark.parametrize("command", ["export", "analyze"])
def test_bad_trace_inputs_one_line(work, capsys, trace, needles, command):
    os.mkfifo(work / "fifo.parquet")
    (work / "zero.parquet").symlink_to("/dev/zero")
    (work / "dir.parquet").mkdir()
    shutil.copy(work / "t.parquet", work / "deep.parquet")
    (work / "deep.json").write_text("[" * 50_000 + "]" * 50_000)
    before = _snapshot(work)
    extra = ["--csv", "x.csv"] if command == "export" else []
    code, err = _cli(capsys, [command, trace, *extra])
    _expect_one_line(code, err, *needles)
    assert _snapshot(work) == before


def test_export_force_overwrites_atomically(work, capsys):
    code, _ = _cli(capsys, ["export", "t.parquet", "--perfetto", "old.json", "--force"])
    assert code == 0
    assert json.loads((work / "old.json").read_text())["traceEvents"]
    assert not [p for p in work.iterdir() if p.name.endswith(".tmp")]


def test_debug_shows_the_traceback(work, capsys):
    with pytest.raises(OSError, match="exists; pass --force"):
        trace_main.main(["export", "t.parquet", "--csv", "old.json", "--debug"])


def test_internal_errors_are_one_line_too(work, capsys, monkeypatch):
    monkeypatch.setattr(export_cmd, "render", lambda *a, **k: 1 / 0)
    code, err = _cli(capsys, ["export", "t.parquet", "--csv", "fresh.csv"])
    _expect_one_line(code, err, "internal error: ZeroDivisionError", "--debug")
    assert not (work / "fresh.csv").exists()


PARSE_CASES = [
    ["nope"], ["kernel", "--samples", "x"], ["kernel", "--dtype", "fp4"], ["kernel", "--backend", "gpu"],
    ["export"], ["analyze"], ["analyze", "t.parquet", "--format", "xml"], ["import-att", "dir"],
    ["kernel", "--heads", "1.5"], ["kernel", "--unknown-branch", "maybe"], ["sweep"],
    ["import-att", "d", "-o", "x", "--dispatch", "one"], ["kernel", "--clock", "fast"],
]


@pytest.mark.parametrize("argv", PARSE_CASES, ids=[" ".join(a) for a in PARSE_CASES])
def test_usage_errors_are_one_line(work, capsys, argv):
    code, err = _cli(capsys, argv)
    _expect_one_line(code, err, "error:", "--help")


@pytest.fixture
def no_simulation(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("simulated although the output was refused")
    monkeypatch.setattr(tracer, "simulate", refuse)


KERNEL_CASES = [
    (["-o", "old.json"], ["old.json", "-o: exists and is not a directory"]),
    (["-o", "traces"], ["zyfa-fp8.parquet", "exists; pass --force"]),
    (["--samples", "0"], ["--samples must be >= 1"]),
    (["--samples", "-4"], ["--samples must be >= 1"]),
    (["--clock", "0"], ["--clock must be in (0, 10000)"]),
    (["--clock", "1e9"], ["--clock must be in (0, 10000)"]),
    (["--clock", "nan"], ["--clock must be in (0, 10000)"]),
    (["--shape", "12q"], ["bad sequence length '12q'"]),
    (["--shape", "0"], ["sequence length must be positive"]),
    (["--shape", "99999999999k"], ["over 2147483647"]),
    (["--batch", "0"], ["AttnShape.batch must be a positive int"]),
    (["--heads", "-1"], ["AttnShape.heads must be a positive int"]),
    (["--heads", "3", "--heads-k", "2"], ["must be a multiple of heads_k"]),
    (["--batch", str(2**40)], ["over 2147483647"]),
    (["--kernel", "no-such-kernel"], ["unknown kernel 'no-such-kernel'"]),
    (["--kernel", "missing.co"], ["missing.co"]),
    (["--kernel", "fifo.s"], ["fifo.s", "not a regular file"]),
    (["--kernel", "zero.s"], ["zero.s", "not a regular file"]),
    (["--kernel", "dir.s"], ["dir.s", "not a regular file"]),
    (["--kernel", "fifo.co"], ["fifo.co", "not a regular file"]),
    (["--compare", "nope"], ["unknown kernel 'nope'"]),
    (["--compare", "fifo.s"], ["fifo.s", "not a regular file"]),
]


@pytest.mark.parametrize("args,needles", KERNEL_CASES, ids=[" ".join(c[0]) for c in KERNEL_CASES])
def test_kernel_refuses_before_simulating(work, capsys, no_simulation, args, needles):
    (work / "traces").mkdir()
    (work / "traces" / "zyfa-fp8.parquet").write_text("an older trace")
    os.mkfifo(work / "fifo.s")
    os.mkfifo(work / "fifo.co")
    (work / "zero.s").symlink_to("/dev/zero")
    (work / "dir.s").mkdir()
    before = _snapshot(work)
    code, err = _cli(capsys, ["kernel", "--shape", "1k", *args])
    _expect_one_line(code, err, *needles)
    assert _snapshot(work) == before


def test_output_stem_stays_in_the_folder(tmp_path):
    for name in ("../../x", "/etc/passwd", "..", ".hidden", "a\\..\\b", "aiter:fwd"):
        stem = tracer.output_stem(name, tmp_path)
        assert stem.parent == tmp_path and not stem.name.startswith(".")


# -- import-att ---------------------------------------------------------------------------------

@pytest.fixture
def capture(work):
    shutil.copytree(TINY, work / "att")
    return work / "att" / DISPATCH


def _wave_name(capture, name):
    f = capture / "filenames.json"
    data = json.loads(f.read_text())
    data["wave_filenames"]["0"]["0"]["0"]["0"][0] = name
    f.write_text(json.dumps(data))


IMPORT_CASES = [
    ("output inside capture", lambda c: None, ["-o", "att/x"], ["inside the capture directory"]),
    ("output inside dispatch", lambda c: None, ["-o", f"att/{DISPATCH}/x"], ["inside the capture directory"]),
    ("output existing", lambda c: (c.parents[1] / "hw.parquet").write_text("old"), ["-o", "hw"], ["exists; pass --force"]),
    ("output sidecar existing", lambda c: (c.parents[1] / "hw.json").write_text("old"), ["-o", "hw"], ["hw.json"]),
    ("output is a dir", lambda c: (c.parents[1] / "hw.parquet").mkdir(), ["-o", "hw", "--force"], ["not a regular file"]),
    ("wave ../", lambda c: _wave_name(c, "../../t.json"), ["-o", "hw"], ["not a plain file name"]),
    ("wave absolute", lambda c: _wave_name(c, "/etc/passwd"), ["-o", "hw"], ["not a plain file name"]),
    ("wave subdir", lambda c: _wave_name(c, "sub/x.json"), ["-o", "hw"], ["not a plain file name"]),
    ("wave dotdot", lambda c: _wave_name(c, ".."), ["-o", "hw"], ["not a plain file name"]),
    ("wave empty", lambda c: _wave_name(c, ""), ["-o", "hw"], ["not a plain file name"]),
    ("wave symlink out", lambda c: ((c / "out.json").symlink_to(c.parents[1] / "t.json"), _wave_name(c, "out.json")),
     ["-o", "hw"], ["leads outside the capture directory"]),
    ("wave fifo", lambda c: (os.mkfifo(c / "f.json"), _wave_name(c, "f.json")), ["-o", "hw"], ["a FIFO"]),
    ("wave /dev/zero", lambda c: ((c / "z.json").symlink_to("/dev/zero"), _wave_name(c, "z.json")), ["-o", "hw"],
     ["leads outside"]),
    ("filenames fifo", lambda c: ((c / "filenames.json").unlink(), os.mkfifo(c / "filenames.json")), ["-o", "hw"],
     ["filenames.json", "a FIFO"]),
    ("filenames /dev/zero", lambda c: ((c / "filenames.json").unlink(), (c / "filenames.json").symlink_to("/dev/zero")),
     ["-o", "hw"], ["filenames.json", "character device"]),
    ("filenames deep", lambda c: (c / "filenames.json").write_text("[" * 100_000 + "]" * 100_000), ["-o", "hw"],
     ["filenames.json", "nested too deeply"]),
    ("filenames utf-16", lambda c: (c / "filenames.json").write_bytes('{"gfxip": 9}'.encode("utf-16")), ["-o", "hw"],
     ["filenames.json", "not UTF-8"]),
    ("wave_filenames list", lambda c: (c / "filenames.json").write_text('{"gfxip": 9, "wave_filenames": [1]}'),
     ["-o", "hw"], ["wave_filenames"]),
    ("wave_filenames bad slot", lambda c: (c / "filenames.json").write_text(
        '{"gfxip": 9, "wave_filenames": {"0": {"0": [1]}}}'), ["-o", "hw"], ["wave_filenames.0.0"]),
    ("se not ascii digit", lambda c: (c / "filenames.json").write_text(
        '{"gfxip": 9, "wave_filenames": {"\\u00b2": {}}}'), ["-o", "hw"], ["wave_filenames"]),
    ("code.json missing", lambda c: (c / "code.json").unlink(), ["-o", "hw"], ["code.json", "missing"]),
    ("occupancy deep", lambda c: (c / "occupancy.json").write_text("[" * 3000 + "]" * 3000), ["-o", "hw"],
     ["occupancy.json", "nested too deeply"]),
    ("capture missing", lambda c: shutil.rmtree(c.parent), ["-o", "hw"], ["does not exist"]),
    ("program missing", lambda c: None, ["-o", "hw", "--program", "absent.s"], ["absent.s: no such file"]),
]


@pytest.mark.parametrize("name,damage,args,needles", IMPORT_CASES, ids=[c[0] for c in IMPORT_CASES])
def test_import_att_refuses(work, capture, capsys, name, damage, args, needles):
    damage(capture)
    before = _snapshot(work)
    code, err = _cli(capsys, ["import-att", str(capture.parent), *args])
    _expect_one_line(code, err, *needles)
    assert _snapshot(work) == before


def test_import_att_force_replaces_an_existing_trace(work, capture, capsys):
    (work / "hw.parquet").write_text("old")
    code, _ = _cli(capsys, ["import-att", str(capture.parent), "-o", "hw", "--force"])
    assert code == 0 and Trace.load(work / "hw.parquet").meta.source == "rocprof-att"


def test_import_att_search_is_bounded(work, capsys, monkeypatch):
    for i in range(5):
        (work / "big" / f"d{i}").mkdir(parents=True)
    monkeypatch.setattr(att_dir, "MAX_SEARCH_DIRS", 3)
    code, err = _cli(capsys, ["import-att", "big", "-o", "hw"])
    _expect_one_line(code, err, "big: searched 3 folders", "dispatch_<id> directory")


def test_import_att_search_depth(work, capsys, capture):
    deep = work / "deep" / "a" / "b" / "c" / "d" / "e" / "f" / "g"
    shutil.copytree(capture, deep / DISPATCH)
    code, err = _cli(capsys, ["import-att", "deep", "-o", "hw"])
    _expect_one_line(code, err, "no rocprofv3 --att dispatch directory")
    assert _cli(capsys, ["import-att", str(deep), "-o", "hw"])[0] == 0


# -- entry points added since the first matrix: fidelity / --aiter-dir, zyfa-accuracy, zyfa-bench --------------
@pytest.fixture
def no_fidelity_run(monkeypatch):
    """Refusals must come before the calibration rows are simulated (minutes)."""
    monkeypatch.setattr(fidelity, "simulate_rows", lambda *a, **k: pytest.fail("simulated before refusing"))
    monkeypatch.delenv(aiter.ENV_DIR, raising=False)


AITER_DIR_CASES = [
    ("flag missing folder", ["fidelity", "--aiter-dir", "nope"], {}, ["--aiter-dir nope", "no such folder"]),
    ("flag is a file", ["fidelity", "--aiter-dir", "old.json"], {}, ["--aiter-dir old.json", "no such folder"]),
    ("flag empty", ["fidelity", "--aiter-dir", ""], {}, ["--aiter-dir", "empty path"]),
    ("flag blank", ["fidelity", "--aiter-dir", "  "], {}, ["--aiter-dir", "empty path"]),
    ("env missing folder", ["fidelity"], {"ZYFA_AITER_DIR": "nope"}, ["ZYFA_AITER_DIR nope", "no such folder"]),
    ("env is a file", ["fidelity"], {"ZYFA_AITER_DIR": "old.json"}, ["ZYFA_AITER_DIR old.json"]),
    ("kernel env missing folder", ["kernel", "--shape", "1k"], {"ZYFA_AITER_DIR": "nope"}, ["ZYFA_AITER_DIR nope"]),
    ("kernel flag empty", ["kernel", "--shape", "1k", "--aiter-dir", ""], {}, ["empty path"]),
    ("fidelity out exists", ["fidelity", "-o", "old.json"], {}, ["old.json", "exists; pass --force"]),
    ("fidelity out is a folder", ["fidelity", "-o", "."], {}, ["not a regular file"]),
    ("fidelity out is the trace", ["fidelity", "-o", "t.parquet"], {}, ["t.parquet", "exists"]),
]


@pytest.mark.parametrize("name,argv,env,needles", AITER_DIR_CASES, ids=[c[0] for c in AITER_DIR_CASES])
def test_fidelity_and_aiter_dir_refuse_before_simulating(work, capsys, monkeypatch, no_fidelity_run, no_simulation,
                                                         name, argv, env, needles):
    """A bad $ZYFA_AITER_DIR used to make every AITER row "skipped" with exit code 0."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    before = _snapshot(work)
    _expect_one_line(*_cli(capsys, argv), *needles)
    assert _snapshot(work) == before


ACCURACY_CASES = [
    (["--headdim", "100000"], ["headdim must be a multiple of 8 in [8, 256], got 100000"]),  # took minutes
    (["--headdim", "100"], ["headdim must be a multiple of 8"]),
    (["--headdim-v", "100000"], ["headdim_v must be a multiple of 8"]),
    (["--seqlen", "100000000"], ["seqlen 100000000", "GiB"]),
    (["--heads", "100000"], ["heads 100000", "GiB"]),
    (["--outlier-scale", "inf"], ["outlier_scale must be finite"]),
    (["--outlier-scale", "nan"], ["outlier_scale"]),
    (["--source", "llm", "--sink-logit", "nan"], ["sink_logit must be finite"]),
    (["--source", "llm", "--sink-logit", "1e999"], ["sink_logit must be finite"]),
    (["--seed", "99999999999999999999"], ["seed must be an int in [-2^63, 2^64)"]),
    (["--device", "meta"], ["device must be a cpu or cuda device", "'meta'"]),
    (["--device", "nope"], ["device must be a torch device string"]),
    (["--rows", "nope"], ["rows must be a non-empty subset"]),
    (["--rows", ","], ["rows must be a non-empty subset"]),
    (["--queries", "0"], ["queries must be an int in [1, seqlen"]),
    (["--heads", "3", "--heads-k", "2"], ["heads_k must be a positive divisor"]),
    (["--batch", "0"], ["batch must be a positive int"]),
    (["--outlier-channels", "999"], ["outlier_channels must be in [0, headdim=128]"]),
    (["--format", "xml"], ["--format"]),
    (["--seqlen", "1.5"], ["--seqlen"]),
]


@pytest.mark.parametrize("argv,needles", ACCURACY_CASES, ids=[" ".join(c[0]) for c in ACCURACY_CASES])
def test_accuracy_refuses_before_computing(work, capsys, monkeypatch, argv, needles):
    monkeypatch.setattr(accuracy_main, "run_study", lambda *a, **k: pytest.fail("ran before refusing"))
    monkeypatch.setattr(accuracy_main, "make_inputs", lambda *a, **k: pytest.fail("made inputs before refusing"))
    try:
        code = accuracy_main.main(argv)
    except SystemExit as exc:
        code = exc.code
    _expect_one_line(code, capsys.readouterr().err, *needles)


def test_accuracy_cuda_without_a_gpu_is_one_line(work, capsys, monkeypatch):
    monkeypatch.setattr(accuracy_main.torch.cuda, "is_available", lambda: False)
    _expect_one_line(accuracy_main.main(["--device", "cuda"]), capsys.readouterr().err, "no CUDA/ROCm GPU")


def _bench_csv(path, rows=1):
    fields = list(bench_main.BenchRow.__dataclass_fields__)
    lines = [",".join(fields)] + [f"mha,b1 h32,{1024 * (i + 1)},sdpa-bf16,1.5,100.0,0.001,1800,500,0.2,"
                                  for i in range(rows)]
    Path(path).write_text("\n".join(lines) + "\n")


def _bench(capsys, argv):
    try:
        code = bench_main.main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


BENCH_CASES = [
    (["--seqlens", "0"], ["--seqlens", "must be positive"]),
    (["--seqlens", "abc"], ["--seqlens", "bad sequence length 'abc'"]),
    (["--seqlens", ""], ["--seqlens"]),
    (["--models", "nope"], ["unknown model shape 'nope'"]),
    (["--backends", "nope"], ["--backends: unknown ['nope']"]),
    (["--backends", ","], ["--backends: unknown empty list"]),
    (["--rep-ms", "-1"], ["--rep-ms must be a finite number > 0"]),
    (["--rep-ms", "nan"], ["--rep-ms"]),
    (["--warmup-ms", "inf"], ["--warmup-ms must be a finite number >= 0"]),
    (["--acc-kv-heads", "-1"], ["--acc-kv-heads must be >= 0"]),
    (["--out", "old.json"], ["old.json", "--out: exists and is not a directory"]),
    (["--out", "prev"], ["bench.csv", "exists; pass --force"]),  # a previous run's results
    (["--html-from", "nope.csv"], ["nope.csv", "no such"]),
    (["--html-from", "old.json"], ["old.json", "not a zyfa-bench bench.csv"]),
    (["--html-from", "."], ["a directory, not a regular bench CSV"]),
    (["--html-from", "fifo"], ["fifo", "FIFO"]),
    (["--html-from", "empty.csv"], ["empty.csv", "no rows"]),
    (["--html-from", "badnum.csv"], ["badnum.csv:2", "not a zyfa-bench row"]),
    (["--html-from", "prev/bench.csv"], ["prev/bench.html", "exists; pass --force"]),
    (["--html-from", "prev/x.html"], ["prev/x.html", "is an input"]),
]


@pytest.mark.parametrize("argv,needles", BENCH_CASES, ids=[" ".join(c[0]) for c in BENCH_CASES])
def test_bench_refuses_before_looking_for_a_gpu(work, capsys, monkeypatch, argv, needles):
    """Argument errors are reported as such on any machine (they came after "needs a GPU"), and
    a previous run's bench.csv / bench.html is never overwritten without --force."""
    monkeypatch.setattr(bench_main, "measure", lambda *a, **k: pytest.fail("benchmarked before refusing"))
    (work / "prev").mkdir()
    _bench_csv(work / "prev" / "bench.csv")
    (work / "prev" / "bench.html").write_text("old")
    _bench_csv(work / "prev" / "x.html")  # a bench CSV named .html: its HTML would be itself
    _bench_csv(work / "empty.csv", rows=0)
    (work / "badnum.csv").write_text((work / "prev" / "bench.csv").read_text().replace(",1.5,", ",fast,"))
    os.mkfifo(work / "fifo")
    before = _snapshot(work)
    _expect_one_line(*_bench(capsys, argv), *needles)
    assert _snapshot(work) == before


def test_bench_html_from_writes_next_to_the_csv(work, capsys):
    pytest.importorskip("plotly")
    _bench_csv(work / "b.csv", rows=2)
    assert _bench(capsys, ["--html-from", "b.csv"])[0] == 0
    html = (work / "b.html").read_text()
    assert "zyfa-bench" in html and "sdpa-bf16" in html
    assert not [p for p in work.iterdir() if p.name.endswith(".tmp")]
    assert _bench(capsys, ["--html-from", "b.csv", "--force"])[0] == 0


@pytest.mark.parametrize("flag", ["--batch", "--seqlen", "--heads", "--headdim"])
@pytest.mark.parametrize("value", ["0", "-3"])
def test_demo_refuses_an_empty_problem(work, capsys, flag, value):
    """--seqlen 0 printed "rel. L2 vs fp64 nan" with exit code 0."""
    _expect_one_line(*_cli(capsys, ["demo", flag, value]), f"{flag} must be >= 1, got {value}")
