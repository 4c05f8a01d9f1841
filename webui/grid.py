"""Server-side rows of the instruction grid: AG Grid's filter and sort models applied to a trace.

The grid uses AG Grid's infinite row model: the browser asks for rows ``[startRow, endRow)`` under
its current ``filterModel`` and ``sortModel`` and the server answers from *every* record of the
trace in the view, so a filter such as ``opcode contains v_exp`` finds all matching records, not
only those a capped client-side table happened to hold. Pure functions over a
:class:`~zyfa.trace.schema.Trace`; the Dash callback only calls :func:`query` and :func:`page`.
"""

from __future__ import annotations

import json
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from zyfa.trace.schema import COLUMNS, Trace

ROW = "row"  # the grid's record-number column (the record's row in the trace)
FIELDS = (ROW, *COLUMNS)
_TEXT_OPS = ("contains", "notContains", "equals", "notEqual", "startsWith", "endsWith", "blank", "notBlank")
_NUMBER_OPS = ("equals", "notEqual", "lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual", "inRange",
               "blank", "notBlank")
_QUERY_CACHE = "webui.grid.query"


class GridRequestError(ValueError):
    """A filter or sort model the grid cannot have sent (unknown column, operator or value)."""


def _column(trace: Trace, rows: np.ndarray, field: str) -> pa.Array:
    if field == ROW:
        return pa.array(rows, type=pa.int64())
    if field not in COLUMNS:
        raise GridRequestError(f"unknown grid column {field!r}; columns are {', '.join(FIELDS)}")
    return trace.table.column(field).take(pa.array(rows, type=pa.int64())).combine_chunks()


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise GridRequestError(f"filter on {field!r}: {value!r} is not a finite number")
    return float(value)


def _condition(col: pa.Array, field: str, cond: dict) -> pa.Array:
    """Boolean mask of one AG Grid filter condition (``{"filterType", "type", "filter"[, "filterTo"]}``)."""
    if not isinstance(cond, dict):
        raise GridRequestError(f"filter on {field!r} must be an object, got {cond!r}")
    kind, op = cond.get("filterType"), cond.get("type")
    if op == "blank":
        return pc.is_null(col)
    if op == "notBlank":
        return pc.is_valid(col)
    if kind == "text":
        if op not in _TEXT_OPS:
            raise GridRequestError(f"text filter on {field!r}: unknown operator {op!r}")
        needle = cond.get("filter")
        if not isinstance(needle, str):
            raise GridRequestError(f"text filter on {field!r}: {needle!r} is not a string")
        text = pc.cast(col, pa.string())
        fn = {"contains": pc.match_substring, "notContains": pc.match_substring, "startsWith": pc.starts_with,
              "endsWith": pc.ends_with, "equals": pc.equal, "notEqual": pc.equal}[op]
        if op in ("equals", "notEqual"):
            hit = pc.equal(pc.utf8_lower(text), needle.lower())
        else:
            hit = fn(text, needle, ignore_case=True)
        hit = pc.fill_null(hit, False)
        return pc.invert(hit) if op in ("notContains", "notEqual") else hit
    if kind == "number":
        if op not in _NUMBER_OPS:
            raise GridRequestError(f"number filter on {field!r}: unknown operator {op!r}")
        if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
            raise GridRequestError(f"number filter on text column {field!r}")
        x = _number(cond.get("filter"), field)
        if op == "inRange":
            hi = _number(cond.get("filterTo"), field)
            hit = pc.and_(pc.greater_equal(col, x), pc.less_equal(col, hi))
        else:
            fn = {"equals": pc.equal, "notEqual": pc.not_equal, "lessThan": pc.less,
                  "lessThanOrEqual": pc.less_equal, "greaterThan": pc.greater,
                  "greaterThanOrEqual": pc.greater_equal}[op]
            hit = fn(col, x)
        return pc.fill_null(hit, False)
    raise GridRequestError(f"filter on {field!r}: unknown filterType {kind!r}")


def _mask(trace: Trace, rows: np.ndarray, field: str, model: dict) -> pa.Array:
    col = _column(trace, rows, field)
    if isinstance(model, dict) and "conditions" in model:  # two conditions joined by AND / OR
        conds = model["conditions"]
        if not isinstance(conds, list) or not conds:
            raise GridRequestError(f"filter on {field!r}: conditions must be a non-empty list")
        masks = [_condition(col, field, c) for c in conds]
        join = {"AND": pc.and_, "OR": pc.or_}.get(model.get("operator", "AND"))
        if join is None:
            raise GridRequestError(f"filter on {field!r}: operator must be AND or OR, got {model.get('operator')!r}")
        out = masks[0]
        for m in masks[1:]:
            out = join(out, m)
        return out
    return _condition(col, field, model)


def query(trace: Trace, rows: np.ndarray, filter_model: Optional[dict], sort_model: Optional[list]) -> np.ndarray:
    """``rows`` (record numbers, in start order) kept by ``filter_model`` and ordered by ``sort_model``.

    ``filter_model``: ``{column: condition}`` as AG Grid sends it; ``sort_model``: ``[{"colId",
    "sort": "asc"|"desc"}]`` (first key most significant; ties keep the incoming order).
    Raises :class:`GridRequestError` for anything the grid could not have sent.
    """
    rows = np.asarray(rows, dtype=np.int64)
    key = json.dumps([filter_model, sort_model], sort_keys=True, default=str)
    cached = trace.cache.get(_QUERY_CACHE)
    if cached is not None and cached[0] == key and np.array_equal(cached[1], rows):
        return cached[2]
    if filter_model and not isinstance(filter_model, dict):
        raise GridRequestError(f"filterModel must be an object, got {type(filter_model).__name__}")
    keep = np.ones(rows.size, dtype=bool)
    for field, model in (filter_model or {}).items():
        keep &= np.asarray(_mask(trace, rows, field, model).to_numpy(zero_copy_only=False), dtype=bool)
    out = rows[keep]
    if sort_model:
        if not isinstance(sort_model, list):
            raise GridRequestError(f"sortModel must be a list, got {type(sort_model).__name__}")
        columns, keys = {"_pos": pa.array(np.arange(out.size))}, []
        for i, s in enumerate(sort_model):
            if not isinstance(s, dict) or s.get("sort") not in ("asc", "desc"):
                raise GridRequestError(f"sort entries must be {{'colId': column, 'sort': 'asc'|'desc'}}, got {s!r}")
            columns[f"k{i}"] = _column(trace, out, s.get("colId"))
            keys.append((f"k{i}", "ascending" if s["sort"] == "asc" else "descending"))
        table = pa.table(columns)
        order = pc.sort_indices(table, sort_keys=keys + [("_pos", "ascending")])
        out = out[order.to_numpy()]
    trace.cache[_QUERY_CACHE] = (key, rows.copy(), out)
    return out


def page(trace: Trace, ordered: np.ndarray, start: int, end: int) -> list[dict]:
    """Grid rows ``ordered[start:end]`` as dicts (every column, plus ``row`` and the grid's ``id``)."""
    for name, value in (("startRow", start), ("endRow", end)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise GridRequestError(f"{name} must be a non-negative int, got {value!r}")
    chunk = ordered[start:max(start, end)]
    data = trace.table.take(pa.array(chunk, type=pa.int64())).to_pylist()
    for r, rec in zip(chunk, data):
        rec[ROW], rec["id"] = int(r), str(int(r))
    return data


def position(ordered: np.ndarray, row: int) -> Optional[int]:
    """Index of record ``row`` in ``ordered`` (None when the filter hides it)."""
    hit = np.flatnonzero(ordered == row)
    return int(hit[0]) if hit.size else None
