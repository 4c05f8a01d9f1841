"""The CDNA4 cycle model as a tracer: kernel + shape -> :class:`zyfa.trace.schema.Trace`.

:func:`simulate` is the one path from a kernel (a name, ``aiter:NAME``, a code-object path or a
gfx950 generator configuration, with optional generator-parameter overrides) and a shape to a
trace and a whole-kernel estimate; ``zyfa-trace kernel``, the sweeps and the web UI's what-if
all call it.

The trace holds the detailed records of one CU running the representative workgroup(s)
(``cu`` = 0); loop periods that were extrapolated have no records (their count is in
``meta.extra``). ``meta.extra`` also carries the whole-kernel prediction and how it was made.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import gc
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Callable, Mapping, Optional

import pandas as pd
import pyarrow as pa

from zyfa.shapes import AttnShape
from zyfa.gfx950 import timing
from zyfa.kernels import gfx950
from zyfa.trace.cdna4.estimate import Estimate, EstimateConfig, estimate
from zyfa.trace.cdna4.launch import Launch, prepare
from zyfa.trace.schema import ARROW_SCHEMA, MEMORY, Trace, TraceError, TraceMeta


@functools.lru_cache(maxsize=1)  # one git process per run, not one per simulated kernel
def _git_commit() -> Optional[str]:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parent, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def records_table(records: Mapping) -> pa.Table:
    """A CU simulation's records (``CUResult.records``) as an Arrow table of the schema's columns
    and types, converted column by column from the Python lists (4x faster than through a pandas
    DataFrame, which was ~7% of the headline's CPU)."""
    try:
        return pa.Table.from_pydict({name: records[name] for name in ARROW_SCHEMA.names}, schema=ARROW_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        raise TraceError(MEMORY, "<records>", f"cannot build the table: {exc}") from exc


def records_frame(records: Mapping) -> pd.DataFrame:
    """A CU simulation's records (``CUResult.records``) as the schema's columns and dtypes."""
    return records_table(records).to_pandas()


def to_trace(launch: Launch, est: Estimate, command: Optional[str] = None) -> Trace:
    """Schema-v1 trace of ``est``'s representative CU simulation."""
    table = records_table(est.cu_result.records)
    shape = launch.shape
    meta = TraceMeta(
        kernel=launch.name, arch="gfx950", source="model", clock_mhz=est.clock_mhz,
        shape={k: getattr(shape, k) for k in shape.__dataclass_fields__},
        grid=tuple(launch.grid), workgroup_size=launch.workgroup_size, simulated=True,
        provenance={"command": command or " ".join(sys.argv), "commit": _git_commit(),
                    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    "tool": "zyfa.trace.cdna4 cycle model", "program_source": launch.program.source},
        extra={
            "predicted_cycles": est.cycles, "predicted_seconds": est.seconds, "predicted_tflops": est.tflops,
            "mfma_flops_ratio": est.flops_ratio,
            "occupancy_workgroups_per_cu": est.occupancy, "work_axis": "xyz"[est.work_axis],
            "representative_work_index": est.representative_x,
            "samples": est.samples, "notes": est.notes,
            "trace_covers": "one CU, detailed records only (extrapolated loop periods have none)",
            "skipped_periods": est.cu_result.skipped_periods(),
            "model_parameters": {k: {"value": p.value, "unit": p.unit, "guess": p.guess}
                                 for k, p in timing.PARAMS.items()},
        },
    )
    return Trace(table, meta)


def simulate(kernel, shape: AttnShape, overrides: Optional[Mapping] = None,
             config: EstimateConfig = EstimateConfig(), progress: Optional[Callable] = None,
             command: Optional[str] = None, rescale_rate: Optional[Fraction] = None) -> tuple[Trace, Estimate]:
    """Run ``kernel`` on ``shape`` through the cycle model: ``(trace, estimate)``.

    ``kernel`` and ``overrides`` as :func:`zyfa.kernels.registry.resolve` takes them;
    ``config``: samples, clock, branch policy; ``progress(iterable)`` may wrap the sampled
    workgroups (e.g. ``tqdm``); ``command``: the provenance command line (default ``sys.argv``);
    ``rescale_rate``: the share of executions on which each lazy O rescale branch the build states
    (``.L_rescale*``) jumps, over ``config``'s policy for those branches (None: as ``config`` says;
    :func:`measured_rescale` gives a generator kernel's measured rate)."""
    with gc_paused():
        launch = prepare(kernel, shape, overrides)
        if rescale_rate is not None:
            policy = dict(config.branch_policy) | launch.rescale_rates(rescale_rate)
            config = dataclasses.replace(config, branch_policy=tuple(sorted(policy.items())))
        est = estimate(launch, config, progress=progress)
        return to_trace(launch, est, command=command), est


def measured_rescale(kernel, shape: AttnShape) -> Optional[tuple[Fraction, str]]:
    """``(rate, input)`` at which a gfx950 generator kernel's lazy O rescale was measured on
    ``shape`` (:func:`zyfa.kernels.gfx950.measured_rescale_rate`; the decimal kept exact, since its
    denominator is the simulated jump pattern's length), or None (another kernel, or no measurement
    at this shape: the model then takes the kernel's stated never). ``zyfa-trace kernel`` and the web
    UI's simulations run at this rate unless told otherwise."""
    if not isinstance(kernel, str) or kernel not in gfx950.VARIANTS:
        return None
    measured = gfx950.measured_rescale_rate(kernel, shape)
    return None if measured is None else (Fraction(str(measured[0])), measured[1])


@contextlib.contextmanager
def gc_paused():
    """Python's cyclic garbage collector off for the block, restored after it. A simulation
    allocates millions of short-lived, acyclic objects (reference counting frees them) while
    its records and tables grow: the collector's repeated full passes over that heap freed
    nothing and took ~20% of the headline command's CPU (measured on the 2-core box,
    2026-12-03). Cyclic garbage made in the block is collected once it ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def output_stem(kernel_name: str, out_dir) -> Path:
    """``<out_dir>/<kernel>``: ``:``, ``/`` and ``\\`` in the name become ``_`` and a leading ``.``
    is escaped, so the trace stays inside ``out_dir`` whatever the name."""
    name = kernel_name.replace(":", "_").replace("/", "_").replace("\\", "_")
    return Path(out_dir) / (f"_{name}" if name.startswith(".") else name)


def save(trace: Trace, out_dir) -> Path:
    """Write ``trace`` as ``<out_dir>/<kernel>.parquet`` + ``.json`` (:func:`output_stem`);
    returns the Parquet path."""
    return trace.save(output_stem(trace.meta.kernel, out_dir))
