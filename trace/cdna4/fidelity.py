"""How close the CDNA4 cycle model (with its clock/power model) comes to published MI355X figures.

The calibration set (docs/cdna4-facts.md "Published MI355X attention throughput"): every row is a
published TFLOP/s figure (causal FLOPs halved) of a kernel whose real code the model runs. Each
row is simulated once at the peak clock; the clock/power model then predicts the sustained clock
from the simulated activity, and the prediction is ``TFLOP/s at peak x clock / peak`` (cycle counts
are clock-independent in the model). :func:`fit` fits the power model's two calibrated
coefficient (``e_mfma_pj``) on these rows only; nothing is tuned per row.

Assumptions stated per row: the write-up's 32K FP8 figures do not state batch and heads; b1 h32
(the README's headline shape) is assumed. Rows whose kernel cannot be resolved here (the FP8
AITER object needs a ROCm/aiter checkout: ``ZYFA_AITER_DIR``) are reported as skipped, with why.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

import numpy as np

from zyfa.gfx950 import timing
from zyfa.kernels import aiter
from zyfa.shapes import AttnShape
from zyfa.trace.cdna4 import power
from zyfa.trace.cdna4.estimate import EstimateConfig
from zyfa.trace.cdna4.tracer import simulate


@dataclass(frozen=True)
class Row:
    """One published figure. ``out_of_band``: why the row cannot be judged against a kernel-time
    model (it is printed, left out of the summary and of the fit); empty for in-band rows."""

    source: str
    kernel: str
    shape: AttnShape
    published: float  # TFLOP/s, causal FLOPs halved
    note: str = ""
    out_of_band: str = ""
    traced_mfma_busy: Optional[float] = None  # the source's thread-trace MFMA busy fraction, if it states one
    inputs: str = "gaussian"  # the input distribution the source's harness feeds (power.INPUTS)
    published_clock_mhz: Optional[float] = None  # a clock check (clock_checks): the source's clock, no throughput

    @property
    def label(self) -> str:
        s = self.shape
        heads = f"h{s.heads}" + (f"/kv{s.heads_k}" if s.heads_k != s.heads else "")
        d = f"d{s.headdim}" + (f"/{s.headdim_v}" if s.headdim_v != s.headdim else "")
        return f"b{s.batch} {heads} s{s.seqlen_q} {d} {'causal' if s.causal else 'non-causal'} {s.dtype}"


def _shape(b, h, hk, s, d=128, dv=None, causal=True, dtype="bf16") -> AttnShape:
    return AttnShape(batch=b, heads=h, heads_k=hk, seqlen_q=s, seqlen_k=s, headdim=d, headdim_v=dv or d,
                     dtype=dtype, causal=causal)


def _pair(source, nc_kernel, c_kernel, shape_args, nc, c, inputs="gaussian", **kw):
    return [Row(source, nc_kernel, _shape(*shape_args, causal=False, **kw), nc, inputs=inputs),
            Row(source, c_kernel, _shape(*shape_args, causal=True, **kw), c, inputs=inputs)]


# HipKittens times AITER through the Python aiter.flash_attn_func (HipKittens paper, Fig. 10), whose
# host-side overhead per call is public: ~200-230 us, ~83-100 us after a fix (ROCm/aiter issue #2129,
# PR #2161). How much of it lands inside HipKittens' timed region is not stated, so it is not modelled.
HOST_OVERHEAD_US = 83.0  # the public lower bound, per call
BAND = 0.15  # the acceptance band of the table


def _host_band(row: Row) -> Row:
    """Mark a row measured through a harness with public per-call host overhead out of band when
    that overhead's lower bound is more than :data:`BAND` of the row's published time: such a row
    cannot say whether the kernel model is within the band."""
    t_us = row.shape.flops / (row.published * 1e12) * 1e6
    if HOST_OVERHEAD_US / t_us <= BAND:
        return row
    why = (f"out of band: timed through aiter.flash_attn_func, whose >= {HOST_OVERHEAD_US:.0f} us host overhead per "
           f"call (ROCm/aiter #2129, PR #2161) is {100 * HOST_OVERHEAD_US / t_us:.0f}% of the published "
           f"{t_us:.0f} us")
    return dataclasses.replace(row, out_of_band=why)


def calibration_set() -> list[Row]:
    """The published MI355X figures (issue 17; docs/cdna4-facts.md)."""
    readme = "AITER op_tests/cpp/mha/README.md"
    pr = "AITER PR #3390"
    hk = "HipKittens benchmark JSONs (AITER column)"
    bf, bfc = "aiter:fwd_hd128_bf16", "aiter:fwd_hd128_bf16_causal"
    rows = []
    # both AITER sources ran its C++ harness (op_tests/cpp/mha/benchmark_mha_fwd.cpp; PR #3390's test
    # plan, PR #4874's README commands) without -init, i.e. Q/K/V uniform in [0, 1) (power.INPUTS)
    cpp = "uniform01"
    for shape, nc, c in (((4, 64, 8, 8192), 1407.6, 1319.2), ((1, 64, 8, 16384), 1437.6, 1392.5),
                         ((8, 64, 8, 4096), 1361.7, 1190.3), ((1, 32, 8, 1024), 613.5, 233.1)):
        rows += _pair(readme, bf, bfc, shape, nc, c, inputs=cpp)
    rows += _pair(pr, bf, bfc, (4, 64, 8, 8192), 1390, 1278, inputs=cpp)
    rows += _pair(pr, bf, bfc, (1, 16, 16, 16384), 1333, 1231, inputs=cpp)
    rows += _pair(pr, "aiter:fwd_hd192_hd128_bf16", "aiter:fwd_hd192_hd128_bf16_causal", (4, 64, 8, 8192),
                  1378, 1298, inputs=cpp, d=192, dv=128)
    # HipKittens' attention tests draw torch.randn (kernels/attn/*/test_python.py) and the write-up states
    # Gaussian inputs: the default "gaussian"
    for s, nc, c in ((1024, 828, 555), (2048, 1085, 876), (4096, 1211, 1069), (8192, 1259, 1173),
                     (16384, 1283, 1247)):
        rows += [_host_band(r) for r in _pair(hk, bf, bfc, (15 if s == 16384 else 16, 16, 16, s), nc, c)]
    note = "the write-up states no batch/heads: b1 h32 assumed"
    rows.append(Row("ZYFA write-up", "zyfa-fp8", _shape(1, 32, 32, 32768, dtype="fp8"), 2672, note))
    # the write-up's thread traces: AITER FP8's MFMA pipe idle 31.7% (docs/cdna4-facts.md)
    aiter_note = (f"{note}; the model gives this row's TFLOP/s and MFMA busy for every b x h that is a multiple of 4 "
                  "(its 64 b h equal workgroups fill 256 CUs in whole rounds) and 0.63x of it at b1 h5, the shape "
                  "of AITER's FP8 regression check (PR #3390), where a grid tail idles CUs "
                  "(benchmarks/results/cycle_model/fp8_clock_links.py)")
    rows.append(Row("ZYFA write-up", "aiter:fwd_hd128_fp8_causal", _shape(1, 32, 32, 32768, dtype="fp8"), 1944,
                    aiter_note, traced_mfma_busy=1 - 0.317))
    return rows


def clock_checks() -> list[Row]:
    """Published clocks without a throughput, held against the model's predicted clock and kept
    out of the error summary and the fit: the write-up's Mistral-7B layer (docs/cdna4-facts.md)."""
    note = ("the write-up's Mistral-7B attention layer (h32/kv8 d128, 16K tokens, real activations, steady clocks): "
            "b1 s16384 causal and the stated Gaussian inputs assumed (the activations are not available)")
    shape = _shape(1, 32, 8, 16384, dtype="fp8")
    why = "a clock check: the source states a clock, not a throughput"
    return [Row("ZYFA write-up", "zyfa-fp8", shape, math.nan, note, why, published_clock_mhz=1628.0),
            Row("ZYFA write-up", "aiter:fwd_hd128_fp8_causal", shape, math.nan, note, why, published_clock_mhz=2108.0)]


@dataclass
class Result:
    row: Row
    tflops_peak: float = math.nan  # simulated at the peak clock
    activity: Optional[power.Activity] = None
    clock: Optional[power.ClockPrediction] = None
    skipped: str = ""
    work: float = math.nan  # MFMA FLOPs simulated over the shape's FLOPs

    @property
    def predicted(self) -> float:
        if self.clock is None:
            return math.nan
        return self.tflops_peak * self.clock.mhz / power.param("f_peak_mhz")

    @property
    def ratio(self) -> float:
        return self.predicted / self.row.published

    @property
    def implied_clock(self) -> float:
        """The clock at which the model's cycles give the published figure (MHz): the two factors
        of a row's error apart. Above the predicted clock: the clock model is low (or the cycle
        model slow); below: the clock model is high or the cycle model fast."""
        return self.row.published / self.tflops_peak * power.param("f_peak_mhz")

    @property
    def traced_clock(self) -> float:
        """The clock the published figure and the source's thread-trace MFMA busy imply without
        the cycle model (:func:`power.traced_clock_mhz`, with the simulated MFMA work); NaN when
        the source states no busy figure."""
        if self.row.traced_mfma_busy is None or math.isnan(self.work):
            return math.nan
        return power.traced_clock_mhz(self.row.published, self.row.traced_mfma_busy, self.row.shape.dtype, self.work)

    @property
    def gap_us(self) -> float:
        """Published time minus predicted time in microseconds (the shape's FLOPs at each TFLOP/s):
        a per-call cost outside the kernel, e.g. a benchmark harness's host overhead inside its
        timed region, shows as a constant here rather than as a ratio."""
        flops = self.row.shape.flops
        return (flops / (self.row.published * 1e12) - flops / (self.predicted * 1e12)) * 1e6

    @property
    def error(self) -> float:
        """Signed relative error of the prediction (predicted / published - 1)."""
        return self.ratio - 1


def simulate_rows(rows: list[Row], progress: Optional[Callable] = None) -> list[Result]:
    """Run every row through the cycle model at the peak clock (once) and record its activity."""
    out = []
    config = EstimateConfig(clock_mhz=power.param("f_peak_mhz"))
    for row in (progress(rows) if progress else rows):
        try:
            trace, est = simulate(row.kernel, row.shape, config=config)
        except aiter.AiterUnavailable as exc:
            out.append(Result(row, skipped=f"kernel unavailable: {exc}"))
            continue
        except ValueError as exc:
            out.append(Result(row, skipped=str(exc).splitlines()[0][:200]))
            continue
        activity = power.activity(est.cu_result.records, est.cu_result.skipped_periods())
        out.append(Result(row, tflops_peak=est.tflops, activity=activity, work=est.flops_ratio))
    return out


def predict(results: list[Result], params: Optional[dict] = None) -> list[Result]:
    """Apply the clock/power model (``params`` override :data:`power.PARAMS` values)."""
    for r in results:
        if r.activity is not None:
            r.clock = power.predict_clock(r.activity, r.row.shape.dtype, params=params, inputs=r.row.inputs)
    return results


@dataclass
class Summary:
    n: int
    mean_abs: float
    max_abs: float
    within_15: int
    skipped: int
    params: dict = field(default_factory=dict)


def summarise(results: list[Result], in_band: bool = True) -> Summary:
    """Errors over the predicted rows (``in_band``: only those not marked out of band)."""
    errs = np.array([abs(r.error) for r in results if r.clock is not None and not (in_band and r.row.out_of_band)])
    return Summary(n=int(errs.size), mean_abs=float(errs.mean()) if errs.size else math.nan,
                   max_abs=float(errs.max()) if errs.size else math.nan,
                   within_15=int((errs <= BAND).sum()), skipped=sum(1 for r in results if r.clock is None))


def log_errors(rows: list[Result], grid: dict, params: Optional[dict] = None, inputs: bool = True) -> np.ndarray:
    """log(predicted / published) of ``rows`` (axis 1) at each point of ``grid`` (axis 0): ``grid`` maps
    coefficients whose energy term is linear (``e_mfma_pj``, ``e_valu_pj``, ...) to equal-length arrays
    of values; the others come from ``params`` / :data:`power.PARAMS`. The energy per CU-cycle is
    linear in each, so every row and grid point is one vectorised clock solve (power.clock_for_energy)
    instead of a bisection each. ``inputs=False`` takes every row as Gaussian (the model before
    Row.inputs, for comparisons)."""
    base = {k: float(v.value) for k, v in power.PARAMS.items()} | dict(params or {})
    zero = base | {name: 0.0 for name in grid}

    def energy(r: Result, coeffs: dict) -> float:
        toggle = power.stated_toggle(r.row.shape.dtype, r.row.inputs if inputs else "gaussian")
        return power.energy_per_cu_cycle(r.activity, toggle, coeffs, r.row.shape.dtype) * 1e12

    e0 = np.array([energy(r, zero) for r in rows])
    e_pj = np.broadcast_to(e0, (len(next(iter(grid.values()))), len(rows))).copy()
    for name, values in grid.items():
        slope = np.array([energy(r, zero | {name: 1.0}) for r in rows]) - e0
        e_pj += np.asarray(values, dtype=float)[:, None] * slope[None, :]
    mhz = power.clock_for_energy(e_pj, base)
    peak = np.array([r.tflops_peak for r in rows])
    published = np.array([r.row.published for r in rows])
    return np.log(peak * mhz / base["f_peak_mhz"] / published)


def fit(results: list[Result], e_mfma=(100.0, 8000.0), steps: int = 41, rounds: int = 3,
        params: Optional[dict] = None) -> dict:
    """Fit ``e_mfma_pj`` minimising the sum of squared log errors of the predicted TFLOP/s over
    every simulated in-band row (the calibration set less the out-of-band rows; nothing per row): a
    ``steps``-point grid over the range, then ``rounds - 1`` finer grids around the best point,
    rounded to 1 pJ. ``e_valu_pj`` is not free: at each grid point it is tied to ``e_mfma_pj`` by the
    public Gluon loops (:func:`power.tied_valu_energy`), and it is returned with it (rounded to 1 pJ).
    ``p_static_w`` stays the table's stated guess: the set cannot separate it from ``e_mfma_pj``
    (150 W or 250 W give tables within 0.5% of each other once ``e_mfma_pj`` is refitted).
    ``params``: other coefficients for the fit (e.g. the per-byte LDS and memory energies of a
    sensitivity sweep, benchmarks/power_sensitivity.py), in the tie and in every prediction."""
    rows = [r for r in results if r.activity is not None and not r.row.out_of_band]
    if not rows:
        raise ValueError("fit needs at least one simulated in-band row")
    lo, hi = e_mfma
    best = None
    for _ in range(rounds):
        grid = np.round(np.linspace(lo, hi, steps))
        valu = np.round(power.tied_valu_energy(grid, params))
        loss = (log_errors(rows, {"e_mfma_pj": grid, "e_valu_pj": valu}, params) ** 2).sum(axis=1)
        i = int(np.argmin(loss))  # the first of equal minima, as the former point-by-point scan
        if best is None or loss[i] < best[0]:
            best = (float(loss[i]), {"e_mfma_pj": float(grid[i]), "e_valu_pj": float(valu[i])})
        step = (hi - lo) / (steps - 1)
        lo, hi = max(e_mfma[0], best[1]["e_mfma_pj"] - 2 * step), min(e_mfma[1], best[1]["e_mfma_pj"] + 2 * step)
    return best[1]


@dataclass
class CrossValidation:
    """Leave-one-out errors: each in-band row predicted with ``e_mfma_pj`` fitted on the others."""

    errors: dict  # row label -> signed relative error of its held-out prediction
    fitted: dict  # row label -> the e_mfma_pj fitted without it

    @property
    def mean_abs(self) -> float:
        return float(np.mean(np.abs(list(self.errors.values()))))

    @property
    def max_abs(self) -> float:
        return float(np.max(np.abs(list(self.errors.values()))))

    @property
    def within_15(self) -> int:
        return int(sum(abs(e) <= BAND for e in self.errors.values()))


def leave_one_out(results: list[Result], **fit_kw) -> CrossValidation:
    """Leave-one-out cross-validation of the clock model's fit on the in-band rows: how well the
    model predicts a published figure it was not fitted on (the held-back figures' situation).
    ``fit_kw`` go to :func:`fit` (its ``params`` also to each held-out prediction)."""
    rows = [r for r in results if r.activity is not None and not r.row.out_of_band]
    if len(rows) < 2:
        raise ValueError("leave-one-out needs at least two simulated in-band rows")
    errors, fitted = {}, {}
    for i, held in enumerate(rows):
        params = fit(rows[:i] + rows[i + 1:], **fit_kw)
        key = f"{held.row.source}: {held.row.kernel} {held.row.label}"
        held_err = log_errors([held], {k: [v] for k, v in params.items()}, fit_kw.get("params"))
        errors[key] = math.expm1(float(held_err[0, 0]))
        fitted[key] = params["e_mfma_pj"]
    return CrossValidation(errors, fitted)


COLUMNS = ("source", "kernel", "shape", "published", "predicted", "ratio", "gap_us", "clock_mhz", "clock",
           "implied_clock_mhz", "at_peak", "band")


def table_rows(results: list[Result]) -> list[dict]:
    out = []
    for r in results:
        base = {"source": r.row.source, "kernel": r.row.kernel, "shape": r.row.label, "published": r.row.published}
        band = r.row.out_of_band or "in band"
        if r.clock is None:
            out.append(base | {"predicted": None, "ratio": None, "gap_us": None, "clock_mhz": None,
                               "clock": f"skipped: {r.skipped}", "implied_clock_mhz": None, "at_peak": None,
                               "band": band})
        else:
            out.append(base | {"predicted": r.predicted, "ratio": r.ratio, "gap_us": r.gap_us, "clock_mhz": r.clock.mhz,
                               "clock": r.clock.label, "implied_clock_mhz": r.implied_clock, "at_peak": r.tflops_peak,
                               "band": band})
    return out


def _notes(results: list[Result]) -> dict:
    """Each row note once, with the rows (kernel and shape) it applies to."""
    out = {}
    for r in results:
        if r.row.note:
            out.setdefault(r.row.note, []).append(f"{r.row.kernel} {r.row.label}")
    return out


def render(results: list[Result], fmt: str = "text", params: Optional[dict] = None,
           checks: Iterable[Result] = ()) -> str:
    """The fidelity table as ``text``, ``markdown`` or ``csv`` (SIMULATED predictions); ``params``:
    the clock-model coefficients the results were predicted with (``--fit``), for the footer's
    pure-MFMA-loop clock; ``checks``: predicted :func:`clock_checks`, one footer line each (text
    and markdown)."""
    rows = table_rows(results)
    s = summarise(results)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=COLUMNS)
        w.writeheader()
        for row in rows:
            w.writerow(row)
        return buf.getvalue()
    num = lambda v, f="{:.0f}": "-" if v is None else f.format(v)
    clock_of = lambda row: row["clock"] if row["clock_mhz"] is None else f"{row['clock_mhz']:.0f} MHz ({row['clock']})"
    mark = lambda row: "" if row["band"] == "in band" else " *"
    lines = []
    if fmt == "markdown":
        lines.append("| source | kernel | shape | published TFLOP/s | predicted TFLOP/s | ratio | time gap (us) | "
                     "predicted clock | implied clock | at 2400 MHz | band |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for row in rows:
            lines.append(f"| {row['source']} | {row['kernel']} | {row['shape']} | {num(row['published'], '{:.1f}')} | "
                         f"{num(row['predicted'])} | {num(row['ratio'], '{:.2f}')} | {num(row['gap_us'], '{:+.1f}')} | "
                         f"{clock_of(row)} | {num(row['implied_clock_mhz'], '{:.0f} MHz')} | {num(row['at_peak'])} | "
                         f"{row['band']} |")
    elif fmt == "text":
        lines.append(f"{'kernel':34s} {'shape':38s} {'published':>9s} {'predicted':>9s} {'ratio':>6s} {'gap us':>8s} "
                     f"{'implied':>8s}  clock")
        for row in rows:
            lines.append(f"{row['kernel']:34s} {row['shape']:38s} {num(row['published'], '{:.1f}'):>9s} "
                         f"{num(row['predicted']):>9s} {num(row['ratio'], '{:.2f}') + mark(row):>6s} "
                         f"{num(row['gap_us'], '{:+.1f}'):>8s} {num(row['implied_clock_mhz'], '{:.0f}'):>8s}  "
                         f"{clock_of(row)}")
        for why in dict.fromkeys(row["band"].split(" is ")[0] for row in rows if row["band"] != "in band"):
            lines.append(f"  * {why}")
    else:
        raise ValueError(f"format must be 'text', 'markdown' or 'csv', got {fmt!r}")
    every = summarise(results, in_band=False)
    lines.append("")
    lines.append(f"CDNA4 cycle model + clock/power model (SIMULATED) vs published MI355X figures: {s.n} in-band rows, "
                 f"mean |error| {100 * s.mean_abs:.1f}%, max |error| {100 * s.max_abs:.1f}%, "
                 f"{s.within_15}/{s.n} within 15%" + (f"; {s.skipped} skipped" if s.skipped else "")
                 + (f" (all {every.n} rows: mean {100 * every.mean_abs:.1f}%, max {100 * every.max_abs:.1f}%, "
                    f"{every.within_15}/{every.n} within 15%)" if every.n != s.n else ""))
    predicted = [r for r in results if r.clock is not None and not r.row.out_of_band]
    if len(predicted) >= 2:
        cv = leave_one_out(predicted)
        lines.append(f"leave-one-out (e_mfma_pj refitted without each in-band row, that row predicted): mean |error| "
                     f"{100 * cv.mean_abs:.1f}%, max |error| {100 * cv.max_abs:.1f}%, {cv.within_15}/{len(cv.errors)} "
                     f"within 15%; e_mfma_pj {min(cv.fitted.values()):.0f}-{max(cv.fitted.values()):.0f} pJ")
    sources = {}
    for r in results:
        sources.setdefault(r.row.inputs, []).append(r.row.source)
    lines.append("toggle densities: stated input distribution per source: " + "; ".join(
        f"{power.INPUTS[k]}: {', '.join(dict.fromkeys(v))}" for k, v in sources.items())
        + "; e_mfma_pj fitted on the in-band rows (benchmarks/fidelity.py --fit); implied clock: the clock at "
        "which the model's cycles give the published figure")
    pure = {dtype: power.pure_mfma_clock(dtype, params=params).mhz for dtype in ("bf16", "fp8")}
    gemm = {loop.dtype: loop for loop in power.PUBLIC_LOOPS if "GEMM" in loop.name}
    lines.append(f"pure MFMA loop (every SIMD's MFMA pipe busy, no VALU) in this clock model: {pure['bf16']:.0f} MHz "
                 f"(bf16) / {pure['fp8']:.0f} MHz (fp8); public MI355X loops imply >= {gemm['bf16'].clock_mhz:.0f} MHz "
                 f"({gemm['bf16'].name}, {100 * gemm['bf16'].mfma_busy:.2f}% MFMA busy) / >= {gemm['fp8'].clock_mhz:.0f} MHz "
                 f"({gemm['fp8'].name}, {100 * gemm['fp8'].mfma_busy:.2f}%; ATT thread traces, {gemm['fp8'].source})")
    for note, labels in _notes(results).items():
        lines.append(f"note ({', '.join(labels)}): {note}")
    for c in checks:
        head = f"clock check, {c.row.source}: {c.row.kernel} {c.row.label}"
        if c.clock is None:
            lines.append(f"{head}: skipped: {c.skipped}")
            continue
        lines.append(f"{head}: predicted {c.clock.mhz:.0f} MHz vs published {c.row.published_clock_mhz:.0f} MHz "
                     f"({c.clock.mhz / c.row.published_clock_mhz:.2f}x)")
    for note in dict.fromkeys(c.row.note for c in checks if c.row.note):
        lines.append(f"  clock checks: {note}")
    fav4 = power.PUBLIC_LOOPS[2]
    lines.append(f"public attention loop ({fav4.name}, {100 * fav4.mfma_busy:.1f}% MFMA busy; activity from the tutorial's "
                 f"instruction counts, power.FAV4_ACTIVITY): "
                 f"{power.predict_clock(power.FAV4_ACTIVITY, 'bf16', params=params).mhz:.0f} MHz in this clock model, "
                 f"its published figures imply >= {fav4.clock_mhz:.0f} MHz; e_valu_pj is tied to e_mfma_pj so that the "
                 f"pure 16-bit loop / this loop clock ratio is the public {gemm['bf16'].clock_mhz / fav4.clock_mhz:.3f}")
    simds = timing.param("simds_per_cu")
    for r in results:
        if r.clock is not None and not math.isnan(r.traced_clock):
            lines.append(
                f"{r.row.kernel} {r.row.label}: the published {r.row.published:.0f} TFLOP/s at the thread trace's "
                f"{100 * r.row.traced_mfma_busy:.1f}% MFMA busy (MFMA work {r.work:.3f}x the FLOPs, dense peak "
                f"{power.DENSE_PEAK_TFLOPS[r.row.shape.dtype].value:.0f} TFLOP/s at {power.param('f_peak_mhz'):.0f} MHz) "
                f"imply {r.traced_clock:.0f} MHz without the cycle model; the model's cycles "
                f"({100 * r.activity.mfma / simds:.1f}% MFMA busy over the run) imply {r.implied_clock:.0f} MHz and it "
                f"predicts {r.clock.mhz:.0f} MHz: if the trace's busy spans the run, the predicted clock is "
                f"{r.clock.mhz / r.traced_clock:.2f}x the real one and the model's cycles {r.implied_clock / r.traced_clock:.2f}x "
                f"the real ones")
    return "\n".join(lines)
