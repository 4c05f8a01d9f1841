"""pytest plugin (``-p zyfa_fa_select``) for FlashAttention's upstream tests run through the zyfa shim.

- Selects the forward-output tests (FA2 ``test_flash_attn_output``, ``test_flash_attn_qkvpacked``;
  FA3 ``test_flash_attn_output``) at the head dims in ``ZYFA_FA_HEADDIMS`` (default 64,128,192) and
  deselects parametrisations that use a feature zyfa's GPU kernels lack: dropout, softcap, ALiBi,
  local windows, FA3's ``qv`` and column-major V. The test bodies are not changed (FA2's backward
  block is switched off by ``run_upstream_tests.sh``; FA3's by FLASH_ATTENTION_DISABLE_BACKWARD).
- Orders the selected cases round-robin over (test, head dim, dtype), so that a time budget
  (``ZYFA_FA_BUDGET_S``: cases not started by then are skipped, and counted as such) still
  samples every group; under pytest-xdist (``-n N --dist loadgroup``) each (test, head dim, dtype,
  causal) goes to one worker, so each Triton kernel is compiled by one process.
- Prints pass/fail/skip counts per (test, head dim, dtype) at the end.
- ``ZYFA_FA_ESTIMATE=1`` (with ``--collect-only``; no GPU needed): prints how many Triton compiles and
  autotuner runs the selected cases cost, by default and with ``ZYFA_TRITON_FIXED_CONFIG=1``
  (``compile_estimate.py``).
"""

import collections
import itertools
import os
import time

import pytest

ESTIMATE = os.environ.get("ZYFA_FA_ESTIMATE", "0") == "1"
if ESTIMATE:  # imported only for the estimate: it needs zyfa's Triton kernel modules (triton installed)
    import compile_estimate

    compile_estimate.fake_cuda_capability()  # before the test modules import (they query it at module level)

TESTS = {"test_flash_attn_output", "test_flash_attn_qkvpacked"}
UNSUPPORTED = {"dropout_p": lambda x: x > 0, "softcap": lambda x: x > 0, "alibi": bool, "local": bool,
               "has_qv": bool, "V_colmajor": bool}
_START = time.monotonic()
_RESULTS = collections.Counter()
_KEY = "zyfa_group"  # user property naming a case's (test, head dim, dtype); it travels with xdist's reports


def _group(item):
    p = item.callspec.params
    return item.originalname, p.get("d"), str(p.get("dtype")).removeprefix("torch.")


def pytest_configure(config):
    config.addinivalue_line("markers", "xdist_group(name): pytest-xdist's --dist loadgroup unit")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks (--dist loadgroup)
def pytest_collection_modifyitems(config, items):
    headdims = {int(d) for d in os.environ.get("ZYFA_FA_HEADDIMS", "64,128,192").split(",")}
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        ok = (item.originalname in TESTS and params.get("d") in headdims
              and not any(name in params and bad(params[name]) for name, bad in UNSUPPORTED.items()))
        (keep if ok else drop).append(item)
    groups = collections.defaultdict(list)
    for item in keep:
        groups[_group(item)].append(item)
        item.user_properties.append((_KEY, "/".join(map(str, _group(item)))))
        # one xdist worker per (test, head dim, dtype, causal): the cases that share Triton kernels run in
        # one process, which compiles each kernel once (workers would otherwise compile the same ones at once)
        item.add_marker(pytest.mark.xdist_group("/".join(map(str, (*_group(item), item.callspec.params.get("causal"))))))
    ordered = [i for batch in itertools.zip_longest(*groups.values()) for i in batch if i is not None]
    items[:] = ordered
    config.hook.pytest_deselected(items=drop)
    if ESTIMATE:
        print(f"\nzyfa shim estimate: {compile_estimate.estimate(ordered)}")


def pytest_runtest_setup(item):
    budget = float(os.environ.get("ZYFA_FA_BUDGET_S", "0") or 0)
    if budget and time.monotonic() - _START > budget:
        pytest.skip(f"zyfa shim: time budget of {budget:.0f} s spent before this case started")


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        group = dict(report.user_properties).get(_KEY)
        _RESULTS[(group, report.outcome)] += 1


def pytest_terminal_summary(terminalreporter):
    tr = terminalreporter
    tr.write_sep("=", "zyfa shim: outcomes per (test, head dim, dtype)")
    total = collections.Counter()
    for g in sorted({g for g, _ in _RESULTS}, key=str):
        counts = {o: _RESULTS[(g, o)] for o in ("passed", "failed", "skipped")}
        total.update(counts)
        tr.write_line(f"{g}: passed {counts['passed']}, failed {counts['failed']}, skipped {counts['skipped']}")
    tr.write_line(f"zyfa shim total: passed {total['passed']}, failed {total['failed']}, skipped {total['skipped']}")
