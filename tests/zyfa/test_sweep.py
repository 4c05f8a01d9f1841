"""Schedule sweeps: spec parsing, point expansion, resumable Parquet results, a real sweep on a
local Ray instance with 2 workers through the generator + cycle model."""

import textwrap

import pandas as pd
import pytest

from zyfa import sweep, sweep_eval


def write(tmp_path, text, name="spec.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


BASIC = """
[sweep]
name = "t"
mode = "grid"
objective = "tflops"

[shape]
seqlen = ["1k", "2k"]
heads = 2

[params]
softmax = ["lean", "exact"]
schedule = ["pingpong", "serial"]
"""


def test_grid_expansion_and_stable_ids(tmp_path):
    spec = sweep.load_spec(write(tmp_path, BASIC))
    points = sweep.grid_points(spec)
    assert len(points) == 2 * 2 * 2
    assert len({p.id for p in points}) == 8
    assert sweep.Point({"seqlen": "1k", "heads": 2}, {"softmax": "lean", "schedule": "serial"}).id in {p.id for p in points}
    # ids do not depend on dict order
    assert sweep.point_id({"a": 1, "b": 2}, {"x": 1}) == sweep.point_id({"b": 2, "a": 1}, {"x": 1})


def test_yaml_spec_and_random_mode_is_seeded(tmp_path):
    text = """
    sweep: {name: y, mode: random, budget: 3, seed: 7}
    shape: {seqlen: 1k}
    params: {softmax: [lean, exact], schedule: [pingpong, serial], rescale_threshold: [0, 4, 8]}
    """
    spec = sweep.load_spec(write(tmp_path, text, "spec.yaml"))
    first = [p.id for p in sweep.random_points(spec)]
    assert len(first) == 3 and len(set(first)) == 3
    assert first == [p.id for p in sweep.random_points(spec)]


@pytest.mark.parametrize("text,message", [
    ("[sweep]\nmode='annealing'\n[params]\nsoftmax=['lean']", "unknown sweep.mode 'annealing'"),
    ("[sweep]\nmode='random'\n[params]\nsoftmax=['lean']", "budget must be a positive int"),
    ("[params]\n", r"\[params\] is empty"),
    ("[params]\nsoftmax=[]", "params.softmax has no candidate values"),
    ("[shape]\nseqlen='32q'\n[params]\nsoftmax=['lean']", "bad shape"),
    ("[shape]\nheadsize=3\n[params]\nsoftmax=['lean']", "unknown shape field"),
    ("[sweep]\nevaluator='gpu'\n[params]\nsoftmax=['lean']", "unknown sweep.evaluator"),
    ("[params]\nsoftmax=['lean']\n[baseline]\nwaves=2", "baseline names parameters not in"),
    ("[parms]\nsoftmax=['lean']", "unknown section"),
    ("[params\n", "cannot parse"),
])
def test_bad_specs_name_the_field(tmp_path, text, message):
    with pytest.raises(sweep.SweepError, match=message):
        sweep.load_spec(write(tmp_path, text))


def test_bad_spec_files(tmp_path):
    with pytest.raises(sweep.SweepError, match="does not exist"):
        sweep.load_spec(tmp_path / "missing.toml")
    with pytest.raises(sweep.SweepError, match=r"\.toml, \.yaml or \.yml"):
        sweep.load_spec(write(tmp_path, "x", "spec.json"))


def test_store_is_atomic_and_resumable(tmp_path):
    store = sweep.ResultStore(tmp_path / "out")
    store.append([{"point_id": "a", "error": None, "tflops": 1.0}])
    (store.parts / "part-00001.tmp").write_bytes(b"torn write from an interrupted run")
    store.append([{"point_id": "b", "error": "ValueError: x", "tflops": None}])
    again = sweep.ResultStore(tmp_path / "out")
    assert again.done_ids() == {"a", "b"}
    merged = again.merge()
    assert list(merged["point_id"]) == ["a", "b"]
    assert (tmp_path / "out" / "results.parquet").exists()


def test_rank_skips_failures_and_orders():
    df = pd.DataFrame({"point_id": list("abcd"), "error": [None, "boom", None, None], "tflops": [3.0, 9.0, 5.0, 1.0]})
    assert list(sweep.rank(df, "tflops")["point_id"]) == ["c", "a", "d"]
    assert list(sweep.rank(df, "tflops", maximise=False)["point_id"]) == ["d", "a", "c"]
    with pytest.raises(sweep.SweepError, match="objective 'speed'"):
        sweep.rank(df, "speed")


def test_evaluate_records_failures_instead_of_raising():
    point = sweep.Point({"seqlen": "1k"}, {"softmax": "lean", "scaling": "none"})  # invalid combination
    row = sweep.evaluate("cycle-model", point)
    assert row["point_id"] == point.id
    assert "lean" in row["error"] and row["seconds"] >= 0


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def test_small_sweep_on_local_ray_resumes(tmp_path, ray_local):
    spec = sweep.spec_from_dict({
        "sweep": {"name": "small", "mode": "grid", "objective": "tflops"},
        "shape": {"seqlen": "512", "heads": 1},
        "params": {"softmax": ["lean", "exact"], "scaling": ["block", "none"]},
        "baseline": {"softmax": "exact", "scaling": "none"},
    })
    out = tmp_path / "sweep"
    results = sweep.run_sweep(spec, out, workers=2, progress=False)
    assert len(results) == 4
    ok = results[results["error"].isna()]
    failed = results[results["error"].notna()]
    assert len(ok) == 3 and len(failed) == 1  # lean without block scaling is rejected by the generator
    assert (ok["tflops"] > 0).all() and ok["mfma_busy"].between(0, 1).all()
    # A rerun finds every point done and evaluates nothing.
    parts_before = sorted(p.name for p in (out / "parts").glob("*.parquet"))
    again = sweep.run_sweep(spec, out, workers=2, progress=False)
    assert sorted(p.name for p in (out / "parts").glob("*.parquet")) == parts_before
    assert set(again["point_id"]) == set(results["point_id"])
    # Ranking and the traces the UI opens.
    ranked = sweep.rank(again, "tflops")
    assert ranked["tflops"].is_monotonic_decreasing
    paths = sweep_eval.save_best_and_baseline(again, spec, out)
    from zyfa.trace.schema import Trace

    best = Trace.load(paths["best"])
    assert best.meta.simulated and best.meta.source == "model"
    assert Trace.load(paths["baseline"]).meta.kernel == "sweep_scaling_none_softmax_exact"


def test_greedy_moves_from_the_baseline_within_budget(tmp_path, ray_local):
    spec = sweep.spec_from_dict({
        "sweep": {"name": "greedy", "mode": "greedy", "budget": 4, "objective": "tflops"},
        "shape": {"seqlen": "512", "heads": 1},
        "params": {"softmax": ["exact", "lean"], "schedule": ["pingpong", "serial"]},
        "baseline": {"softmax": "exact", "schedule": "pingpong"},
    })
    results = sweep.run_sweep(spec, tmp_path / "g", workers=2, progress=False)
    assert 1 < len(results) <= 4 and results["error"].isna().all()
    # coordinate ascent tried both softmax variants at the baseline schedule first
    tried = set(zip(results["param.softmax"], results["param.schedule"]))
    assert {("exact", "pingpong"), ("lean", "pingpong")} <= tried
    # and its best point is the best of everything it evaluated
    best = sweep.rank(results, "tflops", top=1).iloc[0]
    assert best["tflops"] == results["tflops"].max()


def test_sweep_cli_bad_inputs(tmp_path, capsys):
    from zyfa.cli.trace_main import main

    assert main(["sweep", str(tmp_path / "missing.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    spec = write(tmp_path, BASIC)
    assert main(["sweep", str(spec), "--workers", "0"]) == 2
    assert "--workers must be positive" in capsys.readouterr().err
    assert main(["sweep", str(write(tmp_path, "[sweep]\nmode='x'\n[params]\nsoftmax=['lean']", "bad.toml"))]) == 2
    assert "unknown sweep.mode 'x'" in capsys.readouterr().err
