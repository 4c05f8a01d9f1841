"""The two k-step rules of benchmarks/wgmma_accumulator_model.py (a model of the fp8 wgmma accumulator,
docs/numerics.md "Grouped running-max Lean P"), on hand-made values: loaded by path, as a script."""

import importlib.util
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location(
    "wgmma_accumulator_model", Path(__file__).parents[2] / "benchmarks" / "wgmma_accumulator_model.py")
model = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(model)


def test_exact_kstep_is_the_sum():
    acc = torch.tensor([[1.5, -2.0]], dtype=torch.float64)
    prods = torch.tensor([[[0.25, 1.0], [2.0**-30, 3.0]]], dtype=torch.float64)  # (rows 1, keys 2, cols 2)
    assert torch.equal(model.kstep(acc, prods, None, "align"), acc + prods.sum(1))


def test_align_truncates_every_term_below_the_largest_leading_bit():
    # largest term 1.5 (leading bit 2^0): with 13 bits every term is cut to a multiple of 2^-13
    acc = torch.tensor([[1.5]], dtype=torch.float64)
    small = 2.0**-14 + 2.0**-20  # below the quantum: each such product is lost on its own ...
    prods = torch.full((1, 32, 1), small, dtype=torch.float64)
    assert float(model.kstep(acc, prods, 13, "align")) == 1.5
    # ... while the sum rule keeps their sum (32 x ~2^-14 = ~2^-9), truncated to 13 bits below 2^0
    s = 1.5 + 32 * small
    assert float(model.kstep(acc, prods, 13, "sum")) == float(torch.trunc(torch.tensor(s) * 2**13) / 2**13)
    # truncation is toward zero for negative terms too
    assert float(model.kstep(-acc, -prods, 13, "align")) == -1.5


def test_zero_terms_stay_zero():
    # a group's first k-step can see a zero accumulator and 32 zero products (codes 0): 0, not 0/0
    zero = torch.zeros(1, 2, dtype=torch.float64)
    assert torch.equal(model.kstep(zero, torch.zeros(1, 32, 2, dtype=torch.float64), 13, "align"), zero)
    assert torch.equal(model.kstep(zero, torch.zeros(1, 32, 2, dtype=torch.float64), 13, "sum"), zero)
