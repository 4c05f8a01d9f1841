"""Vectorised interval arithmetic on half-open cycle intervals ``[start, end)``, grouped by key.

Grouping trick used throughout: a non-negative time ``t`` of group ``k`` becomes ``k * span + t``
(``span`` larger than any time), so one sorted int64 array holds every group, groups never mix,
and numpy sorts/searches replace per-group Python loops.
"""

from __future__ import annotations

import numpy as np

_INT64_SAFE = 2**62


def check_keyspace(n_keys: int, span: int) -> None:
    if n_keys * span >= _INT64_SAFE:
        raise ValueError(f"trace too large for int64 keyed intervals: {n_keys} groups x {span} cycles")


def dense_ids(key: np.ndarray) -> tuple[np.ndarray, int]:
    """Map non-negative int keys to 0..n-1 in key order; returns (ids, n)."""
    if key.size == 0:
        return np.zeros(0, np.int64), 0
    top = int(key.max())
    if top < 16 * key.size + 1024:
        present = np.zeros(top + 1, np.int64)
        present[key] = 1
        lookup = np.cumsum(present) - 1
        return lookup[key], int(present.sum())
    order = np.argsort(key, kind="stable")
    new = np.ones(key.size, np.int64)
    new[1:] = key[order][1:] != key[order][:-1]
    ids = np.empty(key.size, np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids, int(new.sum())


def count_distinct(key: np.ndarray) -> int:
    """Number of distinct values (sort-based: faster than numpy's hash unique on large int arrays)."""
    if key.size == 0:
        return 0
    ordered = np.sort(key)
    return int((ordered[1:] != ordered[:-1]).sum()) + 1


def union(keyed_start: np.ndarray, keyed_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge keyed intervals into disjoint sorted ones (touching intervals merge). Empty ones are dropped."""
    keep = keyed_end > keyed_start
    s, e = keyed_start[keep], keyed_end[keep]
    if s.size == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(s.size, bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def grouped_cummax(values: np.ndarray, group_start: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` restarting where ``group_start`` is True (rows sorted by group)."""
    if values.size == 0:
        return values.copy()
    # offset each group above all earlier ones so one global cummax never crosses a boundary
    gid = np.cumsum(group_start) - 1
    span = values.max() - values.min() + 1
    lifted = values - values.min() + gid * span
    return np.maximum.accumulate(lifted) - gid * span + values.min()


class Coverage:
    """Cumulative covered length of disjoint sorted intervals: ``at(x)`` = |cover ∩ (-inf, x)|."""

    def __init__(self, start: np.ndarray, end: np.ndarray):
        self.start, self.end = start, end
        self.cum = np.concatenate(([0], np.cumsum(end - start)))

    def at(self, x: np.ndarray) -> np.ndarray:
        if self.start.size == 0:
            return np.zeros(x.shape, np.int64)
        j = np.searchsorted(self.start, x, side="right") - 1
        jc = np.maximum(j, 0)
        inside = np.clip(x - self.start[jc], 0, self.end[jc] - self.start[jc])
        return np.where(j >= 0, self.cum[jc] + inside, 0)

    def between(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Covered length of each ``[lo, hi)`` (lo <= hi, same group)."""
        return self.at(hi) - self.at(lo)


def sweep(keyed_start: np.ndarray, keyed_end: np.ndarray, label: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Elementary segments of a set of intervals: ``(seg_start, seg_end, count, label_sum)``.

    ``count`` is how many intervals cover the segment and ``label_sum`` the sum of their labels
    (with ``count == 1`` it is the one covering interval's label). Segments with count 0 are omitted.
    """
    if keyed_start.size == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, empty
    times = np.concatenate((keyed_start, keyed_end))
    delta = np.concatenate((np.ones(keyed_start.size, np.int64), -np.ones(keyed_end.size, np.int64)))
    dlabel = np.concatenate((label, -label)).astype(np.int64)
    order = np.argsort(times, kind="stable")
    times, delta, dlabel = times[order], delta[order], dlabel[order]
    first = np.flatnonzero(np.concatenate(([True], times[1:] != times[:-1])))
    u = times[first]
    count = np.cumsum(np.add.reduceat(delta, first))
    label_sum = np.cumsum(np.add.reduceat(dlabel, first))
    seg_start, seg_end = u[:-1], u[1:]
    count, label_sum = count[:-1], label_sum[:-1]
    live = count > 0
    return seg_start[live], seg_end[live], count[live], label_sum[live]
