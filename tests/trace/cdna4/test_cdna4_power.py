"""The clock/power model, the fidelity table and the default AITER baseline."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from zyfa.kernels import baseline
from zyfa.shapes import AttnShape
from zyfa.trace.cdna4 import fidelity, power
from zyfa.trace.cdna4.toggle import attention_toggles, gaussian_attention_toggles, stream_toggle


def records(rows):
    """CU records from (unit, opcode, issue, start, end) tuples."""
    cols = ("unit", "opcode", "issue", "start", "end")
    return {c: [r[i] for r in rows] for i, c in enumerate(cols)}


def test_activity_counts_busy_simd_cycles_and_bytes():
    recs = records([("MFMA", "v_mfma_f32_32x32x64_f8f6f4", 0, 0, 64), ("MFMA", "v_mfma_f32_32x32x64_f8f6f4", 0, 0, 64),
                    ("VALU", "v_add_f32", 64, 64, 68), ("TRANS", "v_exp_f32", 68, 68, 72),
                    ("LDS", "ds_read_b128", 72, 72, 80), ("VMEM", "buffer_load_dwordx4", 76, 76, 128)])
    act = power.activity(recs)
    assert act.cycles == 128
    assert act.mfma == pytest.approx(128 / 128)  # two SIMDs x 64 cycles over a 128-cycle span
    assert act.valu == pytest.approx(8 / 128)
    assert act.lds_bytes == pytest.approx(16 * 64 / 128) and act.vmem_bytes == pytest.approx(16 * 64 / 128)


def test_board_power_equation_by_hand():
    act = power.Activity(mfma=2.0, valu=1.0, lds_bytes=10.0, vmem_bytes=1.0, cycles=100)
    p = {"e_clock_pj": 100.0, "e_mfma_pj": 1000.0, "e_valu_pj": 50.0, "tau_valu": 0.5, "e_lds_pj_per_byte": 2.0,
         "e_vmem_pj_per_byte": 30.0, "v0": 0.5, "p_static_w": 200.0}
    e_pj = 100 + 1000 * 0.4 * 2 + 50 * 0.5 * 1 + 2 * 10 + 30 * 1  # = 975 pJ per CU-cycle
    v = 0.5 + 0.5 * 1200 / 2400
    expected = 200 + 256 * 1200e6 * v * v * e_pj * 1e-12
    assert power.board_power(1200, act, 0.4, p) == pytest.approx(expected)


def test_clock_is_peak_when_power_allows_and_falls_with_activity_and_toggling():
    idle = power.Activity(mfma=0.0, valu=0.0, lds_bytes=0.0, vmem_bytes=0.0, cycles=1)
    assert power.predict_clock(idle, "fp8").label == "peak"
    busy = power.Activity(mfma=4.0, valu=1.0, lds_bytes=100.0, vmem_bytes=4.0, cycles=1)
    half = power.Activity(mfma=2.0, valu=1.0, lds_bytes=100.0, vmem_bytes=4.0, cycles=1)
    c_busy, c_half = power.predict_clock(busy, "fp8"), power.predict_clock(half, "fp8")
    assert c_busy.limited and c_busy.mhz < c_half.mhz <= 2400
    assert c_busy.watts == pytest.approx(power.param("board_power_w"), rel=1e-6)  # solved to the limit
    assert power.predict_clock(busy, toggle=0.1).mhz > power.predict_clock(busy, toggle=0.5).mhz
    assert "power-limited" in str(c_busy) and str(c_busy).startswith("predicted clock ")
    with pytest.raises(ValueError, match="toggle"):
        power.predict_clock(busy, toggle=1.5)


def test_every_coefficient_has_provenance_and_fitted_ones_say_so():
    for name, p in {**power.PARAMS, **power.TOGGLE}.items():
        assert p.source, name
    assert "FITTED on the calibration set" in power.PARAMS["e_mfma_pj"].source


def test_stored_toggle_densities_match_the_stated_distribution():
    for dtype in ("fp8", "bf16"):
        assert gaussian_attention_toggles(dtype)["mfma"] == pytest.approx(power.TOGGLE[dtype].value, abs=1e-4)
    import torch

    assert stream_toggle(torch.zeros(100), "bf16") == 0
    assert stream_toggle(torch.tensor([1.0, -1.0] * 50), "bf16") == pytest.approx(1 / 16)  # the sign bit flips


def test_stored_toggle_densities_of_the_uniform_harness_inputs():
    from zyfa.trace.cdna4.toggle import stated_attention_toggles

    for dtype in ("fp8", "bf16"):
        got = stated_attention_toggles(dtype, "uniform01")["mfma"]
        assert got == pytest.approx(power.TOGGLE_UNIFORM01[dtype].value, abs=1e-4)
        assert got < power.stated_toggle(dtype, "gaussian")  # all-positive, ~one binade: fewer flips
    with pytest.raises(ValueError, match="unknown input distribution 'zipf'"):
        power.stated_toggle("bf16", "zipf")
    with pytest.raises(ValueError, match="unknown input distribution 'zipf'"):
        stated_attention_toggles("bf16", "zipf")
    act = power.Activity(mfma=3.5, valu=1.0, lds_bytes=50.0, vmem_bytes=2.0, cycles=1)
    assert power.predict_clock(act, "bf16", inputs="uniform01").mhz > power.predict_clock(act, "bf16").mhz
    # the AITER sources ran its C++ harness (default -init=uf); HipKittens and the write-up are Gaussian
    rows = fidelity.calibration_set()
    assert {r.source for r in rows if r.inputs == "uniform01"} == {"AITER op_tests/cpp/mha/README.md", "AITER PR #3390"}
    assert all(r.inputs == "gaussian" for r in rows if "HipKittens" in r.source or "write-up" in r.source)


def test_vectorised_clock_solve_matches_predict_clock():
    for act in (power.Activity(mfma=3.5, valu=1.0, lds_bytes=50.0, vmem_bytes=2.0, cycles=1),
                power.Activity(mfma=0.0, valu=0.0, lds_bytes=0.0, vmem_bytes=0.0, cycles=1)):
        for dtype in ("bf16", "fp8"):
            e_pj = power.energy_per_cu_cycle(act, power.stated_toggle(dtype), dtype=dtype) * 1e12
            assert float(power.clock_for_energy([e_pj])[0]) == pytest.approx(power.predict_clock(act, dtype).mhz, abs=1e-6)


def test_leave_one_out_predicts_each_row_from_the_others():
    truth = _tied(1800.0)
    results = _synthetic(truth)  # consistent rows: every held-out row is predicted exactly
    cv = fidelity.leave_one_out(results, e_mfma=(1000.0, 2600.0), steps=17, rounds=1)
    assert len(cv.errors) == 5 and cv.max_abs == pytest.approx(0, abs=1e-9) and cv.within_15 == 5
    assert set(cv.fitted.values()) == {1800.0}
    # one row off by 1.5x: its held-out prediction keeps its whole error, and fitting it pulls the others
    bad = results[:4] + [fidelity.Result(dataclasses.replace(results[4].row, published=results[4].row.published * 1.5),
                                         results[4].tflops_peak, results[4].activity)]
    cv = fidelity.leave_one_out(bad, e_mfma=(1000.0, 2600.0), steps=17, rounds=1)
    errors = list(cv.errors.values())
    assert errors[4] == pytest.approx(1 / 1.5 - 1) and max(abs(e) for e in errors[:4]) > 0
    text = fidelity.render(fidelity.predict(results, truth), "text", truth)
    assert "leave-one-out (e_mfma_pj refitted without each in-band row, that row predicted): mean |error| 0.0%" in text
    with pytest.raises(ValueError, match="at least two"):
        fidelity.leave_one_out(results[:1])
    # log_errors: one vectorised solve per grid point, over any linear energy coefficients
    both = fidelity.log_errors(results, {"e_mfma_pj": [1800.0, 900.0], "e_valu_pj": [truth["e_valu_pj"]] * 2})
    assert both[0] == pytest.approx(fidelity.log_errors(results, {"e_mfma_pj": [1800.0]}, params=truth)[0], abs=1e-9)
    assert both[0] == pytest.approx(0, abs=1e-9) and (both[1] > 0).all()  # less MFMA energy: a higher clock


def test_fp8_energy_ratio_is_derived_from_the_public_loops():
    # the stored coefficient is what the public Gluon GEMMs give through the model's own equations
    assert power.fp8_energy_ratio() == pytest.approx(power.param("fp8_mfma_energy_ratio"), abs=1e-3)
    gemm = {loop.dtype: loop for loop in power.PUBLIC_LOOPS if "GEMM" in loop.name}
    assert gemm["bf16"].clock_mhz == pytest.approx(1489 / (2516.6 * 0.9875) * 2400)
    # with it, pure loops of both formats land on the GEMMs' implied clocks when bf16's does
    bf16_pj = {"e_mfma_pj": 3304.0}
    assert power.pure_mfma_clock("bf16", params=bf16_pj).mhz == pytest.approx(gemm["bf16"].clock_mhz, abs=2)
    assert power.pure_mfma_clock("fp8", params=bf16_pj | {"fp8_mfma_energy_ratio": power.fp8_energy_ratio()}).mhz \
        == pytest.approx(gemm["fp8"].clock_mhz, abs=2)
    act = power.Activity(mfma=4.0, valu=0.0, lds_bytes=0.0, vmem_bytes=0.0, cycles=1)
    assert power.board_power(1500, act, 0.4, dtype="fp8") < power.board_power(1500, act, 0.4, dtype="bf16")


def test_calibration_set_is_the_published_one():
    rows = fidelity.calibration_set()
    assert len(rows) == 26
    # HipKittens rows whose public host-overhead lower bound (83 us) is > 15% of the published time
    assert {r.label for r in rows if r.out_of_band} == {
        "b16 h16 s1024 d128 non-causal bf16", "b16 h16 s1024 d128 causal bf16",
        "b16 h16 s2048 d128 non-causal bf16", "b16 h16 s2048 d128 causal bf16"}
    assert all("HipKittens" in r.source for r in rows if r.out_of_band)
    by = {(r.source, r.kernel, r.label): r.published for r in rows}
    assert by[("AITER op_tests/cpp/mha/README.md", "aiter:fwd_hd128_bf16_causal", "b4 h64/kv8 s8192 d128 causal bf16")] == 1319.2
    assert by[("HipKittens benchmark JSONs (AITER column)", "aiter:fwd_hd128_bf16", "b15 h16 s16384 d128 non-causal bf16")] == 1283
    assert by[("ZYFA write-up", "aiter:fwd_hd128_fp8_causal", "b1 h32 s32768 d128 causal fp8")] == 1944


def _tied(e_mfma):
    """Coefficients as fidelity.fit returns them: e_valu tied to e_mfma by the public loops."""
    return {"e_mfma_pj": e_mfma, "e_valu_pj": float(np.round(power.tied_valu_energy([e_mfma])[0]))}


def test_valu_energy_is_tied_to_the_mfma_energy_by_the_public_loops():
    # the stored pair satisfies the tie, and with it the model's pure 16-bit loop and the Gluon fav4
    # attention loop stand in the ratio of the clocks the tutorial's figures imply (1438 / 1263 MHz)
    assert power.tied_valu_energy([power.param("e_mfma_pj")])[0] == pytest.approx(power.param("e_valu_pj"), abs=1)
    gemm, fav4 = power.PUBLIC_LOOPS[0], power.PUBLIC_LOOPS[2]
    for e in (2500.0, 2930.0, 3600.0):
        p = {"e_mfma_pj": e, "e_valu_pj": float(power.tied_valu_energy([e])[0])}
        ratio = power.pure_mfma_clock("bf16", params=p).mhz / power.predict_clock(power.FAV4_ACTIVITY, "bf16", params=p).mhz
        assert ratio == pytest.approx(gemm.clock_mhz / fav4.clock_mhz, rel=1e-6)
    # the fav4 activity by hand from the tutorial's counts: 93.7 % MFMA busy, 2 waves x 2 tiles x 128 ops
    assert power.FAV4_ACTIVITY.mfma / 4 == pytest.approx(0.937, abs=1e-3)
    assert power.FAV4_ACTIVITY.valu == pytest.approx(4 * 2048 / 4373)
    # needed_energy_pj inverts the clock equation
    act = power.Activity(mfma=3.5, valu=1.0, lds_bytes=50.0, vmem_bytes=2.0, cycles=1)
    c = power.predict_clock(act, "bf16")
    assert float(power.needed_energy_pj(c.mhz)) == pytest.approx(power.energy_per_cu_cycle(act, power.stated_toggle("bf16")) * 1e12, rel=1e-6)


def _synthetic(params):
    """Rows whose 'published' figures come from known coefficients: fit must find them."""
    out = []
    for i, (mfma, valu) in enumerate(((3.0, 1.0), (2.5, 1.5), (3.9, 0.5), (3.5, 0.8), (3.9, 2.0))):
        act = power.Activity(mfma=mfma, valu=valu, lds_bytes=50.0, vmem_bytes=2.0, cycles=1)
        shape = AttnShape(batch=1, heads=8, heads_k=8, seqlen_q=1024, seqlen_k=1024, dtype="bf16")
        clock = power.predict_clock(act, "bf16", params=params)
        published = 1000.0 * clock.mhz / 2400
        out.append(fidelity.Result(fidelity.Row("synthetic", f"k{i}", shape, published), tflops_peak=1000.0,
                                   activity=act))
    return out


def test_fit_recovers_known_coefficients_and_render_reports_errors():
    truth = _tied(1800.0)
    results = _synthetic(truth)
    assert all(power.predict_clock(r.activity, "bf16", params=truth).limited for r in results)  # identifiable
    fitted = fidelity.fit(results, e_mfma=(1000.0, 2600.0), steps=17, rounds=1)
    assert fitted == truth  # 1800 is a grid point
    fidelity.predict(results, fitted)
    assert all(r.ratio == pytest.approx(1.0) for r in results)
    assert all(r.gap_us == pytest.approx(0.0, abs=1e-6) for r in results)
    # gap by hand: published at half the predicted rate takes twice the predicted time
    r0 = results[0]
    half = fidelity.Result(dataclasses.replace(r0.row, published=r0.predicted / 2), r0.tflops_peak, r0.activity, r0.clock)
    assert half.gap_us == pytest.approx(r0.row.shape.flops / (r0.predicted * 1e12) * 1e6)
    results.append(fidelity.Result(fidelity.Row("x", "aiter:missing", results[0].row.shape, 500.0), skipped="kernel unavailable"))
    text = fidelity.render(results, "text")
    assert "mean |error| 0.0%" in text and "5/5 within 15%" in text and "1 skipped" in text
    # the footer's pure-MFMA-loop clock follows the coefficients the table was predicted with
    pure = power.pure_mfma_clock("bf16", params=truth)
    assert pure.limited and f"pure MFMA loop (every SIMD's MFMA pipe busy, no VALU) in this clock model: " \
        f"{pure.mhz:.0f} MHz (bf16)" in fidelity.render(results, "text", truth)
    # implied clock: the clock at which the row's simulated cycles give its published figure
    assert all(r.implied_clock == pytest.approx(r.clock.mhz) for r in results[:5])
    # an out-of-band row is printed, marked, and left out of the summary and the fit
    far = fidelity.Result(fidelity.Row("x", "k-far", r0.row.shape, r0.predicted / 3, out_of_band="out of band: why"),
                          r0.tflops_peak, r0.activity, r0.clock)
    both = results + [far]
    text = fidelity.render(both, "text")
    assert "5 in-band rows, mean |error| 0.0%" in text and "all 6 rows" in text and "* out of band: why" in text
    assert fidelity.fit(both, e_mfma=(1000.0, 2600.0), steps=17, rounds=1) == truth
    assert pure.mhz > power.pure_mfma_clock("bf16", params={"e_mfma_pj": 2 * truth["e_mfma_pj"]}).mhz
    md = fidelity.render(results, "markdown")
    assert md.startswith("| source | kernel |") and "(power-limited)" in md or "(peak)" in md
    csv_text = fidelity.render(results, "csv")
    assert csv_text.splitlines()[0] == ",".join(fidelity.COLUMNS) and len(csv_text.splitlines()) == 7
    assert csv_text.splitlines()[1].endswith(",in band")
    s = fidelity.summarise(results)
    assert (s.n, s.skipped) == (5, 1) and math.isclose(s.max_abs, 0, abs_tol=1e-9)


def test_default_pairs_follow_what_resolves(monkeypatch):
    k = object()
    monkeypatch.setattr(baseline.aiter, "catalog", lambda: {"fwd_hd128_fp8_causal": _Fake("ZYFA_AITER_DIR"),
                                                            "fwd_hd128_bf16_causal": k})
    pairs, why = baseline.default_pairs()
    assert [(p.ours, p.baseline, p.real) for p in pairs] == [("zyfa-fp8", "aiter:fwd_hd128_fp8_causal", True)]
    assert "real aiter:fwd_hd128_fp8_causal" in why
    monkeypatch.setattr(baseline.aiter, "catalog", lambda: {"fwd_hd128_bf16_causal": k})
    pairs, why = baseline.default_pairs()
    assert [(p.ours, p.baseline, p.real) for p in pairs] == [("zyfa-bf16", "aiter:fwd_hd128_bf16_causal", True),
                                                              ("zyfa-fp8", "aiter-like-fp8", False)]
    assert "RECONSTRUCTION" in pairs[1].label and "not resolvable" in why


class _Fake:
    def __init__(self, source):
        self.source = source


def test_toggles_from_actual_fp8_inputs_use_their_descales():
    import torch

    from zyfa.numerics import quantize_fp8
    from zyfa.trace.cdna4.toggle import attention_toggles

    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 256, 1, 128, generator=g) for _ in range(3))
    (q8, dq), (k8, dk), (v8, _) = quantize_fp8(q), quantize_fp8(k), quantize_fp8(v)
    real = attention_toggles(q8, k8, v8, "fp8", q_descale=float(dq[0, 0]), k_descale=float(dk[0, 0]))
    assert real["p"] == pytest.approx(power.TOGGLE["fp8"].value, abs=0.06)  # a Gaussian P, as stated
    assert real["q"] == stream_toggle(q8[0, :, 0], "fp8")  # stored FP8 bits, not re-rounded
    # without the descales the scores are ~(448/3)^2 too large and P is one-hot: almost no toggling
    assert attention_toggles(q8, k8, v8, "fp8")["p"] < 0.05


def test_kernel_emulate_prints_the_clock_from_the_emulated_data(capsys):
    from zyfa.cli.trace_main import main

    assert main(["kernel", "--kernel", "zyfa-bf16", "--shape", "256", "--heads", "1", "--samples", "1",
                 "--emulate"]) == 0
    out = capsys.readouterr().out
    assert "operand toggle density of the emulated data 0." in out and "predicted clock " in out


def test_toggle_density_of_too_few_values_is_an_error_not_a_zero_division():
    with pytest.raises(ValueError, match="at least 2 values, got 1"):
        stream_toggle(torch.ones(1), "fp8")
    one = torch.ones(1, 1, 1, 128)  # seqlen 1: a 1 x 1 P tile (zyfa-trace kernel --shape 1 --emulate)
    with pytest.raises(ValueError, match="P tile of at least 2 values; this shape gives 1"):
        attention_toggles(one, one, one, "bf16")


def test_traced_clock_needs_no_cycle_model():
    # f = TFLOP/s x work / (dense peak x busy) x 2400 MHz: the write-up's AITER FP8 figures by hand
    assert power.traced_clock_mhz(1944, 0.683, "fp8", work=1.0078125) == pytest.approx(
        1944e12 * 1.0078125 / (256 * 8192 * 2400e6 * 0.683) * 2400, rel=1e-4)
    assert power.traced_clock_mhz(1944, 0.683, "fp8", work=1.0078125) == pytest.approx(1368, abs=1)
    # the datasheet peaks are 4096 / 8192 FLOP per clock per CU at 2400 MHz on 256 CUs
    for dtype, per_cu in (("bf16", 4096), ("fp8", 8192)):
        assert power.DENSE_PEAK_TFLOPS[dtype].value == pytest.approx(per_cu * 256 * 2.4e9 / 1e12, rel=1e-4)
    with pytest.raises(ValueError, match="mfma_busy"):
        power.traced_clock_mhz(1944, 0.0, "fp8")
    with pytest.raises(ValueError, match="dtype 'fp4'"):
        power.traced_clock_mhz(1944, 0.5, "fp4")
    # the calibration set carries the write-up's busy figure on AITER's FP8 row only
    traced = [r for r in fidelity.calibration_set() if r.traced_mfma_busy is not None]
    assert [(r.kernel, r.traced_mfma_busy) for r in traced] == [("aiter:fwd_hd128_fp8_causal", pytest.approx(0.683))]
    # a row with a busy figure gets the footer line splitting its error into clock and cycles
    shape = AttnShape(batch=1, heads=8, heads_k=8, seqlen_q=1024, seqlen_k=1024, dtype="fp8")
    act = power.Activity(mfma=2.0, valu=3.0, lds_bytes=50.0, vmem_bytes=2.0, cycles=1)
    row = fidelity.Row("x", "k", shape, 1000.0, note="b and h assumed", traced_mfma_busy=0.5)
    r = fidelity.predict([fidelity.Result(row, tflops_peak=2516.6, activity=act, work=1.0)])[0]
    assert r.traced_clock == pytest.approx(1000 / (5033.2 * 0.5) * 2400)
    assert r.implied_clock == pytest.approx(1000 / 2516.6 * 2400)  # half busy in the model too: same clock
    text = fidelity.render([r], "text")
    assert f"imply {r.traced_clock:.0f} MHz without the cycle model" in text
    assert f"the model's cycles 1.00x the real ones" in text and "50.0% MFMA busy over the run" in text
    assert "note (k b1 h8 s1024 d128 causal fp8): b and h assumed" in text  # a row's note is printed once
    aiter_fp8 = [r for r in fidelity.calibration_set() if r.kernel == "aiter:fwd_hd128_fp8_causal"][0]
    assert "multiple of 4" in aiter_fp8.note and "fp8_clock_links.py" in aiter_fp8.note
    # clock checks: a published clock beside the predicted one, outside the summary
    checks = fidelity.clock_checks()
    assert [(c.kernel, c.published_clock_mhz) for c in checks] == [("zyfa-fp8", 1628.0),
                                                                    ("aiter:fwd_hd128_fp8_causal", 2108.0)]
    assert all(c.out_of_band and c.shape.heads_k == 8 and c.shape.seqlen_q == 16384 for c in checks)
    done = fidelity.predict([fidelity.Result(checks[0], tflops_peak=4000.0, activity=act, work=1.0),
                             fidelity.Result(checks[1], skipped="kernel unavailable: no checkout")])
    text = fidelity.render([r], "text", checks=done)
    assert (f"clock check, ZYFA write-up: zyfa-fp8 b1 h32/kv8 s16384 d128 causal fp8: predicted {done[0].clock.mhz:.0f} MHz "
            f"vs published 1628 MHz ({done[0].clock.mhz / 1628:.2f}x)") in text
    assert text.count("clock checks: the write-up's Mistral-7B attention layer") == 1  # the shared note once
    assert "aiter:fwd_hd128_fp8_causal b1 h32/kv8 s16384 d128 causal fp8: skipped: kernel unavailable" in text
    assert "1 in-band rows" in text  # the checks are not summarised
    no_busy = fidelity.Result(fidelity.Row("x", "k", shape, 1000.0), tflops_peak=2516.6, activity=act, work=1.0)
    assert math.isnan(no_busy.traced_clock)


def test_energy_terms_are_the_equation_term_by_term():
    # each term from its own coefficient: doubling one activity doubles its term only
    act = power.Activity(mfma=3.0, valu=2.0, lds_bytes=100.0, vmem_bytes=10.0, cycles=1)
    terms = power.energy_terms(act, 0.4, dtype="fp8")
    assert set(terms) == {"clock", "mfma", "valu", "lds", "vmem"}
    assert sum(terms.values()) * 1e-12 == pytest.approx(power.energy_per_cu_cycle(act, 0.4, dtype="fp8"), rel=1e-12)
    assert terms["mfma"] == pytest.approx(power.param("fp8_mfma_energy_ratio") * power.param("e_mfma_pj") * 0.4 * 3.0)
    assert terms["vmem"] == pytest.approx(power.param("e_vmem_pj_per_byte") * 10.0)
    more = power.energy_terms(power.Activity(mfma=3.0, valu=4.0, lds_bytes=100.0, vmem_bytes=10.0, cycles=1), 0.4, dtype="fp8")
    assert more["valu"] == pytest.approx(2 * terms["valu"])
    assert {k: v for k, v in more.items() if k != "valu"} == {k: v for k, v in terms.items() if k != "valu"}


def test_fit_takes_other_per_byte_energies_in_the_tie_and_the_predictions():
    # benchmarks/power_sensitivity.py refits e_mfma at other e_lds / e_vmem: the tie (which prices the
    # fav4 loop's LDS and global bytes) and every prediction must use them, or the refit answers the
    # default point's question
    point = {"e_lds_pj_per_byte": 0.5, "e_vmem_pj_per_byte": 5.0}
    e_valu = float(np.round(power.tied_valu_energy([1800.0], point)[0]))
    assert e_valu > power.tied_valu_energy([1800.0])[0]  # less priced per byte: more left to the VALU
    truth = point | {"e_mfma_pj": 1800.0, "e_valu_pj": e_valu}
    results = _synthetic(truth)
    kw = dict(e_mfma=(1000.0, 2600.0), steps=17, rounds=1)
    assert point | fidelity.fit(results, params=point, **kw) == truth
    assert fidelity.fit(results, **kw)["e_mfma_pj"] != 1800.0  # the default per-byte energies fit elsewhere
    cv = fidelity.leave_one_out(results, params=point, **kw)
    assert set(cv.fitted.values()) == {1800.0} and max(abs(e) for e in cv.errors.values()) < 1e-9
