"""Clock/power model of the MI355X: the sustained engine clock a kernel runs at (SIMULATED).

MI355X clocks follow power (1400 W board limit, 2400 MHz peak; docs/cdna4-facts.md "Clocks and
power"); power follows activity and operand bit toggling. From the cycle model's per-CU
activity of one kernel the model predicts the clock at which board power meets the limit.

Equations (every coefficient is a row of :data:`PARAMS`, with its provenance and a guess flag):

    a_mfma  = MFMA-busy SIMD-cycles per CU-cycle (0..4)          from the simulated CU's records
    a_valu  = VALU+TRANS-busy SIMD-cycles per CU-cycle (0..4)
    b_lds   = LDS bytes per CU-cycle,  b_vmem = global-memory bytes per CU-cycle
    tau     = operand bit-toggle density of the MFMA operands (0..1; :data:`TOGGLE` for the stated
              Gaussian input distribution, or from the data the functional emulator ran:
              ``zyfa-trace kernel --emulate`` prints that clock too, via toggle.attention_toggles)
    E_cycle = e_clock + e_mfma * tau * a_mfma + e_valu * tau_valu * a_valu + e_lds * b_lds + e_vmem * b_vmem
    V(f)/V_peak = v0 + (1 - v0) * f / f_peak                     (linear voltage-frequency curve)
    P(f)    = P_static + N_CU * f * (V(f)/V_peak)^2 * E_cycle
    clock   = f_peak if P(f_peak) <= P_board ("peak"), else the f with P(f) = P_board ("power-limited")

Cycle counts are taken as clock-independent (memory latencies are modelled in cycles), so the
predicted time is ``cycles / clock``. ``e_mfma`` is fitted on the calibration set only
(``benchmarks/fidelity.py --fit``); the other coefficients are guesses with stated reasons.
Activity is taken over the whole simulated run, loop periods the cycle model extrapolated
included (before 2026-12-03 it was taken over the detailed records only, which over-weighted
prologues and epilogues and so under-stated the activity of long loops; the fit made up for it
with a larger ``e_mfma_pj``: 3836 then, 3292 now). Because the fit also absorbs whatever the
cycle model misses (its AITER BF16 runs at ~86-90% of peak at 2400 MHz where the published
figures are ~56-60%), the predicted clock is an *effective* clock: a pure MFMA loop (4 busy
SIMDs, no VALU) comes out at 1441 MHz (BF16) / 1310 MHz (FP8) with the stated operand
distribution and 1142 MHz at toggle density 0.5 (random bits), while an MI350X BF16
microbenchmark sustains 87% of its peak. Trust ratios between similar kernels more than the
absolute clock. What is not modelled: temperature, per-CU clock differences, HBM clock, the dependence of
toggling on the kernel's own P encoding (one density per input format).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

import numpy as np

from zyfa.gfx950 import timing
from zyfa.gfx950.timing import Param
from zyfa.trace.cdna4.sim import mem_bytes

PARAMS: dict[str, Param] = {
    "board_power_w": Param(1400, "W", "MI355X data sheet: 1400 W total board power (docs/cdna4-facts.md)"),
    "f_peak_mhz": Param(2400, "MHz", "MI355X data sheet: 2400 MHz peak engine clock"),
    "f_min_mhz": Param(500, "MHz", "lower end of the clock search; no kernel here reaches it", guess=True),
    "v0": Param(0.55, "fraction", "voltage at zero clock over voltage at peak, linear V-f curve: typical DVFS range, no MI355X V-f table is public", guess=True),
    "e_clock_pj": Param(150, "pJ/CU-cycle", "clock tree and always-on logic per CU cycle: no public figure", guess=True),
    "e_valu_pj": Param(60, "pJ/SIMD-cycle", "VALU busy cycle (64 lanes fp32): order of magnitude from published ~1 pJ/lane fp32 FMA, no gfx950 figure", guess=True),
    "e_lds_pj_per_byte": Param(2, "pJ/byte", "LDS read/write per byte: no public figure", guess=True),
    "e_vmem_pj_per_byte": Param(30, "pJ/byte", "global memory per byte incl. L2/fabric/HBM (HBM3E ~4 pJ/bit): order of magnitude", guess=True),
    "tau_valu": Param(0.5, "fraction", "toggle density of fp32 softmax operands taken as random bits", guess=True),
    "p_static_w": Param(250, "W", "static + uncore + HBM idle power: no public figure; the calibration set cannot separate it from e_mfma_pj (150 W and 250 W give tables within 0.5% after refitting)", guess=True),
    # fitted on the calibration set only (benchmarks/fidelity.py --fit); it also absorbs what the cycle
    # model misses (see docs/cdna4-facts.md "Clocks and power": the clock is an effective clock)
    "e_mfma_pj": Param(3292, "pJ/SIMD-cycle", "FITTED on the calibration set (26 rows; benchmarks/fidelity.py --fit, 2026-12-03 13:20 UTC, activity over the whole run incl. extrapolated loop periods; mean |error| 11.1%): MFMA busy SIMD-cycle at toggle density 1", guess=True),
}

# Operand toggle density of the MFMA operands (mean of Q, K, P, V) for the stated distribution:
# Q, K, V ~ N(0,1), P = exp(S - rowmax) over a 128-key tile, rounded to the input format.
# Computed by zyfa.trace.cdna4.toggle.gaussian_attention_toggles (seed 0; a test recomputes them).
TOGGLE = {"fp8": Param(0.3999, "fraction", "toggle.gaussian_attention_toggles('fp8')['mfma']"),
          "bf16": Param(0.3405, "fraction", "toggle.gaussian_attention_toggles('bf16')['mfma']")}
DISTRIBUTION = "Gaussian N(0,1) Q/K/V, P = exp(S - rowmax)"


def param(name: str) -> float:
    if name not in PARAMS:
        raise KeyError(f"unknown power-model parameter {name!r}; known: {', '.join(PARAMS)}")
    return float(PARAMS[name].value)


@dataclass(frozen=True)
class Activity:
    """Per-CU activity of one kernel (module docstring): SIMD-busy cycles and bytes per CU-cycle."""

    mfma: float
    valu: float
    lds_bytes: float
    vmem_bytes: float
    cycles: int  # span of the records they were measured over

    def __post_init__(self):
        simds = timing.param("simds_per_cu")
        for name in ("mfma", "valu"):
            value = getattr(self, name)
            if not 0 <= value <= simds + 1e-9:
                raise ValueError(f"Activity.{name} must be in [0, {simds}] SIMD-cycles per CU-cycle, got {value}")
        if self.lds_bytes < 0 or self.vmem_bytes < 0:
            raise ValueError("Activity byte rates must be >= 0")


def activity(records: dict, skipped: Iterable[Mapping] = ()) -> Activity:
    """:class:`Activity` of a simulated CU from its records (``CUResult.records`` or a trace's
    columns: ``unit``, ``opcode``, ``issue``, ``start``, ``end``) and the loop periods skipped
    between them (``CUResult.skipped_periods()`` or a trace's ``meta.extra["skipped_periods"]``):
    the whole run, so a long loop of which few periods were simulated in detail weighs as much as
    it runs."""
    unit = np.asarray(records["unit"])
    if unit.size == 0:
        raise ValueError("activity needs at least one record")
    start = np.asarray(records["start"], dtype=np.int64)
    end = np.asarray(records["end"], dtype=np.int64)
    skipped = list(skipped)
    span = int(end.max() - np.asarray(records["issue"], dtype=np.int64).min()) + sum(int(x["cycles"]) for x in skipped)
    busy = end - start
    wave = int(timing.param("wave_size"))
    opcode = np.asarray(records["opcode"])
    lds = sum(mem_bytes(op) * wave for op in opcode[unit == "LDS"]) + sum(x["lds_bytes"] for x in skipped)
    vmem = sum(mem_bytes(op) * wave for op in opcode[unit == "VMEM"]) + sum(x["vmem_bytes"] for x in skipped)
    mfma = float(busy[unit == "MFMA"].sum()) + sum(sum(x["mfma_cycles"]) for x in skipped)
    valu = float(busy[(unit == "VALU") | (unit == "TRANS")].sum()) + sum(x["valu_cycles"] for x in skipped)
    return Activity(mfma=mfma / span, valu=valu / span, lds_bytes=lds / span, vmem_bytes=vmem / span, cycles=span)


def energy_per_cu_cycle(act: Activity, toggle: float, params: Optional[dict] = None) -> float:
    """E_cycle in joules at peak voltage (module docstring)."""
    p = {k: float(v.value) for k, v in PARAMS.items()} | dict(params or {})
    pj = (p["e_clock_pj"] + p["e_mfma_pj"] * toggle * act.mfma + p["e_valu_pj"] * p["tau_valu"] * act.valu
          + p["e_lds_pj_per_byte"] * act.lds_bytes + p["e_vmem_pj_per_byte"] * act.vmem_bytes)
    return pj * 1e-12


def board_power(f_mhz: float, act: Activity, toggle: float, params: Optional[dict] = None) -> float:
    """P(f) in watts."""
    p = {k: float(v.value) for k, v in PARAMS.items()} | dict(params or {})
    v = p["v0"] + (1 - p["v0"]) * f_mhz / p["f_peak_mhz"]
    return p["p_static_w"] + timing.param("cus") * f_mhz * 1e6 * v * v * energy_per_cu_cycle(act, toggle, p)


@dataclass(frozen=True)
class ClockPrediction:
    mhz: float
    limited: bool  # True: power-limited; False: at the peak clock
    watts: float  # board power at that clock
    toggle: float
    toggle_source: str

    @property
    def label(self) -> str:
        return "power-limited" if self.limited else "peak"

    def __str__(self) -> str:
        return f"predicted clock {self.mhz:.0f} MHz ({self.label})"


def pure_mfma_clock(dtype: str, toggle: Optional[float] = None, params: Optional[dict] = None) -> ClockPrediction:
    """The clock this model predicts for a pure MFMA loop: every SIMD's MFMA pipe busy, no VALU,
    LDS or memory traffic (the check against the MI350X microbenchmark's 87% of peak,
    docs/cdna4-facts.md "Clocks and power")."""
    simds = timing.param("simds_per_cu")
    act = Activity(mfma=simds, valu=0.0, lds_bytes=0.0, vmem_bytes=0.0, cycles=1)
    return predict_clock(act, dtype, toggle=toggle, params=params)


def predict_clock(act: Activity, dtype: str = "fp8", toggle: Optional[float] = None,
                  params: Optional[dict] = None) -> ClockPrediction:
    """Sustained clock of a kernel with activity ``act``: ``toggle`` from data when given, else
    the stated distribution's density for ``dtype`` (:data:`TOGGLE`)."""
    if toggle is None:
        if dtype not in TOGGLE:
            raise ValueError(f"no stated toggle density for dtype {dtype!r}; known: {', '.join(TOGGLE)}")
        toggle, source = float(TOGGLE[dtype].value), f"stated distribution: {DISTRIBUTION} ({dtype})"
    else:
        source = "given"
    if not 0 <= toggle <= 1:
        raise ValueError(f"toggle density must be in [0, 1], got {toggle}")
    p = {k: float(v.value) for k, v in PARAMS.items()} | dict(params or {})
    hi, lo, limit = p["f_peak_mhz"], p["f_min_mhz"], p["board_power_w"]
    watts = board_power(hi, act, toggle, p)
    if watts <= limit:
        return ClockPrediction(hi, False, watts, toggle, source)
    if board_power(lo, act, toggle, p) > limit:
        return ClockPrediction(lo, True, board_power(lo, act, toggle, p), toggle, source)
    for _ in range(60):  # P(f) is increasing in f: bisection
        mid = (lo + hi) / 2
        if board_power(mid, act, toggle, p) > limit:
            hi = mid
        else:
            lo = mid
    return ClockPrediction(lo, True, board_power(lo, act, toggle, p), toggle, source)
