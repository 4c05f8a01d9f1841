"""AITER's real gfx950 BF16 causal forward (amd-aiter wheel) through the cycle model."""

import struct

import pytest

from zyfa.shapes import AttnShape
from zyfa.kernels import aiter
from zyfa.trace.cdna4.estimate import EstimateConfig, _interpolate, _sample_xs, dispatch, estimate, occupancy
from zyfa.gfx950.isa import disassemble
from zyfa.trace.cdna4.launch import prepare as resolve
from zyfa.trace.cdna4.sim import CUSim

SHAPE = AttnShape(batch=1, heads=8, heads_k=8, seqlen_q=2048, seqlen_k=2048, headdim=128, dtype="bf16")


def test_kernel_arguments_follow_metadata_and_dispatcher(aiter_causal):
    program = disassemble(aiter_causal)
    args = {a.name: a for a in program.descriptor.args if a.name != "pad"}
    assert (args["Q"].offset, args["seq_len"].offset, args["kv_seq_len"].offset) == (16, 96, 272)
    raw = aiter.kernargs(program, aiter_causal, SHAPE)
    read = lambda name: struct.unpack_from("<I", raw, args[name].offset)[0]
    assert read("seq_len") == read("kv_seq_len") == 2048
    assert read("Seqs") == 8 * 128 * 2  # BSHD row stride in bytes
    assert read("Ts") == 256 * 8 * 128 * 2
    assert read("gqa") == 1 and read("msk_opt") == 5  # tune_opt 5: heads % 8 == 0 and seqlen <= 16K
    big = aiter.kernargs(program, aiter_causal, SHAPE.with_(seqlen_q=32768, seqlen_k=32768))
    assert struct.unpack_from("<I", big, args["msk_opt"].offset)[0] == 3  # causal, seqlen > 16K: 5 - 2
    assert aiter.grid(aiter_causal, SHAPE) == (4, 8, 1)  # ceil(ceil(2048/256)/2) query-tile pairs


def test_causal_trip_counts_are_real(aiter_causal):
    # workgroup x = 0 takes query tiles 0 and 7 (of 8, 256 rows): (1 + 8) * 256 keys = 36 key tiles of 64,
    # each 2 (QK^T and PV) x 256 x 64 x 128 x 2 FLOPs of MFMA work, masked diagonal tiles included
    launch = resolve("aiter:fwd_hd128_bf16_causal", SHAPE)
    result = CUSim(launch.program, launch.kernargs, [(0, 0, 0)], launch.workgroup_size).run()
    assert result.mfma_flops(launch.program) == 36 * 2 * 256 * 64 * 128 * 2
    assert len(set(result.iterations.values())) == 1  # all 8 waves ran the same number of loop iterations
    assert result.extrapolated and result.extrapolated_instructions > 0


def test_code_object_path_is_recognised_as_aiter(aiter_causal):
    launch = resolve(str(aiter_causal), SHAPE)
    assert launch.origin == "aiter" and launch.grid == (4, 8, 1) and launch.workgroup_size == 512
    assert launch.kernargs == resolve("aiter:fwd_hd128_bf16_causal", SHAPE).kernargs


def test_estimate_reports_simulated_and_extrapolated(aiter_causal):
    launch = resolve("aiter:fwd_hd128_bf16_causal", SHAPE)
    assert occupancy(launch) == (1, "VGPR+AGPR")  # 8 waves x 256 registers: 2 waves per SIMD fill 512
    est = estimate(launch, EstimateConfig(samples=1))
    # the spec states the work axis (the host code's query-tile axis, x in batch mode): no probing
    assert est.work_axis == 0 and "work axis probed" not in est.notes[1]
    probed = est.samples[0]["coord"]
    assert probed[0] == 4 // 2 == est.representative_x
    # 32 workgroups, 256 CUs: one round, kernel time = the sampled workgroup's time
    assert est.cycles == est.samples[0]["cycles"]
    assert est.tflops == pytest.approx(SHAPE.flops / (est.cycles / 2.4e9) / 1e12)
    assert any(n.startswith("extrapolated:") for n in est.notes) and any("interpolated" in n for n in est.notes)
    # 4 workgroups per head each compute 36 full (256 rows x 64 keys) tiles; causal counts 2048 * 2048 / 2
    assert est.flops_ratio == pytest.approx(36 * 4 * 256 * 64 / (2048 * 2048 / 2)) == pytest.approx(1.125)
    assert est.notes[0].startswith("MFMA work in the model: 1.")


def test_dispatch_and_interpolation_hand_computed():
    # slots [0,0]: x0 -> 10, x1 -> 20, x0 -> 20, x1 -> 40, x0 -> 30, x1 -> 50
    assert dispatch([10, 20], (2, 3, 1), slots=2) == 50
    assert dispatch([10, 20], (2, 1, 1), slots=4) == 20
    # work along y: (x0,y0)=10 (x1,y0)=10 (x0,y1)=20 (x1,y1)=20 on 2 slots -> 10, 10, 30, 30
    assert dispatch([10, 20], (2, 2, 1), slots=2, axis=1) == 30
    assert _interpolate([0, 4], [10, 30], 5) == [10, 15, 20, 25, 30]
    assert _sample_xs(64, 3) == [0, 32, 63] and _sample_xs(2, 3) == [0, 1]


def test_bad_inputs(aiter_causal):
    with pytest.raises(ValueError, match="unknown AITER kernel"):
        aiter.resolve("aiter:fwd_hd64_nonexistent")
    with pytest.raises(ValueError, match="needs headdim 128"):
        resolve("aiter:fwd_hd128_bf16_causal", SHAPE.with_(headdim=64, headdim_v=64))
    with pytest.raises(ValueError, match="takes dtype .bf16."):
        resolve("aiter:fwd_hd128_bf16_causal", SHAPE.with_(dtype="fp8"))
    with pytest.raises(ValueError, match="samples"):
        EstimateConfig(samples=0)
    with pytest.raises(TypeError, match="Launch"):
        estimate("aiter:fwd_hd128_bf16_causal")
