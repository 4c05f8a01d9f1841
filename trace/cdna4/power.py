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
    r       = fp8_mfma_energy_ratio for FP8 kernels, 1 for BF16 (an FP8 MFMA-busy SIMD-cycle's
              energy over a BF16 one's at equal toggle density; :func:`fp8_energy_ratio`)
    E_cycle = e_clock + r * e_mfma * tau * a_mfma + e_valu * tau_valu * a_valu + e_lds * b_lds + e_vmem * b_vmem
    e_valu  = tied to e_mfma by two public loops (:func:`tied_valu_energy`)
    V(f)/V_peak = v0 + (1 - v0) * f / f_peak                     (linear voltage-frequency curve)
    P(f)    = P_static + N_CU * f * (V(f)/V_peak)^2 * E_cycle
    clock   = f_peak if P(f_peak) <= P_board ("peak"), else the f with P(f) = P_board ("power-limited")

Cycle counts are taken as clock-independent (memory latencies are modelled in cycles), so the
predicted time is ``cycles / clock``. ``e_mfma`` is fitted on the calibration set only
(``benchmarks/fidelity.py --fit``); ``fp8_mfma_energy_ratio`` is derived from public MI355X
thread-trace measurements outside that set (:data:`PUBLIC_LOOPS`); the other coefficients are
guesses with stated reasons. Activity is taken over the whole simulated run, loop periods the
cycle model extrapolated included.

What the public loops say (docs/cdna4-facts.md "Clocks and power"): AMD's gfx950 Gluon GEMMs on
an MI355X run their main loops at 98.75% (FP16) and 99.72% (BF8) MFMA busy, measured in ATT
thread traces, at 1489 and 3257 TFLOP/s: at least 1438 MHz (FP16) and 1557 MHz (BF8) effective
(a lower bound: the prologue and epilogue are less busy than the loop). So at full MFMA load an
FP8 loop clocks higher than a 16-bit one. Before 2026-12-03 the model gave both the same energy
per busy SIMD-cycle (weighted by toggle density only: FP8 0.40 > BF16 0.34), which put a pure
FP8 loop at 1310 MHz, below a pure BF16 loop (1441 MHz), and under-clocked the MFMA-dense zyfa-fp8
(0.76x its published figure). The BF16 pure-loop clock that fit gave, 1441 MHz, was already
consistent with the FP16 GEMM's >= 1438 MHz; the MI350X microbenchmark's 87% of peak states no
operand data (constant operands toggle nothing). With ``fp8_mfma_energy_ratio`` and ``e_mfma``
refitted: 1489 MHz (BF16) / 1612 MHz (FP8), 3.5% above both GEMMs' lower bounds. Since each
calibration row takes the input distribution its harness feeds (AITER's C++ harness: uniform
[0, 1), :data:`INPUTS`; the leave-one-out error fell from 6.7% to 4.1% mean, 27.5% to 19.8% max)
``e_mfma`` was 3560 pJ and a pure Gaussian MFMA loop came out at 1376 / 1493 MHz, 4.3% / 4.1%
under the GEMMs' lower bounds. The missing piece was the energy of non-MFMA work: the same
tutorials time an attention loop (fav4, 93.7% MFMA busy) at >= 1263 MHz, ~12% under the 98.75%-busy
FP16 GEMM. ``e_valu`` is now tied to ``e_mfma`` by that ratio (:func:`tied_valu_energy`, with the
fav4 loop's activity from the tutorial's own instruction counts, :data:`FAV4_ACTIVITY`) and
``e_mfma`` refitted: 2930 / 564 pJ, leave-one-out 4.1% -> 3.6% mean, 19.8% -> 13.8% max, pure loops
1541 / 1667 MHz (7% above the GEMMs' lower bounds), the fav4 loop 1354 MHz (>= 1263). What is not
modelled: temperature, per-CU clock differences, HBM clock, the dependence of toggling on a
kernel's own P encoding (one density per input format), power limits other than the board's
(di/dt).
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
    "e_valu_pj": Param(564, "pJ/SIMD-cycle", "VALU/TRANS busy SIMD-cycle (64 lanes, operands, register file), TIED to e_mfma_pj by the public Gluon loops (tied_valu_energy: the model's clocks of a pure 16-bit MFMA loop and of the fav4 attention loop in the ratio their ATT MFMA busy and TFLOP/s imply, 1438 / 1263 MHz; ROCm/gfx950-gluon-tutorials kernels/attention/README.md sections 4, 5, 8) at the fitted e_mfma_pj; it absorbs LDS and memory energy the guesses below miss (was 60, a guess, before 2026-12-03)", guess=True),
    "e_lds_pj_per_byte": Param(2, "pJ/byte", "LDS read/write per byte: no public gfx950 figure. Nearest public one: Horowitz's 45 nm / 0.9 V table (ISSCC 2014), a 64-bit access to an 8 KB SRAM 10 pJ = 1.25 pJ/byte (PMC8934428 Table 3 quotes it); the LDS is 160 KB (more per byte) on N3P (less). benchmarks/power_sensitivity.py sweeps 0.5-4 with e_mfma refitted: benchmarks/results/cycle_model/power_sensitivity_2026-12-03.md", guess=True),
    "e_vmem_pj_per_byte": Param(30, "pJ/byte", "every byte a buffer load/store moves between a CU and the memory system (power.activity), L2 hit or not. HBM3E 3.9 pJ/bit = 31 pJ/byte (Samsung, reported by ChinaFlashMarket: en.chinaflashmarket.com/price/ews/100178) prices an HBM access; at b1 h32 s32K causal only 3.8 % of the counted bytes are the shape's unique Q/K/V/O, the rest K/V re-reads L2 or the Infinity Cache can serve, whose per-byte energy has no public figure: 30 is the all-HBM end. Swept 2-45 with e_mfma refitted (benchmarks/power_sensitivity.py)", guess=True),
    "tau_valu": Param(0.5, "fraction", "toggle density of fp32 softmax operands taken as random bits", guess=True),
    "p_static_w": Param(250, "W", "static + uncore + HBM idle power: no public figure; the calibration set cannot separate it from e_mfma_pj (150 W and 250 W give tables within 0.5% after refitting)", guess=True),
    # fitted on the calibration set's in-band rows only (benchmarks/fidelity.py --fit); it also absorbs
    # what the cycle model misses (docs/cdna4-facts.md "Clocks and power": an effective clock)
    "fp8_mfma_energy_ratio": Param(0.741, "fraction", "derived (fp8_energy_ratio) from AMD's gfx950 Gluon GEMMs on an MI355X (ROCm blog 'From Naive to Near-Peak: Building High-Performance GEMM Kernels with Gluon', ROCm/gfx950-gluon-tutorials): FP16 1489 TFLOP/s at 98.75% and BF8 3257 TFLOP/s at 99.72% main-loop MFMA busy (ATT thread traces) imply >= 1438 / >= 1557 MHz; the ratio that makes this model's equations give both, with the stated toggle densities per format (the GEMMs' input data is not stated)", guess=True),
    "e_mfma_pj": Param(2930, "pJ/SIMD-cycle", "FITTED on the calibration set's 22 in-band rows (benchmarks/fidelity.py --fit, 2026-12-03 17:50 UTC, with fp8_mfma_energy_ratio 0.741, e_valu_pj tied to it by the Gluon loops, activity over the whole run and each source's stated input distribution: AITER's C++ harness rows uniform [0, 1), the rest Gaussian; in-band mean |error| 3.4%, leave-one-out 3.6%): a 16-bit MFMA busy SIMD-cycle at toggle density 1 (3110 with every row Gaussian and e_valu 60; 3560 with the harness inputs and e_valu 60)", guess=True),
}

# Operand toggle density of the MFMA operands (mean of Q, K, P, V) for the stated distribution:
# Q, K, V ~ N(0,1), P = exp(S - rowmax) over a 128-key tile, rounded to the input format.
# Computed by zyfa.trace.cdna4.toggle.gaussian_attention_toggles (seed 0; a test recomputes them).
TOGGLE = {"fp8": Param(0.3999, "fraction", "toggle.gaussian_attention_toggles('fp8')['mfma']"),
          "bf16": Param(0.3405, "fraction", "toggle.gaussian_attention_toggles('bf16')['mfma']")}
DISTRIBUTION = "Gaussian N(0,1) Q/K/V, P = exp(S - rowmax)"

# The same densities for the other input distribution a published figure was measured on: AITER's
# C++ harness (op_tests/cpp/mha/benchmark_mha_fwd.cpp, which produced the AITER README and PR #3390
# figures) fills Q, K and V uniformly in [0, 1) unless ``-init`` says otherwise (its default
# ``-init=uf``: ck_tile::FillUniformDistribution{0.f, 1.f}), and none of those commands passes -init.
# All-positive operands never flip the sign bit and span ~one binade, so they toggle ~20% fewer
# bits than N(0, 1). Computed by toggle.stated_attention_toggles(dtype, "uniform01") (seed 0).
INPUTS = {"gaussian": DISTRIBUTION, "uniform01": "uniform [0, 1) Q/K/V (AITER C++ harness default -init=uf), "
          "P = exp(S - rowmax)"}
TOGGLE_UNIFORM01 = {"fp8": Param(0.2997, "fraction", "toggle.stated_attention_toggles('fp8', 'uniform01')['mfma']"),
                    "bf16": Param(0.2755, "fraction", "toggle.stated_attention_toggles('bf16', 'uniform01')['mfma']")}


def stated_toggle(dtype: str, inputs: str = "gaussian") -> float:
    """The MFMA operand toggle density of ``dtype`` under a stated input distribution (:data:`INPUTS`)."""
    table = {"gaussian": TOGGLE, "uniform01": TOGGLE_UNIFORM01}
    if inputs not in table:
        raise ValueError(f"unknown input distribution {inputs!r}; known: {', '.join(table)}")
    if dtype not in table[inputs]:
        raise ValueError(f"no stated toggle density for dtype {dtype!r}; known: {', '.join(table[inputs])}")
    return float(table[inputs][dtype].value)


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


def energy_terms(act: Activity, toggle: float, params: Optional[dict] = None, dtype: str = "bf16") -> dict:
    """The terms of E_cycle (module docstring) in pJ per CU-cycle at peak voltage: ``clock``,
    ``mfma``, ``valu`` (VALU + TRANS), ``lds``, ``vmem``; their sum is :func:`energy_per_cu_cycle`.
    The model prices no SALU, branch or wait activity (part of ``e_clock_pj``)."""
    p = {k: float(v.value) for k, v in PARAMS.items()} | dict(params or {})
    ratio = p["fp8_mfma_energy_ratio"] if dtype == "fp8" else 1.0
    return {"clock": p["e_clock_pj"], "mfma": ratio * p["e_mfma_pj"] * toggle * act.mfma,
            "valu": p["e_valu_pj"] * p["tau_valu"] * act.valu, "lds": p["e_lds_pj_per_byte"] * act.lds_bytes,
            "vmem": p["e_vmem_pj_per_byte"] * act.vmem_bytes}


def energy_per_cu_cycle(act: Activity, toggle: float, params: Optional[dict] = None, dtype: str = "bf16") -> float:
    """E_cycle in joules at peak voltage (module docstring); ``dtype``: the MFMA operand format."""
    return sum(energy_terms(act, toggle, params, dtype).values()) * 1e-12


def board_power(f_mhz: float, act: Activity, toggle: float, params: Optional[dict] = None,
                dtype: str = "bf16") -> float:
    """P(f) in watts."""
    p = {k: float(v.value) for k, v in PARAMS.items()} | dict(params or {})
    v = p["v0"] + (1 - p["v0"]) * f_mhz / p["f_peak_mhz"]
    return p["p_static_w"] + timing.param("cus") * f_mhz * 1e6 * v * v * energy_per_cu_cycle(act, toggle, p, dtype)


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
    LDS or memory traffic (the check against the public MI355X loops of :data:`PUBLIC_LOOPS`,
    docs/cdna4-facts.md "Clocks and power")."""
    simds = timing.param("simds_per_cu")
    act = Activity(mfma=simds, valu=0.0, lds_bytes=0.0, vmem_bytes=0.0, cycles=1)
    return predict_clock(act, dtype, toggle=toggle, params=params)


def predict_clock(act: Activity, dtype: str = "fp8", toggle: Optional[float] = None,
                  params: Optional[dict] = None, inputs: str = "gaussian") -> ClockPrediction:
    """Sustained clock of a kernel with activity ``act``: ``toggle`` from data when given, else
    the density for ``dtype`` under the stated input distribution ``inputs`` (:data:`INPUTS`)."""
    if toggle is None:
        toggle, source = stated_toggle(dtype, inputs), f"stated distribution: {INPUTS[inputs]} ({dtype})"
    else:
        source = "given"
    if not 0 <= toggle <= 1:
        raise ValueError(f"toggle density must be in [0, 1], got {toggle}")
    p = {k: float(v.value) for k, v in PARAMS.items()} | dict(params or {})
    hi, lo, limit = p["f_peak_mhz"], p["f_min_mhz"], p["board_power_w"]
    watts = board_power(hi, act, toggle, p, dtype)
    if watts <= limit:
        return ClockPrediction(hi, False, watts, toggle, source)
    if board_power(lo, act, toggle, p, dtype) > limit:
        return ClockPrediction(lo, True, board_power(lo, act, toggle, p, dtype), toggle, source)
    for _ in range(60):  # P(f) is increasing in f: bisection
        mid = (lo + hi) / 2
        if board_power(mid, act, toggle, p, dtype) > limit:
            hi = mid
        else:
            lo = mid
    return ClockPrediction(lo, True, board_power(lo, act, toggle, p, dtype), toggle, source)


def clock_for_energy(e_pj, params: Optional[dict] = None) -> np.ndarray:
    """The clock (MHz) at which the board limit is met for energies ``e_pj`` per CU-cycle (pJ, at
    peak voltage; any array shape), capped at the peak and floored at ``f_min_mhz``: the same
    equation :func:`predict_clock` solves, vectorised for fits over many rows and coefficients."""
    p = {k: float(v.value) for k, v in PARAMS.items()} | dict(params or {})
    e = np.asarray(e_pj, dtype=float) * 1e-12
    cus = timing.param("cus")

    def watts(f):
        v = p["v0"] + (1 - p["v0"]) * f / p["f_peak_mhz"]
        return p["p_static_w"] + cus * f * 1e6 * v * v * e

    lo, hi = np.full(e.shape, p["f_min_mhz"]), np.full(e.shape, p["f_peak_mhz"])
    for _ in range(60):  # P(f) is increasing in f: bisection, as predict_clock
        mid = (lo + hi) / 2
        over = watts(mid) > p["board_power_w"]
        hi, lo = np.where(over, mid, hi), np.where(over, lo, mid)
    return np.where(watts(np.full(e.shape, p["f_peak_mhz"])) <= p["board_power_w"], p["f_peak_mhz"], lo)


# MI355X dense MFMA peaks at the 2400 MHz peak clock (256 CUs): per CU and clock 4096 FLOP for
# 16-bit operands and 8192 for FP8 = v_mfma_f32_32x32x16_bf16's 32768 FLOP per 32 cycles and
# v_mfma_f32_32x32x64_f8f6f4's 131072 per 64 cycles, per SIMD, x 4 SIMDs (docs/cdna4-facts.md).
DENSE_PEAK_TFLOPS = {
    "bf16": Param(2516.6, "TFLOP/s", "MI355X data sheet: dense FP16/BF16 peak at 2400 MHz (4096 FLOP/clk/CU)"),
    "fp8": Param(5033.2, "TFLOP/s", "MI355X data sheet: dense FP8 peak at 2400 MHz (8192 FLOP/clk/CU)"),
}


def traced_clock_mhz(tflops: float, mfma_busy: float, dtype: str, work: float = 1.0) -> float:
    """The effective clock a published throughput and a thread trace's MFMA busy fraction imply,
    independent of the cycle model: MFMA cycles are the work over the datasheet rate, so
    ``f = FLOPs x work / (CUs x rate x busy x time) = TFLOP/s x work / (dense peak x busy) x
    f_peak``. ``work``: MFMA FLOPs executed over the FLOPs the throughput counts (masked
    diagonal tiles, row-sum MFMAs). Exact when ``mfma_busy`` spans the whole run; a lower bound
    when it spans a loop window (the rest of the kernel is less busy)."""
    if dtype not in DENSE_PEAK_TFLOPS:
        raise ValueError(f"no dense peak for dtype {dtype!r}; known: {', '.join(DENSE_PEAK_TFLOPS)}")
    if not 0 < mfma_busy <= 1:
        raise ValueError(f"mfma_busy must be in (0, 1], got {mfma_busy}")
    return tflops * work / (float(DENSE_PEAK_TFLOPS[dtype].value) * mfma_busy) * param("f_peak_mhz")


@dataclass(frozen=True)
class PublicLoop:
    """A published MI355X main loop: its TFLOP/s and its MFMA busy fraction from a thread trace."""

    name: str
    dtype: str  # MFMA operand format class of this model: "bf16" (16-bit) or "fp8" (8-bit)
    tflops: float
    mfma_busy: float  # main-loop MFMA cycles over loop cycles, per SIMD (ATT)
    source: str

    @property
    def clock_mhz(self) -> float:
        """Effective clock the figures imply (:func:`traced_clock_mhz`). A lower bound: the
        kernel's prologue and epilogue are less MFMA-busy than its loop."""
        return traced_clock_mhz(self.tflops, self.mfma_busy, self.dtype)


_GLUON = ("ROCm blog 'From Naive to Near-Peak: Building High-Performance GEMM Kernels with Gluon' "
          "and ROCm/gfx950-gluon-tutorials")
PUBLIC_LOOPS = (
    PublicLoop("Gluon FP16 GEMM 4096x4096x8192", "bf16", 1489, 0.9875, _GLUON),
    PublicLoop("Gluon BF8 GEMM 4096x4096x16384", "fp8", 3257, 0.9972, _GLUON),
    PublicLoop("Gluon FP16 attention fav4, b1 h64 d128 s16320 non-causal", "bf16", 1241, 0.937,
               "ROCm/gfx950-gluon-tutorials kernels/attention/README.md section 8"),
)


# The Gluon fav4 attention loop of :data:`PUBLIC_LOOPS` as per-CU activity, from the tutorial's own
# counts (ROCm/gfx950-gluon-tutorials kernels/attention/README.md: section 8 B1 H64 D128 S16320 fp16,
# 4373 cycles per loop body of two 64-key tiles, 93.7 % MFMA busy per SIMD; section 4 one 8-wave
# workgroup per CU, two waves per SIMD, each wave reading a 128x64 fp16 K tile and a 64x128 V tile from
# LDS per tile; section 5 fav4's softmax per tile and wave: 16 v_max3, 32 v_fma, 32 v_exp, 32 v_add, 16
# v_cvt_pk = 128 VALU/TRANS ops, the rescale skipped). Per SIMD and loop body: MFMA 2 waves x 2048
# busy cycles; VALU 2 waves x 2 tiles x 128 ops x 4 busy cycles (this model's one pass per op, TRANS
# included); per CU: LDS 8 waves x 2 tiles x 32 KiB read + 2 x 32 KiB written, global 2 x 32 KiB.
_BODY = 4373
FAV4_ACTIVITY = Activity(mfma=4 * 4096 / _BODY, valu=4 * 2 * 2 * 128 * 4 / _BODY,
                         lds_bytes=(8 * 2 * 32768 + 2 * 32768) / _BODY, vmem_bytes=2 * 32768 / _BODY, cycles=_BODY)


def needed_energy_pj(f_mhz, params: Optional[dict] = None):
    """The energy per CU-cycle (pJ, at peak voltage) at which board power meets the limit at ``f_mhz``:
    the clock equation inverted (array-valued like ``f_mhz``)."""
    p = {k: float(v.value) for k, v in PARAMS.items()} | dict(params or {})
    f = np.asarray(f_mhz, dtype=float)
    v = p["v0"] + (1 - p["v0"]) * f / p["f_peak_mhz"]
    return (p["board_power_w"] - p["p_static_w"]) / (timing.param("cus") * f * 1e6 * v * v) * 1e12


def tied_valu_energy(e_mfma, params: Optional[dict] = None) -> np.ndarray:
    """``e_valu_pj`` tied to ``e_mfma_pj`` (array-valued) by the public loops: the VALU energy at which
    this model's clocks of a pure 16-bit MFMA loop and of the fav4 attention loop (:data:`FAV4_ACTIVITY`)
    stand in the ratio of the clocks their published throughput and ATT MFMA busy imply (the FP16
    GEMM's >= 1438 over fav4's >= 1263 MHz: 1.139; both lower bounds of the same kind, so their ratio
    is the firmer figure). Same tutorial, same board, Gaussian FP16 operands (``torch.randn`` in both
    benches), stated densities: what a 93.7 %-busy attention loop draws beyond its MFMA share, over
    a 98.75 %-busy GEMM's, is priced as VALU energy; the LDS and global-memory energies stay guesses,
    so this absorbs any error in them. Clipped at 0."""
    p = {k: float(v.value) for k, v in PARAMS.items()} | dict(params or {})
    e_mfma = np.asarray(e_mfma, dtype=float)
    tau = float(TOGGLE["bf16"].value)
    gemm, fav4 = PUBLIC_LOOPS[0], PUBLIC_LOOPS[2]
    f_pure = clock_for_energy(p["e_clock_pj"] + e_mfma * tau * timing.param("simds_per_cu"), p)
    need = needed_energy_pj(f_pure * fav4.clock_mhz / gemm.clock_mhz, p)
    a = FAV4_ACTIVITY
    rest = p["e_clock_pj"] + e_mfma * tau * a.mfma + p["e_lds_pj_per_byte"] * a.lds_bytes + p["e_vmem_pj_per_byte"] * a.vmem_bytes
    return np.maximum(0.0, (need - rest) / (p["tau_valu"] * a.valu))


def fp8_energy_ratio(params: Optional[dict] = None) -> float:
    """``fp8_mfma_energy_ratio`` from the two Gluon GEMMs of :data:`PUBLIC_LOOPS`: the r for which a
    pure MFMA loop (4 busy SIMDs, nothing else) with the stated toggle densities reaches the BF8
    GEMM's implied clock when a BF16 one reaches the FP16 GEMM's. Independent of ``e_mfma_pj``:
    r = (E(f_fp8) - e_clock) / tau_fp8 / ((E(f_bf16) - e_clock) / tau_bf16), with E(f) the energy
    per CU-cycle at which P(f) is the board limit."""
    p = {k: float(v.value) for k, v in PARAMS.items()} | dict(params or {})
    simds = timing.param("simds_per_cu")

    def mfma_pj(loop: PublicLoop) -> float:
        f = loop.clock_mhz
        v = p["v0"] + (1 - p["v0"]) * f / p["f_peak_mhz"]
        e_cycle = (p["board_power_w"] - p["p_static_w"]) / (timing.param("cus") * f * 1e6 * v * v) * 1e12
        return (e_cycle - p["e_clock_pj"]) / (float(TOGGLE[loop.dtype].value) * simds)

    bf16, fp8 = PUBLIC_LOOPS[0], PUBLIC_LOOPS[1]
    return mfma_pj(fp8) / mfma_pj(bf16)
