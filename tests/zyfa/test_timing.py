"""zyfa.timing.elapsed_s: the benchmark scripts' one timer (its CPU path; the CUDA path runs on the H200)."""

import pytest

from zyfa import timing


def test_wall_clock_spans_all_calls(monkeypatch):
    clock = iter([10.0, 10.75])
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    calls = []
    assert timing.elapsed_s(lambda: calls.append(1), 5, cuda=False) == 0.75
    assert len(calls) == 5


def test_cuda_path_not_taken_without_cuda(monkeypatch):
    """cuda=False never touches torch.cuda (the CPU box has no GPU)."""
    monkeypatch.setattr(timing.torch.cuda, "synchronize", lambda: pytest.fail("torch.cuda used"))
    assert timing.elapsed_s(lambda: None, 1, cuda=False) >= 0.0


@pytest.mark.parametrize("reps", [0, -3])
def test_reps_must_be_positive(reps):
    with pytest.raises(ValueError, match="reps must be >= 1"):
        timing.elapsed_s(lambda: None, reps, cuda=False)
