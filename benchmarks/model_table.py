#!/usr/bin/env python3
"""The CDNA4 cycle model's side-by-side table (SIMULATED, not measured): every registered gfx950
kernel and AITER's real BF16 causal forward on one shape, with the analyzer's steady-state
metrics and the model's whole-kernel prediction. Prints a markdown table. For the gfx950
generator kernels also the static per-tile softmax VALU cycles (``counts.tile_counts``: the
generated code, the model's timing table) and the MFMA work over the shape's FLOPs without the
rounded row-sum MFMAs (one per 64-key block by design: the whole-grid ratio times
``(MFMAs - row-sum MFMAs) / MFMAs`` per tile).

    python3 benchmarks/model_table.py [--shape 32k] [--heads 32] [--clock MHZ] [--rows A,B,..]

Below the table: the power model's energy per 32x128 tile (``power.energy_terms``: MFMA, VALU by op
class and the lazy rescale's fix-up path, LDS, VMEM, clock tree) of zyfa-fp8 beside the FP8 baseline.

TFLOP/s are given at the clock/power model's predicted clock (``--clock`` forces one) and at the
2400 MHz peak. AITER's BF16 object comes from the amd-aiter wheel (downloaded once into
~/.cache/zyfa/aiter); its real FP8 causal forward only from a ROCm/aiter checkout
(``ZYFA_AITER_DIR``) or an aiter built from source: without it that row says so, and the
comparison below the table falls back to ``aiter-like-fp8`` (our reconstruction, labelled).
"""

import argparse
import time
from collections import Counter
from dataclasses import replace

from zyfa.analyzer import summary
from zyfa.gfx950 import timing
from zyfa.gfx950.isa import mfma_flops
from zyfa.kernels import gfx950
from zyfa.kernels.gfx950.counts import tile_counts
from zyfa.kernels.gfx950.generator import generate
from zyfa.kernels.gfx950.schedule import BLOCK_M, BLOCK_N  # one wave's tile: 32 queries x 128 keys
from zyfa.kernels.baseline import default_pairs
from zyfa.kernels.registry import kernels, spec_of
from zyfa.shapes import parse_shape
from zyfa.trace.cdna4 import power
from zyfa.trace.cdna4.estimate import EstimateConfig
from zyfa.trace.cdna4.tracer import simulate

V4 = "aiter:fmha_v4_fwd/fwd_hd128_fp8"  # AITER v4 FP8 forward: non-causal only
ROWS = ("zyfa-fp8", "zyfa-fp8-v1", "zyfa-fp8-valu-rowsum", "zyfa-fp8-exact", "aiter-like-fp8",
        "aiter:fwd_hd128_fp8_causal", "zyfa-bf16", "aiter:fwd_hd128_bf16_causal")


FP8_ABLATIONS = ("zyfa-fp8-v1", "zyfa-fp8-valu-rowsum")  # also compared with the FP8 baselines


def _ratios(ours: dict, base: dict) -> str:
    """The ratio at the predicted clocks split into the schedule's share (both at 2400 MHz: the
    cycle ratio) and the clock model's (predicted clock ratio); their product is the first."""
    both = ours["tflops"] / base["tflops"]
    cycles = ours["tflops_2400"] / base["tflops_2400"]
    return (f"{both:.3f}x at the predicted clocks = {cycles:.3f}x in cycles (both at 2400 MHz) x "
            f"{ours['mhz'] / base['mhz']:.3f} clock ratio ({ours['mhz']:.0f} / {base['mhz']:.0f} MHz)")


def mfma_cycles(shape, work: float) -> float:
    """Kernel cycles with ``work`` x the shape's FLOPs on every SIMD's MFMA pipe back to back (the
    32x32x64 FP8 MFMA's FLOPs per cycle on all CUs, no idle, no tail). Also used by
    benchmarks/ratio_bound.py."""
    opcode = "v_mfma_f32_32x32x64_f8f6f4"
    per_cycle = mfma_flops(opcode) / timing.op_class(opcode).cycles * timing.param("simds_per_cu") * timing.param("cus")
    return shape.flops * work / per_cycle


def _mfma_bound(shape, work: float) -> dict:
    """The cycle model's ceiling for any schedule: :func:`mfma_cycles`, at 2400 MHz and at the
    power model's clock for a pure MFMA loop (:func:`power.pure_mfma_clock`)."""
    cycles = mfma_cycles(shape, work)
    mhz = power.pure_mfma_clock(shape.dtype).mhz
    return {"tflops": shape.tflops(cycles / (mhz * 1e6)), "tflops_2400": shape.tflops(cycles / 2.4e9), "mhz": mhz}


def simulate_row(name: str, shape, forced_clock=None, rescale_rate=None, label=None):
    """Simulate ``name`` on ``shape`` (fitted to the kernel's spec): a dict with the markdown row
    (first column ``label``, default ``name``), the TFLOP/s at the predicted (or forced) clock and
    at 2400 MHz, the clock, the whole-run ``power.Activity``, the cycles, the energy per tile and
    the cycle model's ``Estimate`` (``estimate``: its representative CU's records); or the one-line
    reason it is unavailable. ``rescale_rate``: the kernel's lazy O rescale branches jump at that
    rate (else never). Also used by benchmarks/power_sensitivity.py and benchmarks/ratio_bound.py."""
    start = time.perf_counter()
    try:
        spec = spec_of(name)
        shape = spec.fit(shape)
        trace, est = simulate(name, shape, config=EstimateConfig(clock_mhz=2400.0), rescale_rate=rescale_rate)
    except Exception as exc:  # a missing wheel or an unsupported shape is a row, not a crash
        return str(exc).splitlines()[0][:160]
    s = summary(trace, "steady")
    pct = lambda v: "n/a" if v is None else f"{100 * v:.1f} %"
    static, work, fixup = "-", f"{est.flops_ratio:.3f}", frozenset()
    if name in gfx950.VARIANTS:
        generated = generate(gfx950.config_for(name, shape))
        counts = tile_counts(generated)
        fixup = frozenset(cl["name"] for cl in generated.clusters if cl["emitter"] == "rescale")
        static = str(counts.valu_cycles)
        if counts.rowsum_valu_cycles:
            static += f" (+{counts.rowsum_valu_cycles} row sum)"
        # MFMA cycles are proportional to FLOPs for these fp8 shapes (64 cycles per 32x32x64, 32 per 16x16x128)
        work += f" ({est.flops_ratio * (counts.mfma_cycles - counts.rowsum_cycles) / counts.mfma_cycles:.3f})"
    act = power.activity(est.cu_result.records, est.cu_result.skipped_periods())
    clock = power.predict_clock(act, shape.dtype)
    mhz = forced_clock or clock.mhz
    seconds = est.cycles / (mhz * 1e6)
    tflops = shape.tflops(seconds)
    markdown = (f"| {label or name} | {spec.dtype} | {pct(s['mfma_busy'])} | {pct(s['pingpong_overlap'])} | "
                f"{s['valu_cycles_per_block']:.0f} | {static} | {work} | "
                f"{mhz:.0f} MHz ({'forced' if forced_clock else clock.label}) | {seconds * 1e3:.3f} | "
                f"{tflops:.0f} | {est.tflops:.0f} |  <!-- {time.perf_counter() - start:.1f} s -->")
    return {"tflops": tflops, "tflops_2400": est.tflops, "mhz": mhz, "markdown": markdown, "activity": act,
            "cycles": est.cycles, "energy": _energy_per_tile(est, act, shape, fixup, clock.toggle), "estimate": est}


def _without(row: dict, base: dict, dtype: str) -> list:
    """What-if lines: ``row``'s clock and ratio to ``base`` with the same cycles and its VALU, then
    also LDS, then also VMEM activity priced at zero, and with half its global bytes (a query block
    twice as tall loading each K/V tile once), with and without VALU energy (power.predict_clock on
    the changed activity)."""
    lines, act = [], row["activity"]
    half = act.vmem_bytes / 2
    for label, change in (("no VALU energy", {"valu": 0.0}), ("no VALU + LDS energy", {"valu": 0.0, "lds_bytes": 0.0}),
                          ("no VALU + LDS + VMEM energy", {"valu": 0.0, "lds_bytes": 0.0, "vmem_bytes": 0.0}),
                          ("half the global bytes", {"vmem_bytes": half}),
                          ("half the global bytes and no VALU energy", {"vmem_bytes": half, "valu": 0.0})):
        mhz = power.predict_clock(replace(act, **change), dtype).mhz
        ratio = row["tflops_2400"] / base["tflops_2400"] * mhz / base["mhz"]
        lines.append(f"- the same cycles with {label}: {mhz:.0f} MHz, {ratio:.3f}x")
    return lines


# VALU op classes of the energy split, by mnemonic prefix (first match; AITER's objects carry _e32/_e64/_dpp)
VALU_CLASSES = (("max/min", ("v_max", "v_min")), ("convert", ("v_cvt",)), ("AGPR moves", ("v_accvgpr",)),
                ("compare/select", ("v_cmp", "v_cndmask")),
                ("fp32 add/mul/fma", ("v_add_f32", "v_sub_f32", "v_subrev_f32", "v_mul_f32", "v_fma_f32",
                                      "v_pk_fma_f32", "v_pk_mul_f32", "v_pk_add_f32", "v_ldexp_f32")))
FIXUP = "fix-up path (out-of-line lazy O rescale, all its ops)"


def _valu_class(opcode: str, unit: str, region, fixup: frozenset) -> str:
    if region in fixup:
        return FIXUP
    if unit == "TRANS":
        return "exp/log (TRANS)"
    return next((name for name, prefixes in VALU_CLASSES if opcode.startswith(prefixes)), "other (moves, integer, permlane)")


def _energy_per_tile(est, act, shape, fixup: frozenset, toggle: float) -> dict:
    """The power model's energy (nJ at peak voltage, :func:`power.energy_terms`) per 32x128 tile of
    the shape's work: E_cycle's terms x predicted cycles x CUs / (FLOPs / a tile's 2 x 32 x 128 x
    (d + d_v) FLOPs), the whole-run activity the clock model reads. The VALU term is split by op class (and
    the lazy O rescale's out-of-line fix-up clusters, ``fixup``) in the proportions of the detailed
    records' VALU+TRANS busy cycles (extrapolated loop periods repeat detailed ones)."""
    tiles = shape.flops / (2 * BLOCK_M * BLOCK_N * (shape.headdim + shape.headdim_v))
    scale = est.cycles * timing.param("cus") / tiles * 1e-3
    terms = {k: v * scale for k, v in power.energy_terms(act, toggle, dtype=shape.dtype).items()}
    rec = est.cu_result.records
    busy = Counter()
    for opcode, unit, region, start, end in zip(rec["opcode"], rec["unit"], rec["region"], rec["start"], rec["end"]):
        if unit in ("VALU", "TRANS"):
            busy[_valu_class(str(opcode), str(unit), region, fixup)] += int(end) - int(start)
    total = sum(busy.values()) or 1
    return {"terms": terms, "valu": {k: terms["valu"] * v / total for k, v in busy.items()}}


def _energy_table(columns: dict) -> list:
    """Markdown lines: the energy per tile of each column (label -> a row's ``energy``) by term."""
    keys = ("mfma", "valu", "lds", "vmem", "clock")
    names = {"mfma": "MFMA", "valu": "VALU + TRANS", "lds": "LDS", "vmem": "VMEM (global)", "clock": "clock tree (per CU-cycle)"}
    classes = [c for c, _ in VALU_CLASSES] + ["exp/log (TRANS)", "other (moves, integer, permlane)", FIXUP]
    lines = ["| energy per 32x128 tile (nJ, peak voltage) | " + " | ".join(columns) + " |",
             "|---|" + "---|" * len(columns)]

    def cell(e, value):
        return f"{value:.1f} ({100 * value / sum(e['terms'].values()):.1f} %)"

    for key in keys:
        lines.append(f"| {names[key]} | " + " | ".join(cell(e, e["terms"][key]) for e in columns.values()) + " |")
        if key == "valu":
            for c in classes:
                if any(c in e["valu"] for e in columns.values()):
                    lines.append(f"| - VALU {c} | " + " | ".join(cell(e, e["valu"].get(c, 0.0)) for e in columns.values()) + " |")
    lines.append("| SALU, branches, waits | " + " | ".join("0 (not priced)" for _ in columns) + " |")
    lines.append("| total | " + " | ".join(f"{sum(e['terms'].values()):.1f}" for e in columns.values()) + " |")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="32k")
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--clock", type=float, default=None, help="force a clock in MHz (default: the predicted clock)")
    p.add_argument("--rescale-rate", action="append", default=[], metavar="KERNEL=R[:INPUT]",
                   help="also simulate KERNEL with its lazy O rescale branches jumping at rate R (measured by "
                        "benchmarks/v2_rescale_rate.py on INPUT) and print it against the FP8 baseline below the "
                        "table; repeatable")
    p.add_argument("--rows", default=",".join(ROWS), metavar="A,B,..",
                   help="only these rows of the causal table (default: all); the AITER v4 table follows when it "
                        "includes zyfa-fp8")
    args = p.parse_args()
    selected = [r for r in args.rows.split(",") if r]
    unknown = [r for r in selected if r not in ROWS]
    if unknown:
        p.error(f"--rows: unknown row(s) {', '.join(unknown)}; known: {', '.join(ROWS)}")
    rescale = []
    for item in args.rescale_rate:
        name, _, rest = item.partition("=")
        rate, _, source = rest.partition(":")
        try:
            rescale.append((name, float(rate), source or "unnamed input"))
        except ValueError:
            p.error(f"--rescale-rate wants KERNEL=R[:INPUT] with R a number in [0, 1], got {item!r}")
    registered = kernels()
    clock_text = f"{args.clock:.0f} MHz (forced)" if args.clock else "the clock/power model's predicted clock"
    print(f"CDNA4 cycle model (simulated), b1 h{args.heads} s{args.shape} d128 causal, TFLOP/s at {clock_text}\n")
    print("| kernel | dtype | MFMA busy (steady) | ping-pong overlap | VALU cycles/block | static softmax VALU/tile "
          "| MFMA work / FLOPs (w/o row sum) | clock | predicted ms | predicted TFLOP/s | TFLOP/s at 2400 MHz |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = {}
    for name in selected:
        if not name.startswith("aiter:") and name not in registered:
            print(f"| {name} | - | not registered | | | | |")
            continue
        shape = parse_shape(args.shape, heads=args.heads)
        measured = gfx950.measured_rescale_rate(name, shape) if name in gfx950.VARIANTS else None
        if measured is not None:  # the stated never first (optimistic), then the kernel's row at its measured rate
            never = simulate_row(name, shape, args.clock, label=f"{name}, lazy rescale never (optimistic)")
            if not isinstance(never, str):
                rows[f"{name} (rescale never)"] = never
                print(never["markdown"])
        rate = None if measured is None else measured[0]
        label = None if measured is None else f"{name}, lazy rescale {100 * rate:.1f} % ({measured[1]}, measured)"
        row = simulate_row(name, shape, args.clock, rate, label)
        if isinstance(row, str):
            print(f"| {name} | - | unavailable: {row} | | | | | | | | |")
            continue
        rows[name] = row
        print(row["markdown"])
    print("\nRows with a measured lazy O rescale rate (kernels.gfx950.MEASURED_RESCALE_RATES: causal, seqlen_q = "
          "seqlen_k at 8K and 32K; the larger of the Gaussian and sink inputs' rates) take it; the others take "
          "the stated never (optimistic; README 'Lazy O rescale at its measured rate').")
    pairs, why = default_pairs()
    print(f"\nDefault comparison ({why}):")
    for pair in pairs:
        ours = (pair.ours, *FP8_ABLATIONS) if pair.ours == "zyfa-fp8" else (pair.ours,)
        for name in (n for o in ours for n in (o, f"{o} (rescale never)")):
            if name in rows and pair.baseline in rows:
                print(f"- {name} / {pair.baseline}: {_ratios(rows[name], rows[pair.baseline])} ({pair.label})")
    base = next((p.baseline for p in pairs if p.ours == "zyfa-fp8"), None)
    if base in rows and "zyfa-fp8" in rows:
        shape = parse_shape(args.shape, heads=args.heads)
        counts = tile_counts(generate(gfx950.config_for("zyfa-fp8", shape)))
        for name, rate, source in rescale:
            row = simulate_row(name, shape, args.clock, rate)
            if isinstance(row, str):
                print(f"- {name} with the rescale at rate {rate:g} ({source}): unavailable: {row}")
                continue
            print(f"- {name} with its lazy O rescale branch jumping on {100 * rate:.1f} % of executions "
                  f"({source}; the table: never): {row['tflops']:.0f} TFLOP/s at {row['mhz']:.0f} MHz, "
                  f"{row['tflops_2400']:.0f} at 2400 MHz; / {base}: {_ratios(row, rows[base])}")
        for label, work in (("the shape's FLOPs alone", 1.0),
                            ("+ zyfa-fp8's row-sum MFMAs", counts.mfma_cycles / (counts.mfma_cycles - counts.rowsum_cycles))):
            bound = _mfma_bound(shape, work)
            print(f"- bound for any schedule, MFMA work = {label} ({work:.4f}x) with no idle: "
                  f"{bound['tflops_2400']:.0f} TFLOP/s at 2400 MHz, {bound['tflops']:.0f} at the pure-MFMA clock "
                  f"{bound['mhz']:.0f} MHz; / {base}: {_ratios(bound, rows[base])}")
        columns = {f"zyfa-fp8{' (measured rescale)' if 'zyfa-fp8 (rescale never)' in rows else ''}": rows["zyfa-fp8"]["energy"]}
        if "zyfa-fp8 (rescale never)" in rows:
            columns["zyfa-fp8 (rescale never)"] = rows["zyfa-fp8 (rescale never)"]["energy"]
        columns[base] = rows[base]["energy"]
        print(f"\nWhere the power model's energy goes (power.energy_terms x predicted cycles x CUs per 32x128 tile of "
              f"the shape's work; the VALU split in the detailed records' proportions; coefficients: power.PARAMS):\n")
        print("\n".join(_energy_table(columns)))
        print(f"\nzyfa-fp8 / {base}, what-if (its activity changed, its cycles kept; the baseline at {rows[base]['mhz']:.0f} MHz):")
        print("\n".join(_without(rows["zyfa-fp8"], rows[base], "fp8")))
    # AITER v4 has no causal FP8 object: compare on the same shape without the mask
    if "zyfa-fp8" not in selected:
        return
    noncausal = replace(parse_shape(args.shape, heads=args.heads), causal=False)
    print(f"\nAgainst AITER v4 ({V4}), b1 h{args.heads} s{args.shape} d128 NON-causal (our lazy rescale: never, "
          "its non-causal rate is not measured):\n")
    print("| kernel | dtype | MFMA busy (steady) | ping-pong overlap | VALU cycles/block | static softmax VALU/tile "
          "| MFMA work / FLOPs (w/o row sum) | clock | predicted ms | predicted TFLOP/s | TFLOP/s at 2400 MHz |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = {}
    for name in ("zyfa-fp8", *FP8_ABLATIONS, V4):
        row = simulate_row(name, noncausal, args.clock)
        print(f"| {name} | - | unavailable: {row} | | | | | | | | |" if isinstance(row, str) else row["markdown"])
        if not isinstance(row, str):
            rows[name] = row
    if V4 in rows:
        for name in ("zyfa-fp8", *FP8_ABLATIONS):
            if name in rows:
                print(f"- {name} / {V4}: {_ratios(rows[name], rows[V4])}")


if __name__ == "__main__":
    main()
