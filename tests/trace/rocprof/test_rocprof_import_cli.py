"""``zyfa-trace import-att DIR -o TRACE`` on the hand-written fixture (see test_rocprof_att_import.py
for the format documentation it follows)."""

from __future__ import annotations

from pathlib import Path

from zyfa.cli.trace_main import main
from zyfa.trace.schema import Trace

TINY = Path(__file__).resolve().parents[2] / "data" / "att" / "tiny"


def test_import_att_writes_a_trace(tmp_path, capsys):
    assert main(["import-att", str(TINY), "-o", str(tmp_path / "hw"), "--clock-mhz", "2100"]) == 0
    out = capsys.readouterr().out
    assert "zyfa_tiny (gfx950, hardware (rocprof-att)): 16 records from 3 waves, 1 without a code address" in out
    t = Trace.load(tmp_path / "hw.parquet")
    assert t.meta.clock_mhz == 2100.0 and t.meta.source == "rocprof-att"
    assert (tmp_path / "hw.json").is_file()
    # the CLI takes MFMA pipe cycles from the CDNA4 timing table: 32x32x64 fp8 = 16 passes = 64 cycles
    mfma = t.df[t.df["unit"] == "MFMA"]
    assert sorted(zip(mfma["start"], mfma["end"])) == [(1018, 1082), (1028, 1092)]
    assert "start + matrix-pipe cycles" in out


def test_import_att_errors_go_to_stderr(tmp_path, capsys):
    assert main(["import-att", str(tmp_path / "missing"), "-o", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zyfa-trace import-att:") and "does not exist" in err
    assert not (tmp_path / "x.parquet").exists()
    (tmp_path / "file").write_text("")  # an output stem under a plain file cannot be written
    assert main(["import-att", str(TINY), "-o", str(tmp_path / "file" / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zyfa-trace import-att:") and "file" in err and "Traceback" not in err


def test_import_att_program_labels(tmp_path, capsys):
    """--program: region from the labels of the kernel's assembly (same layout as the fixture's code.json)."""
    (tmp_path / "tiny.s").write_text("\n".join([
        "zyfa_tiny:",
        "  s_load_dwordx4 s[4:7], s[0:1], 0x0",
        "  s_waitcnt lgkmcnt(0)",
        "  v_mfma_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[0:15]",
        "  v_exp_f32_e32 v32, v33",
        "  v_add_f32_e32 v34, v35, v36",
        "lds_phase:",
        "  ds_read_b128 v[40:43], v44",
        "  buffer_load_dwordx4 v[48:51], v52, s[4:7], 0 offen",
        "  s_barrier",
        "  s_cbranch_scc1 lds_phase",
        "  s_endpgm", ""]))
    assert main(["import-att", str(TINY), "-o", str(tmp_path / "hw"), "--program", str(tmp_path / "tiny.s")]) == 0
    recs = [r for r in Trace.load(tmp_path / "hw.parquet").table.to_pylist() if (r["cu"], r["simd"]) == (1, 0)]
    assert [r["region"] for r in recs] == [None] * 5 + ["lds_phase"] * 5  # ds_read_b128 sits at byte 28
    assert main(["import-att", str(TINY), "-o", str(tmp_path / "y"), "--program", str(tmp_path / "absent.s")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zyfa-trace import-att: --program ") and "absent.s: no such file" in err


def test_program_regions_of_a_registered_kernel(tmp_path, capsys):
    """--program NAME builds the registered kernel: one schedule cluster per instruction (the
    generator's instruction_clusters), pcs counted from the kernel entry."""
    import argparse

    from zyfa.cli.import_att_cmd import _regions
    from zyfa.kernels.registry import get_kernel
    from zyfa.shapes import AttnShape

    regions = _regions(argparse.Namespace(program="zyfa-bf16", headdim=128, dtype=None))
    build = get_kernel("zyfa-bf16").build(AttnShape(dtype="bf16"))
    assert list(regions.clusters.values()) == list(build.meta["instruction_clusters"])
    assert min(regions.clusters) == 0 and all(pc % 4 == 0 for pc in regions.clusters)
    assert main(["import-att", str(TINY), "-o", str(tmp_path / "x"), "--program", "no-such-kernel"]) == 2
    assert "unknown kernel 'no-such-kernel'" in capsys.readouterr().err
