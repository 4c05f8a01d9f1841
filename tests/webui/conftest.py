"""Synthetic schema-v1 traces with hand-known schedules for the web UI tests."""

from __future__ import annotations

import pytest

from zyfa.trace.schema import Trace, TraceMeta


def pingpong_trace(kernel: str = "zyfa-fp8", simds: int = 2, iterations: int = 3, mfma_cycles: int = 16,
                   valu_ops: int = 8, gap: int = 0) -> Trace:
    """Two waves per SIMD alternating 4 MFMAs and ``valu_ops`` 4-cycle VALU ops per phase.

    Per iteration and wave: phase 0 of wave 0 = 4 MFMAs back to back (4 * mfma_cycles), while
    wave 1 runs its VALU ops; then they swap. Phase length = max(4 * mfma_cycles, 4 * valu_ops) + gap.
    Iteration i, phase p starts at cycle (2 * i + p) * phase.
    """
    phase = max(4 * mfma_cycles, 4 * valu_ops) + gap
    records = []
    for simd in range(simds):
        for slot in range(2):
            wave = 2 * simd + slot
            for it in range(iterations):
                for p in range(2):
                    t0 = (2 * it + p) * phase
                    doing_mfma = (p == slot)
                    if doing_mfma:
                        for k in range(4):
                            s = t0 + k * mfma_cycles
                            records.append(dict(cu=0, simd=simd, wave=wave, slot=slot, pc=0x100 + 8 * k,
                                                opcode="v_mfma_f32_32x32x64_f8f6f4",
                                                operands=f"a[0:15], v[{4 * k}:{4 * k + 7}], v[64:71], a[0:15]",
                                                unit="MFMA", issue=s, start=s, end=s + mfma_cycles,
                                                stall=0 if k else 2, stall_reason=None if k else "dependency",
                                                iteration=it, region=f"QK_{it}"))
                    else:
                        for k in range(valu_ops):
                            s = t0 + 4 * k
                            op = "v_exp_f32" if k % 4 == 3 else "v_fma_f32"
                            records.append(dict(cu=0, simd=simd, wave=wave, slot=slot, pc=0x200 + 8 * k,
                                                opcode=op, operands=f"v{k}, v{k}, v{k + 1}",
                                                unit="VALU", issue=s, start=s, end=s + 4, stall=0,
                                                stall_reason=None, iteration=it, region=f"softmax_{it}"))
    meta = TraceMeta(kernel=kernel, arch="gfx950", source="model", clock_mhz=2400.0,
                     shape=dict(batch=1, heads=1, heads_k=1, seqlen_q=256, seqlen_k=256, headdim=128, headdim_v=128),
                     workgroup_size=64 * 2 * simds)
    return Trace.from_records(records, meta)


@pytest.fixture
def make_trace():
    return pingpong_trace

