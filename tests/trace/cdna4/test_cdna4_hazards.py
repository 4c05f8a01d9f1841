"""Static hazard checker: wait states counted like GCNHazardRecognizer, through branches."""

import pytest

from zyfa.gfx950.hazards import check_hazards
from zyfa.gfx950.isa import disassemble, parse_asm


def check(body: str):
    return check_hazards(parse_asm(f"k:\n{body}\n s_endpgm\n", encode=False))


def test_mfma_result_read_by_valu_too_early():
    (v,) = check("v_mfma_f32_32x32x16_bf16 v[0:15], v[16:19], v[20:23], v[0:15]\n s_nop 4\n v_add_f32 v30, v0, v1")
    # 8 passes + 4 = 12 wait states needed; s_nop 4 gives 5
    assert (v.rule, v.needed, v.actual, v.index, v.producer_index) == ("mfma_write_valu_read", 12, 5, 2, 0)
    assert v.registers == (0, 1) and "insert s_nop 6" in str(v)
    assert check("v_mfma_f32_32x32x16_bf16 v[0:15], v[16:19], v[20:23], v[0:15]\n s_nop 7\n s_nop 3\n"
                 " v_add_f32 v30, v0, v1") == []


def test_mfma_chain_and_valu_to_mfma():
    # same accumulator back to back: no wait states
    assert check("v_mfma_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[0:15]\n" * 2) == []
    # MFMA result used as the A operand of the next: 16 passes + 3
    (v,) = check("v_mfma_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[0:15]\n"
                 " v_mfma_f32_32x32x64_f8f6f4 v[32:47], v[0:7], v[24:31], v[32:47]")
    assert (v.rule, v.needed, v.actual) == ("mfma_write_mfma_srcab", 19, 0)
    (v,) = check("v_mov_b32 v16, 0\n v_mfma_f32_32x32x16_bf16 v[0:15], v[16:19], v[20:23], v[0:15]")
    assert (v.rule, v.needed, v.actual) == ("valu_write_mfma_read", 2, 0)


def test_hazard_across_a_loop_back_edge():
    body = """
.Lloop:
 v_add_f32 v30, v0, v1
 s_nop 7
 v_mfma_f32_32x32x16_bf16 v[0:15], v[16:19], v[20:23], v[0:15]
 s_cbranch_scc1 .Lloop
"""
    (v,) = check(body)  # the MFMA at the loop end feeds the v_add at its head: 1 wait state (the branch)
    assert (v.rule, v.index, v.producer_index, v.actual) == ("mfma_write_valu_read", 0, 2, 1)


def test_aiter_real_code_is_hazard_free(aiter_causal):
    # AITER's hand-scheduled assembly runs correctly on MI355X: our rules must not flag it
    program = disassemble(aiter_causal)
    assert sum(i.unit == "MFMA" for i in program.instructions) == 176
    assert check_hazards(program) == []


def test_bad_input():
    with pytest.raises(TypeError, match="Program"):
        check_hazards("v_add_f32 v0, v1, v2")
