#!/usr/bin/env python3
"""Upper bounds on zyfa-fp8 / AITER v3 ``fwd_hd128_fp8_causal`` in the CDNA4 cycle model + clock/power
model (SIMULATED, b1 h32 s32K d128 causal FP8 by default): what ratio could any schedule of zyfa-fp8's
work reach, and which design would it take?

    ZYFA_AITER_DIR=<ROCm/aiter checkout> python3 benchmarks/ratio_bound.py [--shape 32k] [--heads 32]

Start: zyfa-fp8's simulated run at its measured lazy rescale rate (benchmarks/model_table.py's row,
:func:`model_table.simulate_row`) as per-CU totals in the clock model's frame: each rate of its
``power.Activity`` times the kernel's cycles (every CU runs the representative workgroup's mix for
the whole kernel; the MFMA total this gives is printed beside the shape's MFMA work as a check).
One term is made ideal at a time, then all at once; each changed set of totals becomes an Activity
again and its clock is ``power.predict_clock`` at ``power.PARAMS`` (the function model_table uses;
no coefficient is changed). Ratio: ``cycles_v3 / cycles x clock / clock_v3``, AITER v3 as simulated.

a. MFMA busy 100 %: kernel cycles = :func:`model_table.mfma_cycles` of the shape's FLOPs plus the
   row-sum MFMAs (one per 64-key block: ``counts.tile_counts``; no masked diagonal work), every SIMD's
   MFMA pipe busy every cycle; the VALU, LDS and global work unchanged, done in fewer cycles.
b. VALU floor: per 32x128 tile of the shape's work only Lean P's static VALU + TRANS cycles
   (``counts.tile_counts`` of the generated code: the probability path, block max included); no
   fix-up, masking, epilogue, prologue or loop bookkeeping VALU. b0: no VALU at all (a floor, no design).
c. global bytes: the per-query-row bytes (Q, O, LSE) kept, the rest of the counted bytes (K/V tiles,
   re-read by every query block of the head) / 2 or / 4 for query blocks 2x or 4x as tall (each
   workgroup fetches each K/V tile once); and the compulsory minimum: unique Q, K, V, O, LSE bytes.
d. LDS bytes: writes (``ds_write``: each K/V tile written once per workgroup) and reads (``ds_read``:
   every wave reads the whole tile) in the proportions of the representative CU's detailed records
   (skipped loop periods repeat detailed ones); writes / 2, / 4 for 2x, 4x taller workgroups; reads / 2
   with 64 query rows per wave; zero (nothing forces a byte through LDS: a floor, not a design).
all: a + b + c (compulsory minimum) + d (zero): no schedule of this work does better in the model.

Then designs: R query rows per workgroup (one per CU), W per wave, at a + b, with the global bytes of
R-row query blocks and the LDS bytes of W-row waves and R-row workgroups as in c and d, beside the
registers their fp32 O and S accumulators and FP8 Q and P operands need per lane (a lower bound of
the need: no K/V operand ring, row statistics or addresses) against the 512 VGPR+AGPR of a SIMD lane
shared by the waves on it, their ratio with no VALU at all, and the most VALU cycles per 32x128 tile
at which they still reach 1.37x; and the frontier of what a CU's registers can hold. Last: the one input of the fidelity table that moves the ratio most, AITER
v3's clock (its row is 1.13x too fast), as a labelled what-if.
"""

import argparse
import math
import os
import sys
from dataclasses import dataclass, replace

from zyfa.gfx950 import timing
from zyfa.kernels import gfx950
from zyfa.kernels.gfx950.counts import tile_counts
from zyfa.kernels.gfx950.generator import generate
from zyfa.kernels.gfx950.schedule import BLOCK_M, BLOCK_N, ROWS_PER_WG
from zyfa.shapes import parse_shape
from zyfa.trace.cdna4 import fidelity, power
from zyfa.trace.cdna4.sim import mem_bytes

from model_table import mfma_cycles, simulate_row
from power_sensitivity import V3, ratio, tensor_bytes

TARGET = 1.37  # the write-up's hardware ratio (issue 18's acceptance point)
LSE_BYTES = 4  # fp32 log-sum-exp per query row and head
MIN_KEYS = 64  # the fewest keys per S/P tile: the K of the FP8 PV MFMA v_mfma_f32_32x32x64_f8f6f4
DESIGNS = ((32, 256), (32, 384), (32, 512), (32, 1024), (64, 256), (64, 512), (64, 1024), (64, 2048),
           (96, 384), (128, 512), (128, 1024), (128, 2048))  # (query rows per wave W, per workgroup R)


@dataclass(frozen=True)
class Work:
    """Per-CU totals over the kernel in the clock model's frame (an Activity rate x kernel cycles)."""

    cycles: float  # kernel cycles
    mfma: float  # MFMA-busy SIMD-cycles per CU
    valu: float  # VALU + TRANS busy SIMD-cycles per CU
    lds: float  # LDS bytes per CU
    vmem: float  # global bytes per CU

    @classmethod
    def of(cls, row: dict) -> "Work":
        a, c = row["activity"], row["cycles"]
        return cls(c, a.mfma * c, a.valu * c, a.lds_bytes * c, a.vmem_bytes * c)

    def activity(self) -> power.Activity:
        c = self.cycles
        return power.Activity(mfma=self.mfma / c, valu=self.valu / c, lds_bytes=self.lds / c,
                              vmem_bytes=self.vmem / c, cycles=round(c))

    def row(self, shape) -> dict:
        """A row as :func:`power_sensitivity.ratio` reads it (TFLOP/s at the peak clock, activity)."""
        return {"tflops_2400": shape.tflops(self.cycles / (power.param("f_peak_mhz") * 1e6)),
                "activity": self.activity(), "cycles": self.cycles}


@dataclass(frozen=True)
class Terms:
    """What the idealisations need besides zyfa-fp8's :class:`Work` (per CU)."""

    mfma_cycles: float  # a: kernel cycles with the MFMA work back to back
    valu_floor: float  # b: Lean P's static VALU+TRANS cycles x the shape's tiles
    tiles: float  # b: 32x128 tiles of the shape's work per CU
    row_bytes: float  # c: global bytes per query row (Q, O, LSE), all rows
    unique_bytes: float  # c: unique Q, K, V, O, LSE bytes
    lds_write_share: float  # d: LDS bytes written over all LDS bytes (representative CU)


def terms(shape, est) -> Terms:
    """The idealisations' inputs for zyfa-fp8 on ``shape`` (``est``: its cycle-model Estimate)."""
    cus = timing.param("cus")
    counts = tile_counts(generate(gfx950.config_for("zyfa-fp8", shape)))
    work = counts.mfma_cycles / (counts.mfma_cycles - counts.rowsum_cycles)  # the row-sum MFMAs, by design
    tiles = shape.flops / (2 * BLOCK_M * BLOCK_N * (shape.headdim + shape.headdim_v)) / cus
    tb = tensor_bytes(shape)
    lse = LSE_BYTES * shape.batch * shape.heads * shape.seqlen_q
    rec = est.cu_result.records
    lds = [(str(op), mem_bytes(str(op))) for op, unit in zip(rec["opcode"], rec["unit"]) if unit == "LDS"]
    written = sum(b for op, b in lds if op.startswith("ds_write"))
    return Terms(mfma_cycles=mfma_cycles(shape, work),
                 valu_floor=(counts.valu_cycles + counts.trans_cycles + counts.rowsum_valu_cycles) * tiles, tiles=tiles,
                 row_bytes=(tb["q"] + tb["o"] + lse) / cus, unique_bytes=(sum(tb.values()) + lse) / cus,
                 lds_write_share=written / sum(b for _, b in lds))


def _global(w: Work, t: Terms, k: float) -> float:
    """Global bytes with query blocks ``k`` x as tall: K/V bytes / k, never below the unique bytes."""
    return max(t.unique_bytes, t.row_bytes + (w.vmem - t.row_bytes) / k)


def _lds(w: Work, t: Terms, wg: float, wave: float) -> float:
    """LDS bytes with workgroups ``wg`` x and waves ``wave`` x as tall (writes / wg, reads / wave)."""
    return w.lds * t.lds_write_share / wg + w.lds * (1 - t.lds_write_share) / wave


def idealised(w: Work, t: Terms) -> list:
    """(key, what it assumes, Work) per idealisation of :func:`main`'s table (module docstring)."""
    simds = timing.param("simds_per_cu")
    mfma = {"cycles": t.mfma_cycles, "mfma": simds * t.mfma_cycles}
    return [
        ("a", "MFMA busy 100 %: cycles = the shape's MFMA work + row-sum MFMAs, back to back", replace(w, **mfma)),
        ("b", "VALU floor: Lean P's static VALU per tile only", replace(w, valu=t.valu_floor)),
        ("b0", "no VALU at all (no softmax: a floor, not a design)", replace(w, valu=0.0)),
        ("c2", "global: query blocks 2x as tall (K/V bytes / 2)", replace(w, vmem=_global(w, t, 2))),
        ("c4", "global: query blocks 4x as tall (K/V bytes / 4)", replace(w, vmem=_global(w, t, 4))),
        ("cmin", "global: unique Q/K/V/O/LSE bytes only (compulsory)", replace(w, vmem=t.unique_bytes)),
        ("d2", "LDS: workgroups 2x as tall (writes / 2)", replace(w, lds=_lds(w, t, 2, 1))),
        ("d4", "LDS: workgroups 4x as tall (writes / 4)", replace(w, lds=_lds(w, t, 4, 1))),
        ("dw", "LDS: 64 query rows per wave (reads / 2)", replace(w, lds=_lds(w, t, 1, 2))),
        ("d0", "LDS: zero bytes (floor)", replace(w, lds=0.0)),
        ("ab", "a + b", replace(w, valu=t.valu_floor, **mfma)),
        ("all", "a + b + c (compulsory) + d (zero)",
         replace(w, valu=t.valu_floor, vmem=t.unique_bytes, lds=0.0, **mfma)),
    ]


def design(w: Work, t: Terms, rows_wave: int, rows_wg: int) -> Work:
    """a + b with the global and LDS bytes of ``rows_wg`` query rows per workgroup sharing each K/V
    tile and ``rows_wave`` per wave (zyfa-fp8: 32 and 256)."""
    return replace(w, cycles=t.mfma_cycles, mfma=timing.param("simds_per_cu") * t.mfma_cycles, valu=t.valu_floor,
                   vmem=_global(w, t, rows_wg / ROWS_PER_WG), lds=_lds(w, t, rows_wg / ROWS_PER_WG, rows_wave / BLOCK_M))


def registers(shape, rows_wave: int) -> int:
    """Registers per lane a wave of ``rows_wave`` query rows needs at least: fp32 O (rows x d_v) and
    S (rows x 128 keys) accumulators, FP8 Q (rows x d) and P (rows x 128) operands; 64 lanes, 4 bytes
    a register."""
    lanes = timing.param("wave_size")
    fp32 = rows_wave * (shape.headdim_v + BLOCK_N) * 4
    fp8 = rows_wave * (shape.headdim + BLOCK_N)
    return int((fp32 + fp8) // (lanes * 4))


def designs(w: Work, t: Terms, shape, v3: dict) -> list:
    """Per (rows per wave, rows per workgroup) of :data:`DESIGNS`: its :func:`design` row, clock and
    ratio to ``v3``, waves per SIMD, registers per lane it needs (:func:`registers`) and has, whether
    they fit, its O accumulators per workgroup in KiB, its ratio with no VALU at all (``no_valu``) and
    the VALU cycles per tile it may spend to reach :data:`TARGET` (``valu_budget``, :func:`valu_for_target`)."""
    simds, budget = timing.param("simds_per_cu"), timing.param("vgprs_per_simd_lane")
    out = []
    for rows_wave, rows_wg in DESIGNS:
        row = design(w, t, rows_wave, rows_wg).row(shape)
        per_simd = rows_wg / rows_wave / simds
        need, have = registers(shape, rows_wave), budget / per_simd
        out.append({"rows_wave": rows_wave, "rows_wg": rows_wg, "per_simd": per_simd, "need": need, "have": have,
                    "fits": need <= have, "o_kib": rows_wg * shape.headdim_v * 4 / 1024, "row": row,
                    "mhz": power.predict_clock(row["activity"], "fp8").mhz, "ratio": ratio(row, v3, {}),
                    "no_valu": ratio(replace(design(w, t, rows_wave, rows_wg), valu=0.0).row(shape), v3, {}),
                    "valu_budget": valu_for_target(design(w, t, rows_wave, rows_wg), t, shape, v3)})
    return out


def frontier(shape) -> tuple[int, int]:
    """(rows per wave, rows per workgroup) at most, for any design that keeps each query row's fp32 O
    (d_v values), fp32 S and FP8 P over :data:`MIN_KEYS` keys in registers (Q, K/V operands, row
    statistics and addresses not counted: a generous bound): rows per workgroup = the CU's register
    file over those bytes per row; rows per wave = a multiple of the MFMA's 32 rows within one
    SIMD's registers at one wave per SIMD."""
    lanes, simds = timing.param("wave_size"), timing.param("simds_per_cu")
    simd_bytes = timing.param("vgprs_per_simd_lane") * lanes * 4
    per_row = shape.headdim_v * 4 + MIN_KEYS * 4 + MIN_KEYS
    return int(simd_bytes // per_row) // BLOCK_M * BLOCK_M, int(simds * simd_bytes // per_row)


def valu_for_target(work: Work, t: Terms, shape, v3: dict):
    """The most VALU cycles per 32x128 tile at which ``work`` (its VALU replaced) still reaches
    :data:`TARGET` over ``v3`` (bisection up to every SIMD's VALU busy every cycle: the ratio falls as
    VALU rises); None if not even zero VALU does, ``math.inf`` if even that much VALU does."""
    at = lambda per_tile: ratio(replace(work, valu=per_tile * t.tiles).row(shape), v3, {})
    if at(0.0) < TARGET:
        return None
    lo, hi = 0.0, timing.param("simds_per_cu") * work.cycles / t.tiles
    if at(hi) >= TARGET:
        return math.inf
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if at(mid) >= TARGET else (lo, mid)
    return lo


def budget_text(cycles) -> str:
    if cycles is None:
        return "none: not even with zero VALU"
    return "any" if math.isinf(cycles) else f"<= {cycles:.0f}"


def v3_fidelity(v3: dict, shape):
    """The fidelity table's calibration row of AITER v3 on ``shape`` with a thread-trace MFMA busy, as
    a :class:`fidelity.Result` of the simulated ``v3`` row at its predicted clock (``ratio``: predicted
    over published; ``traced_clock``: the clock the published figure and the trace imply), or None."""
    for r in fidelity.calibration_set():
        if r.kernel == V3 and r.traced_mfma_busy is not None and r.shape == shape:
            return fidelity.Result(r, tflops_peak=v3["tflops_2400"], activity=v3["activity"],
                                   clock=power.predict_clock(v3["activity"], "fp8"), work=v3["estimate"].flops_ratio)
    return None


def valu_energy_for_clock(act: power.Activity, mhz: float) -> float:
    """The ``e_valu_pj`` at which ``predict_clock(act)`` is ``mhz`` (bisection; the clock falls as it rises)."""
    lo, hi = 0.0, 1e5
    for _ in range(60):
        mid = (lo + hi) / 2
        if power.predict_clock(act, "fp8", params={"e_valu_pj": mid}).mhz > mhz:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def report(w: Work, t: Terms, ours: dict, v3: dict, shape) -> tuple[list, dict]:
    """The markdown lines of the bound table and, per key, (Work, its row, clock MHz, ratio)."""
    base_mhz = power.predict_clock(v3["activity"], "fp8").mhz
    out = {"sim": (w, ours, power.predict_clock(ours["activity"], "fp8").mhz, ratio(ours, v3, {}))}
    for key, _, changed in idealised(w, t):
        row = changed.row(shape)
        out[key] = (changed, row, power.predict_clock(row["activity"], "fp8").mhz, ratio(row, v3, {}))
    labels = {"sim": "zyfa-fp8 as simulated (model_table's row)"} | {k: text for k, text, _ in idealised(w, t)}
    simds = timing.param("simds_per_cu")
    lines = [f"| zyfa-fp8, per CU (SIMULATED) | cycles | MFMA busy (whole run) | VALU busy (SIMD-cycles) | LDS bytes | global bytes "
             f"| clock | / AITER v3 ({base_mhz:.0f} MHz, {v3['cycles'] / 1e6:.3f}M cycles) |", "|---|---|---|---|---|---|---|---|"]
    for key, (work, _, mhz, r) in out.items():
        lines.append(f"| {key}: {labels[key]} | {work.cycles / 1e6:.3f}M | {100 * work.mfma / (simds * work.cycles):.1f} % "
                     f"| {work.valu / 1e6:.2f}M | {work.lds / 2**20:.0f} MiB | {work.vmem / 2**20:.1f} MiB | {mhz:.0f} MHz "
                     f"| {'**' if r >= TARGET else ''}{r:.3f}x{'**' if r >= TARGET else ''} |")
    return lines, out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="32k", help="sequence length (default: %(default)s; causal)")
    p.add_argument("--heads", type=int, default=32)
    args = p.parse_args()
    if not os.environ.get("ZYFA_AITER_DIR"):
        sys.exit("ratio_bound.py: set ZYFA_AITER_DIR to a ROCm/aiter checkout: AITER v3 FP8 causal is the ratio's baseline")
    shape = parse_shape(args.shape, heads=args.heads)
    rate = gfx950.measured_rescale_rate("zyfa-fp8", shape)
    ours = simulate_row("zyfa-fp8", shape, rescale_rate=None if rate is None else rate[0])
    v3 = simulate_row(V3, shape)
    for name, row in (("zyfa-fp8", ours), (V3, v3)):
        if isinstance(row, str):
            sys.exit(f"ratio_bound.py: {name}: {row}")
    w, t = Work.of(ours), terms(shape, ours["estimate"])
    simds, cus = timing.param("simds_per_cu"), timing.param("cus")
    print(f"CDNA4 cycle model + clock/power model (SIMULATED), b{shape.batch} h{shape.heads} s{args.shape} d128 causal "
          f"FP8, power.PARAMS unchanged. zyfa-fp8 at its lazy rescale rate "
          f"{'never' if rate is None else f'{100 * rate[0]:.1f} % ({rate[1]}, measured)'}; per CU = Activity rate x "
          f"{w.cycles / 1e6:.3f}M kernel cycles.")
    needed = mfma_cycles(shape, ours["estimate"].flops_ratio) * simds
    rebuilt = power.predict_clock(w.row(shape)["activity"], "fp8").mhz
    print(f"Frame checks: MFMA-busy SIMD-cycles per CU {w.mfma / 1e6:.4f}M from the activity, {needed / 1e6:.4f}M "
          f"from the simulated grid's MFMA work ({ours['estimate'].flops_ratio:.4f}x the FLOPs); the activity rebuilt "
          f"from the totals clocks at {rebuilt:.2f} MHz, model_table's row at {ours['mhz']:.2f} MHz.")
    print(f"Terms: a {t.mfma_cycles / 1e6:.3f}M cycles; b {t.valu_floor / 1e6:.2f}M VALU SIMD-cycles "
          f"({100 * t.valu_floor / w.valu:.1f} % of the simulated); c per-row bytes {t.row_bytes / 2**20:.2f} MiB, unique "
          f"{t.unique_bytes / 2**20:.2f} MiB ({100 * t.unique_bytes / w.vmem:.1f} % of the counted); d LDS writes "
          f"{100 * t.lds_write_share:.1f} % of the LDS bytes.\n")
    lines, out = report(w, t, ours, v3, shape)
    print("\n".join(lines))
    print(f"\nEach clock: power.predict_clock of that row's activity; each ratio: power_sensitivity.ratio (the same "
          f"function). All ideal at once: {out['all'][3]:.3f}x ({'>=' if out['all'][3] >= TARGET else '<'} {TARGET}x).")
    fid = v3_fidelity(v3, shape)
    whatif = None if fid is None else {"e_valu_pj": valu_energy_for_clock(v3["activity"], fid.traced_clock)}
    budget = int(timing.param("vgprs_per_simd_lane"))
    print(f"\nDesigns at a + b (MFMA busy 100 %, VALU floor) with their own global and LDS bytes (c, d); registers: "
          f"fp32 O+S and FP8 Q+P per lane (a lower bound), against {budget} / waves per SIMD; O accumulators per "
          f"workgroup against the CU's register file ({simds} x {budget} x 64 lanes x 4 B = "
          f"{simds * budget * 256 // 1024} KiB):\n")
    extra = "" if whatif is None else f" what-if e_valu_pj {whatif['e_valu_pj']:.0f} (below) |"
    print(f"| rows per wave | rows per workgroup | waves per SIMD | registers needed / available per lane | "
          f"O per workgroup | clock | / AITER v3 | no VALU at all | VALU cycles per tile for {TARGET}x |{extra}")
    print("|---|---|---|---|---|---|---|---|---|" + ("---|" if extra else ""))
    for d in designs(w, t, shape, v3):
        cell = "" if whatif is None else f" {ratio(d['row'], v3, whatif):.3f}x |"
        print(f"| {d['rows_wave']} | {d['rows_wg']} | {d['per_simd']:g} | {d['need']} / {d['have']:.0f}"
              f"{'' if d['fits'] else ' (does not fit)'} | {d['o_kib']:.0f} KiB | {d['mhz']:.0f} MHz | {d['ratio']:.3f}x | {d['no_valu']:.3f}x | {budget_text(d['valu_budget'])} |{cell}")
    fw, fr = frontier(shape)
    edge = ratio(design(w, t, fw, fr).row(shape), v3, {})
    need = valu_for_target(design(w, t, fw, fr), t, shape, v3)
    print(f"\nFrontier: a workgroup that keeps each query row's fp32 O ({shape.headdim_v} values) and a "
          f"{MIN_KEYS}-key fp32 S and FP8 P tile in registers (nothing else counted) holds at most {fr} rows on a CU "
          f"and {fw} per wave; there (a + b, its c and d bytes; the bound rises with both) zyfa-fp8 / AITER v3 is "
          f"{edge:.3f}x{'' if whatif is None else f' ({ratio(design(w, t, fw, fr).row(shape), v3, whatif):.3f}x in the what-if)'}; "
          f"{TARGET}x there: {budget_text(need)} VALU cycles per 32x128 tile (Lean P: {t.valu_floor / t.tiles:.0f}).")
    if fid is None:
        print("\nNo published AITER v3 figure with a thread trace for this shape: the fidelity what-ifs are skipped.")
        return
    traced, predicted = fid.traced_clock, fid.clock.mhz
    print(f"\nWhat would move it (what-ifs, not the model): the fidelity table's AITER v3 FP8 row ({fid.row.source}, "
          f"{fid.row.published:g} TFLOP/s) is {fid.ratio:.2f}x too fast; the published figure and the traced MFMA busy "
          f"({100 * fid.row.traced_mfma_busy:.1f} %) imply {traced:.0f} MHz against the predicted {predicted:.0f} MHz.")
    print(f"- AITER v3 at {traced:.0f} MHz, zyfa-fp8 at its predicted clock: as simulated "
          f"{out['sim'][3] * predicted / traced:.3f}x, all ideal {out['all'][3] * predicted / traced:.3f}x")
    print(f"- the input that gives AITER v3 that clock inside the model, e_valu_pj {whatif['e_valu_pj']:.0f} pJ "
          f"(PARAMS: {power.param('e_valu_pj'):.0f}, tied by the public Gluon loops), prices zyfa-fp8's VALU too: as "
          f"simulated {ratio(ours, v3, whatif):.3f}x at "
          f"{power.predict_clock(ours['activity'], 'fp8', params=whatif).mhz:.0f} MHz, all ideal "
          f"{ratio(out['all'][1], v3, whatif):.3f}x")


if __name__ == "__main__":
    main()
