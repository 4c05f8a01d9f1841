"""zyfa-bench on the CPU: shape lists, FP8 quantisation, CSV/HTML round trip, errors."""

import math

import pytest
import torch

from zyfa.cli import bench_main as bench


def test_shapes_for_models_and_seqlens():
    shapes = bench.shapes_for(["mha", "mistral-7b", "mla"], [1024, 16384], causal=True)
    assert [(m, s.seqlen_q) for m, s in shapes] == [("mha", 1024), ("mha", 16384), ("mistral-7b", 1024),
                                                    ("mistral-7b", 16384), ("mla", 1024), ("mla", 16384)]
    mistral = shapes[3][1]
    assert (mistral.heads, mistral.heads_k, mistral.headdim, mistral.causal) == (32, 8, 128, True)
    mla = shapes[5][1]
    assert (mla.headdim, mla.headdim_v) == (192, 128)
    # 2 * b * h * s^2 * (d + dv) / 2 for causal
    assert mla.flops == 2 * 16 * 16384 ** 2 * 320 / 2
    with pytest.raises(ValueError, match="unknown model shape 'gpt5'"):
        bench.shapes_for(["gpt5"], [1024], causal=True)


def test_quantise_fp8_per_kv_head_group():
    x = torch.zeros(1, 3, 4, 8)
    x[0, 1, 0, 2] = 896.0  # head 0 (group 0): amax 896 -> descale 2
    x[0, 2, 3, 5] = -4.48  # head 3 (group 1): amax 4.48 -> descale 0.01
    x8, descale = bench.quantise_fp8(x, heads_k=2)
    assert x8.dtype == torch.float8_e4m3fn and descale.shape == (1, 2)
    assert descale.tolist()[0] == pytest.approx([2.0, 0.01])
    assert float(x8[0, 1, 0, 2]) == 448.0 and float(x8[0, 2, 3, 5]) == -448.0
    assert float(x8.float().abs().sum()) == 896.0


def test_csv_round_trip_and_html(tmp_path):
    rows = [bench.BenchRow("mha", "b1 h32 s1024 d128 causal", 1024, "zyfa-triton-fp8", ms=0.5, tflops=100.0,
                           rel_l2=0.05, sm_mhz=1980.0, power_w=300.0, tflop_per_j=100.0 / 300.0),
            bench.BenchRow("mha", "b1 h32 s1024 d128 causal", 1024, "fa3-fp8", error="ImportError: no fa3")]
    path = tmp_path / "bench.csv"
    import csv
    from dataclasses import asdict
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(asdict(rows[0])))
        w.writeheader()
        w.writerows(asdict(r) for r in rows)
    back = bench.read_csv(path)
    assert back[0] == rows[0]
    assert back[1].error == "ImportError: no fa3" and math.isnan(back[1].ms)
    pytest.importorskip("plotly")
    assert bench.main(["--html-from", str(path)]) == 0
    assert "zyfa-triton-fp8" in (tmp_path / "bench.html").read_text()


def test_format_row():
    row = bench.BenchRow("mha", "s", 16384, "sdpa-cudnn", ms=3.861, tflops=569.6, rel_l2=2.12e-3, sm_mhz=1688.0,
                         power_w=675.0, tflop_per_j=0.84)
    assert bench.format_row(row) == ("mha          16384 sdpa-cudnn           3.861 ms   569.6 TFLOP/s relL2 2.12e-03"
                                     "   1688 MHz   675 W  0.84 TFLOP/J")
    assert bench.format_row(bench.BenchRow("mha", "s", 1, "x", error="E")).endswith("ERROR E")


def test_cli_errors(tmp_path, capsys):
    assert bench.main(["--html-from", str(tmp_path / "missing.csv")]) == 2
    assert "no such bench CSV" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert bench.main(["--seqlens", "1k"]) == 2
        assert "needs a CUDA or ROCm GPU" in capsys.readouterr().err
