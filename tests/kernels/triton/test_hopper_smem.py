"""Every head dim the validator accepts gets Triton tiles that fit Hopper's shared memory.

Compiles the kernels for sm_90 on this CPU (``triton.compile`` with a CUDA target; no GPU) and
reads the shared memory each autotune candidate asks for. The H200 failure this guards against:
head dim 192 padded to 256 with the 128-wide configs asked for 458752 B where sm_90 has 232448.
"""

import pytest

triton = pytest.importorskip("triton")

from zyfa.interface import MAX_HEADDIM  # noqa: E402
from zyfa.kernels.triton._common import (  # noqa: E402
    AUTOTUNE_CONFIGS, HEAD_TIERS, V2_WIDE_MAX_STAGES, TileConfig, padded_headdim, prune_for_headdim, tier_configs,
)
from zyfa.kernels.triton.aot import HOPPER_SMEM_PER_BLOCK, hopper_shared_bytes  # noqa: E402

ACCEPTED = range(8, MAX_HEADDIM + 1, 8)  # what zyfa.interface's validator lets through
SM90 = [(kind, tier, config) for (arch, kind), tiers in AUTOTUNE_CONFIGS.items() if arch == "sm_90"
        for tier, configs in tiers.items() for config in configs]
# the FP8 kernel has two recipe paths (constexpr): both must fit
SM90 = [(k, t, c, v2) for k, t, c in SM90 for v2 in ((False, True) if k == "fp8" else (False,))]


@pytest.mark.parametrize("kind", ["fp8", "bf16"])
def test_every_accepted_head_dim_pair_has_a_tier(kind):
    fp8 = kind == "fp8"
    for d in ACCEPTED:
        for dv in ACCEPTED:
            configs = tier_configs(fp8, "sm_90", padded_headdim(d, fp8), padded_headdim(dv, fp8))
            assert configs, (d, dv)
    assert HEAD_TIERS[-1] >= padded_headdim(MAX_HEADDIM)


@pytest.mark.parametrize("kind,tier,config,v2", SM90, ids=[
    f"{k}-{t}-{c.block_m}x{c.block_n}-w{c.num_warps}-s{c.num_stages}{'-v2' if v2 else ''}" for k, t, c, v2 in SM90])
def test_sm90_config_fits_shared_memory_at_its_widest_head(kind, tier, config, v2):
    # the tier's widest problem (d = dv = tier) needs the most shared memory of any problem in it
    used = hopper_shared_bytes(kind, tier, tier, config, recipe_v2=v2)
    if v2 and tier > 128 and config.num_stages > V2_WIDE_MAX_STAGES:
        # v2 holds two key blocks per stage: these do not fit, and the prune keeps them out of wide heads
        assert used > HOPPER_SMEM_PER_BLOCK, f"{config} fits at {used} B: V2_WIDE_MAX_STAGES is too strict"
        kept = prune_for_headdim(True, "sm_90")([config.to_triton(True)], {}, HEAD_DIM_PAD=tier,
                                                HEAD_DIM_V_PAD=tier, RECIPE_V2=True)
        assert kept == []
        return
    assert 0 < used <= HOPPER_SMEM_PER_BLOCK, f"{kind} tier {tier} {config}: {used} B"


def test_old_wide_head_config_is_caught():
    # the H200 failure of the issue, reproduced at compile level: the check is not vacuous
    used = hopper_shared_bytes("bf16", 192, 192, TileConfig(128, 8, 3, block_n=128))
    assert used > HOPPER_SMEM_PER_BLOCK


@pytest.mark.parametrize("kind", ["fp8", "bf16"])
def test_narrowest_head_compiles_for_sm90(kind):
    # headdim 8: the FP8 kernel pads to 32 (Hopper's fp8 MMA is 32 deep; 16 does not compile)
    config = tier_configs(kind == "fp8", "sm_90", 16, 16)[0]
    assert 0 < hopper_shared_bytes(kind, 8, 8, config) <= HOPPER_SMEM_PER_BLOCK


def test_prune_keeps_the_problem_tier_only():
    configs = [c.to_triton(False) for tier in AUTOTUNE_CONFIGS[("sm_90", "bf16")].values() for c in tier]
    prune = prune_for_headdim(False, "sm_90")
    kept = prune(configs, {}, HEAD_DIM_PAD=256, HEAD_DIM_V_PAD=128)
    want = [c.to_triton(False).all_kwargs() for c in AUTOTUNE_CONFIGS[("sm_90", "bf16")][256]]
    assert [c.all_kwargs() for c in kept] == want
    kept = prune(configs, {}, HEAD_DIM_PAD=64, HEAD_DIM_V_PAD=64)
    assert all(isinstance(c, triton.Config) for c in kept)
    assert [c.all_kwargs() for c in kept] == [c.to_triton(False).all_kwargs()
                                            for c in AUTOTUNE_CONFIGS[("sm_90", "bf16")][128]]
