"""benchmarks/ratio_bound.py's invariants on zyfa-fp8's real simulated run at b1 h32 s32K causal FP8
(about 3 s of cycle model): the idealised rows go through power.predict_clock unchanged, none lowers
the ratio, the all-ideal row is what an independent recomputation gives, and the design table agrees
with the idealisations. The baseline is ``aiter-like-fp8`` (always available; the invariants hold for
any baseline); AITER's real v3 FP8 object (ROCm/aiter checkout only) is checked when present."""

import importlib.util
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from zyfa.kernels import gfx950
from zyfa.kernels.gfx950.counts import tile_counts
from zyfa.kernels.gfx950.generator import generate
from zyfa.shapes import parse_shape
from zyfa.trace.cdna4 import power

BENCH = Path(__file__).parents[3] / "benchmarks"
sys.path.insert(0, str(BENCH))  # the script imports its sibling modules (model_table, power_sensitivity)
_spec = importlib.util.spec_from_file_location("ratio_bound", BENCH / "ratio_bound.py")
rb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rb)


@pytest.fixture(scope="module")
def run():
    shape = parse_shape("32k", heads=32)
    rate = gfx950.measured_rescale_rate("zyfa-fp8", shape)
    ours = rb.simulate_row("zyfa-fp8", shape, rescale_rate=rate[0])
    base = rb.simulate_row("aiter-like-fp8", shape)
    assert not isinstance(ours, str) and not isinstance(base, str), (ours, base)
    w, t = rb.Work.of(ours), rb.terms(shape, ours["estimate"])
    lines, out = rb.report(w, t, ours, base, shape)
    return {"shape": shape, "ours": ours, "base": base, "w": w, "t": t, "lines": lines, "out": out}


def test_the_totals_round_trip_through_predict_clock(run):
    # the activity rebuilt from per-CU totals clocks exactly as model_table's row, and the ratio is its own
    ours, base, shape = run["ours"], run["base"], run["shape"]
    row = run["w"].row(shape)
    assert power.predict_clock(row["activity"], "fp8").mhz == pytest.approx(ours["mhz"], rel=1e-12)
    assert rb.ratio(row, base, {}) == pytest.approx(ours["tflops"] / base["tflops"], rel=1e-12)
    assert run["out"]["sim"][3] == pytest.approx(ours["tflops"] / base["tflops"], rel=1e-12)
    # the frame: MFMA busy x kernel cycles is the simulated grid's MFMA work (representative CU, 0.1 %)
    needed = rb.mfma_cycles(shape, ours["estimate"].flops_ratio) * 4
    assert run["w"].mfma == pytest.approx(needed, rel=1e-3)


def test_terms_are_the_shape_and_the_generated_code(run):
    shape, t = run["shape"], run["t"]
    counts = tile_counts(generate(gfx950.config_for("zyfa-fp8", shape)))
    # two 32-cycle row-sum MFMAs per 16 64-cycle QK/PV MFMAs: 17/16 of the shape's MFMA cycles
    assert counts.rowsum_cycles * 16 == counts.mfma_cycles - counts.rowsum_cycles
    # 32 x 32768^2 / 2 x 2 x 256 FLOPs at 8192 FLOP per CU-cycle x 256 CUs, x 17/16
    assert t.mfma_cycles == 4456448 == rb.mfma_cycles(shape, 17 / 16)
    # 32 heads x 32768^2 / 2 causal pairs / (32 x 128) per tile / 256 CUs = 16384 tiles per CU
    assert t.valu_floor == (counts.valu_cycles + counts.trans_cycles + counts.rowsum_valu_cycles) * 16384
    assert counts.valu_cycles <= 400 and t.valu_floor < run["w"].valu
    # per query row and head: Q 128 B, O 256 B, LSE 4 B; K and V 128 B each per key: / 256 CUs
    assert t.row_bytes == 32 * 32768 * (128 + 256 + 4) / 256
    assert t.unique_bytes == 32 * 32768 * (128 + 256 + 4 + 2 * 128) / 256
    # each of the 8 waves reads the K/V tile the workgroup writes once: 1/9 of the LDS bytes written,
    # plus prologue / epilogue traffic
    assert 0.105 < t.lds_write_share < 0.12


def test_no_idealisation_lowers_the_ratio_and_all_at_once_bounds_them(run):
    out = run["out"]
    sim = out["sim"][3]
    for key in ("a", "b", "b0", "c2", "c4", "cmin", "d2", "d4", "dw", "d0", "ab"):
        assert sim < out[key][3] <= out["all"][3], key
    assert out["c2"][3] < out["c4"][3] < out["cmin"][3]
    assert out["d2"][3] < out["d4"][3] < out["d0"][3] and out["dw"][3] < out["d0"][3]
    assert out["ab"][3] > max(out["a"][3], out["b"][3]) and out["b0"][3] > out["b"][3]


def test_the_all_ideal_row_is_an_independent_recomputation(run):
    # rebuild the all-ideal activity from its definition and price it with predict_clock directly
    shape, t, base = run["shape"], run["t"], run["base"]
    cycles = t.mfma_cycles
    act = power.Activity(mfma=4.0, valu=t.valu_floor / cycles, lds_bytes=0.0, vmem_bytes=t.unique_bytes / cycles,
                         cycles=round(cycles))
    mhz = power.predict_clock(act, "fp8").mhz
    expected = base["cycles"] / cycles * mhz / power.predict_clock(base["activity"], "fp8").mhz
    work, _, printed_mhz, ratio = run["out"]["all"]
    assert (work.lds, work.vmem, work.mfma) == (0.0, t.unique_bytes, 4 * cycles)
    assert printed_mhz == pytest.approx(mhz, rel=1e-12)
    assert ratio == pytest.approx(expected, rel=1e-9)
    line = next(x for x in run["lines"] if x.startswith("| all:"))
    assert f"| {mhz:.0f} MHz |" in line and f"{expected:.3f}x" in line


def test_designs_agree_with_the_idealisations_and_rise_with_rows(run):
    shape, w, t, base = run["shape"], run["w"], run["t"], run["base"]
    table = {(d["rows_wave"], d["rows_wg"]): d for d in rb.designs(w, t, shape, base)}
    # zyfa-fp8's own tiling (32 rows per wave, 256 per workgroup) at a + b is the "ab" row
    assert table[32, 256]["ratio"] == pytest.approx(run["out"]["ab"][3], rel=1e-12)
    for (wave, wg), d in table.items():
        for (wave2, wg2), d2 in table.items():
            if (wave2, wg2) != (wave, wg) and wave2 >= wave and wg2 >= wg:
                assert d2["ratio"] > d["ratio"], ((wave, wg), (wave2, wg2))
    assert [rb.registers(shape, rows) for rows in (32, 64, 96, 128)] == [160, 320, 480, 640]
    assert {k for k, d in table.items() if d["fits"]} == {(32, 256), (32, 384), (64, 256), (96, 384)}
    for key, d in table.items():
        assert d["no_valu"] > d["ratio"], key
        if d["valu_budget"] is None:  # not even zero VALU reaches the target
            assert d["no_valu"] < rb.TARGET, key
            continue
        if math.isinf(d["valu_budget"]):  # even every SIMD's VALU busy every cycle reaches it
            assert d["ratio"] >= rb.TARGET, key
            continue
        # at the VALU budget the design is at the target (bisection to ~1000 / 2^40 cycles per tile)
        at_budget = replace(rb.design(w, t, *key), valu=d["valu_budget"] * t.tiles).row(shape)
        assert rb.ratio(at_budget, base, {}) == pytest.approx(rb.TARGET, abs=1e-6), key
    # 512 KiB / (512 B of O + 256 B of S + 64 B of P per row) = 630 rows; 128 KiB / 832 B = 157 -> 128 per wave
    assert rb.frontier(shape) == (128, 630)


def test_without_an_aiter_checkout_it_says_what_it_needs():
    env = {k: v for k, v in os.environ.items() if k != "ZYFA_AITER_DIR"}
    proc = subprocess.run([sys.executable, str(BENCH / "ratio_bound.py")], env=env, capture_output=True, text=True)
    assert proc.returncode != 0 and "ZYFA_AITER_DIR" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not os.environ.get("ZYFA_AITER_DIR"), reason="AITER v3 FP8 needs a ROCm/aiter checkout")
def test_against_aiter_v3_the_fidelity_row_is_found(run):
    shape = run["shape"]
    v3 = rb.simulate_row(rb.V3, shape)
    fid = rb.v3_fidelity(v3, shape)
    # README "How far to trust the model": 1944 x 1.008 / (5033 x 0.683) x 2400 MHz = 1368 MHz, predicted 1618
    assert fid.traced_clock == pytest.approx(1368, abs=1) and fid.clock.mhz == pytest.approx(1618, abs=1)
    e_valu = rb.valu_energy_for_clock(v3["activity"], fid.traced_clock)
    assert power.predict_clock(v3["activity"], "fp8", params={"e_valu_pj": e_valu}).mhz == pytest.approx(
        fid.traced_clock, abs=0.01)
    assert not math.isnan(e_valu) and e_valu > power.param("e_valu_pj")
