"""Whole-kernel time from the CU cycle model: sample workgroups, extrapolate, dispatch.

1. Occupancy: workgroups resident per CU, limited by LDS (``lds_bytes_per_cu``), VGPR+AGPR
   registers (``vgprs_per_simd_lane``) and wave slots (``max_waves_per_simd``).
2. Workgroup time: causal work differs by query block, which is one grid axis (the *work
   axis*: stated by the kernel or probed, see :func:`estimate`); workgroups that differ only
   along the other axes (heads, batch) are assumed to take the same time. A few values along
   the work axis are simulated in detail on one CU (with as many co-resident copies as fit),
   each with steady-state loop extrapolation (:mod:`sim`); the others are interpolated linearly.
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

from zyfa.gfx950 import timing
from zyfa.trace.cdna4.launch import Launch
from zyfa.trace.cdna4.sim import CUSim, SimConfig, normal_policy


@dataclass(frozen=True)
class EstimateConfig:
    """``samples``: grid-x values simulated in detail (first, last and evenly spaced between);
    ``clock_mhz``: converts cycles to time; ``fast_forward``: steady-state loop extrapolation;
    ``unknown_branch``: policy for data-dependent branches (:class:`sim.SimConfig`);
    ``branch_policy``: ``(pc, "taken"/"not-taken")`` pairs for individual data-dependent branches,
    e.g. measured on the real data path (:func:`zyfa.trace.emu.branches.measured_branch_policy`),
    or ``(pc, rate)`` with a rate in [0, 1]: the fraction of a wave's executions that jump, in the
    deterministic pattern of :func:`sim.rate_taken`; they override the kernel's stated directions
    and ``unknown_branch``."""

    samples: int = 3
    clock_mhz: float = timing.param("clock_mhz")
    fast_forward: bool = True
    unknown_branch: Optional[str] = "not-taken"
    branch_policy: tuple = ()

    def __post_init__(self):
        if not isinstance(self.samples, int) or self.samples < 1:
            raise ValueError(f"EstimateConfig.samples must be a positive int, got {self.samples!r}")
        for item in self.branch_policy:
            if not (isinstance(item, tuple) and len(item) == 2):
                raise ValueError(f"EstimateConfig.branch_policy must hold (pc, policy) pairs, got {item!r}")
            normal_policy(item[1], f"EstimateConfig.branch_policy[{item[0]}]")
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
    work_axis: int = 0  # grid axis whose coordinate sets a workgroup's work (0 = x)
    notes: list = field(default_factory=list)
    simulated: int = 0  # instructions issued in detail, probes included
    extrapolated: int = 0  # instructions covered by skipped loop periods
    launch: Optional[Launch] = None  # what was estimated (program, grid, build meta: registers, LDS)

    @property
    def simulated_instructions(self) -> int:
        return self.simulated

    @property
    def extrapolated_instructions(self) -> int:
        return self.extrapolated


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


def dispatch(durations: list[float], grid: tuple, slots: int, axis: int = 0) -> float:
    """Kernel cycles: workgroups in hardware order (x fastest) to the earliest free of ``slots``
    slots; a workgroup's duration is ``durations[its coordinate along axis]``."""
    gx, gy, gz = grid
    if gx * gy * gz <= slots:
        return max(durations)
    free = [0.0] * slots
    heapq.heapify(free)
    end = 0.0
    for z in range(gz):
        for y in range(gy):
            for x in range(gx):
                t = heapq.heappop(free) + durations[(x, y, z)[axis]]
                end = max(end, t)
                heapq.heappush(free, t)
    return end


def _coord(axis: int, index: int) -> list[int]:
    coord = [0, 0, 0]
    coord[axis] = index
    return coord


def estimate(launch: Launch, config: EstimateConfig = EstimateConfig(),
             progress: Optional[Callable] = None) -> Estimate:
    """Predict ``launch``'s kernel time (module docstring). ``progress(iterable)`` may wrap the
    sample loop (e.g. ``tqdm``).

    The *work axis* (the grid axis along which workgroups do different work: the query block)
    is ``launch.meta["work_axis"]`` (0, 1, 2) when the kernel states it; otherwise it is probed:
    the workgroup at the far end of each axis is simulated, and the axis whose end differs most
    from workgroup (0, 0, 0) is taken (ties: x). A kernel whose build meta states
    ``uniform_work`` (every workgroup along the work axis does the same work) is sampled once."""
    if not isinstance(launch, Launch):
        raise TypeError(f"launch must be a zyfa.trace.cdna4.launch.Launch, got {type(launch).__name__}")
    wall = time.perf_counter()
    grid = tuple(launch.grid)
    occ, limit = occupancy(launch)
    cache: dict = {}

    def simulate(coord: list, record: bool) -> dict:
        key = tuple(coord)
        if key in cache and (not record or cache[key]["result"].records):
            return cache[key]
        others = [a for a in range(3) if grid[a] > 1 and coord[a] == 0 and a != work_axis] or [None]
        resident = min(occ, max(1, grid[others[0]] if others[0] is not None else 1))
        wgs = []
        for j in range(resident):
            c = list(coord)
            if others[0] is not None:
                c[others[0]] = j
            wgs.append(tuple(c))
        sim_cfg = SimConfig(fast_forward=config.fast_forward, record=record, unknown_branch=config.unknown_branch)
        result = CUSim(launch.program, launch.kernargs, wgs, launch.workgroup_size, sim_cfg,
                       regions=launch.regions, branch_policy=launch.branch_policy | dict(config.branch_policy),
                       iteration_starts=launch.iteration_starts).run()
        cache[key] = {"coord": key, "resident": resident, "cycles": result.cycles,
                      "mfma_flops_per_workgroup": result.mfma_flops(launch.program) / resident,
                      "simulated_instructions": result.simulated_instructions,
                      "extrapolated_instructions": result.extrapolated_instructions,
                      "loops_extrapolated": result.extrapolated,
                      "policy_branches": sum(result.unknown_branches.values()), "result": result}
        return cache[key]

    work_axis = launch.meta.get("work_axis")
    probes = {}
    if work_axis is None:
        candidates = [a for a in range(3) if grid[a] > 1] or [0]
        work_axis = candidates[0]
        if len(candidates) > 1:
            base = simulate([0, 0, 0], False)["cycles"]
            for a in candidates:
                probes["xyz"[a]] = simulate(_coord(a, grid[a] - 1), False)["cycles"] - base
            work_axis = max(candidates, key=lambda a: (abs(probes["xyz"[a]]), -a))
    elif work_axis not in (0, 1, 2):
        raise ValueError(f"launch.meta['work_axis'] must be 0, 1 or 2, got {work_axis!r}")
    n = grid[work_axis]
    # a kernel whose host code gives every workgroup along the work axis the same work (AITER's
    # pairing of query tiles i and n-1-i) states it: one sample is exact there and 3x cheaper
    xs = _sample_xs(n, 1 if launch.meta.get("uniform_work") else config.samples)
    rep_x = xs[len(xs) // 2]
    iterator = progress(xs) if progress else xs
    samples = [simulate(_coord(work_axis, x), x == rep_x) for x in iterator]
    rep_result = cache[tuple(_coord(work_axis, rep_x))]["result"]
    durations = _interpolate(xs, [s["cycles"] for s in samples], n)
    others = grid[0] * grid[1] * grid[2] // n
    model_flops = sum(_interpolate(xs, [s["mfma_flops_per_workgroup"] for s in samples], n)) * others
    flops_ratio = model_flops / launch.shape.flops
    cycles = int(math.ceil(dispatch(durations, grid, int(timing.param("cus")) * occ, work_axis)))
    seconds = cycles / (config.clock_mhz * 1e6)
    tflops = launch.shape.flops / seconds / 1e12
    total_wg = grid[0] * grid[1] * grid[2]
    runs = list(cache.values())
    extrapolated = sum(s["extrapolated_instructions"] for s in runs)
    simulated = sum(s["simulated_instructions"] for s in runs)
    name = "xyz"[work_axis]
    rated = sum(not isinstance(p, str) for _, p in config.branch_policy)
    tallies = [t for s in runs for t in s["result"].rate_branches.values()]
    runs_rated, taken = sum(t[0] for t in tallies), sum(t[1] for t in tallies)
    probe_text = ("; work axis probed: far-end minus origin cycles " +
                  ", ".join(f"{a}: {d:+d}" for a, d in probes.items())) if probes else ""
    notes = [
        f"simulated in detail: {len(runs)} workgroup(s) ({len(xs)} of {n} grid-{name} values: "
        f"{name} = {', '.join(map(str, xs))}{probe_text}), each with {samples[0]['resident']} co-resident "
        f"workgroup(s) on one CU; {simulated} instructions issued",
        f"extrapolated: {extrapolated} instructions in steady-state loop periods skipped "
        f"({100.0 * extrapolated / max(1, extrapolated + simulated):.1f}% of the simulated work)",
        f"interpolated: {n - len(xs)} grid-{name} values (linear in {name}); replicated: {others} workgroups along "
        f"the other axes assumed to take the time of coordinate 0",
        f"data-dependent branches: {sum(s['policy_branches'] for s in runs)} executions (in detail) decided by "
        + (f"the configured per-branch policies ({len(config.branch_policy)} branches, {rated} of them at a rate), "
           "otherwise " if config.branch_policy else "")
        + (f"the kernel's stated steady-state directions ({len(launch.branch_policy)} branches) and otherwise "
           if launch.branch_policy else "")
        + f"the '{config.unknown_branch}' policy" if any(s["policy_branches"] for s in runs) else
        "data-dependent branches: none (every branch followed computed scalar values)",
        *([f"rate branches: {taken} of {runs_rated} executions taken ({100.0 * taken / runs_rated:.1f}%) in the "
           "simulated workgroups, extrapolated periods included"] if runs_rated else []),
        f"dispatched: {total_wg} workgroups over {int(timing.param('cus'))} CUs x {occ} slot(s) "
        f"(occupancy limited by {limit}); launch overhead and cross-CU memory contention not modelled",
    ]
    work = (f"MFMA work in the model: {flops_ratio:.3f} x the shape's FLOPs (above 1: masked diagonal tiles or "
            f"padding computed as full tiles, or MFMAs beyond QK^T and PV such as zyfa-fp8's row sums)")
    if not 0.9 <= flops_ratio <= 2.5:
        work = (f"WARNING: MFMA work in the model is {flops_ratio:.3f} x the shape's FLOPs: the kernel did not do "
                f"this shape's work in the model (kernel arguments? branch policy?); the time is not credible")
    notes.insert(0, work)
    public = [{k: v for k, v in s.items() if k != "result"} for s in samples]
    return Estimate(cycles=cycles, seconds=seconds, tflops=tflops, clock_mhz=float(config.clock_mhz), occupancy=occ,
                    flops_ratio=flops_ratio, samples=public, cu_result=rep_result, representative_x=rep_x,
                    work_axis=work_axis, wall_seconds=time.perf_counter() - wall, notes=notes,
                    simulated=simulated, extrapolated=extrapolated, launch=launch)
