"""Generator, DSL, schedule data, static counts, assembly round trip and hazards of the gfx950 kernels."""

import inspect
import re
import shutil
import struct
import subprocess
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from zyfa import numerics
from zyfa.gfx950.isa import parse_asm
from zyfa.kernels.gfx950 import build_for, config_for, grid
from zyfa.kernels.gfx950.build import build, disassemble
from zyfa.kernels.gfx950.counts import tile_counts
from zyfa.kernels.gfx950.dsl import Asm, Label, Neg, Reg, a, emitter_source, forwards_source, s, v
from zyfa.kernels.gfx950.generator import STAMP, generate, lds_layout, pad_hazards
from zyfa.kernels.gfx950.kernargs import unpack
from zyfa.kernels.gfx950 import generator as generator_module
from zyfa.kernels.gfx950.schedule import VARIANTS, Cluster, KernelConfig, barrier_intervals, schedule
from zyfa.kernels.registry import get_kernel, kernels
from zyfa.shapes import AttnShape
from zyfa.trace.emu.formats import fma_f32


needs_llvm = pytest.mark.skipif(not (shutil.which("llvm-mc-22") and shutil.which("ld.lld-22")),
                                reason="llvm-mc-22/ld.lld-22 not installed (Debian llvm-22, lld-22)")


@pytest.fixture(scope="module")
def generated():
    return {name: generate(config) for name, config in VARIANTS.items()}


# -- DSL ---------------------------------------------------------------------------------------------
def test_registers_validate_at_construction():
    assert str(v[0:16]) == "v[0:15]" and str(a[3]) == "a3" and str(s[2:4]) == "s[2:3]"
    assert v[8:16][2:4] == Reg("v", 10, 2)
    with pytest.raises(ValueError, match="outside the v file"):
        v[250:260]
    with pytest.raises(ValueError, match="outside the s file"):
        s[102]
    with pytest.raises(IndexError):
        v[0:4][4]
    with pytest.raises(ValueError, match="kind"):
        Reg("x", 0)


def test_emit_validates_operands():
    asm = Asm()
    asm.emit("v_mfma_f32_32x32x64_f8f6f4", v[0:16], v[16:24], v[24:32], 0)
    asm.emit("v_fma_f32", v[1], Neg(v[2]), v[3], 1.0)
    assert asm.render().splitlines() == ["  v_mfma_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], 0",
                                         "  v_fma_f32 v1, -v2, v3, 1.0"]
    with pytest.raises(ValueError, match="operand 1: v\\[16:19\\] is 4 registers wide, expected 8"):
        asm.emit("v_mfma_f32_32x32x64_f8f6f4", v[0:16], v[16:20], v[24:32], 0)
    with pytest.raises(TypeError, match="operand 1: s\\[4:5\\] is in the s file"):
        asm.emit("v_pk_fma_f32", v[0:2], s[4:6], v[2:4], v[4:6])
    with pytest.raises(ValueError, match="no VOP3 literals"):
        asm.emit("v_max3_f32", v[0], 0x1234, v[1], v[2])
    with pytest.raises(ValueError, match="one constant-bus operand"):
        asm.emit("v_fma_f32", v[0], s[1], s[2], v[3])
    with pytest.raises(ValueError, match="not in the DSL's signature table"):
        asm.emit("v_bogus_op", v[0])
    with pytest.raises(ValueError, match="modifier 'glc' not allowed"):
        asm.emit("ds_read_b128", v[0:4], v[4], mods=("glc",))
    with pytest.raises(ValueError, match="must start at a multiple of 4"):
        asm.emit("s_load_dwordx4", s[2:6], s[0:2], 0)
    with pytest.raises(ValueError, match="bad label"):
        Label("has space")


def test_instructions_record_the_emitter_line():
    """Each instruction names the line that emitted it (repository path:line), skipping the DSL
    and thin ``forwards_source`` wrappers, so the explorer can link an instruction to its emitter."""
    asm = Asm()

    @forwards_source
    def wrapper(*operands):
        return asm.emit("v_mov_b32", *operands)

    line = inspect.currentframe().f_lineno
    direct = asm.emit("v_mov_b32", v[0], v[1])
    wrapped = wrapper(v[2], v[3])
    here = "tests/kernels/gfx950/test_gfx950_generator.py"
    assert direct.source == f"{here}:{line + 1}" and wrapped.source == f"{here}:{line + 2}"
    assert emitter_source() == f"{here}:{inspect.currentframe().f_lineno}"
    assert direct == replace(direct, source=None)  # a provenance note, not part of the instruction


def test_build_meta_links_every_instruction_to_its_generator_line(generated):
    """The generated instructions' sources are lines of kernels/gfx950/ that emit (a call of
    ``e``/``emit``/``Instr``), and the opcode is spelled out on the line for all but the few
    helpers that take it as a variable (reduce3, the mask compare)."""
    gen = generated["zyfa-fp8-v1"]
    root = Path(generator_module.__file__).resolve().parents[2]
    files, literal = {}, 0
    for inst in gen.instructions:
        path, _, number = inst.source.rpartition(":")
        assert path.startswith("kernels/gfx950/") and number.isdigit(), inst
        if path not in files:
            files[path] = (root / path).read_text().splitlines()
        text = files[path][int(number) - 1]
        assert re.search(r"\b(e|emit|Instr)\(", text), (inst, text)
        literal += inst.opcode in text
    assert literal > 0.8 * len(gen.instructions)  # 88% at the time of writing
    # hazard s_nops name the padder's line
    asm = Asm()
    asm.emit("v_mfma_f32_32x32x64_f8f6f4", a[0:16], v[0:8], v[8:16], a[0:16])
    asm.emit("v_accvgpr_read_b32", v[22], a[3])
    pad_hazards(asm)
    nop = asm.instructions[1]
    path, _, number = nop.source.rpartition(":")
    assert nop.opcode == "s_nop" and path == "kernels/gfx950/generator.py"
    assert "Instr(\"s_nop\"" in (root / path).read_text().splitlines()[int(number) - 1]
    # the softmax's emitters are told apart: its instructions come from many lines
    assert len({i.source for i in gen.instructions if i.cluster == "softmax_j"}) > 20


def test_kernel_config_rejects_bad_values():
    with pytest.raises(ValueError, match="Unknown KernelConfig.softmax: 'fast'"):
        KernelConfig("x", softmax="fast")
    with pytest.raises(ValueError, match="needs scaling='block'"):
        KernelConfig("x", softmax="lean", scaling="none")
    with pytest.raises(ValueError, match="headdim must be a multiple of 64"):
        KernelConfig("x", headdim=100)
    with pytest.raises(ValueError, match="headdim_v must be 128"):
        KernelConfig("x", headdim_v=64)
    with pytest.raises(ValueError, match="bf16 kernels use"):
        KernelConfig("x", dtype="bf16", softmax="lean")


# -- schedule as data ----------------------------------------------------------------------------------
def test_schedule_table_per_wave_group():
    pp, serial = VARIANTS["zyfa-fp8-v1"], KernelConfig("s", schedule="serial")
    g0, g1 = schedule(pp, 0), schedule(pp, 1)
    assert [c.name for c in g0] == ["PV_j-1", "QK_j", "load_K_j+1_V_j", "mask_j", "softmax_j", "store_K_j+1_V_j"]
    assert [c.name for c in g1] == ["PV_j-1", "QK_j", "store_K_j+1_V_j", "mask_j", "softmax_j", "load_K_j+1_V_j",
                                    "prefetch_j+1"]
    # rowsum="split": the previous tile's block-1 sum joins l before the softmax, this tile's after it
    assert [c.name for c in schedule(replace(VARIANTS["zyfa-fp8"], rowsum="split"), 0)] == [
        "PV_j-1", "QK_j", "load_K_j+1_V_j", "mask_j", "rowsum_carry_j", "softmax_j", "rowsum_j", "store_K_j+1_V_j"]
    by_name = {c.name: c for c in g0}
    assert by_name["QK_j"].priority == by_name["load_K_j+1_V_j"].priority == 1 and by_name["softmax_j"].priority == 0
    assert by_name["load_K_j+1_V_j"].spread and not {c.name: c for c in g1}["load_K_j+1_V_j"].spread
    assert by_name["mask_j"].only == "diagonal" and [c.name for c in by_name["softmax_j"].nested] == ["rescale_O"]
    assert [[c.name for c in iv] for iv in barrier_intervals(g0)] == [
        ["PV_j-1", "QK_j", "load_K_j+1_V_j"], ["mask_j", "softmax_j", "store_K_j+1_V_j"]]
    assert {c.priority for c in schedule(serial, 0)} == {0} and schedule(serial, 1) == schedule(serial, 0)
    assert [c.name for c in barrier_intervals(g1)[1]][-1] == "prefetch_j+1" and "prefetch" not in {c.emitter for c in g0}
    assert all(c.nested == () for c in schedule(VARIANTS["aiter-like-fp8"], 0))  # no block scaling: no lazy rescale
    with pytest.raises(ValueError, match="outside a barrier interval"):
        barrier_intervals(g0[:-1])
    with pytest.raises(ValueError, match="cannot be spread"):
        Cluster("x", "lds_store", spread=True)
    with pytest.raises(ValueError, match="Unknown Cluster.emitter"):
        Cluster("x", "nope")


def test_build_meta_units_are_derived_from_the_emitted_code(generated):
    gen = generated["zyfa-fp8-v1"]
    assert {c["group"] for c in gen.clusters} == {0, 1}
    by_name = {}
    for cl in gen.clusters:
        insts = [i for i in gen.instructions[cl["first"]:cl["last"] + 1] if i.cluster == cl["name"]]
        assert sum(cl["units"].values()) == len(insts), cl
        assert cl["units"].get("MFMA", 0) == sum(i.opcode.startswith("v_mfma") for i in insts), cl
        by_name.setdefault(cl["name"], cl)
    # 4 key tiles x 2 head-dim chunks; 4 hd tiles x 2 key blocks + one row-sum MFMA per 64-key block
    assert by_name["QK_j"]["units"]["MFMA"] == 8 and by_name["PV_j-1"]["units"]["MFMA"] == 10
    assert by_name["load_K_j+1_V_j"]["units"]["VMEM"] == 4 and by_name["softmax_j"]["units"]["VALU"] == 180


def test_group1_prefetches_the_next_tiles_first_operands(generated):
    """Group 1's softmax phase ends with the ds_reads of the next MFMA phase's first read_ahead
    steps; that phase then issues only the remaining reads before its first MFMA. Block-scaled
    kernels start PV_j-1 with the two row-sum MFMAs (no LDS operand), so of the first 3 steps
    one reads V^T (2 ds_reads per fp8 operand)."""
    gen = generated["zyfa-fp8-v1"]
    body = _loop_body(gen, group=1)
    start = gen.tile_starts[2]
    pv = [i for i in gen.instructions[start:gen.tile_starts[3]] if i.cluster == "PV_j-1" and i.opcode.startswith("v_mfma")]
    rowsum = gen.registers["rowsum_accumulator"]
    assert [str(i.operands[0]) == rowsum for i in pv] == [True, True] + [False] * 8 and gen.read_ahead == 3
    barriers = [k for k, (_, op) in enumerate(body) if op == "s_barrier"]
    tail = body[barriers[0]:barriers[1]]
    prefetch = [op for cl, op in tail if cl == "prefetch_j+1"]
    assert prefetch == ["ds_read_b128"] * 2
    first_mfma = next(k for k, (_, op) in enumerate(body) if op.startswith("v_mfma"))
    assert [op for _, op in body[:first_mfma]].count("ds_read_b128") == 0  # steps 0-2 came from the prefetch
    g0 = _loop_body(gen, group=0)
    first_mfma = next(k for k, (_, op) in enumerate(g0) if op.startswith("v_mfma"))
    assert [op for _, op in g0[:first_mfma]].count("ds_read_b128") == 2


def _with_table(monkeypatch, edit, name="zyfa-fp8"):
    """Generate ``name`` from its schedule table changed by ``edit(cluster) -> cluster``."""
    original = generator_module.schedule
    monkeypatch.setattr(generator_module, "schedule", lambda config, group: tuple(edit(c) for c in original(config, group)))
    gen = generate(VARIANTS[name])
    monkeypatch.undo()
    return gen


def _loop_body(gen, group=0):
    """Opcodes (with the cluster tag) of wave group ``group``'s first tile body."""
    start = gen.tile_starts[2 * group]
    return [(i.cluster, i.opcode) for i in gen.instructions[start:gen.tile_starts[2 * group + 1]]]


def test_before_end_places_group1_stores_inside_its_mfma_phase(monkeypatch, generated):
    """zyfa-fp8-valu-rowsum, wave group 1: the table's store cluster has before_end=3, so its
    ds_writes sit between the MFMAs, three MFMAs before the phase ends, and the pipeline's
    lgkmcnt waits count them; before_end=0 puts them after the last MFMA."""
    def stores_vs_mfmas(body):
        mfmas = [k for k, (_, op) in enumerate(body) if op.startswith("v_mfma")]
        phase = [k for k in mfmas if k < next(k for k, (_, op) in enumerate(body) if op == "s_barrier")]
        writes = [k for k, (_, op) in enumerate(body) if op == "ds_write_b128"]
        return sum(k > writes[-1] for k in phase), len(writes)
    assert stores_vs_mfmas(_loop_body(generated["zyfa-fp8-valu-rowsum"], group=1)) == (3, 4)
    flat = _with_table(monkeypatch, lambda c: replace(c, before_end=0), name="zyfa-fp8-valu-rowsum")
    assert stores_vs_mfmas(_loop_body(flat, group=1)) == (0, 4)
    body = _loop_body(generated["zyfa-fp8-valu-rowsum"], group=1)
    first_write = next(k for k, (_, op) in enumerate(body) if op == "ds_write_b128")
    waits = [op for _, op in body[first_write:]]
    assert "s_waitcnt" in waits  # the MFMAs after the stores still wait for their operand reads
    with pytest.raises(ValueError, match="before_end"):
        Cluster("x", "qk", before_end=2)


def test_table_entries_drive_the_emitted_order(monkeypatch):
    base = generate(VARIANTS["zyfa-fp8-v1"])
    body = _loop_body(base)
    mfmas = [k for k, (_, op) in enumerate(body) if op.startswith("v_mfma")]
    loads = [k for k, (_, op) in enumerate(body) if op == "buffer_load_dwordx4"]
    assert mfmas[0] < loads[0] < mfmas[1] < loads[1] < mfmas[2]  # spread: one load after each of the first MFMAs

    # not spread: all four loads follow the last MFMA of the phase
    unspread = _loop_body(_with_table(monkeypatch, lambda c: replace(c, spread=False), name="zyfa-fp8-v1"))
    mfmas = [k for k, (_, op) in enumerate(unspread) if op.startswith("v_mfma")]
    assert all(k > mfmas[-1] for k, (_, op) in enumerate(unspread) if op == "buffer_load_dwordx4")

    # QK_j before PV_j-1: the operand pipeline follows the table order
    def swap(c):
        if c.name in ("PV_j-1", "QK_j"):
            return replace(c, name="QK_j", emitter="qk") if c.name == "PV_j-1" else replace(c, name="PV_j-1", emitter="pv")
        return c
    swapped = _loop_body(_with_table(monkeypatch, swap, name="zyfa-fp8-v1"))
    first_mfma = next(op for _, op in swapped if op.startswith("v_mfma"))
    assert first_mfma == "v_mfma_f32_32x32x64_f8f6f4" and next(op for _, op in body if op.startswith("v_mfma")) \
        == "v_mfma_scale_f32_32x32x64_f8f6f4"

    # priority and barrier come from the table: QK_j at priority 2, a barrier after softmax_j too
    def edit(c):
        if c.name == "softmax_j":
            return replace(c, barrier=True)
        return replace(c, priority=2) if c.priority else c
    edited = _with_table(monkeypatch, edit, name="zyfa-fp8-v1")
    ops = [op for _, op in _loop_body(edited)]
    assert ops.count("s_barrier") == 3 and [op for _, op in body].count("s_barrier") == 2
    assert "s_setprio 2" in edited.asm and "s_setprio 1" not in edited.asm and "s_setprio 1" in base.asm

    # the mask only on diagonal tiles: "always" drops the scalar skip branch (the other one: the
    # store's jump to the diagonal V NaN check, generator.mask_v_nan)
    always = _loop_body(_with_table(monkeypatch, lambda c: replace(c, only="always"), name="zyfa-fp8-v1"))
    def branches(ops):  # scalar branches other than the per-MFMA masked skips (s_cmp_le_i32 before them)
        return sum(op == "s_cbranch_scc1" and ops[k - 1][1] != "s_cmp_le_i32" for k, (_, op) in enumerate(ops))
    assert branches(body) == 3 and branches(always) == 2


def test_table_decides_the_softmax_emitter_the_loop_entry_and_the_drain(monkeypatch, generated):
    """The generator has no cluster kinds of its own for these either: softmax_j's emitter names
    the recipe's routine (softmax_lean -> softmax_exact puts v_exp in the loop), a cluster with
    at_entry also runs before the loop (group 1's prefetch: 2 ds_reads per fp8 operand step, 3
    steps minus the row-sum MFMA with no LDS operand), and the drain clusters run after it (PV of
    the last tile: without drain, no MFMA follows the loop)."""
    gen = generated["zyfa-fp8-v1"]
    assert {c["emitter"] for c in gen.clusters if c["name"] == "softmax_j"} == {"softmax_lean"}
    exact = _with_table(monkeypatch, lambda c: replace(c, emitter="softmax_exact") if c.name == "softmax_j" else c,
                        name="zyfa-fp8-v1")
    assert "v_exp_f32" not in gen.asm and any(i.opcode == "v_exp_f32" and i.cluster == "softmax_j"
                                               for i in exact.instructions)

    def before_loop(g, group=1):  # instructions of the group's code before its first tile body
        first = g.tile_starts[2 * group]
        start = max(k for k, i in enumerate(g.instructions[:first]) if i.opcode == "s_cbranch_scc1")
        return [i.opcode for i in g.instructions[start:first]]
    no_entry = _with_table(monkeypatch, lambda c: replace(c, at_entry=False), name="zyfa-fp8-v1")
    assert before_loop(gen).count("ds_read_b128") == 2 and before_loop(no_entry).count("ds_read_b128") == 0

    def mfmas_after_loop(g):
        done = max(k for k, i in enumerate(g.instructions) if i.cluster == "PV_j-1")
        return done > max(k for k, i in enumerate(g.instructions) if i.cluster == "QK_j")
    no_drain = _with_table(monkeypatch, lambda c: replace(c, drain=False), name="zyfa-fp8-v1")
    assert mfmas_after_loop(gen) and not mfmas_after_loop(no_drain)
    with pytest.raises(ValueError, match="drain"):
        Cluster("x", "softmax_lean", drain=True)


# -- static counts (per 32 x 128 tile, cycle model timing table) -------------------------------------------
def test_static_counts_per_tile(generated):
    # per 64-key block: 16 v_maximum3 (lane-local, NaN-propagating), 4 for the scale byte, 1 FMA constant,
    # 32 v_fma; lean: 32 v_cvt_u32 (SDWA); exact: 16 v_cvt_pk_fp8 (+32 v_exp on TRANS).
    # per tile: both blocks' lane halves joined and bm computed by one shared exchange (swap, maximum3,
    # mul, ceil, maximum3, NaN-flag fma, mov, swap = 8), the lazy-rescale max + compare (2)
    per_block_lean = 16 + 4 + 1 + 32 + 32
    per_block_exact = 16 + 4 + 1 + 32 + 16
    lean, exact = tile_counts(generated["zyfa-fp8-v1"]), tile_counts(generated["zyfa-fp8-exact"])
    assert lean.valu_cycles == 4 * (2 * per_block_lean + 8 + 2) == 720
    assert lean.trans_cycles == 0
    assert exact.valu_cycles == 4 * (2 * per_block_exact + 8 + 2) == 592
    assert exact.trans_cycles == 4 * 64
    assert lean.valu_by_opcode["v_cvt_u32_f32_sdwa"] == 4 * 64 and lean.valu_by_opcode["v_fma_f32"] == 4 * (64 + 2 + 1)
    assert lean.valu_by_opcode["v_permlane32_swap_b32"] == 4 * 2
    packed = tile_counts(generate(KernelConfig("packed", fma="packed")))
    assert packed.valu_cycles == 720 - 4 * 32 and packed.valu_by_opcode["v_pk_fma_f32"] == 4 * 32
    for counts in (lean, exact):
        assert (counts.mfma, counts.mfma_rowsum, counts.mfma_cycles) == (18, 2, 18 * 64)
        assert counts.mask_cycles == 4 * (2 * 64 + 1)
    aiter = tile_counts(generated["aiter-like-fp8"])
    # 32 max + 3 join + 2 m_new + 2 guard + 1 + 1 + 32 pk_fma + 1 + 64 add + 64 mul + 32 cvt + 1 mov
    assert aiter.valu_cycles == 4 * 235 and aiter.trans_cycles == 4 * 65
    assert (aiter.mfma, aiter.mfma_rowsum) == (16, 0)
    bf16 = tile_counts(generated["zyfa-bf16"])  # same as AITER-like but 64 v_fma_f32 for 32 v_pk_fma
    assert (bf16.mfma, bf16.mfma_cycles) == (64, 64 * 32) and bf16.valu_cycles == 4 * (235 + 32)


def test_zyfa_fp8_lean_p_static_count_is_within_the_write_ups_budget(generated):
    """zyfa-fp8 (folded Lean P): the FMA lives in the QK MFMA (scaled, Q's power of two as its E8M0
    scale, C = the offset block on each S tile's first MFMA); per tile 32 v_maximum3 (one chain over
    the lane's 64 values) + 1 compare for the check + 64 SDWA converts = 97 VALU ops = 388 cycles <= 400.
    The rounded row sum: two unscaled 16x16x128 MFMAs (32 cycles each) into 4 VGPRs, or on the VALU
    (zyfa-fp8-valu-rowsum: 2 x (16 converts + 31 adds) + 6 = 100 ops, no row-sum MFMA)."""
    counts = tile_counts(generate(replace(VARIANTS["zyfa-fp8"], name="split-rowsum", rowsum="split")))
    assert counts.valu_cycles == 4 * (32 + 1 + 64) == 388 <= 400
    assert counts.valu_by_opcode == {"v_maximum3_f32": 4 * 32, "v_cmp_ngt_f32": 4,
                                     "v_cvt_u32_f32_sdwa": 4 * 64}
    # rowsum="split": block 0 by one 16x16x128 MFMA, block 1 on the VALU (16 converts + 31 adds + 3 to
    # join the lane halves) and carried into l one tile later (one add: the accumulator is a VGPR)
    assert (counts.mfma, counts.mfma_rowsum, counts.mfma_cycles, counts.rowsum_cycles) == (17, 1, 16 * 64 + 32, 32)
    assert counts.rowsum_valu_cycles == 4 * (16 + 31 + 3 + 1) == 204
    # zyfa-fp8 (rowsum="mfma"): both blocks by a 16x16x128 MFMA, no row-sum VALU op
    assert generated["zyfa-fp8"].registers["rowsum_accumulator"].startswith("v[") and generated["zyfa-fp8"].read_ahead == 3
    both = tile_counts(generated["zyfa-fp8"])
    assert both.valu_cycles == 388 and both.valu_by_opcode == counts.valu_by_opcode
    assert (both.mfma, both.mfma_rowsum, both.mfma_cycles, both.rowsum_cycles, both.rowsum_valu_cycles) == (
        18, 2, 16 * 64 + 64, 64, 0)
    valu = tile_counts(generated["zyfa-fp8-valu-rowsum"])
    assert valu.valu_cycles == 388
    assert (valu.mfma, valu.mfma_rowsum, valu.mfma_cycles, valu.rowsum_valu_cycles) == (16, 0, 16 * 64, 400)
    gen = generated["zyfa-fp8-valu-rowsum"]
    pv = [i for i in gen.instructions if i.cluster == "PV_j-1" and i.opcode.startswith("v_mfma")]
    assert {i.opcode for i in pv} == {"v_mfma_f32_32x32x64_f8f6f4"} and "rowsum_accumulator" not in gen.registers
    for gen in (generated["zyfa-fp8"], generated["zyfa-fp8-valu-rowsum"]):
        qk = [i for i in gen.instructions if i.cluster == "QK_j" and i.opcode.startswith("v_mfma")]
        offset = gen.registers["qk_offset_block"]
        assert {i.opcode for i in qk} == {"v_mfma_scale_f32_32x32x64_f8f6f4"}
        assert sum(str(i.operands[3]) == offset for i in qk) == len(qk) // 2  # first MFMA of each S tile
        # no block scale bookkeeping: both P blocks carry the constant E8M0 119 (2^-8)
        assert "v_med3_i32" not in {i.opcode for i in gen.instructions if i.cluster == "softmax_j"}
    with pytest.raises(ValueError, match="headdim 128 only"):
        KernelConfig("f192", softmax="folded", headdim=192)  # rowsum="mfma" (the default)
    assert generate(KernelConfig("f192v", softmax="folded", headdim=192, rowsum="valu")).vgprs <= 192
    # the registered zyfa-fp8 on an MLA shape takes the VALU row sum (config_for), the only form that fits
    mla = config_for("zyfa-fp8", AttnShape(batch=1, heads=2, heads_k=2, seqlen_q=256, seqlen_k=256, headdim=192, dtype="fp8"))
    assert (mla.rowsum, mla.headdim, config_for("zyfa-fp8", AttnShape(batch=1, heads=2, heads_k=2, seqlen_q=256, seqlen_k=256,
                                                                        dtype="fp8")).rowsum) == ("valu", 192, "mfma")

def test_rescale_threshold_adds_one_compare_operand():
    lazy = generate(KernelConfig("lazy8", rescale_threshold=8))
    assert tile_counts(lazy).valu_cycles == 720 + 4
    assert "v_add_f32 v{0}, 0x41000000".format(lazy.registers["tmp2"][1:]) in lazy.asm  # ref + 8.0
    with pytest.raises(ValueError, match="rescale_threshold must be an int in \\[0, 64\\]"):
        KernelConfig("x", rescale_threshold=65)


def test_mla_shape_counts():
    gen = generate(KernelConfig("mla", headdim=192))
    assert tile_counts(gen).mfma == 4 * 3 + 8 + 2
    # Q needs 8 more VGPRs than hd 128: the operand ring drops to 3 slots to stay within 256
    assert (gen.read_ahead, generate(VARIANTS["zyfa-fp8"]).read_ahead, generate(VARIANTS["zyfa-bf16"]).read_ahead) == (2, 3, 4)


# -- resources, descriptor, assembly ---------------------------------------------------------------------------
def test_resources_fit_gfx950(generated):
    for name, gen in generated.items():
        assert gen.vgprs + gen.agprs <= 256, name  # two waves per SIMD share 512
        assert gen.lds_bytes <= 160 * 1024, name
        assert gen.sgprs <= 102, name
        assert gen.asm.startswith(f"; {STAMP}")
        assert f".amdhsa_group_segment_fixed_size {gen.lds_bytes}" in gen.asm
        assert f".amdhsa_accum_offset {gen.vgprs}" in gen.asm
    # + the V NaN words of fp8 (128 first-NaN keys and the "any" word, 16-byte aligned)
    assert lds_layout(VARIANTS["zyfa-fp8"]).total == 2 * 128 * 144 * 2 + 528
    # bf16: first NaN, +Inf and -Inf keys (3 x 128) and the "any" word
    assert lds_layout(VARIANTS["zyfa-bf16"]).total == 2 * 128 * 272 * 2 + 1552


def _mnemonic(op: str) -> str:
    return re.sub(r"_(e32|e64|sdwa)$", "", op)


@needs_llvm
def test_assembles_and_round_trips_through_objdump():
    built = build(VARIANTS["zyfa-fp8"])
    assert built.code_object.read_bytes()[:4] == b"\x7fELF"
    text = disassemble(built.code_object)
    ops = [_mnemonic(line.split()[0]) for line in text.splitlines()
           if line.startswith("\t") and "//" in line and not line.strip().startswith("s_code_end")]
    ours = [_mnemonic(i.opcode) for i in built.generated.instructions]
    assert ops == ours
    notes = subprocess.run(["llvm-readelf-22", "--notes", str(built.code_object)], capture_output=True, text=True).stdout
    assert ".kernarg_segment_size: 128" in notes and "zyfa_fp8.kd" in notes
    clusters = built.clusters
    assert all(c["pc_start"] < (c["pc_end"] or 1 << 30) for c in clusters)
    assert [c["pc_start"] for c in clusters] == sorted(c["pc_start"] for c in clusters)
    # the sizes read off the disassembly lay the text out at the disassembly's offsets, as the
    # model's parser (which takes them instead of encoding the text again) and llvm-mc agree
    program = parse_asm(built.generated.asm, sizes=built.sizes)
    assert tuple(i.pc for i in program.instructions) == built.pcs
    assert program == parse_asm(built.generated.asm)


def test_pad_hazards_uses_the_machine_descriptions_rules():
    """MFMA (16 passes) -> VALU read needs NumPasses + 4 = 20 wait states (PR126727): the padder
    covers them with the independent VALU in between (1) and s_nop 15 + s_nop 2 (16 + 3)."""
    asm = Asm()
    asm.emit("v_mfma_f32_32x32x64_f8f6f4", a[0:16], v[0:8], v[8:16], a[0:16])
    asm.emit("v_mov_b32", v[20], v[21])  # independent: one wait state
    asm.emit("v_accvgpr_read_b32", v[22], a[3])  # reads the MFMA's result
    assert pad_hazards(asm) == 2
    assert [i.text for i in asm.instructions][2:4] == ["s_nop 15", "s_nop 2"]


def test_no_hazards_in_zyfa_fp8(generated):
    from zyfa.gfx950.hazards import check_hazards
    from zyfa.gfx950.isa import parse_asm
    program = parse_asm(generated["zyfa-fp8"].asm, encode=False)
    assert check_hazards(program) == []
    assert program.descriptor.fields["accum_offset"] == generated["zyfa-fp8"].vgprs


@pytest.mark.slow
@pytest.mark.parametrize("name", ["zyfa-fp8-exact", "aiter-like-fp8", "zyfa-bf16"])
def test_no_hazards_other_variants(generated, name):
    from zyfa.gfx950.hazards import check_hazards
    from zyfa.gfx950.isa import parse_asm
    assert check_hazards(parse_asm(generated[name].asm, encode=False)) == []


def test_pingpong_barriers_match_between_wave_groups(generated):
    """Group 1 enters one barrier late; group 0 adds one at the end: equal static counts."""
    text = generated["zyfa-fp8"].asm
    body = text[text.index("s_cbranch_scc1 .L_group1"):text.index(".L_epilogue:")]
    g0, g1 = body.split(".L_group1:")
    assert g0.count("s_barrier") == g1.count("s_barrier") == 2 * 2 + 1 + 1
    assert g0.index("s_setprio 1") < g0.index("ds_write_b128") and "s_setprio 1" in g1
    # the lazy rescale is out of line: the common path falls through s_cbranch_execnz
    assert g0.count("s_cbranch_execnz .L_rescale_") == 2 and g0.index(".L_rescale_g00:") > g0.index("s_branch .L_g0_loop")
    serial = generate(KernelConfig("serial", schedule="serial")).asm
    assert "s_setprio" not in serial and ".L_group1" not in serial


def test_aiter_schedule_is_aiter_v3_fp8s_loop(generated):
    """aiter-like-fp8 runs AITER v3 FP8's loop (schedule.aiter_schedule): six barrier intervals per
    tile, the same table for both groups, group 1 three intervals behind; the max phase holds the
    v_max3 row max and every v_pk_fma (the MFMA pipe is idle then), the exp phase the exps, the
    l and O updates, the convert phase the e4m3 packing: per tile what AITER's
    fwd_hd128_fp8_causal.co does (32 v_max3 + 32 v_pk_fma | 65 v_exp, 64 v_add, 66 v_mul | 32
    v_cvt_pk_fp8_f32, counted in its cycle-model trace)."""
    config = VARIANTS["aiter-like-fp8"]
    table = schedule(config, 0)
    assert schedule(config, 1) == table
    assert [[c.name for c in iv] for iv in barrier_intervals(table)] == [
        ["PV_j-1", "QK_j", "load_K_j+1_V_j"], ["store_K_j+1_V_j"], ["mask_j", "softmax_max_j"], ["softmax_exp_j"],
        ["softmax_cvt_j"], ["idle_j"]]
    gen = generated["aiter-like-fp8"]
    body = gen.asm[gen.asm.index("s_cbranch_scc1 .L_group1"):gen.asm.index(".L_epilogue:")]
    g0, g1 = body.split(".L_group1:")
    assert g0.count("s_barrier") == g1.count("s_barrier") == 6 * 2 + 1 + 3  # 2 tiles unrolled, tail, stagger
    # the stagger: group 1 waits 3 barriers before its loop, group 0 adds 3 after its tail's
    assert g1[:g1.index(".L_g1_loop:")].count("s_barrier") == 3
    assert g0[g0.index(".L_g0_tail_done:"):].count("s_barrier") == 1 + 3
    phases = {}
    for name in ("softmax_max_j", "softmax_exp_j", "softmax_cvt_j"):
        first = next(cl for cl in gen.clusters if cl["name"] == name and cl["group"] == 0)
        ops = [i.opcode for i in gen.instructions[first["first"]:first["last"] + 1] if i.cluster == name]
        phases[name] = {op: ops.count(op) for op in set(ops)}
    assert phases["softmax_max_j"]["v_max3_f32"] == 31 and phases["softmax_max_j"]["v_pk_fma_f32"] == 32
    assert (phases["softmax_exp_j"]["v_exp_f32"], phases["softmax_exp_j"]["v_add_f32"],
            phases["softmax_exp_j"]["v_mul_f32"]) == (64, 64, 65)
    assert phases["softmax_cvt_j"]["v_cvt_pk_fp8_f32"] == 32 and "v_pk_fma_f32" not in phases["softmax_exp_j"]
    with pytest.raises(ValueError, match="schedule='aiter'"):
        KernelConfig("x", softmax="lean", scaling="block", schedule="aiter")


# -- registry -----------------------------------------------------------------------------------------------
@needs_llvm
def test_registry_entries():
    registered = kernels()
    for name in ("zyfa-fp8", "zyfa-fp8-exact", "aiter-like-fp8", "zyfa-bf16"):
        assert registered[name].workgroup_size == 512 and registered[name].arch == "gfx950"
    shape = AttnShape(batch=2, heads=8, heads_k=2, seqlen_q=1000, seqlen_k=1000)
    spec = get_kernel("zyfa-fp8")
    # 4 query blocks of 256 rows; zyfa-fp8 pairs them (workgroup x runs x and 3 - x) only when the
    # unpaired grid exceeds the 256 CUs: not at 64 workgroups, at 512
    assert get_kernel("zyfa-fp8-v1").grid(shape) == (4, 8, 2) == grid(shape) == spec.grid(shape)
    assert unpack(spec.kernargs(shape))["pair_query_blocks"] == 0
    wide = replace(shape, heads=64, heads_k=16)
    assert spec.grid(wide) == (2, 64, 2) and unpack(spec.kernargs(wide))["pair_query_blocks"] == 1
    assert get_kernel("zyfa-fp8-v1").grid(wide) == (4, 64, 2)
    assert grid(replace(shape, seqlen_q=600, seqlen_k=600), VARIANTS["zyfa-fp8"], pair=True) == (2, 8, 2)  # 3 blocks
    assert len(spec.kernargs(shape)) == 128
    kb = spec.build(shape)
    assert kb.code_object.exists() and kb.symbol == "zyfa_fp8" and kb.asm.startswith("; autogenerated")
    assert {c["name"] for c in kb.meta["clusters"]} >= {"QK_j", "softmax_j", "PV_j-1", "mask_j"}
    with pytest.raises(ValueError, match="takes dtype 'bf16'"):
        get_kernel("zyfa-bf16").kernargs(shape)
    with pytest.raises(ValueError, match="unknown gfx950 kernel"):
        config_for("nope", shape)


@needs_llvm
def test_mla_target_builds():
    shape = AttnShape(seqlen_q=512, seqlen_k=512, headdim=192, headdim_v=128)
    kb = build_for("zyfa-fp8", shape)
    assert kb.meta["config"]["headdim"] == 192 and kb.meta["lds_bytes"] == 2 * 128 * 208 + 2 * 128 * 144 + 528  # + V NaN words


def test_every_valid_fp8_combination_generates_within_budget():
    from zyfa.kernels.gfx950.schedule import all_configs
    configs = all_configs()
    # (lean|lean-v2|exact|folded)+block, exact+none; pingpong|serial; hd 128|192 (folded: rowsum="valu");
    # + exact+none under "aiter", hd 128|192
    assert len(configs) == 5 * 2 * 2 + 2
    for config in configs:
        gen = generate(config)
        assert gen.vgprs + gen.agprs <= 256 and gen.lds_bytes <= 160 * 1024, config.name


# -- epilogue division -------------------------------------------------------------------------------------
def _random_f32(rng, n, exp_lo, exp_hi):
    bits = (rng.integers(0, 2, n, dtype=np.uint32) << 31) | (rng.integers(exp_lo, exp_hi + 1, n).astype(np.uint32) << 23) \
        | rng.integers(0, 2**23, n, dtype=np.uint32)
    return bits.view(np.float32)


def test_markstein_division_equals_ieee_inside_the_guard():
    """The fast epilogue path: r = RN(1/d); q0 = x r; e = fma(-d, q0, x); q = fma(e, r, q0) is the
    IEEE quotient for d in [0.5, 2^64] and |x| in [d 2^-100, 2^100] (the generator's guard), and
    is not outside it (why the guard exists). Exact fp32 FMA: the functional emulator's."""
    rng = np.random.default_rng(18)
    n = 400_000
    d = np.abs(_random_f32(rng, n, 126, 127 + 64))
    x = _random_f32(rng, n, 1, 254)
    inside = (np.abs(x) >= d * np.float32(2.0**-100)) & (np.abs(x) <= np.float32(2.0**100))
    x, d = x[inside], d[inside]
    with np.errstate(all="ignore"):
        r = np.float32(1) / d
        q0 = x * r
        q = fma_f32(fma_f32(-d, q0, x), r, q0)
        assert np.array_equal(q.view(np.uint32), (x / d).view(np.uint32)), "Markstein != IEEE inside the guard"
        tiny = _random_f32(rng, n, 0, 3)  # subnormal and barely normal numerators: quotients underflow
        d = np.abs(_random_f32(rng, n, 126, 146))
        r = np.float32(1) / d
        q0 = tiny * r
        q = fma_f32(fma_f32(-d, q0, tiny), r, q0)
        assert (q.view(np.uint32) != (tiny / d).view(np.uint32)).sum() > 100
    assert inside.sum() > n // 2


def test_v2_constants_are_the_numerics_values():
    """zyfa-fp8-v2's fp32 constants (kept as bit patterns so the generator does not import torch)
    are spec v2's: the Lean P constant c and the alpha polynomial c1..c6 of zyfa.numerics."""
    bits = lambda x: struct.unpack("<I", struct.pack("<f", x))[0]  # noqa: E731
    assert generator_module.V2_BIAS_BITS == bits(numerics.LEANP_BIAS_V2)
    assert generator_module.V2_ALPHA_POLY_BITS == tuple(bits(c) for c in numerics.ALPHA_POLY[1:])
    assert numerics.ALPHA_POLY[0] == 1.0  # the kernel's inline 1.0
    assert generator_module.V2_ALPHA_MIN_EXP == numerics.ALPHA_MIN_EXP


def test_folded_constants_are_the_numerics_values():
    """zyfa-fp8's fix-up target and check are zyfa-folded's (the generator does not import torch)."""
    assert generator_module.FOLD_FIX_BIAS == numerics.FOLD_FIX_BIAS == 120.5 - 8 * numerics.FOLD_HEADROOM
    assert (generator_module.FOLD_REF0, generator_module.FOLD_MID, generator_module.FOLD_HALF) == (
        numerics.FOLD_REF0, numerics.FOLD_MID, numerics.FOLD_HALF)


def test_v2_refuses_a_rescale_threshold():
    with pytest.raises(ValueError, match="lean-v2.*rescale_threshold must be 0"):
        KernelConfig("x", softmax="lean-v2", rescale_threshold=4)


def test_accumulators_in_vgprs_make_the_lazy_rescale_one_op_per_register():
    """accumulators="vgpr" (zyfa-fp8): the PV and row-sum MFMAs accumulate into VGPRs, so the fix-up's
    O and L rescale is one v_ldexp_f32 per register (64 + 4) with no v_accvgpr move; the AGPR form
    reads, scales and writes each (3 ops). The rest of the fix-up is the same code."""
    def rescale(config):
        gen = generate(config)
        first = next(cl for cl in gen.clusters if cl["emitter"] == "rescale" and cl["group"] == 0)
        insts = [i for i in gen.instructions[first["first"]:first["last"] + 1] if i.cluster == first["name"]]
        return gen, Counter(i.opcode for i in insts)

    gen, vgpr = rescale(VARIANTS["zyfa-fp8"])
    assert VARIANTS["zyfa-fp8"].accumulators == "vgpr" and gen.agprs == 0
    assert gen.registers["O_accumulator"].startswith("v[")
    pv = [i for i in gen.instructions if i.cluster == "PV_j-1" and i.opcode.startswith("v_mfma")]
    assert all(str(i.operands[0]).startswith("v[") for i in pv)
    assert vgpr["v_ldexp_f32"] == 64 + 4 and not any(op.startswith("v_accvgpr") for op in vgpr)
    _, agpr = rescale(replace(VARIANTS["zyfa-fp8"], name="agpr", accumulators="agpr"))
    assert agpr["v_ldexp_f32"] == 64 + 4 and agpr["v_accvgpr_read_b32"] == agpr["v_accvgpr_write_b32"] == 64 + 4
    assert sum(agpr.values()) - sum(vgpr.values()) == 2 * (64 + 4)
    with pytest.raises(ValueError, match="accumulators"):
        KernelConfig("bad", accumulators="sgpr")


def test_registered_block_scaled_kernels_accumulate_in_vgprs_also_at_mla():
    """Every registered block-scaled FP8 kernel keeps O and L in VGPRs (no AGPR), at head dim 128
    and at MLA 192/128 (there with the operand read-ahead lowered to 2, as with AGPRs); a config
    whose VGPRs cannot fit them at any read-ahead is a one-line budget error naming the field."""
    for name in ("zyfa-fp8", "zyfa-fp8-v1", "zyfa-fp8-v2", "zyfa-fp8-valu-rowsum", "zyfa-fp8-exact"):
        assert VARIANTS[name].accumulators == "vgpr", name
        for headdim in (128, 192):
            shape = AttnShape(batch=1, heads=2, heads_k=2, seqlen_q=256, seqlen_k=256, headdim=headdim, dtype="fp8")
            gen = generate(config_for(name, shape))
            assert gen.agprs == 0 and gen.registers["O_accumulator"].startswith("v["), (name, headdim)
            folded = VARIANTS[name].softmax == "folded"  # its VALU row sum leaves room for read-ahead 3
            assert gen.read_ahead == (3 if headdim == 128 or folded else 2), (name, headdim)
    with pytest.raises(generator_module.RegisterBudgetError, match="accumulators='vgpr'"):
        generate(KernelConfig("d256", headdim=256, accumulators="vgpr"))


def test_fold_check_is_one_compare_with_the_same_decisions():
    """The folded check |fp32(mx - MID)| < HALF (docs/numerics.md) on a max floored at -HALF is
    mx < FOLD_CHECK_MIN: every float32 in [-HALF, 2^20] around the threshold and a random sample
    (and +-inf, NaN) decide the same both ways; the kernel emits it as one v_cmp_ngt_f32."""
    f32 = np.float32
    mid, half, lim = f32(generator_module.FOLD_MID), f32(generator_module.FOLD_HALF), f32(generator_module.FOLD_CHECK_MIN)
    near = np.arange(-4096, 4096, dtype=np.int64) + int(np.array(lim).view(np.int32))
    xs = np.concatenate([near.astype(np.int32).view(np.float32),
                         np.random.RandomState(0).uniform(-2.0 ** 15, 2.0 ** 20, 200000).astype(np.float32),
                         np.array([-2.0 ** 15, 126.0, 127.0, 2.0 ** 17, np.inf, np.nan], dtype=np.float32)])
    with np.errstate(invalid="ignore"):
        spec_fails = ~(np.abs((xs - mid).astype(np.float32)) < half)
        one_compare = ~(lim > xs)
    assert (spec_fails == one_compare).all()
    assert spec_fails[xs == lim].all() and not spec_fails[xs == np.nextafter(lim, f32(0))].any()
    gen = generate(VARIANTS["zyfa-fp8"])
    softmax = [i for i in gen.instructions if i.cluster == "softmax_j"]
    assert [i for i in softmax if i.opcode.startswith("v_cmp")][0].operands[1] == generator_module.FOLD_CHECK_MIN


@pytest.mark.parametrize("name", ["zyfa-fp8", "zyfa-fp8-valu-rowsum"])
def test_vgpr_accumulators_fall_back_to_agprs_where_they_do_not_fit(name):
    """O and the row sum live in VGPRs up to head dim 192; at 256 (V at 128) they do not fit beside Q,
    so the registered variant takes AGPRs there and still builds (what it did before 'vgpr')."""
    wide = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=1024, seqlen_k=1024, headdim=256, headdim_v=128,
                     causal=True, dtype="fp8")
    assert VARIANTS[name].accumulators == "vgpr"
    assert config_for(name, AttnShape(**{**vars(wide), "headdim": 192})).accumulators == "vgpr"
    config = config_for(name, wide)
    assert config.accumulators == "agpr"
    build(config)
    with pytest.raises(ValueError, match="accumulators='vgpr'"):
        build(replace(config, accumulators="vgpr"))
