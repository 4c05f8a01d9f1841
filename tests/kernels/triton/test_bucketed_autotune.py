"""``_common.BucketedAutotune``: the Triton kernels are autotuned once per power-of-two bucket of the lengths.

Triton's own key holds the exact ``SEQ_Q`` / ``SEQ_K``, so each new prompt length re-timed every
candidate. A stand-in autotuner (same attributes as ``triton.runtime.Autotuner``: ``arg_names``,
``keys``, ``best_config``, ``fn``) checks the bucketing and the reuse; the interpreter test runs the
real kernels through it (test_triton_interpreter.py).
"""

import pytest

triton = pytest.importorskip("triton")

from zyfa.kernels.triton import attn_bf16, attn_fp8  # noqa: E402
from zyfa.kernels.triton._common import BucketedAutotune, length_bucket  # noqa: E402


class FakeTensor:
    def __init__(self, dtype):
        self.dtype = dtype


class FakeAutotuner:
    arg_names = ["Q", "SEQ_Q", "SEQ_K", "HEAD_DIM", "IS_CAUSAL"]
    keys = ["SEQ_Q", "SEQ_K", "HEAD_DIM", "IS_CAUSAL"]

    def __init__(self):
        self.tuned, self.direct, self.best_config = [], [], None
        outer = self

        class Fn:
            def __getitem__(self, grid):
                return lambda *args, **kwargs: outer.direct.append((args, kwargs))
        self.fn = Fn()

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.tuned.append(args)
            self.best_config = triton.Config({"BLOCK_M": 64 * len(self.tuned)}, num_warps=4, num_stages=3)
        return run


def test_length_bucket():
    assert [length_bucket(n) for n in (0, 1, 2, 3, 64, 65, 4224)] == [0, 1, 2, 4, 64, 128, 8192]


def test_one_tuning_per_bucket_then_the_winner_untimed():
    kernel = FakeAutotuner()
    tuned = BucketedAutotune(kernel)
    q = FakeTensor("torch.bfloat16")
    for s_q, s_k in [(100, 100), (128, 120), (65, 97)]:  # one bucket (128, 128)
        tuned[(1,)](q, s_q, s_k, HEAD_DIM=128, IS_CAUSAL=True)
    assert len(kernel.tuned) == 1 and len(kernel.direct) == 2
    args, kwargs = kernel.direct[-1]
    assert args == (q, 65, 97)  # the real lengths are launched; only the key is bucketed
    assert kwargs["BLOCK_M"] == 64 and kwargs["num_warps"] == 4 and kwargs["num_stages"] == 3
    assert kwargs["HEAD_DIM"] == 128 and kwargs["IS_CAUSAL"] is True
    # a new bucket, another causal flag, another dtype: each tunes
    tuned[(1,)](q, 129, 100, HEAD_DIM=128, IS_CAUSAL=True)
    tuned[(1,)](q, 100, 100, HEAD_DIM=128, IS_CAUSAL=False)
    tuned[(1,)](FakeTensor("torch.float16"), 100, 100, HEAD_DIM=128, IS_CAUSAL=True)
    assert len(kernel.tuned) == 4 and len(tuned.winners) == 4
    tuned[(1,)](q, 200, 99, HEAD_DIM=128, IS_CAUSAL=True)  # bucket (256, 128) again: no tuning
    assert len(kernel.tuned) == 4 and kernel.direct[-1][1]["BLOCK_M"] == 128


@pytest.mark.parametrize("module,name", [(attn_bf16, "_attn_fwd_bf16"), (attn_fp8, "_attn_fwd_fp8")])
def test_kernels_key_holds_both_lengths(module, name):
    # the bucketing rewrites SEQ_Q and SEQ_K of the autotuner's own key: both must be in it
    kernel = getattr(module, name)
    assert {"SEQ_Q", "SEQ_K"} <= set(kernel.keys)
    assert getattr(module, name + "_bucketed").kernel is kernel
