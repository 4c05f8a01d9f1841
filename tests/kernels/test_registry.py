"""The kernel registry: resolution into launch descriptions, facts from specs, reported plugins."""

from dataclasses import replace

import pytest

from zyfa import backends
from zyfa.kernels import registry
from zyfa.kernels.gfx950 import VARIANTS
from zyfa.shapes import AttnShape

SHAPE = AttnShape(batch=1, heads=2, heads_k=2, seqlen_q=512, seqlen_k=512, dtype="fp8")


def test_a_failing_kernel_plugin_is_reported(monkeypatch):
    monkeypatch.setattr(registry, "_PLUGINS", ("zyfa.kernels.no_such_provider",))
    monkeypatch.setattr(registry, "_loaded", False)
    with pytest.warns(RuntimeWarning, match=r"kernel provider zyfa\.kernels\.no_such_provider not loaded: "
                                            r"ModuleNotFoundError"):
        names = registry.kernels()
    assert set(VARIANTS) <= set(names)  # the built-in generator kernels stay registered


def test_a_failing_backend_plugin_is_reported(monkeypatch):
    monkeypatch.setattr(backends, "_PLUGIN_MODULES", ("zyfa.kernels.no_such_backend",))
    monkeypatch.setattr(backends, "_plugins_loaded", False)
    with pytest.warns(RuntimeWarning, match=r"backend plugin zyfa\.kernels\.no_such_backend not loaded"):
        backends.available_backends()


def test_generator_kernels_carry_their_facts():
    for name, config in VARIANTS.items():
        spec = registry.get_kernel(name)
        assert spec.variant == config and spec.dtype == config.dtype and spec.causal is None


def test_resolve_checks_the_shape_against_the_spec():
    desc = registry.resolve("zyfa-fp8", SHAPE)
    # two query blocks of 256 rows x 2 heads: 4 workgroups fit the CUs, so zyfa-fp8 does not pair them
    assert desc.name == "zyfa-fp8" and desc.grid == (2, 2, 1) and desc.workgroup_size == 512
    big = replace(SHAPE, heads=256, heads_k=256)
    assert registry.resolve("zyfa-fp8", big).grid == (1, 256, 1)
    assert registry.resolve("zyfa-fp8", big, {"pair_query_blocks": False}).grid == (2, 256, 1)
    assert desc.build.asm and desc.spec.variant == VARIANTS["zyfa-fp8"]
    with pytest.raises(ValueError, match="takes dtype 'bf16'"):
        registry.resolve("zyfa-bf16", SHAPE)


def test_overrides_apply_to_the_variant_config():
    desc = registry.resolve("zyfa-fp8", SHAPE, {"schedule": "serial"})
    assert desc.name == "zyfa-fp8[schedule=serial]"
    assert desc.build.meta["config"]["schedule"] == "serial"
    assert desc.build.meta["config"]["softmax"] == VARIANTS["zyfa-fp8"].softmax
    with pytest.raises(ValueError, match="unknown generator parameter"):
        registry.resolve("zyfa-fp8", SHAPE, {"headdim": 64})
