"""run_kernel_trace off ROCm: a clear TracerUnavailable that names what was looked for and points
to the default cycle model; bad arguments rejected first. (This machine has no ROCm and no GPU.)"""

from __future__ import annotations

import pytest

from zyfa.shapes import AttnShape
from zyfa.trace.errors import TracerUnavailable
from zyfa.trace.rocprof import ThreadTraceParams, check_available, run_kernel_trace
from zyfa.trace.rocprof.tracer import _buffer_bytes


def test_unavailable_names_all_three_libraries(tmp_path):
    env = {"ROCM_PATH": str(tmp_path / "rocm")}
    with pytest.raises(TracerUnavailable) as info:
        run_kernel_trace("zyfa-fp8", AttnShape(seqlen_q=256, seqlen_k=256), tmp_path / "out", env=env)
    msg = str(info.value)
    for lib in ("librocprofiler-sdk.so", "libamdhip64.so", "librocprof-trace-decoder.so"):
        assert f"{tmp_path}/rocm/lib/{lib}" in msg and f"/opt/rocm/lib/{lib}" in msg
    assert "ROCm >= 7.0" in msg and "--backend model" in msg and "cycle model" in msg
    assert not (tmp_path / "out").exists()  # nothing was built or written


def test_explicit_locations_are_reported(tmp_path):
    with pytest.raises(TracerUnavailable, match=f"{tmp_path}/sdk.so.*{tmp_path}/dec/librocprof-trace-decoder.so"):
        check_available(library=tmp_path / "sdk.so", decoder_dir=tmp_path / "dec", env={})


@pytest.mark.parametrize("kwargs,error,match", [
    ({"shape": (1, 2)}, TypeError, "shape must be a zyfa.shapes.AttnShape"),
    ({"out_dir": 3}, TypeError, "out_dir must be a str or Path"),
    ({"params": {"target_cu": 1}}, TypeError, "params must be ThreadTraceParams"),
])
def test_bad_arguments_first(tmp_path, kwargs, error, match):
    args = {"kernel": "zyfa-fp8", "shape": AttnShape(), "out_dir": tmp_path, **kwargs}
    with pytest.raises(error, match=match):
        run_kernel_trace(args.pop("kernel"), args.pop("shape"), args.pop("out_dir"), env={}, **args)


def test_buffer_bound():
    # b2 h8/2 s(128, 512) d(128, 64): 4 B * 2 * 512 * 8 * 128
    shape = AttnShape(batch=2, heads=8, heads_k=2, seqlen_q=128, seqlen_k=512, headdim=128, headdim_v=64)
    assert _buffer_bytes(shape) == 4 * 2 * 512 * 8 * 128
    assert ThreadTraceParams(target_cu=0).target_cu == 0
