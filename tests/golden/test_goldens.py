"""Golden cycle-model traces: the model's and the generator's output must not change by accident.

Each case of ``tools/regen_goldens.py`` (zyfa-fp8, aiter-like-fp8, zyfa-bf16 and AITER's real
``fwd_hd128_bf16_causal`` code object, b1 h1 s1024 d128 causal) is simulated again and compared
column for column (values and Arrow types) and metadata key for key with ``tests/data/golden/``.

A commit that changes model or generator output on purpose regenerates the goldens with
``python3 tools/regen_goldens.py`` in a separate commit whose message says why (see
``tests/data/golden/README.md``).
"""

import importlib.util
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from zyfa.kernels import aiter

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("regen_goldens", ROOT / "tools" / "regen_goldens.py")
goldens = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(goldens)


@pytest.mark.parametrize("name", sorted(goldens.CASES))
def test_trace_identical_to_golden(name):
    kernel, _ = goldens.CASES[name]
    stored_meta = goldens.load(name)[1]
    if kernel.startswith("aiter:"):
        if shutil.which("llvm-objdump-22") is None:
            pytest.skip("llvm-objdump-22 missing: AITER code objects cannot be disassembled")
        try:
            sha = goldens.code_object_sha256(kernel)
        except aiter.AiterUnavailable as exc:
            pytest.skip(f"AITER code objects unavailable: {exc}")
        if sha != stored_meta["code_object_sha256"]:
            pytest.skip(f"{kernel}: the amd-aiter wheel here holds another code object (sha256 {sha[:12]}..., "
                        f"golden made from {stored_meta['code_object_sha256'][:12]}...): a different input")
    table, meta = goldens.simulate_case(name)
    diff = goldens.differences(name, table, meta)
    assert not diff, (f"{name}: the cycle-model trace differs from tests/data/golden/{name}.*; if intended, "
                      "regenerate with `python3 tools/regen_goldens.py` in its own commit saying why:\n  "
                      + "\n  ".join(diff))


def test_comparison_detects_a_changed_record():
    """The comparison is not vacuous: one changed stall value in a copy of a golden is reported."""
    table, meta = goldens.load("zyfa-fp8")
    stall = table.column("stall").to_pylist()
    stall[100] += 1
    changed = table.set_column(table.column_names.index("stall"), "stall", pa.array(stall, table.schema.field("stall").type))
    diff = goldens.differences("zyfa-fp8", changed, meta)
    assert diff == [f"column 'stall' differs first at record 100: now {stall[100]}, golden {stall[100] - 1}"]
    assert goldens.differences("zyfa-fp8", table, dict(meta, clock_mhz=1.0))[0].startswith("metadata 'clock_mhz'")
