"""The Hopper kernel's V layout and register packing, checked on the CPU (no GPU, no CuTe DSL).

The kernel packs each thread's fp32 S accumulator values into fp8 A-operand registers without
moving values between threads; V' (``prepare_v``) lists the keys in the order that packing implies.
Here that order is derived independently from the wgmma thread-value layouts (as the CuTe DSL prints
them for ``MmaF8Op`` 64x64x32, fp32 accumulator) and compared with ``v_key_permutation``.
"""

import pytest
import torch

from zyfa.backends import AttentionArgs
from zyfa.kernels.hopper import backend
from zyfa.kernels.hopper.layout import E4M3_ONE, ONES_ROWS, prepare_v, v_key_permutation

# TV layouts of SM90 wgmma m64n64k32 (fp8 A from registers, fp32 C), (thread, value) -> col-major
# offset in the (M=64, K=32) A tile / (M=64, N=64) C tile: ((4,8,4),(4,2,2)):((256,1,16),(64,8,1024))
# and ((4,8,4),(2,2,8)):((128,1,16),(64,8,512)).
A_TV = (((4, 8, 4), (256, 1, 16)), ((4, 2, 2), (64, 8, 1024)))
C_TV = (((4, 8, 4), (128, 1, 16)), ((2, 2, 8), (64, 8, 512)))


def _offset(shape, stride, idx):
    off = 0
    for n, s in zip(shape, stride):
        off += (idx % n) * s
        idx //= n
    return off


def _coord(tv, thread, value, rows=64):
    off = _offset(*tv[0], thread) + _offset(*tv[1], value)
    return off % rows, off // rows  # (m, n or k)


def test_permutation_is_a_permutation_within_32_key_slices():
    perm = v_key_permutation(128)
    assert sorted(perm.tolist()) == list(range(128))
    assert torch.equal(perm // 32, torch.arange(128) // 32)
    with pytest.raises(ValueError, match="multiple of 32"):
        v_key_permutation(40)


def test_packing_rule_matches_the_wgmma_layouts():
    """A value (b, h, kk) of k-block kb holds the C value (c=b&1, h, g=4kb+2kk+(b>>1)) of the same
    thread (the kernel's ``softmax_block``): same row, and the S column is the key V' has there."""
    perm = v_key_permutation(64)
    for thread in range(128):
        for kb in range(2):
            for b in range(4):
                for h in range(2):
                    for kk in range(2):
                        a_row, a_k = _coord(A_TV, thread, b + 4 * h + 8 * kk)
                        g = 4 * kb + 2 * kk + (b >> 1)
                        c_row, c_col = _coord(C_TV, thread, (b & 1) + 2 * h + 4 * g)
                        assert a_row == c_row
                        assert perm[32 * kb + a_k] == c_col


def test_prepare_v_layout_and_product():
    g = torch.Generator().manual_seed(0)
    b, s_k, h_k, d_v = 2, 100, 3, 16
    v = (torch.randn(b, s_k, h_k, d_v, generator=g) * 4).to(torch.float8_e4m3fn)
    vp = prepare_v(v)
    assert vp.shape == (b, h_k, d_v + ONES_ROWS, 128) and vp.dtype == torch.float8_e4m3fn
    assert torch.all(vp.view(torch.uint8)[:, :, d_v:] == E4M3_ONE)
    perm = v_key_permutation(128)
    # every real key appears once at its permuted position; padding keys are zero
    p = torch.randn(5, 128, generator=g, dtype=torch.float64)
    p[:, perm >= s_k] = 0.0  # what the kernel's mask gives padded keys
    p_real = torch.zeros(5, s_k, dtype=torch.float64)
    p_real[:, perm[perm < s_k]] = p[:, perm < s_k]
    for bi in range(b):
        for hk in range(h_k):
            out = p @ vp[bi, hk].double().T  # (5, d_v + 8): P' V'^T
            ref = p_real @ v[bi, :, hk].double()
            assert torch.allclose(out[:, :d_v], ref, rtol=1e-12, atol=1e-12)
            assert torch.allclose(out[:, d_v], p.sum(1), rtol=1e-12)  # the ones rows: the row sum
    assert torch.all(vp.view(torch.uint8)[..., :d_v, :][..., perm >= s_k] == 0)


def _args(**kw):
    q = torch.zeros(1, 8, 2, 128, dtype=torch.float8_e4m3fn)
    base = dict(q=q, k=q, v=q, softmax_scale=1.0, causal=True, window_size=(-1, -1), softcap=0.0,
                alibi_slopes=None, q_descale=None, k_descale=None, v_descale=None)
    base.update(kw)
    return AttentionArgs(**base)


def test_backend_names_why_it_cannot_run_on_this_machine():
    reason = backend.unsupported(_args())
    assert reason is not None  # CPU tensors (and, in CI, no CuTe DSL)
    assert "CuTe DSL" in reason or "sm_90" in reason
