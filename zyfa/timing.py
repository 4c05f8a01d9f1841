"""Timing of repeated calls for the benchmark scripts: CUDA events on a GPU, the wall clock otherwise.

One helper so that every script that times a GPU call measures it the same way: the stream is
drained first (nothing queued earlier lands inside the window), one event pair spans all ``reps``
calls (one event per call would add the event's own cost to each), and the end event is waited on
before the elapsed time is read. ``zyfa-bench`` uses ``triton.testing.do_bench`` instead, which also
flushes L2 between calls; these scripts time end-to-end calls (a model's prefill, an API call with
its quantisation) where L2 reuse between calls is part of what is measured.
"""

import time

import torch


def elapsed_s(fn, reps: int, cuda: bool) -> float:
    """Seconds taken by ``reps`` back-to-back calls of ``fn()`` (no warm-up: warm up before)."""
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    if cuda:
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / 1e3
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return time.perf_counter() - t0
