"""``zyfa-trace kernel``: the cycle-model summary, the saved trace, --list and bad inputs."""

from fractions import Fraction

import pytest

from zyfa.cli.kernel_cmd import _rescale_caveat
from zyfa.cli.trace_main import main
from zyfa.kernels import gfx950
from zyfa.shapes import parse_shape
from zyfa.trace.cdna4.estimate import EstimateConfig, estimate
from zyfa.trace.cdna4.launch import prepare
from zyfa.trace.schema import Trace


def test_kernel_command_on_aiter(aiter_causal, tmp_path, capsys):
    code = main(["kernel", "--kernel", "aiter:fwd_hd128_bf16_causal", "--shape", "2048", "--batch", "1",
                 "--heads", "8", "--samples", "1", "--clock", "2000", "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "CDNA4 cycle model (simulated" in out and "clock forced to 2000 MHz (the power model: predicted clock " in out
    assert "cycles at 2000 MHz" in out
    for label in ("MFMA busy", "ping-pong overlap", "VALU cycles/block", "predicted time", "predicted TFLOP/s",
                  "simulated in detail", "extrapolated:", "interpolated"):
        assert label in out
    trace = Trace.load(tmp_path / "aiter_fwd_hd128_bf16_causal.parquet")
    meta = trace.meta
    assert (meta.source, meta.simulated, meta.arch, meta.clock_mhz) == ("model", True, "gfx950", 2000.0)
    assert meta.grid == (4, 8, 1) and meta.workgroup_size == 512
    cycles = meta.extra["predicted_cycles"]
    assert meta.extra["predicted_seconds"] == pytest.approx(cycles / 2.0e9)
    df = trace.df
    assert set(df["wave"]) == set(range(8)) and set(df["simd"]) == {0, 1, 2, 3}
    assert df["iteration"].max() > 0 and df["region"].notna().any()
    assert (df.loc[df["unit"] == "MFMA", "end"] - df.loc[df["unit"] == "MFMA", "start"]).eq(32).all()


def test_kernel_list(aiter_causal, capsys):
    assert main(["kernel", "--list"]) == 0
    out = capsys.readouterr().out
    assert "aiter:fwd_hd128_bf16_causal" in out and "PATH.co" in out


def test_kernel_command_bad_inputs(capsys):
    assert main(["kernel", "--samples", "0"]) == 2
    assert "--samples must be >= 1" in capsys.readouterr().err
    assert main(["kernel", "--clock", "-5"]) == 2
    assert "--clock" in capsys.readouterr().err
    assert main(["kernel", "--shape", "12q"]) == 2
    assert "bad sequence length" in capsys.readouterr().err
    assert main(["kernel", "--kernel", "no-such-kernel", "--shape", "1k"]) == 2
    assert "unknown kernel 'no-such-kernel'" in capsys.readouterr().err


def test_hardware_backends_exit_2_with_a_message(capsys):
    from zyfa.kernels.registry import kernels

    registered = kernels()
    for backend, kernel in (("rocprof", "zyfa-fp8"), ("proton", "triton-fp8")):
        if kernel not in registered:
            continue
        assert main(["kernel", "--backend", backend, "--kernel", kernel, "--shape", "1k", "--heads", "8"]) == 2
        assert f"{backend} tracer unavailable" in capsys.readouterr().err  # no GPU / ROCm on this machine
    # a kernel a hardware tracer cannot launch is refused with the tracer's reason
    assert main(["kernel", "--backend", "rocprof", "--kernel", "aiter:fwd_hd128_bf16_causal", "--shape", "1k"]) == 2
    assert capsys.readouterr().err.startswith("zyfa-trace kernel: ")


def test_kernel_command_mla_shape(tmp_path, capsys):
    assert main(["kernel", "--shape", "512", "--heads", "2", "--headdim", "192", "--headdim-v", "128",
                 "--samples", "1", "-o", str(tmp_path)]) == 0
    assert "d192/128" in capsys.readouterr().out
    shape = Trace.load(tmp_path / "zyfa-fp8.parquet").meta.shape
    assert (shape["headdim"], shape["headdim_v"]) == (192, 128)
    assert main(["kernel", "--kernel", "zyfa-fp8", "--shape", "512", "--headdim", "100"]) == 2
    assert "headdim must be a multiple of 64" in capsys.readouterr().err


def test_no_kernel_runs_the_default_pairs_with_predicted_clocks(aiter_causal, capsys, monkeypatch):
    monkeypatch.delenv("ZYFA_AITER_DIR", raising=False)  # PyPI-only: the BF16 pair and our FP8 reconstruction
    assert main(["kernel", "--shape", "1k", "--heads", "2", "--samples", "1"]) == 0
    out = capsys.readouterr().out
    assert "note: AITER's real FP8 object is not resolvable here" in out
    assert "=> zyfa-bf16 / aiter:fwd_hd128_bf16_causal: " in out
    assert "=> zyfa-fp8 / aiter-like-fp8: " in out and "OUR RECONSTRUCTION" in out
    assert out.count("predicted clock ") == 4 and ("(power-limited)" in out or "(peak)" in out)


def test_never_taken_rescale_is_flagged_as_optimistic(capsys):
    """Without --rescale-rate a zyfa kernel's lazy O rescale branches follow the stated never: the
    summary (the headline's brief one too) says so; AITER's objects have none and get no line."""
    assert main(["kernel", "--kernel", "zyfa-fp8", "--shape", "2k", "--heads", "2", "--samples", "1",
                 "--compare", "aiter:fwd_hd128_bf16_causal"]) == 0
    out = capsys.readouterr().out
    assert out.count("caveat: its 4 lazy O rescale branch(es) simulated as never taken, which is optimistic") == 1
    assert "--rescale-rate R simulates a rate" in out


def test_measured_rescale_rate_by_shape_and_the_caveat_elsewhere():
    """kernels.gfx950.MEASURED_RESCALE_RATES gives the larger input's rate at a measured shape (where
    zyfa-trace kernel runs at it: no caveat, the next test); elsewhere the caveat gives the measured
    range and the option that simulates a rate; AITER's objects state no rescale branch."""
    rate, source = gfx950.measured_rescale_rate("zyfa-fp8", parse_shape("8k", heads=2))
    assert (rate, source) == (max(gfx950.MEASURED_RESCALE_RATES["zyfa-fp8", 8192].values()), "gaussian")
    line = _rescale_caveat("zyfa-fp8", parse_shape("2k", heads=2))
    assert "5-44 %" in line and "--rescale-rate R" in line
    assert _rescale_caveat("aiter:fwd_hd128_fp8_causal", parse_shape("2k", heads=2)) is None
    assert gfx950.measured_rescale_rate("zyfa-fp8", parse_shape("8k", heads=2, causal=False)) is None
    assert gfx950.measured_rescale_rate("zyfa-fp8-v1", parse_shape("32k")) is None


def test_a_measured_rescale_rate_is_the_default_and_0_is_never(capsys):
    """Where the rate is measured (kernels.gfx950.MEASURED_RESCALE_RATES: zyfa-fp8 causal 8K) the
    lazy O rescale runs at it by default, exact (the decimal as a fraction), and the output line
    says so; --rescale-rate 0 gives the stated never (no caveat: it was asked for)."""
    shape = parse_shape("8k", heads=2)
    rate, source = gfx950.measured_rescale_rate("zyfa-fp8", shape)
    run = ["kernel", "--kernel", "zyfa-fp8", "--shape", "8k", "--heads", "2", "--samples", "1"]
    assert main(run) == 0
    default = capsys.readouterr().out
    assert (f"4 lazy O rescale branches at their measured rate at this shape, {100 * rate:.2f} % of executions "
            f"({source} inputs") in default and "--rescale-rate 0: never taken" in default
    assert "caveat: its" not in default and "rate branches: " in default
    assert main(run + ["--rescale-rate", str(rate)]) == 0
    given = capsys.readouterr().out
    assert main(run + ["--rescale-rate", "0"]) == 0
    never = capsys.readouterr().out
    assert "4 lazy O rescale branches at rate 0 (never taken) (--rescale-rate)" in never
    assert "caveat: its" not in never and "rate branches: " not in never

    def cycles(out):
        return out.split("predicted time")[1].split(" cycles at")[0]
    assert cycles(default) == cycles(given) != cycles(never)
    launch = prepare("zyfa-fp8", shape)
    rates = tuple(sorted(launch.rescale_rates(Fraction(str(rate))).items()))
    assert f"({estimate(launch, EstimateConfig(samples=1, branch_policy=rates)).cycles} cycles" in default
    assert f"({estimate(launch, EstimateConfig(samples=1)).cycles} cycles" in never


def test_rescale_rate_option_takes_the_lazy_rescale_branches_at_a_rate(capsys):
    launch = prepare("zyfa-fp8", parse_shape("2k", heads=2))
    rates = launch.rescale_rates(0.25)
    rescale = {b["pc"] for b in launch.meta["branch_assumptions"] if b["label"].startswith(".L_rescale")}
    assert set(rates) == rescale and len(rescale) == 4 and set(rates.values()) == {0.25}
    with pytest.raises(ValueError, match=r"rate in \[0, 1\]"):
        EstimateConfig(branch_policy=((min(rates), 1.5),))
    assert main(["kernel", "--kernel", "zyfa-fp8", "--shape", "2k", "--heads", "2", "--samples", "1",
                 "--rescale-rate", "0.25"]) == 0
    out = capsys.readouterr().out
    assert "4 lazy O rescale branches at rate 1/4 = 25.00 %, a pattern of 4 executions (--rescale-rate)" in out
    assert "caveat: its" not in out  # a rate was set: the never-taken caveat is not printed
    assert "rate branches: " in out and "executions taken" in out
    assert main(["kernel", "--rescale-rate", "2"]) == 2
    assert "--rescale-rate must be in [0, 1]" in capsys.readouterr().err
    for bad in ("often", "1/0"):  # p/q is taken exactly; anything else is one argparse error
        with pytest.raises(SystemExit):
            main(["kernel", "--rescale-rate", bad])
        assert f"wants a number in [0, 1] or p/q, got {bad!r}" in capsys.readouterr().err
