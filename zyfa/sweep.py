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
``seconds``. Rows are flushed to ``OUT/parts/part-<hash>.parquet`` as they arrive, named by a
hash of the point ids they hold (so no part ever replaces another) and written to a temporary
file, then renamed (an interruption never leaves a torn file). A rerun with the same OUT
evaluates exactly the points no part holds. ``OUT/results.parquet`` is the merged table.

OUT belongs to one spec: ``OUT/spec.json`` records it, and a different spec, or a folder that is
not a sweep, is refused unless ``force`` (then rows of other specs are ignored, never ranked).
``OUT/.sweep.lock`` keeps a second sweep out of a folder while one runs. The whole spec is
checked (field types, parameter names, objective) before any point runs.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import itertools
import json
import os
import random
import re
import time
import tomllib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

import pandas as pd
from tqdm import tqdm

from zyfa.shapes import AttnShape, parse_shape
from zyfa.trace.safeio import SafeIOError, atomic_path, loads_json, read_bytes, write_text

MODES = ("grid", "random", "greedy")
_ERROR_CHARS = 600  # a failing point's message is kept, truncated (assembler logs can be long)
_SHAPE_KEYS = {"seqlen", "batch", "heads", "heads_k", "headdim", "headdim_v", "causal", "dtype"}

MAX_SPEC_BYTES = 2**20
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # sweep.name: also the default folder sweeps/<name>
_SCALAR = (str, int, float, bool)
SPEC_FILE, LOCK_FILE = "spec.json", ".sweep.lock"


@dataclass(frozen=True)
class Evaluator:
    """``function`` ("module:function") maps (shape fields, params) -> metrics dict; ``metrics``
    are the columns it returns (an objective must be one), ``params`` the names a point may set."""

    function: str
    metrics: tuple[str, ...]
    params: tuple[str, ...]


EVALUATORS = {
    "cycle-model": Evaluator(
        "zyfa.sweep_eval:evaluate_cycle_model",
        metrics=("tflops", "predicted_ms", "cycles", "mfma_busy", "pingpong_overlap", "valu_cycles_per_block",
                 "vgprs", "agprs", "lds_bytes"),
        params=("dtype", "softmax", "scaling", "schedule", "fma", "rescale_threshold"),
    ),
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
        src = self.source
        _typed(src, "sweep.name", self.name, str)
        if not _NAME.match(self.name):
            raise SweepError(f"{src}: sweep.name {self.name!r} must be a plain name (letters, digits, '.', '_', '-'; "
                             "no '/' or leading '.'): it names the folder sweeps/<name>")
        _typed(src, "sweep.mode", self.mode, str)
        if self.mode not in MODES:
            raise SweepError(f"{src}: unknown sweep.mode {self.mode!r}; expected one of {MODES}")
        _typed(src, "sweep.evaluator", self.evaluator, str)
        if self.evaluator not in EVALUATORS:
            raise SweepError(f"{src}: unknown sweep.evaluator {self.evaluator!r}; known: {sorted(EVALUATORS)}")
        evaluator = EVALUATORS[self.evaluator]
        _typed(src, "sweep.objective", self.objective, str)
        if self.objective not in evaluator.metrics:
            raise SweepError(f"{src}: unknown sweep.objective {self.objective!r}; {self.evaluator} returns "
                             f"{', '.join(evaluator.metrics)}")
        _typed(src, "sweep.maximise", self.maximise, bool)
        _typed(src, "sweep.seed", self.seed, int)
        if self.budget is not None:
            _typed(src, "sweep.budget", self.budget, int)
        if not self.params:
            raise SweepError(f"{src}: [params] is empty: nothing to sweep")
        unknown = sorted(set(self.params) - set(evaluator.params))
        if unknown:
            raise SweepError(f"{src}: unknown parameter(s) params.{', params.'.join(unknown)}; {self.evaluator} "
                             f"takes {', '.join(evaluator.params)}")
        for key, values in self.params.items():
            if not values:
                raise SweepError(f"{src}: params.{key} has no candidate values")
            for value in values:
                _typed(src, f"params.{key}", value, _SCALAR)
            if len(set(map(repr, values))) != len(values):
                raise SweepError(f"{src}: params.{key} lists a value twice: {list(values)}")
        if self.mode != "grid" and (self.budget is None or self.budget <= 0):
            raise SweepError(f"{src}: sweep.budget must be a positive int for mode {self.mode!r}")
        if self.baseline is not None:
            _typed(src, "[baseline]", self.baseline, dict)
            unknown = set(self.baseline) - set(self.params)
            if unknown:
                raise SweepError(f"{src}: baseline names parameters not in [params]: {sorted(unknown)}")
            for key, value in self.baseline.items():
                _typed(src, f"baseline.{key}", value, _SCALAR)

    def record(self) -> dict:
        """What ``OUT/spec.json`` stores; two specs with equal records own the same folder."""
        return json.loads(json.dumps(
            {"name": self.name, "mode": self.mode, "objective": self.objective, "budget": self.budget,
             "seed": self.seed, "evaluator": self.evaluator, "shapes": list(self.shapes),
             "params": {k: list(v) for k, v in self.params.items()}, "baseline": self.baseline,
             "maximise": self.maximise}, default=str))

    def contains(self, point: "Point") -> bool:
        """Whether ``point`` is one this spec can evaluate (its shapes x candidate values, or its
        baseline): rows of another spec in the same folder are not."""
        if point.shape not in self.shapes or set(point.params) != set(self.params):
            return False
        base = self.baseline or {}
        return all(v in self.params[k] or base.get(k) == v for k, v in point.params.items())


def _typed(source: str, name: str, value, kind) -> None:
    """``value`` must be of ``kind`` (bool is not an int here, and int is not a bool)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not ok:
        expected = " or ".join(k.__name__ for k in kinds)
        raise SweepError(f"{source}: {name} must be {expected}, got {type(value).__name__} {value!r}")


def _as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def _table(source: str, data: dict, name: str) -> dict:
    value = data.get(name, {})
    _typed(source, f"[{name}]", value, dict)
    return dict(value)


def spec_from_dict(data: dict, source: str = "<inline>") -> SweepSpec:
    if not isinstance(data, dict):
        raise SweepError(f"{source}: a sweep spec is a table with [sweep], [shape] and [params]")
    unknown = set(data) - {"sweep", "shape", "params", "baseline"}
    if unknown:
        raise SweepError(f"{source}: unknown section(s) {sorted(unknown)}; expected sweep, shape, params, baseline")
    sweep, shape, params = (_table(source, data, name) for name in ("sweep", "shape", "params"))
    bad = set(shape) - _SHAPE_KEYS
    if bad:
        raise SweepError(f"{source}: unknown shape field(s) {sorted(bad)}; known: {sorted(_SHAPE_KEYS)}")
    for key, value in shape.items():
        for item in _as_tuple(value):
            _typed(source, f"shape.{key}", item, bool if key == "causal" else (str if key == "dtype" else
                                                                            (str, int) if key == "seqlen" else int))
    shape.setdefault("seqlen", "32k")
    keys = sorted(shape)
    shapes = tuple(dict(zip(keys, combo)) for combo in itertools.product(*(_as_tuple(shape[k]) for k in keys)))
    for s in shapes:
        _shape_of(s, source)  # validate now, not in a worker an hour later
    known_sweep = {"name", "mode", "objective", "budget", "seed", "evaluator", "maximise"}
    if set(sweep) - known_sweep:
        raise SweepError(f"{source}: unknown sweep field(s) {sorted(set(sweep) - known_sweep)}; known: {sorted(known_sweep)}")
    for key, values in params.items():
        if isinstance(values, dict):
            raise SweepError(f"{source}: params.{key} must be a value or a list of values, got {values!r}")
    return SweepSpec(
        name=sweep.get("name", Path(source).stem),
        mode=sweep.get("mode", "grid"),
        objective=sweep.get("objective", "tflops"),
        budget=sweep.get("budget"),
        seed=sweep.get("seed", 0),
        evaluator=sweep.get("evaluator", "cycle-model"),
        maximise=sweep.get("maximise", True),
        shapes=shapes,
        params={k: _as_tuple(v) for k, v in params.items()},
        baseline=data.get("baseline"),
        source=source,
    )


def load_spec(path) -> SweepSpec:
    """Reads a TOML (.toml) or YAML (.yaml/.yml) sweep spec: a regular UTF-8 file of at most 1 MiB."""
    path = Path(path)
    if not os.path.lexists(path):
        raise SweepError(f"sweep spec {path} does not exist")
    if path.suffix not in (".toml", ".yaml", ".yml"):
        raise SweepError(f"{path}: sweep specs are .toml, .yaml or .yml files")
    try:
        text = read_bytes(path, MAX_SPEC_BYTES, "sweep spec").decode("utf-8")
    except SafeIOError as exc:
        raise SweepError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise SweepError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        else:
            import yaml  # lazy: optional dependency (the "sweep" extra): only YAML specs need it

            data = yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, ImportError, RecursionError) as exc:
        raise SweepError(f"{path}: cannot parse: {exc}") from exc
    except Exception as exc:  # yaml.YAMLError without importing yaml at module level
        if type(exc).__module__.startswith("yaml"):
            raise SweepError(f"{path}: cannot parse: {' '.join(str(exc).split())}") from exc
        raise
    return spec_from_dict(data, source=str(path))


def _shape_of(fields: dict, source: str = "<inline>") -> AttnShape:
    fields = dict(fields)
    try:
        return parse_shape(str(fields.pop("seqlen")), **fields)
    except (TypeError, ValueError, OverflowError) as exc:
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
    module, _, func = EVALUATORS[name].function.partition(":")
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
    """Parquet parts under ``out/parts`` named by the hash of their point ids; atomic writes; the
    merged table on demand."""

    def __init__(self, out_dir):
        self.out = Path(out_dir)
        self.parts = self.out / "parts"
        try:
            self.parts.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SweepError(f"cannot create output directory {self.out}: {exc.strerror or exc}") from exc

    def files(self) -> list[Path]:
        return sorted(p for p in self.parts.glob("part-*.parquet") if p.is_file())

    def load(self) -> pd.DataFrame:
        files = self.files()
        if not files:
            return pd.DataFrame()
        try:
            frames = [pd.read_parquet(f) for f in files]
        except Exception as exc:  # pyarrow raises several types for a foreign or torn file
            raise SweepError(f"{self.parts}: unreadable result part ({type(exc).__name__}: {exc}); move it away "
                             "and rerun to recompute its points") from exc
        return pd.concat(frames, ignore_index=True).drop_duplicates("point_id", keep="last", ignore_index=True)

    def done_ids(self) -> set[str]:
        df = self.load()
        return set(df["point_id"]) if len(df) else set()

    def append(self, rows: list[dict]) -> Optional[Path]:
        if not rows:
            return None
        digest = hashlib.sha1("\n".join(sorted(r["point_id"] for r in rows)).encode()).hexdigest()[:16]
        final = self.parts / f"part-{digest}.parquet"
        with atomic_path(final) as tmp:
            pd.DataFrame(rows).to_parquet(tmp, index=False)
        return final

    def merge(self, spec: Optional["SweepSpec"] = None) -> pd.DataFrame:
        """All rows (only ``spec``'s points when given), also written to ``results.parquet``."""
        df = self.load()
        if spec is not None and len(df):
            df = df[[spec.contains(row_point(row)) for _, row in df.iterrows()]].reset_index(drop=True)
        if len(df):
            with atomic_path(self.out / "results.parquet") as tmp:
                df.to_parquet(tmp, index=False)
        return df


def _foreign(out: Path) -> list[str]:
    """Entries of ``out`` a sweep does not write (a folder holding them is not a sweep folder)."""
    ours = {SPEC_FILE, LOCK_FILE, "parts", "results.parquet", "best.parquet", "best.json",
            "baseline.parquet", "baseline.json"}
    return sorted(p.name for p in out.iterdir() if p.name not in ours and not p.name.startswith("."))


def check_folder(spec: SweepSpec, out_dir, force: bool = False) -> Path:
    """Raises unless ``out_dir`` can be ``spec``'s folder: new or empty, or already this spec's
    (resume); a folder of a different spec, or one that is not a sweep folder, needs ``force``.
    Reads only: a refused folder is left exactly as it was."""
    out = Path(out_dir)
    if os.path.lexists(out) and not out.is_dir():
        raise SweepError(f"{out}: exists and is not a directory")
    spec_file = out / SPEC_FILE
    if out.is_dir() and any(p.name != LOCK_FILE for p in out.iterdir()):
        stored = None
        if os.path.lexists(spec_file):
            try:
                stored = loads_json(read_bytes(spec_file, MAX_SPEC_BYTES, "sweep record"), spec_file)
            except SafeIOError:
                stored = None
        ours = isinstance(stored, dict) and set(stored) == set(spec.record())
        if not ours and not force:
            raise SweepError(f"{out}: not a sweep folder (no {SPEC_FILE} written by zyfa-trace sweep; holds "
                             f"{', '.join(_foreign(out)[:5]) or 'an unrecognised ' + SPEC_FILE}); choose a new or empty -o, or pass "
                             "--force to write into it")
        if ours and stored != spec.record() and not force:
            differs = sorted(k for k in stored if stored[k] != spec.record()[k])
            raise SweepError(f"{out}: holds sweep {stored.get('name')!r} with a different spec (differs in "
                             f"{', '.join(differs)}); choose another -o, or pass --force to run this spec there "
                             "(rows of the other spec are kept but not ranked)")
    return out


def claim_folder(spec: SweepSpec, out_dir, force: bool = False) -> Path:
    """:func:`check_folder`, then records ``spec`` in ``OUT/spec.json`` (call under :func:`folder_lock`)."""
    out = check_folder(spec, out_dir, force)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / SPEC_FILE, json.dumps(spec.record(), indent=2))
    return out


@contextmanager
def folder_lock(out_dir) -> Iterator[None]:
    """Exclusive, non-blocking lock on ``OUT/.sweep.lock`` for the duration of a sweep."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SweepError(f"{out}: another sweep is running in this folder ({LOCK_FILE} is locked)") from None
        yield
    finally:
        os.close(fd)  # releases the lock


def _ray_pool(address: str, workers: Optional[int]):
    try:
        import ray  # lazy: optional dependency (the "sweep" extra); only running a sweep needs it
    except ImportError:
        raise SweepError("sweeps run their points as Ray tasks: pip install 'zyfa[sweep]' (ray, pyyaml)") from None

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
              progress: bool = True, force: bool = False) -> pd.DataFrame:
    """Runs (or resumes) a sweep in ``out_dir`` (see :func:`claim_folder`); returns the merged
    results of this spec's points."""
    check_folder(spec, out_dir, force)  # before the lock file is created in a folder we may refuse
    with folder_lock(out_dir):
        claim_folder(spec, out_dir, force)
        store = ResultStore(out_dir)
        done = store.done_ids()

        def run(points: Iterable[Point]):
            return run_points([p for p in points if p.id not in done], spec.evaluator, store, address, workers,
                              progress)

        if spec.mode == "greedy":
            _greedy(spec, store, done, run)
        else:
            points = grid_points(spec) if spec.mode == "grid" else random_points(spec)
            if spec.baseline is not None:
                points += [Point(s, {**{k: v[0] for k, v in spec.params.items()}, **spec.baseline})
                           for s in spec.shapes]
                points = list({p.id: p for p in points}.values())
            skipped = sum(p.id in done for p in points)
            if skipped and progress:
                print(f"resuming: {skipped} of {len(points)} points already in {store.parts}")
            run(points)
        return store.merge(spec)


def rank(results: pd.DataFrame, objective: str, maximise: bool = True, top: int = 10) -> pd.DataFrame:
    """Successful points sorted by ``objective`` (best first)."""
    if results.empty:
        return results
    if objective not in results.columns:
        if results["error"].notna().all():  # every point failed: nothing to rank, not a spec error
            return results.iloc[0:0]
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


def row_point(row: pd.Series) -> Point:
    """The point of one results row (its ``shape.*`` and ``param.*`` columns)."""
    shape = {k.split(".", 1)[1]: v for k, v in row.items() if k.startswith("shape.") and not pd.isna(v)}
    params = {k.split(".", 1)[1]: v for k, v in row.items() if k.startswith("param.") and not pd.isna(v)}
    for key, value in list(shape.items()) + list(params.items()):
        if hasattr(value, "item"):  # numpy scalars back to Python for the generator
            (shape if key in shape else params)[key] = value.item()
    return Point(shape, params)
