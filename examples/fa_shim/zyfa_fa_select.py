"""pytest plugin (``-p zyfa_fa_select``) for FlashAttention's upstream tests run through the zyfa shim.

- Selects the forward-output tests (FA2 ``test_flash_attn_output``, ``test_flash_attn_qkvpacked``;
  FA3 ``test_flash_attn_output``) at the head dims in ``ZYFA_FA_HEADDIMS`` (default 64,128,192) and
  deselects parametrisations that use a feature zyfa's GPU kernels lack: dropout, softcap, ALiBi,
  local windows, FA3's ``qv`` and column-major V. The test bodies are not changed (FA2's backward
  block is switched off by ``run_upstream_tests.sh``; FA3's by FLASH_ATTENTION_DISABLE_BACKWARD).
- Orders the selected cases round-robin over (test, head dim, dtype), so that a time budget
  (``ZYFA_FA_BUDGET_S``: cases not started by then are skipped, and counted as such) still
  samples every group.
- Prints pass/fail/skip counts per (test, head dim, dtype) at the end.
"""

import collections
import itertools
import os
import time

import pytest

TESTS = {"test_flash_attn_output", "test_flash_attn_qkvpacked"}
UNSUPPORTED = {"dropout_p": lambda x: x > 0, "softcap": lambda x: x > 0, "alibi": bool, "local": bool,
               "has_qv": bool, "V_colmajor": bool}
_START = time.monotonic()
_RESULTS = collections.Counter()
_GROUP = {}  # nodeid -> (test, head dim, dtype)


def _group(item):
    p = item.callspec.params
    return item.originalname, p.get("d"), str(p.get("dtype")).removeprefix("torch.")


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
    ordered = [i for batch in itertools.zip_longest(*groups.values()) for i in batch if i is not None]
    items[:] = ordered
    _GROUP.update((item.nodeid, _group(item)) for item in ordered)
    config.hook.pytest_deselected(items=drop)


def pytest_runtest_setup(item):
    budget = float(os.environ.get("ZYFA_FA_BUDGET_S", "0") or 0)
    if budget and time.monotonic() - _START > budget:
        pytest.skip(f"zyfa shim: time budget of {budget:.0f} s spent before this case started")


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _RESULTS[(_GROUP.get(report.nodeid), report.outcome)] += 1


def pytest_terminal_summary(terminalreporter):
    tr = terminalreporter
    tr.write_sep("=", "zyfa shim: outcomes per (test, head dim, dtype)")
    groups = sorted({g for g, _ in _RESULTS}, key=str)
    for g in groups:
        counts = {o: _RESULTS[(g, o)] for o in ("passed", "failed", "skipped")}
        tr.write_line(f"{g}: passed {counts['passed']}, failed {counts['failed']}, skipped {counts['skipped']}")
