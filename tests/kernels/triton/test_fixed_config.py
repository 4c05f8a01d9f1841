"""The test-only fixed-config mode (``ZYFA_TRITON_FIXED_CONFIG=1``) that FlashAttention's upstream tests run under.

Its kernels are twins of the autotuned ones with the sequence-length-dependent integer arguments
left unspecialised. Triton ignores a ``do_not_specialize`` name that matches no parameter, so a
renamed argument would silently bring back one compile per length class: the names are checked here.
The bitwise equality with the default launch is in test_triton_interpreter.py.
"""

import pytest

pytest.importorskip("triton")

from zyfa.kernels.triton import attn_bf16, attn_fp8  # noqa: E402
from zyfa.kernels.triton._common import FIXED_CONFIG_ENV, fixed_config, fixed_config_mode, tier_configs  # noqa: E402

TWINS = {"bf16": (attn_bf16._attn_fwd_bf16_any_len, {"SEQ_Q", "SEQ_K", "stride_lb", "stride_lh"}),
         "fp8": (attn_fp8._attn_fwd_fp8_any_len, {"SEQ_Q", "SEQ_K", "stride_lb", "stride_lh", "stride_vh", "stride_vd"})}


@pytest.mark.parametrize("kind", TWINS)
def test_twin_leaves_exactly_the_length_arguments_unspecialised(kind):
    twin, names = TWINS[kind]
    unspecialised = {p.name for p in twin.params if p.do_not_specialize}
    assert unspecialised == names
    assert not any(p.do_not_specialize for p in (attn_bf16._attn_fwd_bf16 if kind == "bf16" else attn_fp8._attn_fwd_fp8).fn.params)


@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("pads", [(64, 64), (128, 128), (256, 128), (256, 256)])
def test_fixed_config_is_the_tiers_first_candidate(fp8, pads):
    assert fixed_config(fp8, *pads, arch="sm_90") == tier_configs(fp8, "sm_90", *pads)[0]


def test_mode_follows_the_environment(monkeypatch):
    monkeypatch.delenv(FIXED_CONFIG_ENV, raising=False)
    assert not fixed_config_mode()
    monkeypatch.setenv(FIXED_CONFIG_ENV, "1")
    assert fixed_config_mode()
    monkeypatch.setenv(FIXED_CONFIG_ENV, "0")
    assert not fixed_config_mode()
