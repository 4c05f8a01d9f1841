"""Server-side grid rows: AG Grid filter and sort models over every record of the view."""

from __future__ import annotations

import numpy as np
import pytest

from zyfa.webui import grid


def test_text_filter_finds_every_match(make_trace):
    t = make_trace(simds=4, iterations=250, valu_ops=24)
    rows = np.arange(len(t))
    hit = grid.query(t, rows, {"opcode": {"filterType": "text", "type": "contains", "filter": "V_EXP"}}, None)
    want = np.flatnonzero(t.df["opcode"].to_numpy() == "v_exp_f32")
    assert want.size > 5000 and np.array_equal(hit, want)


def test_number_filters_combined_and_sort(make_trace):
    t = make_trace()
    rows = np.arange(len(t))
    model = {"start": {"filterType": "number", "type": "inRange", "filter": 64, "filterTo": 128},
             "unit": {"filterType": "text", "operator": "OR",
                      "conditions": [{"filterType": "text", "type": "equals", "filter": "mfma"},
                                     {"filterType": "text", "type": "equals", "filter": "VALU"}]}}
    out = grid.query(t, rows, model, [{"colId": "start", "sort": "desc"}, {"colId": "row", "sort": "asc"}])
    start = t.column("start")
    assert ((start[out] >= 64) & (start[out] <= 128)).all()
    assert list(start[out]) == sorted(start[out], reverse=True)
    assert set(out) == set(np.flatnonzero((start >= 64) & (start <= 128)))
    page = grid.page(t, out, 0, 3)
    assert [r["row"] for r in page] == list(out[:3]) and page[0]["id"] == str(out[0])
    assert grid.position(out, int(out[2])) == 2 and grid.position(out, -5) is None


@pytest.mark.parametrize("filters, sort, message", [
    ({"nope": {"filterType": "text", "type": "contains", "filter": "x"}}, None, "unknown grid column"),
    ({"opcode": {"filterType": "text", "type": "regex", "filter": "x"}}, None, "unknown operator"),
    ({"start": {"filterType": "number", "type": "equals", "filter": "x"}}, None, "not a finite number"),
    ({"opcode": {"filterType": "number", "type": "equals", "filter": 1}}, None, "number filter on text column"),
    ({"opcode": "v_exp"}, None, "must be an object"),
    (None, [{"colId": "start", "sort": "sideways"}], "sort entries"),
    (None, [{"colId": "secret", "sort": "asc"}], "unknown grid column"),
    (["x"], None, "filterModel must be an object"),
])
def test_malformed_requests_raise_a_named_error(make_trace, filters, sort, message):
    t = make_trace()
    with pytest.raises(grid.GridRequestError, match=message):
        grid.query(t, np.arange(len(t)), filters, sort)
    with pytest.raises(grid.GridRequestError, match="startRow"):
        grid.page(t, np.arange(3), -1, 2)
