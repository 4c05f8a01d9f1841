"""Run an attention kernel through a tracer and summarise its schedule.

Default tracer: the CDNA4 (gfx950) cycle model, which runs the kernel's real gfx950 code on
any CPU. Its numbers are SIMULATED, not measured: the summary says so and says what was
simulated in detail, what was extrapolated and what was interpolated. TFLOP/s are given at the
clock the clock/power model predicts (power-limited or peak; --clock forces one) and at 2400 MHz.

Kernels: names from the kernel registry, aiter:NAME (AITER's gfx950 forward code objects: from an
installed aiter, else the folder named by --aiter-dir / ZYFA_AITER_DIR (a ROCm/aiter checkout: the
only source of the FP8 and v4 objects), else the amd-aiter wheel (BF16 only), downloaded once into
~/.cache/zyfa/aiter) or a .co/.hsaco/.s path.

  zyfa-trace kernel --shape 32k            # zyfa-fp8 beside its AITER baseline, and the ratio
  zyfa-trace kernel --kernel zyfa-fp8 --compare aiter:fwd_hd128_fp8_causal --aiter-dir ~/src/aiter
  zyfa-trace kernel --kernel aiter:fwd_hd128_bf16_causal --shape 8k --batch 4 --heads 64 -o out/
  zyfa-trace kernel --list
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from fractions import Fraction
from pathlib import Path

from tqdm import tqdm

from zyfa.analyzer import summary
from zyfa.kernels import aiter, baseline, gfx950, registry
from zyfa.kernels.gfx950.counts import tile_counts
from zyfa.kernels.gfx950.build import build
from zyfa.shapes import parse_shape
from zyfa.trace import proton, rocprof
from zyfa.trace.cdna4 import power, tracer
from zyfa.trace.cdna4.estimate import EstimateConfig
from zyfa.trace.cdna4.launch import prepare
from zyfa.trace.cdna4.sim import PATTERN_PERIOD_MAX
from zyfa.trace.errors import TracerUnavailable
from zyfa.trace.safeio import check_folder, check_output
from zyfa.trace.schema import Trace

BACKENDS = ("model", "proton", "rocprof")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shape", default="32k", help="sequence length (q and k), e.g. 32k or 4096 (default 32k)")
    p.add_argument("--kernel", default=None,
                   help="kernel name, aiter:NAME or a code-object/.s path (see --list); without it (and without "
                        "--compare) the default pairs run: zyfa-fp8 beside AITER's real FP8 causal forward when "
                        "resolvable, else zyfa-bf16 vs AITER's real BF16 and zyfa-fp8 vs aiter-like-fp8")
    p.add_argument("--compare", nargs="?", const="default", default=None, metavar="KERNEL",
                   help="also run KERNEL on the same sizes and print the TFLOP/s ratio (no value: the kernel's "
                        "default AITER baseline)")
    p.add_argument("--batch", type=int, default=None, help="batch size (default 1)")
    p.add_argument("--heads", type=int, default=None, help="query heads (default 32)")
    p.add_argument("--heads-k", type=int, default=None, help="KV heads (GQA); default = --heads")
    p.add_argument("--headdim", type=int, default=None, help="Q/K head dim (default 128)")
    p.add_argument("--headdim-v", type=int, default=None,
                   help="V head dim; default = --headdim (MLA shape: --headdim 192 --headdim-v 128)")
    p.add_argument("--dtype", choices=("fp8", "bf16"), default=None, help="default: the kernel's own dtype")
    p.add_argument("--clock", type=float, default=None,
                   help="force the clock in MHz (default: the clock/power model's predicted sustained clock)")
    p.add_argument("--samples", type=int, default=3, help="grid-x values simulated in detail (default 3)")
    p.add_argument("--unknown-branch", choices=("not-taken", "taken", "emulated"), default="not-taken",
                   help="how branches on data the model does not compute go (default not-taken: guarded code runs; "
                        "emulated: each as the functional emulator saw it on b1 h1 s<=1024 Gaussian inputs of the "
                        "same kernel, the rest not-taken)")
    p.add_argument("--rescale-rate", type=_rate, default=None, metavar="R",
                   help="gfx950 kernels: their lazy O rescale branches (.L_rescale*) jump on a fraction R in [0, 1] "
                        "of each wave's executions (deterministic pattern), a decimal or p/q; 0: never taken (the "
                        "kernel's stated steady state). Default: the kernel's measured rate where one is measured "
                        "(kernels.gfx950.MEASURED_RESCALE_RATES: zyfa-fp8 and zyfa-fp8-valu-rowsum, causal 8K and 32K), "
                        "else never; "
                        "loops extrapolate by periods of its pattern (<= %d executions) or, for a longer one "
                        "(0.0776 = 97/1250), of its nearest short pattern (1/13) while the rate's own jumps repeat it; "
                        "measured rates: benchmarks/v2_rescale_rate.py (README: the rates per kernel and input)"
                        % PATTERN_PERIOD_MAX)
    p.add_argument("-o", "--out", default=None, help="directory for the trace (<kernel>.parquet + .json)")
    p.add_argument("--force", action="store_true", help="overwrite an existing trace of this kernel in -o DIR")
    p.add_argument("--list", action="store_true", help="list the kernels --kernel accepts and exit")
    p.add_argument("--backend", choices=BACKENDS, default="model",
                   help="model: CDNA4 cycle model (default); proton / rocprof: hardware tracers (need a GPU)")
    p.add_argument("--emulate", action="store_true", help="also run the functional emulator on the kernel")
    p.add_argument("--aiter-dir", default=None,
                   help="folder with AITER's hsa/gfx950/fmha_v3_fwd and fmha_v4_fwd (e.g. a ROCm/aiter checkout); "
                        "default: $ZYFA_AITER_DIR")


def _rate(text: str) -> Fraction:
    """``--rescale-rate``: a decimal or ``p/q``, kept exact (its denominator is the pattern's length)."""
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"wants a number in [0, 1] or p/q, got {text!r}") from None


def _rate_text(rate: Fraction) -> str:
    """How the notes state a ``--rescale-rate``: the number given, and a short pattern as such."""
    if rate.denominator <= PATTERN_PERIOD_MAX and rate not in (0, 1):
        return f"{rate.numerator}/{rate.denominator} = {100 * float(rate):.2f} %, a pattern of {rate.denominator} executions"
    return f"{float(rate):g}" + (" (never taken)" if rate == 0 else "")


def _rescale_rate(args: argparse.Namespace, kernel: str, shape) -> tuple[Fraction | None, str]:
    """(rate, why) at which the lazy O rescale branches of ``kernel`` are simulated: --rescale-rate,
    else the kernel's measured rate at this shape (:func:`tracer.measured_rescale`, the decimal
    kept exact), else ``(None, "")``: the kernel's stated never, with :func:`_rescale_caveat`'s line."""
    if args.rescale_rate is not None:
        return args.rescale_rate, f"at rate {_rate_text(args.rescale_rate)} (--rescale-rate)"
    measured = tracer.measured_rescale(kernel, shape)
    if measured is None:
        return None, ""
    rate, source = measured
    return rate, (f"at their measured rate at this shape, {100 * float(rate):.2f} % of executions ({source} "
                  "inputs, kernels.gfx950.MEASURED_RESCALE_RATES; --rescale-rate 0: never taken)")


def _shape(args, kernel: str):
    """The problem: the command line's sizes, the kernel's own dtype unless --dtype is given, and
    its mask when compiled in (facts of its spec; a bare code-object file has none)."""
    spec = registry.spec_of(kernel)
    shape = parse_shape(args.shape, batch=args.batch, heads=args.heads, heads_k=args.heads_k, headdim=args.headdim,
                        headdim_v=args.headdim_v, dtype=args.dtype or (spec.dtype if spec is not None else None))
    return shape if spec is None else spec.fit(shape, dtype=False)


def _summary_values(trace) -> tuple[dict, str]:
    return summary(trace, window="steady"), "analyzer, steady-state window"


def _pct(value) -> str:
    return "n/a" if value is None else f"{100.0 * value:.1f} %"


def _num(value, fmt="{:.0f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def run(args: argparse.Namespace) -> int:
    aiter.use_dir(args.aiter_dir)  # a bad --aiter-dir / $ZYFA_AITER_DIR: one error now, not skipped rows
    if args.list:
        for name, description in registry.list_kernels():
            print(f"{name:36s} {description}")
        return 0
    if args.samples < 1:
        raise ValueError(f"--samples must be >= 1, got {args.samples}")
    if args.clock is not None and not 0 < args.clock < 10000:
        raise ValueError(f"--clock must be in (0, 10000) MHz, got {args.clock}")
    if args.rescale_rate is not None and not 0 <= args.rescale_rate <= 1:
        raise ValueError(f"--rescale-rate must be in [0, 1], got {args.rescale_rate}")
    if args.kernel is None and args.compare is None and args.backend == "model" and not (args.emulate or args.out):
        return _run_pairs(args)  # the headline: our kernel beside its AITER baseline
    kernel = args.kernel or registry.DEFAULT_KERNEL
    shape = _shape(args, kernel)

    if args.backend != "model":
        return _hardware_backend(args, kernel, shape)
    if args.out:
        _check_out(args, kernel, shape)  # before the simulation, not after it
    other = None
    if args.compare is not None:  # an unknown --compare kernel fails before the first simulation too
        other = args.compare if args.compare != "default" else _default_baseline(kernel)
        registry.resolve(other, _shape(args, other))
    summary_ = _summarise(args, kernel, shape, save=True)
    _print_summary(summary_)
    tflops = summary_["tflops"]
    if other is not None:
        other_tflops = _simulate_and_print(args, other, _shape(args, other), save=False)
        print(f"ratio {kernel} / {other}: {tflops / other_tflops:.2f}x (simulated, each at its predicted clock)")
    if args.emulate:
        _emulate(kernel, shape, summary_["activity"])
    return 0


def _static_counts(kernel: str, shape):
    """Static per-tile counts of a gfx950 generator kernel (None for other kernels); the build is
    the one the simulation just made (``build`` is cached per config: generating again took ~10%
    of the headline's CPU)."""
    if kernel not in gfx950.VARIANTS:
        return None
    return tile_counts(build(gfx950.config_for(kernel, shape)).generated)


def _rescale_pcs(kernel: str, shape) -> list[int]:
    """The pcs of ``kernel``'s lazy O rescale branches (.L_rescale*) on ``shape``: for a gfx950
    generator kernel from the build the simulation makes (``build`` is cached per config; a second
    ``prepare`` would parse the program again, ~0.2 s), else from its launch's build meta."""
    if kernel in gfx950.VARIANTS:
        built = build(gfx950.config_for(kernel, shape))
        return [int(b["pc"]) for b in gfx950.rescale_branches(gfx950.branch_assumptions(built))]
    return list(prepare(kernel, shape).rescale_rates(0))


def _rescale_caveat(kernel: str, shape) -> str | None:
    """The line saying that a gfx950 generator kernel's lazy O rescale branches were simulated as
    never taken (the stated steady state): only where neither --rescale-rate nor a measured rate
    at this shape set one (:func:`_rescale_rate`), so it gives the measured range of other shapes."""
    if kernel not in gfx950.VARIANTS:
        return None
    n = len(_rescale_pcs(kernel, shape))
    if not n:
        return None
    return (f"caveat: its {n} lazy O rescale branch(es) simulated as never taken, which is optimistic: real "
            "inputs take them on 5-44 % of executions (README 'Lazy O rescale at its measured rate'); "
            "--rescale-rate R simulates a rate")


def _default_baseline(kernel: str) -> str:
    pairs, why = baseline.default_pairs()
    for pair in pairs:
        if pair.ours == kernel:
            print(f"note: --compare baseline {pair.baseline}: {pair.label}")
            return pair.baseline
    raise ValueError(f"--compare: no default baseline for {kernel!r} ({why}); name one: --compare KERNEL")


def submission_order(n_pairs: int) -> list[int]:
    """The order the default pairs' jobs (ours0, baseline0, ours1, ...) go to the worker pool:
    our kernels first. The pool hands jobs out in that order, and handing out the longer ones
    first finishes sooner; ours take longer to simulate than their baselines (CPU s, 2-core box,
    2026-12-03: zyfa-fp8 1.9 vs aiter-like-fp8 0.65, zyfa-bf16 1.0 vs AITER's BF16 0.7), which
    brings the busiest of two workers from 2.6 to 2.4 s."""
    return [2 * i for i in range(n_pairs)] + [2 * i + 1 for i in range(n_pairs)]


def _run_pairs(args: argparse.Namespace) -> int:
    """``zyfa-trace kernel`` with no --kernel: each default pair (zyfa.kernels.baseline) and its
    ratio. The kernels are simulated in parallel worker processes (one per CPU, at most one per
    kernel): the headline's wall time is the slower kernel's, not the sum."""
    pairs, why = baseline.default_pairs()
    print(f"note: {why}")
    jobs = [(k, _shape(args, k)) for pair in pairs for k in (pair.ours, pair.baseline)]
    workers = max(1, min(len(jobs), os.cpu_count() or 1))
    futures = [None] * len(jobs)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        for i in submission_order(len(pairs)):
            futures[i] = pool.submit(_summarise, args, *jobs[i], False)
        done = [f.result() for f in futures]
    for i, pair in enumerate(pairs):
        ours, theirs = done[2 * i], done[2 * i + 1]
        _print_summary(ours, brief=True)
        _print_summary(theirs, brief=True, label=pair.label)
        print(f"=> {pair.ours} / {pair.baseline}: {ours['tflops'] / theirs['tflops']:.2f}x  (simulated TFLOP/s, each "
              f"at its predicted clock; baseline: {pair.label})\n")
    return 0


def _simulate_and_print(args, kernel: str, shape, save: bool) -> float:
    """Simulate ``kernel`` on ``shape``, print its summary, return its TFLOP/s at the printed clock."""
    summary_ = _summarise(args, kernel, shape, save)
    _print_summary(summary_)
    return summary_["tflops"]


def _summarise(args, kernel: str, shape, save: bool) -> dict:
    """Simulate and reduce to what the summary prints (small: it crosses process boundaries)."""
    measured, branch_text, rescale_text = {}, None, None
    if args.unknown_branch == "emulated":
        measured, branch_text = _emulated_branches(kernel, shape)
    rate, why = _rescale_rate(args, kernel, shape)
    if rate is not None:
        n = len(_rescale_pcs(kernel, shape))
        rescale_text = (f"{n} lazy O rescale branches {why}" if n else
                        "--rescale-rate: this kernel states no lazy O rescale branch (.L_rescale*): not applied")
    config = EstimateConfig(samples=args.samples,
                            unknown_branch="not-taken" if args.unknown_branch == "emulated" else args.unknown_branch,
                            branch_policy=tuple(sorted(measured.items())),
                            **({"clock_mhz": args.clock} if args.clock else {}))
    progress = lambda xs: tqdm(xs, desc="cycle model: workgroups", unit="wg", leave=False, disable=None)
    trace, est = tracer.simulate(kernel, shape, config=config, progress=progress, rescale_rate=rate)
    saved = tracer.save(trace, args.out) if save and args.out else None
    values, origin = _summary_values(trace)
    act = power.activity(est.cu_result.records, est.cu_result.skipped_periods())
    clock = power.predict_clock(act, shape.dtype)
    if args.clock:
        mhz, clock_text = est.clock_mhz, f"clock forced to {est.clock_mhz:.0f} MHz (the power model: {clock})"
    else:
        mhz, clock_text = clock.mhz, str(clock)
    seconds = est.cycles / (mhz * 1e6)
    return {"kernel": trace.meta.kernel, "shape": shape, "grid": tuple(trace.meta.grid),
            "workgroup_size": trace.meta.workgroup_size, "occupancy": est.occupancy, "values": values,
            "origin": origin, "mhz": mhz, "clock_text": clock_text, "seconds": seconds, "cycles": est.cycles,
            "tflops": shape.tflops(seconds), "tflops_peak": est.tflops * 2400 / est.clock_mhz,
            "notes": est.notes + ([branch_text] if branch_text else []),
            "saved": saved, "wall": est.wall_seconds, "simulated": est.simulated_instructions,
            "extrapolated": est.extrapolated_instructions, "static": _static_counts(kernel, shape),
            "rescale": rescale_text, "caveat": _rescale_caveat(kernel, shape) if rate is None else None,
            "activity": act}


def _print_summary(r: dict, brief: bool = False, label: str = "") -> None:
    values, shape = r["values"], r["shape"]
    print(f"CDNA4 cycle model (simulated, not measured) — {r['kernel']} on {shape}, gfx950"
          + (f"  [{label}]" if label else ""))
    print(f"  grid {r['grid']} x {r['workgroup_size']} threads, {r['occupancy']} workgroup(s)/CU")
    print(f"  MFMA busy            {_pct(values.get('mfma_busy'))}   ({r['origin']})")
    if not brief:
        print(f"  ping-pong overlap    {_pct(values.get('pingpong_overlap'))}")
        print(f"  VALU cycles/block    {_num(values.get('valu_cycles_per_block'))}")
        static = r["static"]
        if static is not None:
            print(f"  static per 32x128 tile (from the generated code): softmax {static.valu_cycles} VALU + "
                  f"{static.trans_cycles} TRANS cycles, mask {static.mask_cycles} (diagonal tiles), "
                  f"{static.mfma} MFMAs ({static.mfma_rowsum} row-sum)"
                  + (f", row sum on the VALU {static.rowsum_valu_cycles} cycles" if static.rowsum_valu_cycles else ""))
    print(f"  predicted time       {r['seconds'] * 1e3:.3f} ms  ({r['cycles']} cycles at {r['mhz']:.0f} MHz)")
    print(f"  predicted TFLOP/s    {r['tflops']:.0f}  {r['clock_text']}; {r['tflops_peak']:.0f} at "
          f"2400 MHz (simulated; FLOPs = {shape.flops:.4g}, causal halved)")
    for note in r["notes"] if not brief else r["notes"][:1]:
        print(f"  - {note}")
    if r["saved"] is not None:
        print(f"  trace: {r['saved']}")
    for line in (r["rescale"], r["caveat"]):  # the brief summary too: they say how a zyfa kernel's rescale ran
        if line:
            print(f"  - {line}")
    print(f"  wall time {r['wall']:.2f} s; {r['simulated']} instructions simulated, {r['extrapolated']} extrapolated")


def _check_out(args: argparse.Namespace, kernel: str, shape) -> None:
    """``-o DIR`` must be a folder (or not exist yet) and the trace it would hold must not exist
    unless --force; a kernel file given as input is never overwritten."""
    check_folder(args.out, flag="-o")
    stem = tracer.output_stem(registry.resolve(kernel, shape).name, args.out)
    inputs = [kernel] if Path(kernel).is_file() else []
    for path in Trace.files(stem):
        check_output(path, force=args.force, inputs=inputs, within=args.out)


def _hardware_backend(args, kernel, shape) -> int:
    module = {"proton": proton, "rocprof": rocprof}[args.backend]
    try:
        trace = module.run_kernel_trace(kernel, shape, args.out or "zyfa-trace-out")
    except TracerUnavailable as exc:
        raise TracerUnavailable(f"{args.backend} tracer unavailable: {exc}") from exc
    print(f"{args.backend} trace of {kernel} on {shape}: {len(trace)} records ({trace.meta.label})")
    return 0


def _emulated_branches(kernel: str, shape) -> tuple[dict, str]:
    # lazy: the emulator imports torch (~1 s on the 2-core box, measured), which only this policy needs
    from zyfa.trace.emu.branches import measured_branch_policy

    return measured_branch_policy(kernel, shape, lambda k, s: prepare(k, s).program.instructions)


def _emulate(kernel: str, shape, activity) -> None:
    # lazy: the emulator imports torch (~1 s on the 2-core box, measured), which only --emulate needs
    from zyfa.trace.cdna4.toggle import attention_toggles
    from zyfa.trace.emu import emulate_kernel

    result = emulate_kernel(kernel, shape)
    print(f"functional emulator: {result}")
    inputs = result.inputs
    descale = {name: float(inputs[f"{name}_descale"][0, 0]) for name in "qk" if f"{name}_descale" in inputs}
    toggles = attention_toggles(inputs["q"], inputs["k"], inputs["v"], shape.dtype,
                                q_descale=descale.get("q", 1.0), k_descale=descale.get("k", 1.0))
    clock = power.predict_clock(activity, shape.dtype, toggle=toggles["mfma"])
    stated = power.TOGGLE[shape.dtype].value
    print(f"  operand toggle density of the emulated data {toggles['mfma']:.3f} (Q {toggles['q']:.3f}, K {toggles['k']:.3f}, "
          f"P {toggles['p']:.3f}, V {toggles['v']:.3f}; stated distribution {stated:.3f}): {clock} (simulated)")
