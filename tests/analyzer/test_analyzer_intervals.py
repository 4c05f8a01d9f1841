"""The interval helpers behind the metrics, on hand-checked inputs."""

import numpy as np
import pytest

from zyfa.analyzer.intervals import (Coverage, check_keyspace, count_distinct, dense_ids, grouped_cummax, sweep,
                                     union)

A = np.array


def test_union_merges_overlapping_and_touching_and_drops_empty():
    s, e = union(A([10, 0, 5, 20, 30]), A([15, 6, 10, 25, 30]))
    assert s.tolist() == [0, 20] and e.tolist() == [15, 25]  # [0,6)+[5,10)+[10,15) touch; [30,30) is empty


def test_coverage_between():
    cov = Coverage(A([0, 20]), A([15, 25]))
    assert cov.at(A([-5, 0, 10, 15, 18, 22, 100])).tolist() == [0, 0, 10, 15, 15, 17, 20]
    assert cov.between(A([5, 14]), A([22, 21])).tolist() == [12, 2]
    assert Coverage(A([], np.int64), A([], np.int64)).between(A([1]), A([9])).tolist() == [0]


def test_sweep_counts_and_labels():
    # label 1 on [0,10), label 2 on [5,15): [0,5) one (1), [5,10) two (3), [10,15) one (2)
    s, e, count, label = sweep(A([0, 5]), A([10, 15]), A([1, 2]))
    assert list(zip(s, e, count, label)) == [(0, 5, 1, 1), (5, 10, 2, 3), (10, 15, 1, 2)]


def test_dense_ids_both_paths_and_distinct():
    ids, n = dense_ids(A([7, 3, 7, 9]))
    assert ids.tolist() == [1, 0, 1, 2] and n == 3
    ids, n = dense_ids(A([10**12, 5, 10**12]))  # sparse keys take the sort path
    assert ids.tolist() == [1, 0, 1] and n == 2
    assert count_distinct(A([4, 4, 1, 9, 1])) == 3 and count_distinct(A([], np.int64)) == 0


def test_keyspace_guard():
    with pytest.raises(ValueError, match="too large"):
        check_keyspace(2**40, 2**30)


def test_grouped_cummax_restarts_at_each_group():
    values = np.array([5, 3, 7, 2, 1, 4, 9, 0], np.int64)
    starts = np.array([True, False, False, True, False, False, True, False])
    assert grouped_cummax(values, starts).tolist() == [5, 5, 7, 2, 2, 4, 9, 9]
    assert grouped_cummax(np.zeros(0, np.int64), np.zeros(0, bool)).size == 0
