"""Each timing rule of the cycle model on a tiny stream with a hand-computed cycle count.

Conventions (timing.py): issue slots every 4 cycles, 1 pass = 4 cycles, 1 wait state = 4 cycles.
"""

import struct
from fractions import Fraction

import pytest

from zyfa.analyzer import metrics
from zyfa.gfx950 import scalar, timing
from zyfa.gfx950.isa import mfma_flops, parse_asm
from zyfa.trace.cdna4 import power, sim
from zyfa.shapes import parse_shape
from zyfa.trace.cdna4.estimate import EstimateConfig, estimate
from zyfa.trace.cdna4.launch import prepare
from zyfa.trace.cdna4.sim import CUSim, SimConfig
from zyfa.trace.cdna4.tracer import records_frame
from zyfa.trace.schema import Trace, TraceMeta


def simulate(body: str, workgroup_size: int = 64, kernarg: bytes = b"", header: str = "", **config):
    program = parse_asm(f"k:\n{body}\n s_endpgm\n{header}", encode=False)
    result = CUSim(program, kernarg, [(0, 0, 0)], workgroup_size, SimConfig(**config)).run()
    return program, result


def rows(result, wave=None, opcode=None):
    r = result.records
    out = []
    for i in range(len(r["issue"])):
        if (wave is None or r["wave"][i] == wave) and (opcode is None or r["opcode"][i] == opcode):
            out.append({k: r[k][i] for k in r})
    return out


def test_sixteen_dependent_mfmas():
    # same C/D back to back: no hazard wait, each waits for the XDL pipe (16 passes = 64 cycles)
    _, res = simulate("v_mfma_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[0:15]\n" * 16)
    mfma = rows(res, opcode="v_mfma_f32_32x32x64_f8f6f4")
    assert [m["issue"] for m in mfma] == [64 * i for i in range(16)]
    assert all(m["end"] - m["start"] == 64 for m in mfma)
    assert [m["stall_reason"] for m in mfma[1:]] == ["unit_busy"] * 15
    assert res.cycles == 16 * 64 == 1024
    assert res.mfma_busy[0] == 1024


def test_mfma_then_valu_reading_its_result():
    # 8-pass MFMA -> VALU read needs 8 + 4 = 12 wait states = 48 cycles after the MFMA issued
    _, res = simulate("v_mfma_f32_32x32x16_bf16 v[0:15], v[16:19], v[20:23], v[0:15]\n v_add_f32 v30, v0, v1")
    (add,) = rows(res, opcode="v_add_f32")
    assert add["issue"] == 48 and add["stall_reason"] == "hazard" and add["stall"] == 44


def test_valu_co_issues_with_mfma_after_source_reads_but_packed_fp32_does_not():
    # LLVM PR #233721: ordinary VALU from pass 1 + (wider of A, B bytes per lane) / 16.
    # BF16 32x32x16: A = B = 4 VGPRs = 16 B -> 1 + 1 = 2 passes = 8 cycles
    _, res = simulate("v_mfma_f32_32x32x16_bf16 v[0:15], v[16:19], v[20:23], v[0:15]\n v_add_f32 v30, v31, v32")
    (add,) = rows(res, opcode="v_add_f32")
    assert add["issue"] == 8 and add["end"] == 12  # runs while the MFMA (0..32) still executes
    # FP8 32x32x64: A = B = 8 VGPRs = 32 B -> 1 + 2 = 3 of its 16 passes = 12 cycles
    _, res = simulate("v_mfma_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[0:15]\n v_add_f32 v40, v41, v42")
    (add,) = rows(res, opcode="v_add_f32")
    assert add["issue"] == 12 and add["stall_reason"] == "unit_busy"
    # packed FP32 / DOT: NumPasses + 2, + 1 because A is 16 B -> 8 + 3 = 11 passes = 44 cycles
    for op in ("v_pk_fma_f32 v[40:41], v[42:43], v[44:45], v[40:41]", "v_pk_mov_b32 v[40:41], v[42:43], v[44:45]",
               "v_dot2_f32_bf16 v40, v41, v42, v40"):
        _, res = simulate(f"v_mfma_f32_32x32x16_bf16 v[0:15], v[16:19], v[20:23], v[0:15]\n {op}")
        (pk,) = rows(res, opcode=op.split()[0])
        assert pk["issue"] == 44 and pk["stall_reason"] == "unit_busy", op
    # A of 8 B (16x16x16 bf16: 2 VGPRs): no +1 -> 4 + 2 = 6 passes = 24 cycles
    _, res = simulate("v_mfma_f32_16x16x16_bf16 v[0:3], v[16:17], v[20:21], v[0:3]\n"
                      " v_pk_mul_f32 v[40:41], v[42:43], v[44:45]")
    (pk,) = rows(res, opcode="v_pk_mul_f32")
    assert pk["issue"] == 24


def test_scaled_mfma_starts_one_pass_late_on_an_idle_pipe_only():
    body = "v_mfma_scale_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[0:15], v32, v33\n"
    _, res = simulate(body * 2)
    first, second = rows(res, opcode="v_mfma_scale_f32_32x32x64_f8f6f4")
    assert (first["issue"], first["start"], first["end"]) == (0, 4, 68)  # idle pipe: one pass late
    assert (second["issue"], second["start"], second["end"]) == (68, 68, 132)  # back to back: unscaled rate
    _, res = simulate("v_mfma_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:31], v[0:15]\n" * 2)
    assert [r["start"] for r in rows(res)[:2]] == [0, 64]


def test_valu_write_then_mfma_read_needs_two_wait_states():
    _, res = simulate("v_mov_b32 v16, 0\n v_mfma_f32_32x32x16_bf16 v[0:15], v[16:19], v[20:23], v[0:15]")
    (mfma,) = rows(res, opcode="v_mfma_f32_32x32x16_bf16")
    assert mfma["issue"] == 8 and mfma["stall_reason"] == "hazard"
    # with s_nop 1 (2 wait states) in between the code is hazard-free: no hazard stall
    _, res = simulate("v_mov_b32 v16, 0\n s_nop 1\n v_mfma_f32_32x32x16_bf16 v[0:15], v[16:19], v[20:23], v[0:15]")
    (mfma,) = rows(res, opcode="v_mfma_f32_32x32x16_bf16")
    assert mfma["issue"] == 4 + 2 * 4 and mfma["stall_reason"] == "nop"


def test_transcendental_latency():
    # v_exp_f32 holds the VALU one pass (LLVM ResourceCycles 1); its result is ready 4 passes after start
    _, res = simulate("v_exp_f32 v1, v2\n v_add_f32 v3, v1, v1\n v_add_f32 v4, v5, v6")
    exp, add1, add2 = rows(res)[:3]
    assert (exp["unit"], exp["end"] - exp["start"]) == ("TRANS", 4)
    assert add1["issue"] == 16 and add1["stall_reason"] == "dependency"
    assert add2["issue"] == 20
    # independent transcendentals issue back to back, one per slot
    _, res = simulate("v_exp_f32 v1, v2\n v_exp_f32 v7, v8\n v_exp_f32 v9, v10")
    assert [r["issue"] for r in rows(res)[:3]] == [0, 4, 8]


def test_s_nop_and_s_sleep():
    _, res = simulate("s_nop 3\n v_add_f32 v1, v2, v3\n s_sleep 2\n v_add_f32 v1, v2, v3")
    adds = rows(res, opcode="v_add_f32")
    assert adds[0]["issue"] == (3 + 1) * 4  # s_nop N = N+1 wait states
    assert adds[1]["issue"] == 20 + 2 * 64  # s_sleep 2 issued at 20: 2 x 64 cycles


def test_s_waitcnt_lds_and_global():
    lds_bpc = timing.param("lds_bytes_per_cycle")
    lds_lat = timing.param("lds_latency")
    _, res = simulate("ds_read_b128 v[40:43], v1\n ds_read_b128 v[44:47], v1 offset:16\n"
                      " s_waitcnt lgkmcnt(1)\n v_add_f32 v1, v2, v3\n s_waitcnt lgkmcnt(0)\n v_add_f32 v1, v2, v3")
    # first read: 64 lanes x 16 B = 1024 B over the LDS pipe, then the latency
    first_done = 1024 / lds_bpc + lds_lat
    second_done = max(4, 1024 / lds_bpc) + 1024 / lds_bpc + lds_lat  # queued behind the first on the pipe
    waits = rows(res, opcode="s_waitcnt")
    assert waits[0]["issue"] == -(-first_done // 4) * 4 and waits[0]["stall_reason"] == "waitcnt"
    # ... and no earlier than two issue slots after the first wait (the v_add_f32 in between)
    assert waits[1]["issue"] == max(-(-second_done // 4) * 4, waits[0]["issue"] + 8)
    g_bpc, g_lat = timing.param("global_bytes_per_cycle"), timing.param("global_latency")
    _, res = simulate("buffer_load_dword v1, v2, s[4:7], 0 offen\n s_waitcnt vmcnt(0)\n v_add_f32 v3, v1, v1")
    (wait,) = rows(res, opcode="s_waitcnt")
    assert wait["issue"] == -(-(256 / g_bpc + g_lat) // 4) * 4


def test_two_waves_with_setprio():
    # 5 waves: waves 0 and 4 share SIMD 0; wave 4 (lane-0 flat id 256) raises its priority to 3
    body = """
 v_readfirstlane_b32 s4, v0
 s_cmp_eq_u32 s4, 256
 s_cbranch_scc0 .Lwork
 s_setprio {prio}
.Lwork:
""" + " v_add_f32 v1, v2, v3\n" * 8
    _, res = simulate(body.format(prio=3), workgroup_size=320)
    w0 = [r["issue"] for r in rows(res, wave=0, opcode="v_add_f32")]
    w4 = [r["issue"] for r in rows(res, wave=4, opcode="v_add_f32")]
    # wave 0: readfirstlane 0, cmp 4, taken branch 8 (+4 issue +8 refetch) -> ready 20
    # wave 4: readfirstlane 4 (lost the VALU slot at 0), cmp 8, branch 12, setprio 16 -> ready 20
    assert w4 == [20 + 4 * i for i in range(8)]  # priority 3 wins every VALU slot
    assert w0 == [52 + 4 * i for i in range(8)]
    _, res = simulate(body.format(prio=0), workgroup_size=320)
    w0 = [r["issue"] for r in rows(res, wave=0, opcode="v_add_f32")]
    w4 = [r["issue"] for r in rows(res, wave=4, opcode="v_add_f32")]
    assert w0 == [20 + 8 * i for i in range(8)] and w4 == [24 + 8 * i for i in range(8)]  # round robin


def test_barrier_waits_for_the_slowest_wave():
    body = """
 v_readfirstlane_b32 s4, v0
 s_cmp_eq_u32 s4, 64
 s_cbranch_scc0 .Lbar
 s_sleep 2
.Lbar:
 s_barrier
 v_add_f32 v1, v2, v3
"""
    _, res = simulate(body, workgroup_size=128)
    # wave 1: branch not taken at 8, s_sleep 2 at 12 -> barrier at 12 + 128 = 140; release 140 + 16
    release = 140 + timing.param("barrier_release_cycles")
    adds = rows(res, opcode="v_add_f32")
    assert [a["issue"] for a in adds] == [release, release]
    assert {a["wave"]: a["stall_reason"] for a in adds} == {0: "barrier", 1: "barrier"}


KERNARG_LOOP = """
 s_load_dword s4, s[0:1], 0x0
 s_waitcnt lgkmcnt(0)
 s_mov_b32 s5, 0
.Lloop:
 v_mfma_f32_32x32x16_bf16 v[0:15], v[16:19], v[20:23], v[0:15]
 s_add_u32 s5, s5, 1
 s_cmp_lt_u32 s5, s4
 s_cbranch_scc1 .Lloop
"""
KD = """
.amdhsa_kernel k
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_kernarg_size 8
.end_amdhsa_kernel
"""


def test_trip_count_from_kernel_argument_and_loop_extrapolation():
    trips = 37
    kernarg = struct.pack("<I", trips)
    program, fast = simulate(KERNARG_LOOP, kernarg=kernarg, header=KD)
    _, slow = simulate(KERNARG_LOOP, kernarg=kernarg, header=KD, fast_forward=False)
    # s_load 0, waitcnt after the scalar latency, s_mov +4, then one 32-cycle MFMA per iteration
    first = timing.param("smem_latency") + 4 + 4
    assert slow.cycles == first + trips * 32
    assert fast.cycles == slow.cycles
    assert fast.iterations == slow.iterations == {0: trips - 1}
    assert fast.extrapolated_instructions > 0 and fast.simulated_instructions < slow.simulated_instructions
    assert fast.counts == slow.counts
    assert fast.mfma_flops(program) == trips * 2 * 32 * 32 * 16
    # records stay contiguous: the extrapolated periods are cut out of the timeline
    assert max(fast.records["end"]) == fast.cycles - fast.extrapolated[0]["cycles_skipped"]


def test_data_dependent_branch_policy():
    from zyfa.gfx950.scalar import ScalarUnknown

    # exec after s_and_saveexec with a vector compare is data: the policy decides, and it is counted
    body = """
 v_cmp_gt_f32 vcc, v1, v2
 s_and_saveexec_b64 s[6:7], vcc
 s_cbranch_execz .Lskip
 v_exp_f32 v3, v4
.Lskip:
 s_or_b64 exec, exec, s[6:7]
"""
    _, res = simulate(body)
    assert len(rows(res, opcode="v_exp_f32")) == 1 and res.unknown_branches == {8: 1}
    _, res = simulate(body, unknown_branch="taken")
    assert rows(res, opcode="v_exp_f32") == []
    with pytest.raises(ScalarUnknown, match="branch condition is unknown"):
        simulate(body, unknown_branch=None)
    # a per-branch direction stated by the kernel's author overrides the default policy
    program = parse_asm(f"k:\n{body}\n s_endpgm\n", encode=False)
    regions = ["cmp", "cmp", "guard", "rescale", "restore", "end"]
    res = CUSim(program, b"", [(0, 0, 0)], 64, branch_policy={8: "taken"}, regions=regions).run()
    assert "v_exp_f32" not in res.records["opcode"]
    assert res.records["region"] == ["cmp", "cmp", "guard", "restore", "end"]
    with pytest.raises(ValueError, match="regions must name one cluster per instruction"):
        CUSim(program, b"", [(0, 0, 0)], 64, regions=["x"])
    with pytest.raises(ValueError, match="unknown_branch"):
        SimConfig(unknown_branch="maybe")


def test_table_rows_have_sources_and_bad_inputs():
    assert all(cls.source for _, cls in timing.TABLE) and all(p.source for p in timing.PARAMS.values())
    assert timing.op_class("v_mfma_f32_32x32x64_f8f6f4").cycles == 64
    assert timing.op_class("v_mfma_f32_16x16x32_bf16").passes == 4
    assert timing.op_class("v_exp_f32_e32").unit == "TRANS"
    with pytest.raises(ValueError, match="no timing class"):
        timing.op_class("x_bogus")
    with pytest.raises(KeyError, match="unknown cycle-model parameter"):
        timing.param("warp_drive")
    with pytest.raises(ValueError, match="stable_periods"):
        SimConfig(stable_periods=1)
    with pytest.raises(ValueError, match="workgroup_size"):
        CUSim(parse_asm("k:\n s_endpgm\n", encode=False), b"", [(0, 0, 0)], 0)
    with pytest.raises(TypeError, match="kernarg must be bytes"):
        CUSim(parse_asm("k:\n s_endpgm\n", encode=False), "x", [(0, 0, 0)], 64)


def test_one_mfma_flops_table_read_from_the_mnemonic():
    """2*M*N*K (x blocks) from the mnemonic [CDNA4 ISA], for the shapes the old timing rows
    approximated (k fixed per row) and for the ones our kernels use; the analyzer reads the same."""
    assert metrics.mfma_flops is mfma_flops
    assert mfma_flops("v_mfma_scale_f32_32x32x64_f8f6f4") == 2 * 32 * 32 * 64
    assert mfma_flops("v_mfma_f32_32x32x16_bf16") == 2 * 32 * 32 * 16
    assert mfma_flops("v_mfma_i32_32x32x16_i8") == 2 * 32 * 32 * 16  # the old row counted k = 8
    assert mfma_flops("v_mfma_f32_32x32x1_2b_f32") == 2 * 32 * 32 * 1 * 2
    assert mfma_flops("v_smfmac_f32_32x32x32_bf16") == 2 * 32 * 32 * 32
    assert mfma_flops("v_mfma_ld_scale_b32") == 0 and mfma_flops("v_mfma_mystery") is None


# KERNARG_LOOP with a data-dependent branch (vcc from a vector compare) to an out-of-line block
RATE_LOOP = KERNARG_LOOP.replace(" s_add_u32 s5", " v_cmp_gt_f32 vcc, v1, v2\n s_cbranch_vccnz .Lrare\n.Lback:\n"
                                 " s_add_u32 s5") + """ s_endpgm
.Lrare:
 v_exp_f32 v3, v4
 v_exp_f32 v5, v6
 s_branch .Lback
"""


def rate_sim(policy, trips: int, fast_forward: bool = True, waves: int = 1):
    program = parse_asm(f"k:\n{RATE_LOOP}\n{KD}", encode=False)
    pc = next(i.pc for i in program.instructions if i.opcode == "s_cbranch_vccnz")
    result = CUSim(program, struct.pack("<I", trips), [(0, 0, 0)], 64 * waves, SimConfig(fast_forward=fast_forward),
                   branch_policy={pc: policy}).run()
    return program, pc, result


def test_a_replay_drops_only_the_steps_that_change_nothing():
    # RATE_LOOP's period: an MFMA whose (unknown) results feed the vector compare of a rate-decided
    # branch. The replay keeps the MFMA for the compare, but once a period has run its results are
    # None already: the lean steps drop it where the start state holds None there
    program = parse_asm(f"k:\n{RATE_LOOP}\n{KD}", encode=False)
    ops = [inst.opcode for inst in program.instructions]
    pc = program.instructions[ops.index("s_cbranch_vccnz")].pc
    model = CUSim(program, struct.pack("<I", 40), [(0, 0, 0)], 64, branch_policy={pc: 0.25})
    period = tuple(range(ops.index("v_mfma_f32_32x32x16_bf16"), ops.index("s_cbranch_scc1") + 1))
    steps, lean, need = model._replay_plan(period)
    kept = ["v_mfma_f32_32x32x16_bf16", "s_cbranch_vccnz", "s_add_u32", "s_cmp_lt_u32", "s_cbranch_scc1"]
    assert [s.inst.opcode for s, _ in steps] == kept and [s.inst.opcode for s, _ in lean] == kept[1:]
    assert need == {scalar.VECTOR_KEY0 - k for k in range(16)}  # v[0:15]
    v1 = scalar.VECTOR_KEY0 - 1
    full = [(steps, steps, frozenset())]
    after_a_period = model.waves[0].state.regs | {4: 40, 5: 3} | dict.fromkeys(need)
    # from a state with v1 known only the full steps are right (they make it unknown again)
    for regs in (after_a_period, after_a_period | {v1: 0x40000000}):
        counters = [{}], [{}]
        lean_out, full_out = (model._replay([regs], plans, c) for plans, c in zip(([(steps, lean, need)], full), counters))
        assert lean_out == full_out and lean_out[0][v1] is None and lean_out[0][5] == 4
        assert counters[0] == counters[1] == [{ops.index("s_cbranch_vccnz"): 1}]
    assert model._replay_plan(period) is model._replay_plan(period)  # built once per sequence


def test_rate_branch_policy_takes_the_stated_pattern():
    # a data-dependent branch (vcc from a vector compare) taken on execution n iff
    # floor((n + 1) r) > floor(n r): r = 3/10 over 50 executions jumps on 3, 6, 9, 13, ... (15 times)
    rate, trips = 0.3, 50
    program, pc, res = rate_sim(rate, trips, fast_forward=False)
    expected = [n for n in range(trips) if (n + 1) * 3 // 10 > n * 3 // 10]
    assert len(expected) == 15 and expected[:4] == [3, 6, 9, 13]
    ops = res.records["opcode"]
    after = [ops[i + 1] for i, op in enumerate(ops) if op == "s_cbranch_vccnz"]
    assert [n for n, op in enumerate(after) if op == "v_exp_f32"] == expected
    assert res.rate_branches == {pc: [trips, 15]} and res.unknown_branches == {pc: trips}
    exp_index = [i for i, inst in enumerate(program.instructions) if inst.opcode == "v_exp_f32"]
    assert [res.counts[i] for i in exp_index] == [15, 15]
    # each wave counts its own executions: two waves take the same pattern, the tally sums them
    _, _, two = rate_sim(rate, trips, fast_forward=False, waves=2)
    assert two.rate_branches == {pc: [2 * trips, 30]}
    # deterministic: the same inputs give the same trace
    _, _, again = rate_sim(rate, trips, fast_forward=False)
    assert again.records == res.records and again.cycles == res.cycles


def test_rate_zero_and_one_are_the_direction_policies():
    for rate, direction in ((0, "not-taken"), (0.0, "not-taken"), (1, "taken"), (1.0, "taken")):
        _, _, a = rate_sim(rate, 40)
        _, _, b = rate_sim(direction, 40)
        assert (a.cycles, a.counts, a.records, a.extrapolated) == (b.cycles, b.counts, b.records, b.extrapolated)
        assert a.rate_branches == {}
    for bad in (1.5, -0.1, "sometimes", True):
        with pytest.raises(ValueError, match=r"branch_policy\[.*rate in \[0, 1\]"):
            rate_sim(bad, 4)


def test_extrapolated_periods_follow_the_rate():
    # at r = 1/20 the detailed periods between two taken executions are equal, so the loop is
    # extrapolated; a skip must stop before the next taken execution (not repeat the not-taken
    # period to the end), so the fast run equals the detailed one in cycles, counts and the tally
    trips = 400
    program, pc, fast = rate_sim(0.05, trips)
    _, _, slow = rate_sim(0.05, trips, fast_forward=False)
    assert fast.extrapolated and not slow.extrapolated
    assert fast.extrapolated_instructions > 0
    assert fast.rate_branches == slow.rate_branches == {pc: [trips, 20]}
    assert fast.counts == slow.counts
    assert fast.cycles == slow.cycles
    # the skipped periods' MFMA cycles are the full run's
    assert fast.mfma_busy == slow.mfma_busy


def test_a_rate_pattern_shorter_than_its_steady_run_extrapolates_by_pattern_periods():
    # at r = 1/10 the pattern repeats every 10 executions: a span of 10 back-edges that starts and
    # ends in the same steady period at the same phase is skipped (not only the periods between two
    # jumps): the fast run equals the detailed one in cycles, counts, MFMA busy and the tally
    trips = 400
    program, pc, fast = rate_sim(0.1, trips)
    _, _, slow = rate_sim(0.1, trips, fast_forward=False)
    assert fast.extrapolated and not slow.extrapolated
    assert fast.extrapolated_instructions > 0.8 * (fast.extrapolated_instructions + fast.simulated_instructions)
    # a pattern period is 10 loop iterations (6 instructions each) and one jump to .Lrare (3 more)
    assert {x["instructions_skipped"] // x["periods_skipped"] for x in fast.extrapolated} >= {10 * 6 + 3}
    assert fast.rate_branches == slow.rate_branches == {pc: [trips, 40]}
    assert fast.counts == slow.counts
    assert fast.cycles == slow.cycles
    assert fast.mfma_busy == slow.mfma_busy
    # a pattern longer than PATTERN_PERIOD_MAX whose jumps are further apart than its nearest short
    # pattern's (1/33: 1/32) is still exact
    long_rate = Fraction(1, sim.PATTERN_PERIOD_MAX + 1)
    _, _, a = rate_sim(long_rate, trips)
    _, _, b = rate_sim(long_rate, trips, fast_forward=False)
    assert (a.cycles, a.counts, a.rate_branches) == (b.cycles, b.counts, b.rate_branches)


def test_a_long_rate_pattern_extrapolates_by_its_nearest_short_pattern():
    # 97/1250 (a measured-looking 7.76 %) repeats only every 1250 executions, but over a loop of a few
    # hundred it jumps every 13th execution, with a 12 every ninth jump: the pattern period of its
    # nearest short pattern (1/13) is skipped while it replays as recorded, and the steady periods
    # after it up to the next jump; the jump that breaks it is simulated in detail. The fast run
    # equals the detailed one in cycles, counts, MFMA busy and the tally
    trips, rate = 400, Fraction(97, 1250)
    assert sim.pattern_rate(rate) == Fraction(1, 13)
    program, pc, fast = rate_sim(rate, trips)
    _, _, slow = rate_sim(rate, trips, fast_forward=False)
    assert fast.rate_branches == slow.rate_branches == {pc: [trips, trips * 97 // 1250]}
    assert (fast.cycles, fast.counts, fast.mfma_busy) == (slow.cycles, slow.counts, slow.mfma_busy)
    spans = [x for x in fast.extrapolated if x["instructions_skipped"] == x["periods_skipped"] * (13 * 6 + 3)]
    assert 13 * sum(x["periods_skipped"] for x in spans) > trips // 2  # most of the loop in pattern periods
    assert fast.simulated_instructions < 0.2 * slow.simulated_instructions


def test_pattern_rate_is_the_nearest_short_pattern():
    # the measured rescale rates run as one jump per N executions (7.76 % -> 1/13, 4.68 % -> 1/21);
    # a rate that already has a short pattern is kept as it is
    assert sim.pattern_rate(0.0776) == Fraction(1, 13)
    assert sim.pattern_rate(0.0468) == Fraction(1, 21)
    assert sim.pattern_rate(0.3) == Fraction(3, 10) and sim.pattern_rate(0.05) == Fraction(1, 20)
    assert sim.pattern_rate(0) == 0 and sim.pattern_rate(1.0) == 1
    assert all(sim.pattern_rate(r / 997).denominator <= sim.PATTERN_PERIOD_MAX for r in range(998))


@pytest.mark.parametrize("rate", [Fraction(1, 8), Fraction("0.0776")])
def test_gfx950_kernel_at_a_rescale_rate_extrapolates_exactly(rate):
    # zyfa-fp8's four lazy-rescale branches at 1/8 and at 7.76 % (97/1250: its measured 32K rate at
    # the time of writing; a pattern of 1250 executions, followed as 1/13 between deviations): loop
    # periods are skipped between the jumps and, once the pattern has repeated, whole pattern periods
    # (8 or 13 loop periods and a jump) across them; the kernel time, MFMA busy and the jump tally
    # equal the fully detailed simulation's
    launch = prepare("zyfa-fp8", parse_shape("16k", heads=2))
    rates = tuple(sorted(launch.rescale_rates(rate).items()))
    assert len(rates) == 4
    fast, slow = (estimate(launch, EstimateConfig(samples=1, fast_forward=ff, branch_policy=rates)) for ff in (True, False))
    assert fast.extrapolated > 0 and slow.extrapolated == 0
    periods = sorted({x["period_cycles"] for x in fast.cu_result.extrapolated})
    # a loop period and a pattern period
    assert len(periods) == 2 and periods[1] > sim.pattern_rate(rate).denominator * periods[0]
    assert fast.cycles == slow.cycles
    assert fast.cu_result.mfma_busy == slow.cu_result.mfma_busy
    tally = [n for n in fast.notes if n.startswith("rate branches")]
    assert tally and tally == [n for n in slow.notes if n.startswith("rate branches")]
    assert fast.cu_result.rate_branches == slow.cu_result.rate_branches != {}


def test_mfma_busy_counts_extrapolated_periods_as_if_simulated():
    # a 512-cycle prologue without MFMA, then a loop of one 32-cycle MFMA, a 64-cycle s_nop, a
    # transcendental and an LDS read waited for: with most periods skipped the records alone
    # over-weight the prologue, so the analyzer and the clock model add the skipped periods back
    body = " s_nop 15\n v_exp_f32 v40, v41\n ds_read_b128 v[44:47], v42\n s_waitcnt lgkmcnt(0)\n"
    loop = KERNARG_LOOP.replace(" s_mov_b32 s5, 0\n", " s_mov_b32 s5, 0\n s_sleep 8\n").replace(
        " s_add_u32 s5", body + " s_add_u32 s5")
    kernarg = struct.pack("<I", 200)
    _, fast = simulate(loop, kernarg=kernarg, header=KD)
    _, slow = simulate(loop, kernarg=kernarg, header=KD, fast_forward=False)
    assert fast.cycles == slow.cycles and fast.extrapolated and not slow.extrapolated
    traces = []
    for res in (fast, slow):
        meta = TraceMeta(kernel="k", arch="gfx950", source="model", clock_mhz=2400.0, shape={}, grid=(1, 1, 1),
                         workgroup_size=64, simulated=True, extra={"skipped_periods": res.skipped_periods()})
        traces.append(Trace(records_frame(res.records), meta))
    busy = [metrics.mfma_busy(t, "whole") for t in traces]
    assert busy[0] == pytest.approx(busy[1], abs=1e-12)
    assert busy[1] * slow.cycles == pytest.approx(sum(slow.mfma_busy.values()), rel=1e-3)
    per_simd = metrics.mfma_busy_per_simd(traces[0], "whole")
    assert per_simd["mfma_cycles"].sum() == sum(fast.mfma_busy.values())
    # where the skip belongs: the records issued before at_cycle are the full run's first ones, those
    # issued at or after it are its last ones, shifted by the skipped cycles
    skip = fast.extrapolated[0]
    at, shift = skip["at_cycle"], skip["cycles_skipped"]
    before = [i for i in fast.records["issue"] if i < at]
    after = [i + shift for i in fast.records["issue"] if i >= at]
    assert before and after
    assert slow.records["issue"][:len(before)] == before and slow.records["issue"][-len(after):] == after
    # the clock model's activity (VALU/TRANS cycles, LDS bytes too) of the extrapolated run is the full run's
    act_fast, act_slow = power.activity(fast.records, fast.skipped_periods()), power.activity(slow.records)
    assert act_fast.cycles == act_slow.cycles and act_fast.lds_bytes == act_slow.lds_bytes > 0
    assert (act_fast.mfma, act_fast.valu) == pytest.approx((act_slow.mfma, act_slow.valu), abs=1e-12)
    assert act_slow.valu > 0
    # the records alone (no skipped periods stated) give the biased number the CLI printed before
    bare = Trace(records_frame(fast.records), TraceMeta(kernel="k", arch="gfx950", source="model", clock_mhz=2400.0,
                                                        shape={}, grid=(1, 1, 1), workgroup_size=64, simulated=True))
    assert metrics.mfma_busy(bare, "whole") < busy[1] - 0.05
