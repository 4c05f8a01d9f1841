"""tools/check_sischedule.py on a small SISchedule.td-format file written here."""

import importlib.util
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[3] / "tools" / "check_sischedule.py"
TD = """
multiclass SICommonWriteRes {
  def : HWVALUWriteRes<Write32Bit,         1>;
  def : HWVALUWriteRes<WriteTrans32,       4>;
  def : HWVALUWriteRes<WriteFloatCvt,      {cvt}>;
}
let SchedModel = SIDPGFX940FullSpeedModel in {
defm : SICommonWriteRes;
def : HWVALUWriteRes<WriteIntMul,      1>;
def : InstRW<[Write4PassMAI,   MIMFMARead], (instregex "^V_MFMA_.32_16X16X32")>;
def : InstRW<[{pass32}PassMAI,   MIMFMARead], (instregex "^V_MFMA_.32_32X32X16")>;
def : InstRW<[Write16PassMAI,  MIMFMARead], (instregex "^V_MFMA_.32_32X32X[124][FBI]")>;
}
"""


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("check_sischedule", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_agreeing_table_exits_0(tool, tmp_path, capsys):
    td = tmp_path / "SISchedule.td"
    td.write_text(TD.replace("{cvt}", "4").replace("{pass32}", "Write8"))
    assert tool.main(["--td", str(td)]) == 0
    out = capsys.readouterr().out
    assert "v_mfma_f32_32x32x16_bf16                       8     8  match" in out
    assert "v_mfma_f32_32x32x2_f32                        16    16  match" in out  # LLVM name V_MFMA_F32_32X32X2F32
    assert "WriteTrans32 latency (passes)                  4     4  match" in out
    assert "v_mfma_f32_32x32x64_f8f6f4" in out and "not in SIDPGFX940FullSpeedModel" in out


GFX950 = """
let SchedModel = SIDPGFX950FullSpeedModel in {
def : InstRW<[Write4PassMAI,   MIMFMARead], (instregex "^V_MFMA_.32_16X16X64")>;
def WriteMFMAScale_32X32X64_F8F6F4 : SchedWriteVariant<[
    SchedVar<PredIsF8_MFMA_SCALE, [{f8}PassMAI]>,
    SchedVar<NoSchedPred, [Write8PassMAI]>]>;
def : InstRW<[WriteMFMAScale_32X32X64_F8F6F4,  MIMFMARead],
        (instregex "^V_MFMA(_SCALE)?_.32_32X32X64_F8F6F4")>;
}
"""


@pytest.mark.parametrize("f8,code", [("Write16", 0), ("Write8", 1)])
def test_gfx950_f8_variant_is_compared_for_fp8_operands(tool, tmp_path, capsys, f8, code):
    # gfx950's f8f6f4 MFMAs are timed through a SchedWriteVariant: the FP8-operand SchedVar is ours
    td = tmp_path / "SISchedule.td"
    td.write_text(TD.replace("{cvt}", "4").replace("{pass32}", "Write8") + GFX950.replace("{f8}", f8))
    assert tool.main(["--td", str(td)]) == code
    out = capsys.readouterr().out
    assert "LLVM model: SIDPGFX950FullSpeedModel" in out
    row = next(line for line in out.splitlines() if line.startswith("v_mfma_scale_f32_32x32x64_f8f6f4"))
    assert row.split()[1:3] == ["16", f8.removeprefix("Write")]
    assert "v_mfma_i32_16x16x64_i8                         4     4  match" in out


def test_differences_are_reported(tool, tmp_path, capsys):
    td = tmp_path / "SISchedule.td"
    td.write_text(TD.replace("{cvt}", "1").replace("{pass32}", "Write16"))
    assert tool.main(["--td", str(td)]) == 1
    out = capsys.readouterr().out
    assert "DIFF (Write16PassMAI via ^V_MFMA_.32_32X32X16)" in out
    assert "WriteFloatCvt latency (passes)                 4     1  DIFF" in out
    assert "difference(s)" in out


def test_missing_file(tool, tmp_path):
    with pytest.raises(SystemExit):
        tool.main(["--td", str(tmp_path / "nope.td")])
