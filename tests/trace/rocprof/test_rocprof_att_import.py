"""Importer tests for rocprofv3 --att output directories.

The fixture ``tests/data/att/tiny`` was written by hand, field for field, from the writer of that
format: rocprofiler-sdk ``source/lib/att-tool/{wave,code,occupancy,filenames}.cpp``
(ROCm/rocm-systems, projects/rocprofiler-sdk) and the rocprofiler-sdk guide "Using thread trace",
section "rocprofv3 output files". Instruction timing semantics follow
``rocprofiler_thread_trace_decoder_inst_t`` in ``trace_decoder_types.h`` (rocprof-trace-decoder).
It is not a capture from an MI3xx: no AMD GPU was available. Expected values below are computed by
hand from the fixture's numbers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from zyfa.trace.rocprof import AttFormatError, dispatch_dirs, import_att_dir
from zyfa.trace.rocprof.isa import canonical_opcode, split_isa, stall_reason, unit_of
from zyfa.trace.rocprof.records import AttInstruction, AttWave, RegionMap, annotate, cycles_from_table
from zyfa.trace.schema import Trace

DATA = Path(__file__).resolve().parents[2] / "data" / "att"
TINY = DATA / "tiny"
DISPATCH = TINY / "ui_output_agent_2_dispatch_7"


@pytest.fixture
def tiny_copy(tmp_path):
    dst = tmp_path / "att"
    shutil.copytree(TINY, dst)
    return dst / DISPATCH.name


def _edit(file: Path, fn):
    data = json.loads(file.read_text())
    fn(data)
    file.write_text(json.dumps(data))


def _rows(trace, **where):
    df = trace.df
    for k, v in where.items():
        df = df[df[k] == v]
    return df


# -- the tiny fixture, field for field -----------------------------------------------------------

def test_metadata_from_occupancy_filenames_and_code_object_names():
    t = import_att_dir(TINY)
    assert t.meta.source == "rocprof-att" and t.meta.simulated is False
    assert t.meta.kernel == "zyfa_tiny"  # occupancy.json dispatches["1"]
    assert t.meta.arch == "gfx950"  # att_2_gfx950_code_object_id_1.out beside the dispatch dir
    assert t.meta.extra["agent"] == 2 and t.meta.extra["dispatch"] == 7
    assert t.meta.extra["waves"] == 3 and t.meta.extra["occupancy_wave_starts"] == 3
    assert t.meta.extra["code_objects"] == [1]
    assert t.meta.extra["kernel_labels"] == [[1, 4096, "zyfa_tiny"]]
    assert t.meta.clock_mhz is None  # thread trace counts shader cycles; the clock is not in the files


def test_record_count_and_wave_numbering():
    t = import_att_dir(DISPATCH)
    assert len(t) == 10 + 4 + 2
    # SE0 target CU 1 -> cu 1; SE1 target CU 1 -> cu 1 + 16
    assert sorted(set(t.df["cu"].tolist())) == [1, 17]
    # waves of cu 1 numbered by begin time: simd0/slot0 (begin 1000) = 0, simd1/slot2 (begin 1010) = 1
    assert set(_rows(t, cu=1, simd=0)["wave"].tolist()) == {0}
    assert set(_rows(t, cu=1, simd=1)["wave"].tolist()) == {1}
    assert set(_rows(t, cu=1, simd=1)["slot"].tolist()) == {2}
    assert set(_rows(t, cu=17)["wave"].tolist()) == {0}


def test_timing_of_each_instruction_of_wave_a():
    """issue = start = time + stall, end = time + duration (gfx9: duration = stall + issue)."""
    t = import_att_dir(DISPATCH)
    keys = ("pc", "opcode", "unit", "issue", "start", "end", "stall", "stall_reason")
    got = [tuple(r[k] for k in keys) for r in t.table.to_pylist() if (r["cu"], r["simd"]) == (1, 0)]
    na = None
    expected = [  # pc = Vaddr - 4096, the "; zyfa_tiny" label row's Vaddr
        (0, "s_load_dwordx4", "SMEM", 1000, 1000, 1004, 0, na),
        (8, "s_waitcnt", "WAIT", 1024, 1024, 1028, 20, "waitcnt"),  # 1004 + 20, 1004 + 24
        (12, "v_mfma_f32_32x32x64_f8f6f4", "MFMA", 1028, 1028, 1032, 0, na),  # decoder said VALU (6)
        (20, "v_exp_f32", "TRANS", 1034, 1034, 1040, 2, "unit_busy"),
        (24, "v_add_f32", "VALU", 1040, 1040, 1044, 0, na),
        (28, "ds_read_b128", "LDS", 1044, 1044, 1048, 0, na),
        (36, "buffer_load_dwordx4", "VMEM", 1054, 1054, 1058, 6, "unit_busy"),
        (44, "s_barrier", "BARRIER", 1088, 1088, 1092, 30, "barrier"),
        (48, "s_cbranch_scc1", "BRANCH", 1092, 1092, 1096, 0, na),
        (52, "s_endpgm", "MISC", 1096, 1096, 1100, 0, na),
    ]
    assert got == expected
    assert _rows(t, cu=1, simd=0)["operands"].iloc[2] == "v[0:15], v[16:23], v[24:31], v[0:15]"


def test_unmapped_line_keeps_timing_and_is_counted():
    t = import_att_dir(DISPATCH)
    row = [r for r in t.table.to_pylist() if (r["cu"], r["simd"]) == (1, 1)][1]
    assert row["opcode"] == "<unmapped:VALU>" and row["unit"] == "VALU"
    assert row["pc"] is None
    assert (row["issue"], row["end"]) == (1014, 1018)
    assert t.meta.extra["unmapped_records"] == 1


def test_mfma_end_from_timing_table():
    """MFMA end = start + pipe cycles when a table is given: 1028 + 64 and 1018 + 64."""
    t = import_att_dir(DISPATCH, mfma_cycles=cycles_from_table({"v_mfma_f32_32x32x64_f8f6f4": 64}))
    mfma = t.df[t.df["unit"] == "MFMA"]
    assert sorted(zip(mfma["simd"], mfma["start"], mfma["end"])) == [(0, 1028, 1092), (1, 1018, 1082)]
    assert t.meta.extra["mfma_end"].startswith("start + matrix-pipe cycles")
    assert import_att_dir(DISPATCH).meta.extra["mfma_end"].startswith("issue completion")


def test_overrides_and_round_trip(tmp_path):
    t = import_att_dir(TINY, kernel="zyfa-fp8", arch="gfx950", clock_mhz=2100.0,
                       shape={"seqlen_q": 128, "seqlen_k": 128}, provenance={"host": "mi355x-01"})
    assert (t.meta.kernel, t.meta.clock_mhz, t.meta.shape) == ("zyfa-fp8", 2100.0, {"seqlen_q": 128, "seqlen_k": 128})
    assert t.meta.provenance["host"] == "mi355x-01"
    back = Trace.load(t.save(tmp_path / "imported"))
    assert back.meta.source == "rocprof-att" and len(back) == 16
    assert back.df["issue"].tolist() == t.df["issue"].tolist()


def test_legacy_code_json_header(tiny_copy):
    """Older att-tool releases wrote 10 columns (no ServiceType/Issued/Stalled/NotIssuedReasons)."""
    def legacy(data):
        data["header"] = "ISA, _, LineNumber, Source, Codeobj, Vaddr, Hit, Latency, Stall, Idle"
        data["code"] = [row[:10] for row in data["code"]]
    _edit(tiny_copy / "code.json", legacy)
    t = import_att_dir(tiny_copy)
    assert _rows(t, cu=1, simd=0)["pc"].tolist()[:3] == [0, 8, 12]


def test_pc_without_kernel_label_stays_vaddr(tiny_copy):
    """No "; name" label row: the entry is unknown, pc keeps the ELF vaddr and the metadata says so."""
    _edit(tiny_copy / "code.json", lambda d: d.update(code=d["code"][1:]))
    t = import_att_dir(tiny_copy)
    assert _rows(t, cu=1, simd=0)["pc"].tolist()[:3] == [4096, 4104, 4108]
    assert t.meta.extra["pc"].startswith("ELF vaddr in the code object for 15 records")
    assert import_att_dir(TINY).meta.extra["pc"].startswith("byte offset from the kernel entry")


def test_kernel_name_falls_back_to_code_label(tiny_copy):
    _edit(tiny_copy / "occupancy.json", lambda d: d.pop("dispatches"))
    assert import_att_dir(tiny_copy).meta.kernel == "zyfa_tiny"  # code.json's "; zyfa_tiny" row
    _edit(tiny_copy / "occupancy.json", lambda d: d.update(dispatches=[1]))
    with pytest.raises(AttFormatError, match="occupancy.json: field 'dispatches'"):
        import_att_dir(tiny_copy)


def test_arch_falls_back_to_gfxip_family(tiny_copy):
    (tiny_copy.parent / "att_2_gfx950_code_object_id_1.out").unlink()
    assert import_att_dir(tiny_copy).meta.arch == "gfx9"


# -- choosing a dispatch ------------------------------------------------------------------------

def test_several_dispatches_need_a_choice(tiny_copy):
    shutil.copytree(tiny_copy, tiny_copy.parent / "ui_output_agent_2_dispatch_9")
    root = tiny_copy.parent
    assert [p.name for p in dispatch_dirs(root)] == ["ui_output_agent_2_dispatch_7", "ui_output_agent_2_dispatch_9"]
    with pytest.raises(ValueError, match="holds 2 traced dispatches.*--dispatch"):
        import_att_dir(root)
    assert import_att_dir(root, dispatch=9).meta.extra["dispatch"] == 9
    with pytest.raises(AttFormatError, match="for dispatch 5"):
        import_att_dir(root, dispatch=5)


def test_not_a_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        import_att_dir(tmp_path / "nowhere")
    with pytest.raises(AttFormatError, match="no rocprofv3 --att dispatch directory"):
        import_att_dir(tmp_path)


# -- bad inputs name the file and the field -----------------------------------------------------

@pytest.mark.parametrize("name", ["filenames.json", "code.json", "occupancy.json"])
def test_missing_file(tiny_copy, name):
    (tiny_copy / name).unlink()
    with pytest.raises(AttFormatError, match=f"{name}: field '<file>': missing"):
        import_att_dir(tiny_copy)


def test_truncated_json(tiny_copy):
    f = tiny_copy / "se0_sm0_sl0_wv0.json"
    f.write_text(f.read_text()[:50])
    with pytest.raises(AttFormatError, match="se0_sm0_sl0_wv0.json: field '<file>': unreadable or truncated JSON"):
        import_att_dir(tiny_copy)


def test_wave_file_listed_but_absent(tiny_copy):
    (tiny_copy / "se1_sm0_sl0_wv0.json").unlink()
    with pytest.raises(AttFormatError, match="se1_sm0_sl0_wv0.json: field '<file>'"):
        import_att_dir(tiny_copy)


def test_code_header_without_vaddr(tiny_copy):
    _edit(tiny_copy / "code.json", lambda d: d.update(header="ISA, _, LineNumber, Source, Codeobj"))
    with pytest.raises(AttFormatError, match=r"code.json: field 'header': lacks column\(s\) \['Vaddr'\]"):
        import_att_dir(tiny_copy)


def test_short_instruction_row(tiny_copy):
    _edit(tiny_copy / "se0_sm0_sl0_wv0.json", lambda d: d["wave"]["instructions"].__setitem__(3, [1, 6, 0]))
    with pytest.raises(AttFormatError, match=r"field 'wave.instructions\[3\]': expected \[time, category"):
        import_att_dir(tiny_copy)


def test_unknown_category(tiny_copy):
    _edit(tiny_copy / "se0_sm0_sl0_wv0.json", lambda d: d["wave"]["instructions"][0].__setitem__(1, 42))
    with pytest.raises(AttFormatError, match="unknown decoder category 42"):
        import_att_dir(tiny_copy)


def test_duration_shorter_than_stall(tiny_copy):
    _edit(tiny_copy / "se0_sm0_sl0_wv0.json", lambda d: d["wave"]["instructions"][1].__setitem__(3, 5))
    with pytest.raises(AttFormatError, match=r"duration \(5\) must be >= stall \(20\)"):
        import_att_dir(tiny_copy)


def test_wave_missing_key(tiny_copy):
    _edit(tiny_copy / "se0_sm1_sl2_wv0.json", lambda d: d["wave"].pop("simd"))
    with pytest.raises(AttFormatError, match="se0_sm1_sl2_wv0.json: field 'wave.simd': missing key"):
        import_att_dir(tiny_copy)


def test_wave_in_wrong_shader_engine(tiny_copy):
    _edit(tiny_copy / "se1_sm0_sl0_wv0.json", lambda d: d.update(name="SE0"))
    with pytest.raises(AttFormatError, match="field 'name': says 'SE0'.*shader engine 1"):
        import_att_dir(tiny_copy)


def test_navi_capture_rejected(tiny_copy):
    _edit(tiny_copy / "filenames.json", lambda d: d.update(gfxip=11))
    with pytest.raises(AttFormatError, match="field 'gfxip': gfxip 11 is not CDNA"):
        import_att_dir(tiny_copy)


def test_bad_occupancy_event(tiny_copy):
    _edit(tiny_copy / "occupancy.json", lambda d: d["0"].append([1, 2]))
    with pytest.raises(AttFormatError, match=r"occupancy.json: field '0\[4\]'"):
        import_att_dir(tiny_copy)


def test_occupancy_not_an_object(tiny_copy):
    (tiny_copy / "occupancy.json").write_text("[1, 2]")
    with pytest.raises(AttFormatError, match="occupancy.json: field '<file>': expected an object.*got list"):
        import_att_dir(tiny_copy)


def test_duplicate_line_number(tiny_copy):
    _edit(tiny_copy / "code.json", lambda d: d["code"][2].__setitem__(2, 1))
    with pytest.raises(AttFormatError, match=r"code.json: field 'code\[2\].LineNumber': line 1 appears twice"):
        import_att_dir(tiny_copy)


# -- ISA classification -------------------------------------------------------------------------

@pytest.mark.parametrize("text,opcode,operands,unit", [
    ("v_mfma_scale_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[0:15]", "v_mfma_scale_f32_32x32x64_f8f6f4",
     "v[0:15], v[16:23], v[24:31], v[0:15]", "MFMA"),
    ("v_smfmac_f32_32x32x32_fp8_fp8 v[0:15], v[16:17], v[18:21], v22", "v_smfmac_f32_32x32x32_fp8_fp8",
     "v[0:15], v[16:17], v[18:21], v22", "MFMA"),
    ("v_rcp_f32_e32 v1, v2 // 000000001A2C: 7E024502", "v_rcp_f32_e32", "v1, v2", "TRANS"),
    ("v_pk_fma_f32 v[0:1], v[2:3], v[4:5], v[6:7]", "v_pk_fma_f32", "v[0:1], v[2:3], v[4:5], v[6:7]", "VALU"),
    ("global_load_dwordx4 v[0:3], v4, s[0:1]", "global_load_dwordx4", "v[0:3], v4, s[0:1]", "VMEM"),
    ("s_buffer_load_dword s4, s[0:3], 0x10", "s_buffer_load_dword", "s4, s[0:3], 0x10", "SMEM"),
    ("s_nop 7", "s_nop", "7", "WAIT"),
    ("s_setprio 1", "s_setprio", "1", "MISC"),
    ("s_branch 65533", "s_branch", "65533", "BRANCH"),
    ("s_add_u32 s0, s1, s2", "s_add_u32", "s0, s1, s2", "SALU"),
])
def test_split_and_unit(text, opcode, operands, unit):
    assert split_isa(text) == (opcode, operands)
    assert unit_of(opcode, 6) == unit


def test_canonical_opcode():
    assert [canonical_opcode(o) for o in ("v_add_f32_e32", "V_CNDMASK_B32_E64", "v_cvt_u32_f32_sdwa",
                                          "v_mov_b32_dpp", "s_waitcnt")] == \
        ["v_add_f32", "v_cndmask_b32", "v_cvt_u32_f32_sdwa", "v_mov_b32_dpp", "s_waitcnt"]


def test_unit_from_category_only():
    assert [unit_of(None, c) for c in (1, 2, 3, 5, 6, 7, 8)] == ["SMEM", "SALU", "VMEM", "LDS", "VALU", "BRANCH", "BRANCH"]
    with pytest.raises(ValueError, match="unknown decoder category 99"):
        unit_of(None, 99)
    with pytest.raises(ValueError, match="need an opcode or a decoder category"):
        unit_of(None)


def test_stall_reasons():
    assert stall_reason("s_waitcnt", 0) is None
    assert (stall_reason("s_waitcnt", 3), stall_reason("s_sleep", 1), stall_reason("v_add_f32", 2)) == \
        ("waitcnt", "nop", "unit_busy")


def test_bad_arguments():
    with pytest.raises(TypeError, match="split_isa: text must be a str"):
        split_isa(3)
    with pytest.raises(ValueError, match="no instruction"):
        split_isa("   ")
    with pytest.raises(TypeError, match="AttInstruction.time must be an int"):
        AttInstruction(time=1.5, category=6, stall=0, duration=4)
    with pytest.raises(ValueError, match="AttWave.simd must be 0-3"):
        AttWave(se=0, cu=0, simd=4, slot=0, begin=0, end=1, instructions=())
    with pytest.raises(ValueError, match="AttWave.cu must be < 16"):
        AttWave(se=0, cu=16, simd=0, slot=0, begin=0, end=1, instructions=())
    with pytest.raises(ValueError, match="cycles of 'v_mfma_x' must be a positive int"):
        cycles_from_table({"v_mfma_x": 0})


def test_annotate_regions_and_iterations():
    """Two waves; wave 0 runs pcs 0 4 8 4 8 12 (one backward jump 8 -> 4), label "loop" at pc 4."""
    recs = [{"cu": 0, "simd": 0, "wave": 0, "pc": pc, "issue": 10 * i} for i, pc in enumerate((0, 4, 8, 4, 8, 12))]
    recs += [{"cu": 0, "simd": 1, "wave": 1, "pc": pc, "issue": 5 + i} for i, pc in enumerate((0, None, 4, 0))]
    annotate(recs, RegionMap({4: "loop"}))
    assert [(r["iteration"], r["region"]) for r in recs[:6]] == [
        (0, None), (0, "loop"), (0, "loop"), (1, "loop"), (1, "loop"), (1, "loop")]
    # no pc: state kept; 4 -> 0 is a backward jump
    assert [(r["iteration"], r["region"]) for r in recs[6:]] == [(0, None), (0, None), (0, "loop"), (1, "loop")]


def test_import_with_labels_fills_region(tiny_copy):
    t = import_att_dir(tiny_copy, regions=RegionMap({28: "lds_phase"}))
    a = [r for r in t.table.to_pylist() if (r["cu"], r["simd"]) == (1, 0)]
    assert [r["region"] for r in a] == [None] * 5 + ["lds_phase"] * 5
    assert {r["iteration"] for r in a} == {0}
    assert {r["region"] for r in import_att_dir(tiny_copy).table.to_pylist()} == {None}


def test_annotate_with_static_clusters():
    """Clusters known: region = the cluster of the record's own pc (labels only drive iteration)."""
    recs = [{"cu": 0, "simd": 0, "wave": 0, "pc": pc, "issue": i} for i, pc in enumerate((0, 4, 8, 4, None, 12))]
    annotate(recs, RegionMap({4: "loop"}, clusters={0: "prologue", 4: "QK_j", 8: "QK_j", 12: "epilogue"}))
    assert [(r["region"], r["iteration"]) for r in recs] == [
        ("prologue", 0), ("QK_j", 0), ("QK_j", 0), ("QK_j", 1), (None, 1), ("epilogue", 1)]
