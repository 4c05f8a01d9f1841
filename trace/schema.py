"""Trace schema v1: one row per executed instruction plus a metadata record (``zyfa.trace.schema``).

The contract is ``docs/trace-schema.md``. Every tracer (the CDNA4 cycle model, rocprofv3 thread
trace, Triton Proton) builds a :class:`Trace`; the analyzer and the web UI read only this.

Storage: ``<name>.parquet`` (the records) + ``<name>.json`` (the :class:`TraceMeta` sidecar). The
same JSON is also embedded in the Parquet key-value metadata under ``zyfa.trace.meta`` so a
Parquet file that lost its sidecar still loads.

Validation (on construction and on load) raises :class:`TraceError` naming the file (or
``<memory>``) and the field: missing columns, wrong dtypes, nulls in non-null columns, unknown
units, ``start < issue``, ``end < start``, negative stalls, overlapping ``[start, end)`` records on
one ``(cu, simd)`` MFMA or VALU unit, an unknown ``schema_version``, unreadable files.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from zyfa.shapes import AttnShape
from zyfa.trace.safeio import MAX_JSON_BYTES, MAX_TRACE_BYTES, SafeIOError, atomic_path, check_regular, loads_json, read_bytes

SCHEMA_VERSION = 1
META_KEY = b"zyfa.trace.meta"
MEMORY = "<memory>"  # the "file" named by errors about traces that were never saved

# unit -> what it executes
UNITS: dict[str, str] = {
    "MFMA": "matrix core (v_mfma_*, v_smfmac_*)",
    "VALU": "vector ALU, non-transcendental",
    "TRANS": "transcendental VALU (v_exp_f32, v_rcp_f32, v_log_f32 ...)",
    "SALU": "scalar ALU",
    "SMEM": "scalar memory (s_load_*, s_buffer_load_*)",
    "LDS": "local data share (ds_*)",
    "VMEM": "vector memory (buffer_*, global_*, flat_*)",
    "BRANCH": "s_branch, s_cbranch_*",
    "BARRIER": "s_barrier",
    "WAIT": "s_waitcnt, s_nop, s_sleep",
    "MISC": "everything else (s_setprio, s_endpgm ...)",
    "REGION": "a Proton scope (one record per region, not per instruction)",
}

# source -> what produced it
SOURCES: dict[str, str] = {
    "model": "the CDNA4 cycle model (simulated)",
    "rocprof-att": "rocprofv3 / rocprofiler-sdk thread trace (hardware)",
    "proton": "Triton Proton intra-kernel regions (hardware)",
    "cute-clock": "clock64 stamps inside the CuTe DSL Hopper kernel (hardware)",
}

# units whose records must not overlap in [start, end) on one (cu, simd)
EXCLUSIVE_UNITS = ("MFMA", "VALU")


@dataclass(frozen=True)
class Column:
    """One column of the record table."""

    name: str
    type: pa.DataType
    nullable: bool
    meaning: str


COLUMNS: dict[str, Column] = {c.name: c for c in (
    Column("cu", pa.int32(), False, "compute unit (SM for Proton)"),
    Column("simd", pa.int32(), False, "SIMD within the CU (0-3); Proton: warp group"),
    Column("wave", pa.int32(), False, "wave id, unique within the CU (Proton: warp id)"),
    Column("slot", pa.int32(), False, "wave slot within its SIMD"),
    Column("pc", pa.int64(), True, "byte offset of the instruction in the code object"),
    Column("opcode", pa.string(), False, "mnemonic or Proton region name"),
    Column("operands", pa.string(), True, "operand text as disassembled"),
    Column("unit", pa.string(), False, "one of UNITS"),
    Column("issue", pa.int64(), False, "cycle the wave issued it"),
    Column("start", pa.int64(), False, "cycle its unit started executing it (>= issue)"),
    Column("end", pa.int64(), False, "cycle its unit is free again (>= start)"),
    Column("stall", pa.int64(), False, "cycles the wave waited before issue (0 if none)"),
    Column("stall_reason", pa.string(), True, "dependency, hazard, unit_busy, arbitration, waitcnt, barrier, nop ..."),
    Column("iteration", pa.int32(), True, "main-loop iteration the instruction belongs to"),
    Column("region", pa.string(), True, "schedule cluster / phase name (QK_j, softmax_j, PV_j-1)"),
)}

ARROW_SCHEMA = pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in COLUMNS.values()])


class TraceError(ValueError):
    """A trace (file or in-memory table) violates schema v1.

    ``file`` is the path (or ``"<memory>"``), ``field`` the column or metadata key at fault.
    """

    def __init__(self, file: Any, field: str, message: str):
        self.file = str(file)
        self.field = field
        super().__init__(f"{self.file}: field {field!r}: {message}")


# -- metadata ------------------------------------------------------------------------------------

def _shape_fields() -> set[str]:
    return {f.name for f in fields(AttnShape)}


@dataclass(frozen=True)
class TraceMeta:
    """What a trace is: kernel, arch, source, clock, problem shape, launch, provenance.

    ``simulated`` defaults to ``source == "model"``. ``shape`` holds :class:`zyfa.shapes.AttnShape`
    fields (all optional; missing ones take AttnShape defaults in :attr:`attn_shape`). ``extra`` is
    free-form (JSON-serialisable), e.g. extrapolation details or a predicted kernel time.
    """

    kernel: str
    arch: str
    source: str
    clock_mhz: Optional[float] = None
    shape: Optional[dict] = None
    grid: Optional[tuple] = None
    workgroup_size: Optional[int] = None
    provenance: dict = field(default_factory=dict)
    simulated: Optional[bool] = None
    extra: dict = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self):
        if not isinstance(self.kernel, str) or not self.kernel:
            raise ValueError(f"TraceMeta.kernel must be a non-empty string, got {self.kernel!r}")
        if not isinstance(self.arch, str) or not self.arch:
            raise ValueError(f"TraceMeta.arch must be a non-empty string (gfx950, sm_90 ...), got {self.arch!r}")
        if self.source not in SOURCES:
            raise ValueError(f"Unknown source: {self.source!r}; expected one of {sorted(SOURCES)}")
        if self.clock_mhz is not None:
            if isinstance(self.clock_mhz, bool) or not isinstance(self.clock_mhz, (int, float)) \
                    or not math.isfinite(self.clock_mhz) or self.clock_mhz <= 0:
                raise ValueError(f"TraceMeta.clock_mhz must be a positive number or None, got {self.clock_mhz!r}")
            object.__setattr__(self, "clock_mhz", float(self.clock_mhz))
        if self.shape is not None:
            if not isinstance(self.shape, Mapping):
                raise TypeError(f"TraceMeta.shape must be a dict of AttnShape fields, got {type(self.shape).__name__}")
            unknown = set(self.shape) - _shape_fields()
            if unknown:
                raise ValueError(f"TraceMeta.shape has unknown keys {sorted(unknown)}; expected AttnShape fields "
                                 f"{sorted(_shape_fields())}")
            object.__setattr__(self, "shape", dict(self.shape))
            AttnShape(**self.shape)  # validates the values
        if self.grid is not None:
            grid = tuple(self.grid)
            if not grid or not all(isinstance(g, int) and not isinstance(g, bool) and g > 0 for g in grid):
                raise ValueError(f"TraceMeta.grid must be positive ints (x, y, z), got {self.grid!r}")
            object.__setattr__(self, "grid", grid)
        if self.workgroup_size is not None and (isinstance(self.workgroup_size, bool)
                                                or not isinstance(self.workgroup_size, int)
                                                or self.workgroup_size <= 0):
            raise ValueError(f"TraceMeta.workgroup_size must be a positive int or None, got {self.workgroup_size!r}")
        for name in ("provenance", "extra"):
            value = getattr(self, name)
            if not isinstance(value, Mapping):
                raise TypeError(f"TraceMeta.{name} must be a dict, got {type(value).__name__}")
            object.__setattr__(self, name, dict(value))
        if self.simulated is None:
            object.__setattr__(self, "simulated", self.source == "model")
        elif not isinstance(self.simulated, bool):
            raise TypeError(f"TraceMeta.simulated must be a bool or None, got {self.simulated!r}")
        if self.schema_version != SCHEMA_VERSION:
            raise ValueError(f"Unknown schema_version: {self.schema_version!r}; this zyfa reads {SCHEMA_VERSION}")

    @property
    def attn_shape(self):
        """The problem shape as :class:`zyfa.shapes.AttnShape` (None without ``shape``)."""
        return None if self.shape is None else AttnShape(**self.shape)

    @property
    def label(self) -> str:
        """``"simulated (cycle model)"`` or ``"hardware (rocprof-att)"`` ..., for printed output."""
        if self.simulated:
            return "simulated (cycle model)" if self.source == "model" else f"simulated ({self.source})"
        return f"hardware ({self.source})"

    def to_dict(self) -> dict:
        out = asdict(self)
        out["grid"] = None if self.grid is None else list(self.grid)
        return out

    @classmethod
    def from_dict(cls, data: Mapping, file: Any = MEMORY) -> "TraceMeta":
        """Build from a sidecar dict; any problem becomes a :class:`TraceError` naming the key."""
        if not isinstance(data, Mapping):
            raise TraceError(file, "<metadata>", f"expected a JSON object, got {type(data).__name__}")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise TraceError(file, "schema_version", f"unknown schema_version {version!r}; this zyfa reads "
                                                     f"{SCHEMA_VERSION}")
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise TraceError(file, unknown[0], f"unknown metadata key(s) {unknown}; free-form data goes in 'extra'")
        for required in ("kernel", "arch", "source"):
            if required not in data:
                raise TraceError(file, required, "missing required metadata key")
        try:
            return cls(**data)
        except (TypeError, ValueError) as exc:
            key = next((k for k in known if f"TraceMeta.{k} " in str(exc) or f"{k}:" in str(exc)), "<metadata>")
            raise TraceError(file, key, str(exc)) from exc


# -- table validation ----------------------------------------------------------------------------

def _same_type(actual: pa.DataType, expected: pa.DataType) -> bool:
    if pa.types.is_dictionary(actual):
        actual = actual.value_type
    if pa.types.is_string(expected):
        return pa.types.is_string(actual) or pa.types.is_large_string(actual) or pa.types.is_string_view(actual)
    return actual == expected


def _conform(table: pa.Table, file: Any, strict: bool) -> pa.Table:
    """Check columns and dtypes and return the table in ARROW_SCHEMA order (extra columns kept last).

    ``strict`` (loading a file): every column must be present with its exact type. Otherwise
    (building in memory): missing nullable columns are filled with nulls and numeric columns are
    cast when the cast is lossless.
    """
    arrays, names = [], []
    for col in COLUMNS.values():
        if col.name not in table.column_names:
            if strict or not col.nullable:
                raise TraceError(file, col.name, f"missing column (expected {col.type}, "
                                                 f"{'nullable' if col.nullable else 'not null'})")
            arrays.append(pa.nulls(table.num_rows, col.type))
            names.append(col.name)
            continue
        arr = table.column(col.name)
        if not _same_type(arr.type, col.type):
            numeric = pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)
            castable = not strict and (pa.types.is_null(arr.type) or (numeric and pa.types.is_integer(col.type)))
            if not castable:
                raise TraceError(file, col.name, f"wrong dtype {arr.type}, expected {col.type}")
            try:
                arr = arr.cast(col.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise TraceError(file, col.name, f"cannot convert {arr.type} to {col.type} losslessly: {exc}") from exc
        elif arr.type != col.type:
            arr = arr.cast(col.type)
        if not col.nullable and arr.null_count:
            raise TraceError(file, col.name, f"{arr.null_count} null value(s) in a non-null column")
        arrays.append(arr)
        names.append(col.name)
    for name in table.column_names:
        if name not in COLUMNS:
            arrays.append(table.column(name))
            names.append(name)
    return pa.Table.from_arrays(arrays, names=names)


def dictionary_codes(column: pa.ChunkedArray) -> tuple[np.ndarray, list]:
    """A string column as (int64 codes, -1 for null; list of distinct values).

    Dictionary-typed columns (as ``Trace.load`` reads them) are not re-encoded.
    """
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    if column.num_chunks != 1:
        column = column.unify_dictionaries()
    chunks = column.chunks
    if not chunks:
        return np.zeros(0, np.int64), []
    values = chunks[0].dictionary
    codes = np.concatenate([pc.fill_null(c.indices, -1).to_numpy().astype(np.int64) for c in chunks])
    return codes, values.to_pylist()


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _overlap_order(cu: np.ndarray, simd: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Row order sorted by (cu, simd, start): one int64 key when it fits, else a lexsort."""
    group = (cu - cu.min()) * (int(simd.max() - simd.min()) + 1) + (simd - simd.min())
    span = int(start.max() - start.min()) + 1
    if (int(group.max()) + 1) * span < 2**62:
        return np.argsort(group * span + (start - start.min()), kind="stable")
    return np.lexsort((start, simd, cu))


def _check_values(table: pa.Table, file: Any, units: tuple[np.ndarray, list]) -> dict[str, np.ndarray]:
    """Row-level rules: units, issue <= start <= end, stall >= 0, no overlap on MFMA/VALU.

    Returns the int64 numpy arrays it read (issue, start, end, stall, cu, simd) for reuse.
    """
    arrays = {c: table.column(c).to_numpy().astype(np.int64, copy=False)
              for c in ("issue", "start", "end", "stall", "cu", "simd")}
    if table.num_rows == 0:
        return arrays
    codes, values = units
    unknown = [i for i, v in enumerate(values) if v not in UNITS]
    if unknown:
        row = _first(np.isin(codes, unknown))
        raise TraceError(file, "unit", f"row {row}: unknown unit {values[codes[row]]!r}; expected one of {list(UNITS)}")
    issue, start, end, stall = (arrays[c] for c in ("issue", "start", "end", "stall"))
    for name in ("cu", "simd", "wave", "slot"):  # ids index arrays in the analyzer: never negative
        ids = arrays[name] if name in arrays else table.column(name).to_numpy(zero_copy_only=False)
        if (ids < 0).any():
            row = _first(ids < 0)
            raise TraceError(file, name, f"row {row}: negative {name} id {ids[row]}")
    if (start < issue).any():
        row = _first(start < issue)
        raise TraceError(file, "start", f"row {row}: start {start[row]} < issue {issue[row]}")
    if (end < start).any():
        row = _first(end < start)
        raise TraceError(file, "end", f"row {row}: end {end[row]} < start {start[row]} (negative duration)")
    if (stall < 0).any():
        row = _first(stall < 0)
        raise TraceError(file, "stall", f"row {row}: negative stall {stall[row]}")
    for name in EXCLUSIVE_UNITS:
        if name not in values:
            continue
        rows = np.flatnonzero((codes == values.index(name)) & (end > start))
        if rows.size < 2:
            continue
        cu, simd, s, e = arrays["cu"][rows], arrays["simd"][rows], start[rows], end[rows]
        order = _overlap_order(cu, simd, s)
        cu, simd, s, e = cu[order], simd[order], s[order], e[order]
        clash = (cu[1:] == cu[:-1]) & (simd[1:] == simd[:-1]) & (s[1:] < e[:-1])
        if clash.any():
            k = _first(clash)
            a, b = rows[order[k]], rows[order[k + 1]]
            raise TraceError(file, "start", f"{name} records overlap on cu {cu[k]} simd {simd[k]}: "
                                            f"row {a} [{start[a]}, {end[a]}) and row {b} [{start[b]}, {end[b]})")
    return arrays


def _json_default(value: Any) -> Any:
    """numpy scalars/arrays and paths in provenance/extra become plain JSON values."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} {value!r} (use str, int, float, bool, list, dict or None)")


# -- the trace -----------------------------------------------------------------------------------

class Trace:
    """Instruction records (schema v1) plus :class:`TraceMeta`.

    ``Trace(df, meta)`` accepts a pandas DataFrame or a ``pyarrow.Table`` and validates it.
    ``df`` is a pandas DataFrame with pyarrow-backed dtypes; ``table`` the underlying Arrow table.
    """

    def __init__(self, df: pd.DataFrame | pa.Table, meta: TraceMeta, *, _file: Any = MEMORY,
                 _strict: bool = False, _validated: bool = False):
        if not isinstance(meta, TraceMeta):
            raise TypeError(f"Trace: meta must be a TraceMeta, got {type(meta).__name__}")
        if isinstance(df, pd.DataFrame):
            try:
                table = pa.Table.from_pandas(df, preserve_index=False)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                raise TraceError(_file, "<table>", f"cannot convert the DataFrame to Arrow: {exc}") from exc
        elif isinstance(df, pa.Table):
            table = df
        else:
            raise TypeError(f"Trace: df must be a pandas DataFrame or pyarrow Table, got {type(df).__name__}")
        self._numpy: dict[str, np.ndarray] = {}
        # string columns read dictionary-encoded (Trace.load) keep their codes: no re-encoding later
        self._codes: dict[str, tuple[np.ndarray, list]] = {
            c.name: dictionary_codes(table.column(c.name)) for c in COLUMNS.values()
            if c.name in table.column_names and pa.types.is_dictionary(table.schema.field(c.name).type)}
        if not _validated:
            table = _conform(table, _file, _strict)
            if "unit" not in self._codes:
                self._codes["unit"] = dictionary_codes(table.column("unit"))
            arrays = _check_values(table, _file, self._codes["unit"])
            self._numpy.update({f"{name}|None": arr for name, arr in arrays.items()})
        self.table: pa.Table = table.replace_schema_metadata(None)
        self.meta = meta
        self._df: Optional[pd.DataFrame] = None
        self.cache: dict[str, Any] = {}  # derived data (e.g. the analyzer's per-unit arrays)

    # construction ----------------------------------------------------------------------------
    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], meta: TraceMeta) -> "Trace":
        """Build from dicts keyed by column name; nullable keys may be left out."""
        records = list(records)
        for i, rec in enumerate(records):
            if not isinstance(rec, Mapping):
                raise TypeError(f"Trace.from_records: records[{i}] must be a dict, got {type(rec).__name__}")
            unknown = set(rec) - set(COLUMNS)
            if unknown:
                raise TraceError(MEMORY, sorted(unknown)[0], f"records[{i}] has unknown key(s) {sorted(unknown)}")
        for col in COLUMNS.values():
            if not col.nullable:
                missing = next((i for i, rec in enumerate(records) if rec.get(col.name) is None), None)
                if missing is not None:
                    raise TraceError(MEMORY, col.name, f"records[{missing}] lacks non-null field {col.name!r}")
        for col in COLUMNS.values():  # Arrow would truncate 4.5 into an int column silently
            if pa.types.is_integer(col.type):
                bad = next((i for i, rec in enumerate(records) if isinstance(rec.get(col.name), float)), None)
                if bad is not None:
                    raise TraceError(MEMORY, col.name, f"records[{bad}]: {records[bad][col.name]!r} is not an integer")
        try:
            table = pa.Table.from_pylist(records, schema=ARROW_SCHEMA)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise TraceError(MEMORY, "<records>", f"cannot build the table (a value outside its column's type?): "
                                                  f"{exc}") from exc
        return cls(table, meta)

    # persistence -----------------------------------------------------------------------------
    @staticmethod
    def files(path: str | Path) -> tuple[Path, Path]:
        """(``<stem>.parquet``, ``<stem>.json``) of a trace named by either file or the stem."""
        path = Path(path)
        stem = path.with_suffix("") if path.suffix in (".parquet", ".json") else path
        return stem.with_name(stem.name + ".parquet"), stem.with_name(stem.name + ".json")

    _paths = files

    def save(self, path: str | Path) -> Path:
        """Write ``<stem>.parquet`` and ``<stem>.json`` (``path`` may end in ``.parquet``); returns the Parquet path.

        Each file is written to a temporary file in its folder and renamed over the target, so a
        crash or a full disk never leaves a truncated trace (callers decide about overwriting:
        :func:`zyfa.trace.safeio.check_output`)."""
        parquet_path, json_path = self._paths(path)
        try:
            meta_json = json.dumps(self.meta.to_dict(), indent=2, sort_keys=True, default=_json_default)
        except TypeError as exc:
            raise TraceError(json_path, "extra", f"metadata is not JSON-serialisable: {exc}") from exc
        with atomic_path(parquet_path) as tmp_parquet, atomic_path(json_path) as tmp_json:
            pq.write_table(self.table.replace_schema_metadata({META_KEY: meta_json.encode()}), tmp_parquet)
            tmp_json.write_text(meta_json + "\n")
        return parquet_path

    @classmethod
    def load(cls, path: str | Path) -> "Trace":
        """Read and validate a saved trace (``.parquet``, its ``.json`` sidecar or the stem).

        Regular files only (a FIFO or device is refused without being opened), the Parquet file at
        most ``MAX_TRACE_BYTES``, the sidecar at most ``MAX_JSON_BYTES`` and 64 levels deep."""
        parquet_path, json_path = cls._paths(path)
        if not os.path.lexists(parquet_path):
            if Path(path).is_file():
                raise TraceError(path, "<file>", "not a trace file: give the .parquet, its .json sidecar or their "
                                                 "common stem")
            raise TraceError(parquet_path, "<file>", "no such trace file")
        try:
            check_regular(parquet_path, MAX_TRACE_BYTES, "trace file")
        except SafeIOError as exc:
            raise TraceError(parquet_path, "<file>", str(exc).removeprefix(f"{parquet_path}: ")) from None
        try:
            strings = [c.name for c in COLUMNS.values() if pa.types.is_string(c.type)]
            present = set(pq.read_schema(parquet_path).names)
            table = pq.read_table(parquet_path, read_dictionary=[c for c in strings if c in present])
        except (pa.ArrowException, OSError) as exc:
            raise TraceError(parquet_path, "<file>", f"unreadable or truncated Parquet file: {exc}") from exc
        if os.path.lexists(json_path):
            try:
                meta_dict = loads_json(read_bytes(json_path, MAX_JSON_BYTES, "JSON sidecar"), json_path,
                                       what="JSON sidecar")
            except SafeIOError as exc:
                raise TraceError(json_path, "<metadata>", str(exc).removeprefix(f"{json_path}: ")) from None
            meta_file = json_path
        else:
            embedded = (table.schema.metadata or {}).get(META_KEY)
            if embedded is None:
                raise TraceError(parquet_path, "<metadata>", f"no sidecar {json_path.name} and no embedded metadata")
            try:
                meta_dict = loads_json(embedded, parquet_path, what="embedded metadata")
            except SafeIOError as exc:
                raise TraceError(parquet_path, "<metadata>", str(exc).removeprefix(f"{parquet_path}: ") +
                                 f" (and no sidecar {json_path.name})") from None
            meta_file = parquet_path
        meta = TraceMeta.from_dict(meta_dict, file=meta_file)
        return cls(table, meta, _file=parquet_path, _strict=True)

    # access ------------------------------------------------------------------------------------
    @property
    def df(self) -> pd.DataFrame:
        """The records as a pandas DataFrame with pyarrow-backed dtypes (computed once)."""
        if self._df is None:
            self._df = self.table.to_pandas(types_mapper=pd.ArrowDtype)
        return self._df

    def to_pandas(self) -> pd.DataFrame:
        """A copy of :attr:`df` that the caller may modify."""
        return self.df.copy()

    def column(self, name: str, fill: Any = None) -> np.ndarray:
        """One column as a numpy array (cached; integer columns as int64).

        Nulls become ``fill``; a null without ``fill`` is an error.
        """
        if name not in self.table.column_names:
            raise KeyError(f"Trace has no column {name!r}; columns: {self.table.column_names}")
        key = f"{name}|{fill!r}"
        if key not in self._numpy:
            arr = self.table.column(name)
            if arr.null_count:
                if fill is None:
                    raise ValueError(f"column {name!r} has {arr.null_count} null(s): pass fill=")
                arr = pc.fill_null(arr, fill)
            values = arr.to_numpy()
            self._numpy[key] = values.astype(np.int64, copy=False) if pa.types.is_integer(arr.type) else values
        return self._numpy[key]

    def codes(self, name: str) -> tuple[np.ndarray, list]:
        """A string column as (int64 codes with -1 for null, list of distinct values), cached."""
        if name not in COLUMNS or not pa.types.is_string(COLUMNS[name].type):
            raise KeyError(f"Trace.codes: {name!r} is not a string column of the schema")
        if name not in self._codes:
            self._codes[name] = dictionary_codes(self.table.column(name))
        return self._codes[name]

    def query(self, expr: str) -> "Trace":
        """Rows matching a pandas ``DataFrame.query`` expression, as a new Trace with the same meta."""
        if not isinstance(expr, str) or not expr.strip():
            raise ValueError(f"Trace.query: expr must be a non-empty pandas query string, got {expr!r}")
        mask = self.df.eval(expr)
        if not (isinstance(mask, pd.Series) and len(mask) == len(self)):
            raise ValueError(f"Trace.query: {expr!r} is not a row filter")
        rows = np.flatnonzero(mask.fillna(False).to_numpy(dtype=bool))
        return Trace(self.table.take(rows), self.meta, _validated=True)

    def __len__(self) -> int:
        return self.table.num_rows

    def __repr__(self) -> str:
        return f"Trace({self.meta.kernel!r}, {self.meta.arch}, {self.meta.label}, {len(self)} records)"
