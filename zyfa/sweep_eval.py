"""Sweep evaluators: one (shape, generator parameters) point -> metrics. Run inside Ray workers.

``cycle-model``: generate the gfx950 kernel for a :class:`zyfa.kernels.gfx950.KernelConfig`
built from the point's parameters, run it through the CDNA4 cycle model (simulated, not
measured) and return the whole-kernel prediction plus the analyzer's steady-state metrics.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import pandas as pd

from zyfa.analyzer import summary
from zyfa.kernels.gfx950 import VARIANTS, KernelConfig, configure
from zyfa.kernels.registry import DEFAULT_KERNEL
from zyfa.shapes import AttnShape, parse_shape
from zyfa import sweep
from zyfa.trace.cdna4 import tracer
from zyfa.trace.cdna4.estimate import EstimateConfig

# generator parameters a sweep may set (KernelConfig fields other than the name and head dims);
# declared with the evaluator so that a spec is checked before anything runs
SWEEPABLE = sweep.EVALUATORS["cycle-model"].params


def kernel_config(shape: AttnShape, params: dict) -> KernelConfig:
    """The flagship (:data:`zyfa.kernels.registry.DEFAULT_KERNEL`) at ``shape``'s dtype and head
    dims with ``params`` applied; named after the parameters."""
    unknown = set(params) - set(SWEEPABLE)
    if unknown:
        known = ", ".join(SWEEPABLE)
        raise ValueError(f"unknown generator parameter(s) {sorted(unknown)}; sweepable: {known}")
    label = "_".join(f"{k}_{params[k]}" for k in sorted(params)) or "default"
    name = "sweep_" + re.sub(r"[^A-Za-z0-9_]", "_", label)  # also the assembly symbol
    return configure(VARIANTS[DEFAULT_KERNEL], shape, {"dtype": shape.dtype, **params}, name)


def simulate(shape_fields: dict, params: dict, clock_mhz: Optional[float] = None):
    """(trace, estimate) of one point, through the one simulate path (:func:`zyfa.trace.cdna4.tracer.simulate`)."""
    fields_ = dict(shape_fields)
    shape = parse_shape(str(fields_.pop("seqlen")), **fields_)
    config = EstimateConfig() if clock_mhz is None else EstimateConfig(clock_mhz=clock_mhz)
    return tracer.simulate(kernel_config(shape, params), shape, config=config,
                           command=f"zyfa-trace sweep point {params}")


def evaluate_cycle_model(shape_fields: dict, params: dict) -> dict:
    trace, est = simulate(shape_fields, params)
    steady = summary(trace, window="steady")
    build = est.launch.meta  # the generator's build meta: register and LDS use
    return {
        "kernel": trace.meta.kernel,
        "tflops": est.tflops,  # whole kernel, predicted by the model
        "predicted_ms": est.seconds * 1e3,
        "cycles": est.cycles,
        "mfma_busy": steady.get("mfma_busy"),
        "pingpong_overlap": steady.get("pingpong_overlap"),
        "valu_cycles_per_block": steady.get("valu_cycles_per_block"),
        "vgprs": build["vgprs"],
        "agprs": build["agprs"],
        "lds_bytes": build["lds_bytes"],
    }


def save_best_and_baseline(results: pd.DataFrame, spec: sweep.SweepSpec, out_dir) -> dict[str, Path]:
    """Re-simulates the best point (and the baseline, if the spec names one) for the best
    point's shape and saves both traces under ``out_dir`` for the web UI."""
    ranked = sweep.rank(results, spec.objective, spec.maximise, top=1)
    if ranked.empty:
        return {}
    best = sweep.row_point(ranked.iloc[0])
    chosen = {"best": best}
    if spec.baseline is not None:
        params = {**{k: v[0] for k, v in spec.params.items()}, **spec.baseline}
        chosen["baseline"] = sweep.Point(best.shape, params)
    paths = {}
    for label, point in chosen.items():
        trace, _ = simulate(point.shape, point.params)
        paths[label] = trace.save(Path(out_dir) / label)  # the sweep folder's own files (claim_folder)
    return paths
