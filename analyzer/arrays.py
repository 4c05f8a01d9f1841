"""The numpy form of a trace that every metric works on, built once per trace and cached on it.

Dense ids: ``simd_id`` numbers the ``(cu, simd)`` pairs present, ``wave_id`` the ``(cu, wave)`` pairs,
both in sorted order. A *block* is one ``(cu, wave, iteration)`` triple: the work one wave does for
one main-loop iteration (one key block of the attention loop).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from zyfa.analyzer.intervals import dense_ids
from zyfa.trace.schema import UNITS, Trace

UNIT_CODES = {name: i for i, name in enumerate(UNITS)}
_CACHE_KEY = "zyfa.analyzer.arrays"
MEMO_ENTRIES = 64


@dataclass(frozen=True)
class Blocks:
    """Per-block arrays: owning wave id, iteration, first issue and last end of its records."""

    n: int
    wave: np.ndarray
    iteration: np.ndarray
    first_issue: np.ndarray
    last_end: np.ndarray


@dataclass(frozen=True)
class Arrays:
    cu: np.ndarray
    simd: np.ndarray
    wave: np.ndarray
    unit: np.ndarray  # index into UNITS
    issue: np.ndarray
    start: np.ndarray
    end: np.ndarray
    stall: np.ndarray
    simd_id: np.ndarray
    simd_keys: np.ndarray  # (n_simd, 2): cu, simd
    wave_id: np.ndarray
    wave_keys: np.ndarray  # (n_wave, 2): cu, wave
    opcode: np.ndarray  # index into opcodes
    opcodes: list
    reason: np.ndarray  # index into reasons, -1 for null
    reasons: list
    region: np.ndarray  # index into regions, -1 for null
    regions: list
    block: np.ndarray  # block id, -1 where iteration is null
    blocks: Blocks
    t0: int
    t1: int
    memo: OrderedDict = field(default_factory=OrderedDict, repr=False)  # derived results by name (and window)

    def cached(self, key: Any, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per key, so metrics share intermediates (the trace never changes).

        Least-recently-used entries beyond MEMO_ENTRIES are dropped (a UI asks for many windows).
        """
        if key in self.memo:
            self.memo.move_to_end(key)
            return self.memo[key]
        value = self.memo[key] = compute()
        while len(self.memo) > MEMO_ENTRIES:
            self.memo.popitem(last=False)
        return value

    @property
    def n(self) -> int:
        return self.start.size

    @property
    def n_simd(self) -> int:
        return self.simd_keys.shape[0]

    @property
    def n_wave(self) -> int:
        return self.wave_keys.shape[0]

    @property
    def span(self) -> int:
        """A length larger than any time offset ``t - t0`` in the trace (for keyed intervals)."""
        return self.t1 - self.t0 + 1

    @property
    def has_instructions(self) -> bool:
        """Whether any record is an instruction (not a Proton REGION scope)."""
        return self.cached("has_instructions", lambda: bool((self.unit != UNIT_CODES["REGION"]).any()))

    def unit_mask(self, *names: str) -> np.ndarray:
        mask = np.zeros(self.n, bool)
        for name in names:
            mask |= self.unit == UNIT_CODES[name]
        return mask


def _pairs(major: np.ndarray, minor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense ids of (major, minor) pairs and the (n, 2) table of pairs per id."""
    width = int(minor.max()) + 1 if minor.size else 1
    key = major * width + minor
    ids, n = dense_ids(key)
    keys = np.zeros((n, 2), np.int64)
    keys[ids, 0] = major
    keys[ids, 1] = minor
    return ids, keys


def _blocks(wave_id: np.ndarray, iteration: pa.ChunkedArray, issue: np.ndarray, end: np.ndarray
            ) -> tuple[np.ndarray, Blocks]:
    has = pc.is_valid(iteration).to_numpy(zero_copy_only=False)
    block = np.full(wave_id.size, -1, np.int64)
    if not has.any():
        empty = np.zeros(0, np.int64)
        return block, Blocks(0, empty, empty, empty, empty)
    it = pc.fill_null(iteration, 0).to_numpy().astype(np.int64)
    lo = int(it[has].min())
    width = int(it[has].max()) - lo + 1
    ids, n = dense_ids(wave_id[has] * width + (it[has] - lo))
    block[has] = ids
    b_wave = np.zeros(n, np.int64)
    b_iter = np.zeros(n, np.int64)
    b_wave[ids] = wave_id[has]
    b_iter[ids] = it[has]
    first = np.full(n, np.iinfo(np.int64).max)
    last = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(first, ids, issue[has])
    np.maximum.at(last, ids, end[has])
    return block, Blocks(n, b_wave, b_iter, first, last)


def arrays_of(trace: Trace) -> Arrays:
    """The cached :class:`Arrays` of ``trace``."""
    if not isinstance(trace, Trace):
        raise TypeError(f"expected a zyfa.trace.schema.Trace, got {type(trace).__name__}")
    cached = trace.cache.get(_CACHE_KEY)
    if cached is not None:
        return cached
    col = {name: trace.column(name).astype(np.int64)
           for name in ("cu", "simd", "wave", "issue", "start", "end", "stall")}
    unit_codes, unit_values = trace.codes("unit")
    remap = np.array([UNIT_CODES[u] for u in unit_values] or [0], np.int8)
    unit = remap[unit_codes] if unit_codes.size else np.zeros(0, np.int8)
    simd_id, simd_keys = _pairs(col["cu"], col["simd"])
    wave_id, wave_keys = _pairs(col["cu"], col["wave"])
    opcode, opcodes = trace.codes("opcode")
    reason, reasons = trace.codes("stall_reason")
    region, regions = trace.codes("region")
    block, blocks = _blocks(wave_id, trace.table.column("iteration"), col["issue"], col["end"])
    if col["start"].size:
        t0 = int(col["issue"].min())
        t1 = max(int(col["end"].max()), int(col["issue"].max()) + 1)
    else:
        t0 = t1 = 0
    arrays = Arrays(cu=col["cu"], simd=col["simd"], wave=col["wave"], unit=unit, issue=col["issue"],
                    start=col["start"], end=col["end"], stall=col["stall"], simd_id=simd_id, simd_keys=simd_keys,
                    wave_id=wave_id, wave_keys=wave_keys, opcode=opcode, opcodes=opcodes, reason=reason,
                    reasons=reasons, region=region, regions=regions, block=block, blocks=blocks, t0=t0, t1=t1)
    trace.cache[_CACHE_KEY] = arrays
    return arrays
