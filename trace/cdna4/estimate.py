"""Whole-kernel time from the CU cycle model: sample workgroups, extrapolate, dispatch.

1. Occupancy: workgroups resident per CU, limited by LDS (``lds_bytes_per_cu``), VGPR+AGPR
   registers (``vgprs_per_simd_lane``) and wave slots (``max_waves_per_simd``).
2. Workgroup time: workgroups that differ only in grid y/z (heads, batch) run the same code
   path, so time is a function of grid x (the query block, whose causal work differs). A few
   x values are simulated in detail on one CU (with as many co-resident copies as fit),
   each with steady-state loop extrapolation (:mod:`sim`); other x values are interpolated
   linearly between the simulated ones.
3. Dispatch: workgroups in hardware order (x fastest, then y, then z) go to the earliest free
   slot of ``cus`` x occupancy slots; the kernel ends when the last one does. Launch overhead
   and inter-CU memory contention are not modelled.

Kernel time = cycles / clock; TFLOP/s uses :attr:`zyfa.shapes.AttnShape.flops`.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from zyfa.trace.cdna4 import timing
from zyfa.trace.cdna4.launch import Launch
from zyfa.trace.cdna4.sim import CUSim, SimConfig


@dataclass(frozen=True)
class EstimateConfig:
    """``samples``: grid-x values simulated in detail (first, last and evenly spaced between);
    ``clock_mhz``: converts cycles to time; ``fast_forward``: steady-state loop extrapolation;
    ``unknown_branch``: policy for data-dependent branches (:class:`sim.SimConfig`)."""

    samples: int = 3
    clock_mhz: float = timing.param("clock_mhz")
    fast_forward: bool = True
    unknown_branch: Optional[str] = "not-taken"

    def __post_init__(self):
        if not isinstance(self.samples, int) or self.samples < 1:
            raise ValueError(f"EstimateConfig.samples must be a positive int, got {self.samples!r}")
        if not isinstance(self.clock_mhz, (int, float)) or not 0 < self.clock_mhz < 10000:
            raise ValueError(f"EstimateConfig.clock_mhz must be a number in (0, 10000) MHz, got {self.clock_mhz!r}")


@dataclass
class Estimate:
    """Predicted kernel time and how it was obtained.

    ``cycles``: kernel cycles; ``seconds``/``tflops`` at ``clock_mhz``; ``occupancy``:
    workgroups per CU; ``samples``: per simulated grid-x value, its workgroup cycles, MFMA
    FLOPs and instruction counts; ``flops_ratio``: MFMA FLOPs executed over the whole grid
    (interpolated like the time) / the shape's FLOPs, a check that the kernel did the work; ``cu_result``: the representative sample's :class:`sim.CUResult` (its
    records are the trace); ``notes``: what was simulated, extrapolated and interpolated."""

    cycles: int
    seconds: float
    tflops: float
    clock_mhz: float
    occupancy: int
    samples: list
    cu_result: object
    representative_x: int
    wall_seconds: float
    flops_ratio: float = float("nan")  # MFMA FLOPs the model executed / AttnShape.flops
    notes: list = field(default_factory=list)

    @property
    def simulated_instructions(self) -> int:
        return sum(s["simulated_instructions"] for s in self.samples)

    @property
    def extrapolated_instructions(self) -> int:
        return sum(s["extrapolated_instructions"] for s in self.samples)


def occupancy(launch: Launch) -> tuple[int, str]:
    """Workgroups per CU and the limiting resource."""
    desc = launch.program.descriptor
    wave_size = int(timing.param("wave_size"))
    simds = int(timing.param("simds_per_cu"))
    waves = -(-launch.workgroup_size // wave_size)
    per_simd = -(-waves // simds)
    limits = {"wave slots": int(timing.param("max_waves_per_simd")) // per_simd}
    regs = desc.total_vgprs
    if regs:
        granule = 8
        regs = -(-regs // granule) * granule
        limits["VGPR+AGPR"] = (int(timing.param("vgprs_per_simd_lane")) // regs) // per_simd
    lds = max(desc.lds_bytes, int(launch.meta.get("lds_bytes", 0) or 0), int(launch.meta.get("shared", 0) or 0))
    if lds:  # static LDS of the descriptor, or dynamic LDS the kernel's build meta states (Triton "shared")
        limits["LDS"] = int(timing.param("lds_bytes_per_cu")) // lds
    name = min(limits, key=limits.get)
    if limits[name] < 1:
        raise ValueError(f"kernel {launch.name!r} does not fit on a CU ({name}: {limits})")
    return limits[name], name


def _sample_xs(gx: int, samples: int) -> list[int]:
    if gx <= samples:
        return list(range(gx))
    return sorted({round(i * (gx - 1) / (samples - 1)) for i in range(samples)}) if samples > 1 else [gx // 2]


def _interpolate(xs: list[int], values: list[float], gx: int) -> list[float]:
    out = []
    for x in range(gx):
        if x <= xs[0]:
            out.append(values[0])
        elif x >= xs[-1]:
            out.append(values[-1])
        else:
            j = next(i for i in range(1, len(xs)) if xs[i] >= x)
            a, b = xs[j - 1], xs[j]
            out.append(values[j - 1] + (values[j] - values[j - 1]) * (x - a) / (b - a))
    return out


def dispatch(durations_by_x: list[float], grid: tuple, slots: int) -> float:
    """Kernel cycles: workgroups in hardware order to the earliest free of ``slots`` slots."""
    gx, gy, gz = grid
    total = gx * gy * gz
    if total <= slots:
        return max(durations_by_x)
    free = [0.0] * slots
    heapq.heapify(free)
    end = 0.0
    for _ in range(gy * gz):
        for x in range(gx):
            t = heapq.heappop(free) + durations_by_x[x]
            end = max(end, t)
            heapq.heappush(free, t)
    return end


def estimate(launch: Launch, config: EstimateConfig = EstimateConfig(),
             progress: Optional[Callable] = None) -> Estimate:
    """Predict ``launch``'s kernel time (module docstring). ``progress(iterable)`` may wrap the
    sample loop (e.g. ``tqdm``)."""
    if not isinstance(launch, Launch):
        raise TypeError(f"launch must be a zyfa.trace.cdna4.launch.Launch, got {type(launch).__name__}")
    wall = time.perf_counter()
    gx, gy, gz = launch.grid
    occ, limit = occupancy(launch)
    xs = _sample_xs(gx, config.samples)
    rep_x = xs[len(xs) // 2]
    samples, rep_result = [], None
    iterator = progress(xs) if progress else xs
    for x in iterator:
        resident = min(occ, gy * gz)
        wgs = [(x, j % gy, (j // gy) % gz) for j in range(resident)]
        sim_cfg = SimConfig(fast_forward=config.fast_forward, record=(x == rep_x), unknown_branch=config.unknown_branch)
        result = CUSim(launch.program, launch.kernargs, wgs, launch.workgroup_size, sim_cfg,
                       regions=launch.regions, branch_policy=launch.branch_policy).run()
        samples.append({"x": x, "resident": resident, "cycles": result.cycles,
                        "mfma_flops_per_workgroup": result.mfma_flops(launch.program) / resident,
                        "simulated_instructions": result.simulated_instructions,
                        "extrapolated_instructions": result.extrapolated_instructions,
                        "loops_extrapolated": result.extrapolated,
                        "policy_branches": sum(result.unknown_branches.values())})
        if x == rep_x:
            rep_result = result
    durations = _interpolate(xs, [s["cycles"] for s in samples], gx)
    model_flops = sum(_interpolate(xs, [s["mfma_flops_per_workgroup"] for s in samples], gx)) * gy * gz
    flops_ratio = model_flops / launch.shape.flops
    cycles = int(math.ceil(dispatch(durations, launch.grid, int(timing.param("cus")) * occ)))
    seconds = cycles / (config.clock_mhz * 1e6)
    tflops = launch.shape.flops / seconds / 1e12
    total_wg = gx * gy * gz
    extrapolated = sum(s["extrapolated_instructions"] for s in samples)
    simulated = sum(s["simulated_instructions"] for s in samples)
    notes = [
        f"simulated in detail: {len(xs)} of {gx} grid-x values (x = {', '.join(map(str, xs))}), "
        f"each with {samples[0]['resident']} co-resident workgroup(s) on one CU; {simulated} instructions issued",
        f"extrapolated: {extrapolated} instructions in steady-state loop periods skipped "
        f"({100.0 * extrapolated / max(1, extrapolated + simulated):.1f}% of the sampled work)",
        f"interpolated: {gx - len(xs)} grid-x values (linear in x); replicated: {gy * gz} (y, z) copies "
        f"assumed to take the same time as y = z = 0",
        f"data-dependent branches: {sum(s['policy_branches'] for s in samples)} executions (in detail) decided by "
        + (f"the kernel's stated steady-state directions ({len(launch.branch_policy)} branches) and otherwise "
           if launch.branch_policy else "")
        + f"the '{config.unknown_branch}' policy" if any(s["policy_branches"] for s in samples) else
        "data-dependent branches: none (every branch followed computed scalar values)",
        f"dispatched: {total_wg} workgroups over {int(timing.param('cus'))} CUs x {occ} slot(s) "
        f"(occupancy limited by {limit}); launch overhead and cross-CU memory contention not modelled",
    ]
    work = (f"MFMA work in the model: {flops_ratio:.3f} x the shape's FLOPs (above 1: masked diagonal tiles or "
            f"padding computed as full tiles)")
    if not 0.9 <= flops_ratio <= 2.5:
        work = (f"WARNING: MFMA work in the model is {flops_ratio:.3f} x the shape's FLOPs: the kernel did not do "
                f"this shape's work in the model (kernel arguments? branch policy?); the time is not credible")
    notes.insert(0, work)
    return Estimate(cycles=cycles, seconds=seconds, tflops=tflops, clock_mhz=float(config.clock_mhz), occupancy=occ,
                    flops_ratio=flops_ratio,
                    samples=samples, cu_result=rep_result, representative_x=rep_x,
                    wall_seconds=time.perf_counter() - wall, notes=notes)
