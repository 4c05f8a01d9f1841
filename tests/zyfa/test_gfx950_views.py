"""The gfx950 machine description has one of each table; where two executors remain, they agree.

- Units: ``isa.classify`` (what an instruction record's ``unit`` is) and the sourced timing
  table's class (``timing.op_class(...).unit``) name the same unit for every mnemonic the
  generator can emit, the emulator executes, or the generated kernels contain.
- SALU: the cycle model's scalar side (``zyfa.gfx950.scalar.executor``) and the emulator
  (``zyfa.trace.emu.run_snippet``) execute the one ``SOP1``/``SOP2`` table to the same result and SCC.
"""

import random

import pytest

from zyfa.gfx950 import scalar, timing
from zyfa.gfx950.isa import classify, parse_asm, parse_instruction
from zyfa.kernels.gfx950 import VARIANTS, build_config
from zyfa.kernels.gfx950.dsl import SIGNATURES
from zyfa.trace.emu import run_snippet
from zyfa.trace.emu.valu import VALU_OPS

VALUES = [0, 1, 2, 31, 32, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE, 0x10000, 0x1F0005, 0x00080004]


def _mnemonics() -> set[str]:
    names = set(SIGNATURES) | set(VALU_OPS) | set(scalar.SOP1) | set(scalar.SOP2)
    for config in VARIANTS.values():
        names |= {inst.opcode for inst in parse_asm(build_config(config).asm, encode=False).instructions}
    return names


def test_unit_classes_agree():
    names = _mnemonics()
    assert len(names) > 150  # not vacuous: 192 mnemonics when written
    differ = {op: (classify(op), timing.op_class(op).unit) for op in sorted(names)
              if classify(op) != timing.op_class(op).unit}
    assert not differ, differ


SALU_32 = sorted(op for op, (d, s, _) in scalar.SOP2.items() if (d, s) == (1, 1)
                 and op not in ("s_cselect_b32",))  # cselect reads SCC: covered by the scalar tests


@pytest.mark.parametrize("op", SALU_32)
def test_salu_model_and_emulator_agree(op):
    rng = random.Random(op)
    for a in VALUES:
        for b in rng.sample(VALUES, 4) + [rng.getrandbits(32)]:
            st = scalar.State(b"")
            st.regs.update({0: a, 1: b, scalar.SCC: 0})
            scalar.executor(parse_instruction(f"{op} s2, s0, s1"))(st)
            wave, _ = run_snippet(f"{op} s2, s0, s1", sgprs={0: a, 1: b})
            assert (st.regs[2], st.regs[scalar.SCC]) == (wave.s[2], wave.scc), (op, hex(a), hex(b))


def test_scc_of_shift_add_and_bit_field_extract():
    """ISA: s_lshlN_add_u32's SCC is the carry of the whole 64-bit (S0 << N) + S1 (shifted-out
    bits count); s_bfe_*'s SCC is result != 0."""
    assert scalar.SOP2["s_lshl1_add_u32"][2](0x80000000, 1, 0) == (1, 1)
    assert scalar.SOP2["s_bfe_u32"][2](0xF0, 4 | (4 << 16), 0) == (0xF, 1)
    assert scalar.SOP2["s_bfe_u32"][2](0xF0, 0 | (4 << 16), 0) == (0, 0)


@pytest.mark.parametrize("op", sorted(scalar.SOPK))
def test_sopk_model_and_emulator_agree(op):
    for cur in VALUES:
        for k in (0, 1, 0x7FFF, 0x8000, 0xFFFF, 0x1234):
            for scc in (0, 1):
                st = scalar.State(b"")
                st.regs.update({2: cur, scalar.SCC: scc})
                scalar.executor(parse_instruction(f"{op} s2, {k:#x}"))(st)
                setup = "s_cmp_eq_u32 0, 0\n" if scc else ""  # the emulator's SCC starts at 0
                wave, _ = run_snippet(f"{setup}{op} s2, {k:#x}", sgprs={2: cur})
                assert (st.regs[2], st.regs[scalar.SCC]) == (wave.s[2], wave.scc), (op, hex(cur), hex(k), scc)
