"""Schedule design-space sweeps: expand a spec into points, evaluate them as Ray tasks, stream
the results into Parquet, resume after an interruption, rank.

A spec (TOML or YAML) names the shapes, the generator parameters with their candidate values,
a search mode and an objective::

    [sweep]
    name = "handover"
    mode = "grid"          # grid | random | greedy
    budget = 40            # points for random/greedy (grid: all)
    seed = 0
    objective = "tflops"   # metric to maximise (any column an evaluator returns)
    evaluator = "cycle-model"

    [shape]                # scalars or lists; lists multiply the grid
    seqlen = ["4k", "16k"]
    heads = 32
    headdim = 128

    [params]               # generator parameters (see zyfa.kernels.gfx950)
    softmax = ["exact", "lean"]
    schedule = ["pingpong", "serial"]

    [baseline]             # optional: the point every ranking is compared with
    softmax = "exact"
    schedule = "pingpong"

Each evaluated point becomes one row: ``point_id``, ``shape`` and parameter columns, the
evaluator's metrics, ``error`` (None on success: a failing point is recorded, never lost) and
``seconds``. Rows are flushed to ``OUT/parts/part-NNNNN.parquet`` as they arrive (written to a
temporary name, then renamed, so an interruption never leaves a torn file); a rerun with the
same OUT skips every point already there. ``OUT/results.parquet`` is the merged table.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import random
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

import pandas as pd

from zyfa.shapes import AttnShape, parse_shape

MODES = ("grid", "random", "greedy")
_ERROR_CHARS = 600  # a failing point's message is kept, truncated (assembler logs can be long)
_SHAPE_KEYS = {"seqlen", "batch", "heads", "heads_k", "headdim", "headdim_v", "causal", "dtype"}

# evaluator name -> "module:function"; the function maps (shape fields, params) -> metrics dict.
EVALUATORS = {
    "cycle-model": "zyfa.sweep_eval:evaluate_cycle_model",
}


class SweepError(ValueError):
    """A malformed spec or an unusable output directory; the message names the field or file."""


@dataclass(frozen=True)
class SweepSpec:
    name: str
    mode: str
    objective: str
    shapes: tuple[dict, ...]
    params: dict[str, tuple]
    budget: Optional[int] = None
    seed: int = 0
    evaluator: str = "cycle-model"
    baseline: Optional[dict] = None
    maximise: bool = True
    source: str = "<inline>"

    def __post_init__(self):
        if self.mode not in MODES:
            raise SweepError(f"{self.source}: unknown sweep.mode {self.mode!r}; expected one of {MODES}")
        if self.evaluator not in EVALUATORS:
            raise SweepError(f"{self.source}: unknown sweep.evaluator {self.evaluator!r}; known: {sorted(EVALUATORS)}")
        if not self.params:
            raise SweepError(f"{self.source}: [params] is empty: nothing to sweep")
        for key, values in self.params.items():
            if not values:
                raise SweepError(f"{self.source}: params.{key} has no candidate values")
        if self.mode != "grid" and (self.budget is None or self.budget <= 0):
            raise SweepError(f"{self.source}: sweep.budget must be a positive int for mode {self.mode!r}")
        if self.baseline is not None:
            unknown = set(self.baseline) - set(self.params)
            if unknown:
                raise SweepError(f"{self.source}: baseline names parameters not in [params]: {sorted(unknown)}")


def _as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def spec_from_dict(data: dict, source: str = "<inline>") -> SweepSpec:
    if not isinstance(data, dict):
        raise SweepError(f"{source}: a sweep spec is a table with [sweep], [shape] and [params]")
    unknown = set(data) - {"sweep", "shape", "params", "baseline"}
    if unknown:
        raise SweepError(f"{source}: unknown section(s) {sorted(unknown)}; expected sweep, shape, params, baseline")
    sweep = dict(data.get("sweep", {}))
    shape = dict(data.get("shape", {}))
    bad = set(shape) - _SHAPE_KEYS
    if bad:
        raise SweepError(f"{source}: unknown shape field(s) {sorted(bad)}; known: {sorted(_SHAPE_KEYS)}")
    shape.setdefault("seqlen", "32k")
    keys = sorted(shape)
    shapes = tuple(dict(zip(keys, combo)) for combo in itertools.product(*(_as_tuple(shape[k]) for k in keys)))
    for s in shapes:
        _shape_of(s, source)  # validate now, not in a worker an hour later
    known_sweep = {"name", "mode", "objective", "budget", "seed", "evaluator", "maximise"}
    if set(sweep) - known_sweep:
        raise SweepError(f"{source}: unknown sweep field(s) {sorted(set(sweep) - known_sweep)}; known: {sorted(known_sweep)}")
    return SweepSpec(
        name=str(sweep.get("name", Path(source).stem)),
        mode=sweep.get("mode", "grid"),
        objective=sweep.get("objective", "tflops"),
        budget=sweep.get("budget"),
        seed=int(sweep.get("seed", 0)),
        evaluator=sweep.get("evaluator", "cycle-model"),
        maximise=bool(sweep.get("maximise", True)),
        shapes=shapes,
        params={k: _as_tuple(v) for k, v in data.get("params", {}).items()},
        baseline=data.get("baseline"),
        source=source,
    )


def load_spec(path) -> SweepSpec:
    """Reads a TOML (.toml) or YAML (.yaml/.yml) sweep spec."""
    path = Path(path)
    if not path.is_file():
        raise SweepError(f"sweep spec {path} does not exist")
    text = path.read_text()
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            raise SweepError(f"{path}: sweep specs are .toml, .yaml or .yml files")
    except (tomllib.TOMLDecodeError, ImportError) as exc:
        raise SweepError(f"{path}: cannot parse: {exc}") from exc
    except Exception as exc:  # yaml.YAMLError without importing yaml at module level
        if type(exc).__module__.startswith("yaml"):
            raise SweepError(f"{path}: cannot parse: {exc}") from exc
        raise
    return spec_from_dict(data, source=str(path))


def _shape_of(fields: dict, source: str = "<inline>") -> AttnShape:
    fields = dict(fields)
    try:
        return parse_shape(str(fields.pop("seqlen")), **fields)
    except (TypeError, ValueError) as exc:
        raise SweepError(f"{source}: bad shape {fields}: {exc}") from exc


def point_id(shape: dict, params: dict) -> str:
    """Stable id of one (shape, params) point: resuming recognises finished points by it."""
    canonical = json.dumps({"shape": shape, "params": params}, sort_keys=True, default=str)
    return hashlib.sha1(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Point:
    shape: dict
    params: dict
    id: str = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "id", point_id(self.shape, self.params))


def grid_points(spec: SweepSpec) -> list[Point]:
    keys = list(spec.params)
    combos = [dict(zip(keys, c)) for c in itertools.product(*(spec.params[k] for k in keys))]
    return [Point(shape, params) for shape in spec.shapes for params in combos]


def random_points(spec: SweepSpec) -> list[Point]:
    grid = grid_points(spec)
    rng = random.Random(spec.seed)
    return rng.sample(grid, min(spec.budget, len(grid)))


# --- evaluation ---------------------------------------------------------------------------------

def resolve_evaluator(name: str) -> Callable[[dict, dict], dict]:
    module, _, func = EVALUATORS[name].partition(":")
    return getattr(importlib.import_module(module), func)


def evaluate(evaluator: str, point: Point) -> dict:
    """Runs one point; never raises: failures become the row's ``error``."""
    start = time.perf_counter()
    row = {"point_id": point.id, **{f"shape.{k}": v for k, v in point.shape.items()},
           **{f"param.{k}": v for k, v in point.params.items()}, "error": None}
    try:
        metrics = resolve_evaluator(evaluator)(point.shape, point.params)
        row.update({k: v for k, v in metrics.items() if k not in row})
    except Exception as exc:  # a broken variant is a result, not a crash of the sweep
        message = f"{type(exc).__name__}: {exc}"
        row["error"] = message if len(message) <= _ERROR_CHARS else message[:_ERROR_CHARS] + " ..."
    row["seconds"] = time.perf_counter() - start
    return row


class ResultStore:
    """Parquet parts under ``out/parts``; atomic writes; the merged table on demand."""

    def __init__(self, out_dir):
        self.out = Path(out_dir)
        self.parts = self.out / "parts"
        try:
            self.parts.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SweepError(f"cannot create output directory {self.out}: {exc}") from exc
        self._next = len(list(self.parts.glob("part-*.parquet")))

    def load(self) -> pd.DataFrame:
        files = sorted(self.parts.glob("part-*.parquet"))
        if not files:
            return pd.DataFrame()
        return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)

    def done_ids(self) -> set[str]:
        df = self.load()
        return set(df["point_id"]) if len(df) else set()

    def append(self, rows: list[dict]) -> None:
        if not rows:
            return
        final = self.parts / f"part-{self._next:05d}.parquet"
        tmp = final.with_suffix(".tmp")
        pd.DataFrame(rows).to_parquet(tmp, index=False)
        tmp.replace(final)
        self._next += 1

    def merge(self) -> pd.DataFrame:
        df = self.load()
        if len(df):
            df.to_parquet(self.out / "results.parquet", index=False)
        return df


def _ray_pool(address: str, workers: Optional[int]):
    import ray

    if not ray.is_initialized():
        kwargs = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        if address == "local":
            ray.init(num_cpus=workers, **kwargs)
        else:
            ray.init(address=address, **kwargs)
    return ray


def run_points(points: list[Point], evaluator: str, store: ResultStore, address: str = "local",
               workers: Optional[int] = None, progress: bool = True, flush_every: int = 8) -> list[dict]:
    """Evaluates ``points`` as Ray tasks, flushing rows to ``store`` as they complete."""
    if not points:
        return []
    ray = _ray_pool(address, workers)
    remote = ray.remote(evaluate)
    pending = {remote.remote(evaluator, p): p for p in points}
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(points), desc="sweep", unit="pt")
    rows, buffer = [], []
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                pending.pop(ref)
                row = ray.get(ref)
                rows.append(row)
                buffer.append(row)
                if bar:
                    bar.update(1)
            if len(buffer) >= flush_every:
                store.append(buffer)
                buffer = []
    finally:
        store.append(buffer)  # what finished is kept even if we are interrupted
        if bar:
            bar.close()
    return rows


def _better(a: Optional[float], b: Optional[float], maximise: bool) -> bool:
    if a is None or pd.isna(a):
        return False
    if b is None or pd.isna(b):
        return True
    return a > b if maximise else a < b


def _greedy(spec: SweepSpec, store: ResultStore, done: set[str], run) -> None:
    """Coordinate ascent per shape: from the baseline, try every value of one parameter at a
    time (others fixed), move to the best, repeat until no move helps or the budget is spent."""
    budget = spec.budget
    for shape in spec.shapes:
        current = {k: (spec.baseline or {}).get(k, v[0]) for k, v in spec.params.items()}
        best_score = None
        improved = True
        while improved and budget > 0:
            improved = False
            for key, values in spec.params.items():
                candidates = [Point(shape, {**current, key: v}) for v in values]
                todo = [p for p in candidates if p.id not in done][:budget]
                budget -= len(todo)
                run(todo)
                done.update(p.id for p in todo)
                table = store.load().set_index("point_id")
                for p in candidates:
                    if p.id in table.index and table.loc[p.id, "error"] is None:
                        score = table.loc[p.id].get(spec.objective)
                        if _better(score, best_score, spec.maximise):
                            best_score, current, improved = score, dict(p.params), improved or p.params != current
                if budget <= 0:
                    break


def run_sweep(spec: SweepSpec, out_dir, address: str = "local", workers: Optional[int] = None,
              progress: bool = True) -> pd.DataFrame:
    """Runs (or resumes) a sweep; returns the merged results table."""
    store = ResultStore(out_dir)
    (store.out / "spec.json").write_text(json.dumps(
        {"name": spec.name, "mode": spec.mode, "objective": spec.objective, "budget": spec.budget,
         "seed": spec.seed, "evaluator": spec.evaluator, "shapes": list(spec.shapes),
         "params": {k: list(v) for k, v in spec.params.items()}, "baseline": spec.baseline,
         "maximise": spec.maximise}, indent=2, default=str))
    done = store.done_ids()

    def run(points: Iterable[Point]):
        return run_points([p for p in points if p.id not in done], spec.evaluator, store, address, workers, progress)

    if spec.mode == "greedy":
        _greedy(spec, store, done, run)
    else:
        points = grid_points(spec) if spec.mode == "grid" else random_points(spec)
        if spec.baseline is not None:
            points += [Point(s, {**{k: v[0] for k, v in spec.params.items()}, **spec.baseline}) for s in spec.shapes]
            points = list({p.id: p for p in points}.values())
        skipped = sum(p.id in done for p in points)
        if skipped and progress:
            print(f"resuming: {skipped} of {len(points)} points already in {store.parts}")
        run(points)
    return store.merge()


def rank(results: pd.DataFrame, objective: str, maximise: bool = True, top: int = 10) -> pd.DataFrame:
    """Successful points sorted by ``objective`` (best first)."""
    if results.empty:
        return results
    if objective not in results.columns:
        raise SweepError(f"objective {objective!r} is not a result column; columns: {sorted(results.columns)}")
    ok = results[results["error"].isna()]
    return ok.sort_values(objective, ascending=not maximise, kind="stable").head(top)


def format_ranking(ranked: pd.DataFrame, spec: SweepSpec) -> str:
    """The ranked table as text: rank, shape, parameters, objective and the key metrics."""
    shown = [c for c in ranked.columns if c.startswith(("shape.", "param."))]
    metrics = [c for c in (spec.objective, "mfma_busy", "pingpong_overlap", "valu_cycles_per_block",
                           "vgprs", "lds_bytes") if c in ranked.columns]
    table = ranked[shown + list(dict.fromkeys(metrics))].copy()
    table.columns = [c.split(".", 1)[-1] for c in table.columns]
    table.insert(0, "rank", range(1, len(table) + 1))
    return f"top {len(table)} by {spec.objective} (cycle model, simulated):\n" + table.to_string(
        index=False, float_format=lambda x: f"{x:.4g}")


def _row_point(row: pd.Series) -> Point:
    shape = {k.split(".", 1)[1]: v for k, v in row.items() if k.startswith("shape.") and not pd.isna(v)}
    params = {k.split(".", 1)[1]: v for k, v in row.items() if k.startswith("param.") and not pd.isna(v)}
    for key, value in list(shape.items()) + list(params.items()):
        if hasattr(value, "item"):  # numpy scalars back to Python for the generator
            (shape if key in shape else params)[key] = value.item()
    return Point(shape, params)


def save_best_and_baseline(results: pd.DataFrame, spec: SweepSpec, out_dir) -> dict[str, Path]:
    """Re-simulates the best point (and the baseline, if the spec names one) for the best
    point's shape and saves both traces under ``out_dir`` for the web UI."""
    from zyfa.sweep_eval import simulate

    ranked = rank(results, spec.objective, spec.maximise, top=1)
    if ranked.empty:
        return {}
    best = _row_point(ranked.iloc[0])
    chosen = {"best": best}
    if spec.baseline is not None:
        params = {**{k: v[0] for k, v in spec.params.items()}, **spec.baseline}
        chosen["baseline"] = Point(best.shape, params)
    paths = {}
    for label, point in chosen.items():
        trace, _ = simulate(point.shape, point.params)
        paths[label] = trace.save(Path(out_dir) / label)
    return paths
