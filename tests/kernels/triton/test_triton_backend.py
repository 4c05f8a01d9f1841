"""The ``triton`` backend's registration and its reasons for refusing inputs (CPU)."""

import pytest
import torch

pytest.importorskip("triton")

from zyfa.backends import available_backends  # noqa: E402
from zyfa.interface import _validate  # noqa: E402


def args_for(**overrides):
    q = torch.zeros(1, 8, 2, 64, dtype=torch.bfloat16)
    kw = dict(dropout_p=0.0, softmax_scale=None, causal=True, window_size=(-1, -1), softcap=0.0,
              alibi_slopes=None, q_descale=None, k_descale=None, v_descale=None)
    kw.update(overrides)
    return _validate(q, q, q, **kw)


def test_registered_with_priority_10():
    backend = available_backends()["triton"]
    assert backend.priority == 10


def test_refuses_cpu_tensors_and_names_the_alternative():
    reason = available_backends()["triton"].unsupported(args_for())
    assert "cpu" in reason and "reference" in reason


@pytest.mark.parametrize("overrides,needle", [
    (dict(window_size=(4, 0)), "sliding-window"), (dict(softcap=2.0), "softcap"),
])
def test_refuses_unimplemented_features(monkeypatch, overrides, needle):
    # pretend the tensors are on a GPU so the feature checks are reached
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    reason = available_backends()["triton"].unsupported(args_for(**overrides))
    assert needle in reason


def test_tileconfig_validates():
    from zyfa.kernels.triton._common import TileConfig, padded_headdim
    with pytest.raises(ValueError, match="block_m"):
        TileConfig(100, 4, 2)
    with pytest.raises(ValueError, match="num_warps"):
        TileConfig(64, 3, 2)
    with pytest.raises(ValueError, match="num_stages"):
        TileConfig(64, 4, 0)
    assert padded_headdim(192) == 256 and padded_headdim(128) == 128 and padded_headdim(8) == 16
    assert padded_headdim(8, fp8=True) == 32 and padded_headdim(64, fp8=True) == 64


def test_kernel_wrappers_reject_bad_arguments():
    from zyfa.kernels.triton._common import TileConfig
    from zyfa.kernels.triton.attn_bf16 import attention_bf16
    from zyfa.kernels.triton.attn_fp8 import attention_fp8
    x = torch.zeros(1, 4, 2, 64, dtype=torch.bfloat16)
    x8 = x.to(torch.float8_e4m3fn)
    with pytest.raises(TypeError, match="q must be float8_e4m3fn"):
        attention_fp8(x, x8, x8, 0.125, True)
    with pytest.raises(ValueError, match="out_dtype"):
        attention_fp8(x8, x8, x8, 0.125, True, out_dtype=torch.float16)
    with pytest.raises(ValueError, match="explicit config"):
        attention_fp8(x8, x8, x8, 0.125, True, proton_scopes=True)
    with pytest.raises(TypeError, match="k must be bfloat16 or float16"):
        attention_bf16(x, x8, x, 0.125, True)
    with pytest.raises(ValueError, match="block_n must be 64"):
        TileConfig(64, 4, 2, block_n=128).meta(fp8=True)
    with pytest.raises(ValueError, match="block_n"):
        TileConfig(64, 4, 2, block_n=48)
