"""Per-instruction listing, derived regions and the MFMA-pipe budget behind the UI's "why"."""

from __future__ import annotations

import numpy as np
import pytest

from zyfa.analyzer import listing
from zyfa.analyzer.metrics import blocks
from zyfa.trace.schema import Trace, TraceMeta

META = TraceMeta(kernel="k", arch="gfx950", source="model", clock_mhz=2400.0)


def _rec(wave, pc, opcode, unit, start, length, it, stall=0, reason=None, region=None, simd=0):
    return dict(cu=0, simd=simd, wave=wave, slot=wave, pc=pc, opcode=opcode, operands="", unit=unit, issue=start,
                start=start, end=start + length, stall=stall, stall_reason=reason, iteration=it, region=region)


def pingpong(iterations: int = 4, gap: int = 0, region: bool = True) -> Trace:
    """One SIMD, two waves. Per iteration each wave runs 2 MFMAs of 16 cycles (pc 0x10, 0x18) then
    2 VALUs of 8 cycles (pc 0x20, 0x28); the waves alternate, a hand-over costs ``gap`` cycles."""
    recs, t = [], 0
    for it in range(iterations):
        for wave in (0, 1):
            for k in range(2):
                recs.append(_rec(wave, 0x10 + 8 * k, "v_mfma", "MFMA", t + 16 * k, 16, it,
                                 stall=gap if k == 0 and t else 0, reason="dependency" if k == 0 and t else None,
                                 region="QK_j" if region else None))
            for k in range(2):
                recs.append(_rec(wave, 0x20 + 8 * k, "v_exp_f32" if k else "v_fma", "VALU", t + 32 + 8 * k, 8, it,
                                 region="softmax_j" if region else None))
            t += 32 + gap
    recs.append(_rec(0, 0x40, "s_endpgm", "MISC", t + 100, 0, None))
    return Trace.from_records(recs, META)


def test_listing_counts_every_execution_by_pc():
    t = pingpong(gap=4)
    out = listing.instruction_listing(t, "whole").set_index("pc")
    assert list(out.index) == [0x10, 0x18, 0x20, 0x28, 0x40]
    assert out.loc[0x10, "executions"] == 8 and out.loc[0x10, "busy"] == 8 * 16
    assert out.loc[0x10, "stall"] == 7 * 4 and out.loc[0x10, "stall_dependency"] == 7 * 4  # every hand-over but the first
    assert out.loc[0x28, "opcode"] == "v_exp_f32" and out.loc[0x28, "region"] == "softmax_j"
    assert out.loc[0x20, "latency"] == 8.0
    assert out["share"].sum() == pytest.approx(1.0)
    assert out["executions"].sum() == len(t)


def test_regions_derived_from_loop_structure_without_region_column():
    t = pingpong(region=False)
    region = listing.region_of(t)
    pcs = t.column("pc")
    assert set(region[pcs < 0x40]) == {"loop"} and set(region[pcs == 0x40]) == {"epilogue"}
    assert set(listing.instruction_listing(t)["region"]) == {"loop", "epilogue"}


def test_regions_follow_each_wave_in_time_not_the_pc_alone():
    """Code placed after the loop in the binary but run before a wave's loop starts (zyfa-bf16's
    second wave per SIMD loads its first tile from there) is that wave's prologue, code the loop
    branches to out of line is loop, and only what runs after the wave's last loop record is its
    epilogue."""
    t = pingpong(region=False)
    recs = t.table.to_pylist()
    recs.append(_rec(1, 0x80, "buffer_load_dwordx4", "VMEM", 10, 4, None))  # wave 1 (loop from cycle 32), before it
    recs.append(_rec(0, 0x90, "v_cndmask_b32", "VALU", 50, 4, None))  # wave 0, between its loop records
    recs.append(_rec(1, 0x90, "v_cndmask_b32", "VALU", 500, 4, None))  # wave 1, after its last loop record
    t = Trace.from_records(recs, META)
    region = listing.region_of(t)
    pcs, wave = t.column("pc"), t.column("wave")
    assert set(region[(pcs == 0x80)]) == {"prologue"}
    assert set(region[(pcs == 0x90) & (wave == 0)]) == {"loop"}
    assert set(region[(pcs == 0x90) & (wave == 1)]) == {"epilogue"}
    assert set(region[pcs == 0x40]) == {"epilogue"} and set(region[pcs < 0x40]) == {"loop"}


def test_loop_part_ignores_the_region_names():
    t = pingpong(region=True)
    pcs = t.column("pc")
    assert set(listing.region_of(t)[pcs < 0x40]) == {"QK_j", "softmax_j"}
    assert set(listing.loop_part(t)[pcs < 0x40]) == {"loop"} and set(listing.loop_part(t)[pcs == 0x40]) == {"epilogue"}
    out = listing.instruction_listing(t).set_index("pc")
    assert (out.loc[0x10, "region"], out.loc[0x10, "part"], out.loc[0x40, "part"]) == ("QK_j", "loop", "epilogue")


def test_occurrences():
    t = pingpong()
    rows = listing.occurrences(t, 0x28)
    assert len(rows) == 8 and set(t.df["opcode"].iloc[rows]) == {"v_exp_f32"}


def test_budget_terms_add_up_and_hand_over_gaps_are_found():
    t = pingpong(iterations=4, gap=6)
    b = listing.mfma_pipe_budget(t, "whole")
    assert b["total"] == pytest.approx(sum(b[k] for k in listing.BUDGET_TERMS))
    blocks = 8  # (wave, iteration) pairs
    assert b["mfma_busy"] == pytest.approx(8 * 32 / blocks)
    assert b["handover_gap"] == pytest.approx(7 * 6 / blocks)  # 7 hand-overs of 6 cycles
    assert b["same_wave_gap"] == 0


def test_explain_ranks_the_term_that_differs():
    a, b = pingpong(gap=0), pingpong(gap=10)
    out = listing.explain(a, b, "whole")
    assert out["term"].iloc[0] == "handover_gap" and out["term"].iloc[-1] == "total"
    assert out["share"].iloc[:-1].sum() == pytest.approx(1.0)
    top = out.iloc[0]
    assert top["diff"] == pytest.approx(7 * 10 / 8)
    same = listing.explain(a, a, "whole")
    assert (same["diff"] == 0).all() and np.isnan(same["share"].iloc[0])


def test_pipe_intervals_are_the_cycles_behind_each_budget_term():
    t = pingpong(iterations=4, gap=4)
    gaps = listing.pipe_intervals(t, "handover_gap", "whole")
    # 8 MFMA phases alternate between the two waves: 7 hand-overs of 4 cycles, each on the row of the
    # wave that takes over, right after the other wave's last MFMA
    assert len(gaps) == 7 and ((gaps.end - gaps.start) == 4).all()
    assert list(gaps.wave) == [1, 0, 1, 0, 1, 0, 1]
    assert list(gaps.start[:2]) == [32, 68]
    budget = listing.mfma_pipe_budget(t, "whole")
    n_blocks = blocks(t, "whole")
    for term in listing.BUDGET_TERMS:
        iv = listing.pipe_intervals(t, term, "whole")
        assert (iv.end - iv.start).sum() / n_blocks == pytest.approx(budget[term]), term
    assert listing.pipe_intervals(t, "same_wave_gap", "whole").empty
    with pytest.raises(ValueError, match="term must be one of"):
        listing.pipe_intervals(t, "busy", "whole")


def test_iteration_phases_per_key_block():
    t = pingpong(iterations=4, gap=4)
    out = listing.iteration_phases(t).set_index("iteration")
    assert list(out.index) == [0, 1, 2, 3]
    assert (out["mfma_phase"] == 32).all()  # 2 MFMAs of 16 per wave and block
    assert (out["softmax_phase"] == 16).all()  # 2 VALUs of 8
    # hand-overs belong to the block of the MFMA after the gap: block 0 has w0 -> w1, the others two
    assert list(out["handover_gap"]) == [4, 8, 8, 8]
    assert listing.iteration_phases(pingpong(iterations=2, gap=0))["handover_gap"].eq(0).all()
