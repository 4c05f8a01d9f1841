"""The fused Hadamard + FP8 kernel keeps whole rows in one thread at 32 rows per warp (the per-head
default launch; kernels/triton/hadamard_fp8.py, "Layout"): compiled for sm_90 on this CPU (no
GPU), its butterflies need no lane shuffles and no local memory. The shuffles left are the
block-wide reductions (the token kernel's min over the block's descales, the amax pass's max): a
handful, where the row-major layout of H200 run 10 needed ~500 per thread (a row spread over 8
lanes: 41-57 instructions per element). The per-token default (16 rows per warp, two threads per
row: ~200 shuffles) trades some of that for wider loads; it was the faster one on the H200."""

import re

import pytest

triton = pytest.importorskip("triton")

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from zyfa.kernels.triton import hadamard_fp8 as H  # noqa: E402

ARGS = {
    "token": (H._hadamard_fp8_token, ["*bf16", "*fp8e4nv", "*fp32"] + ["i32"] * 10,
              ["D", "BLOCK_S", "INV_SQRT_D", "OUT_F32", "ROTATE"]),
    "amax": (H._hadamard_amax_head, ["*bf16", "*fp32"] + ["i32"] * 6, ["D", "BLOCK_S", "INV_SQRT_D", "ROTATE"]),
    "head": (H._hadamard_fp8_head, ["*bf16", "*fp8e4nv", "*fp32", "*fp32"] + ["i32"] * 9,
             ["D", "BLOCK_S", "INV_SQRT_D", "OUT_F32", "ROTATE"]),
}


def compile_sm90(kernel: str, d: int, num_warps: int = H.NUM_WARPS) -> str:
    """PTX of ``kernel`` for sm_90 at 32 rows per warp (one row per thread)."""
    fn, types, constexprs = ARGS[kernel]
    names = fn.arg_names
    signature = dict(zip(names, types + ["constexpr"] * len(constexprs)))
    const = {"D": d, "BLOCK_S": 32 * num_warps, "INV_SQRT_D": d ** -0.5, "OUT_F32": False, "ROTATE": True}
    # 16-divisible pointers and strides, as the launcher specialises contiguous tensors
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if signature[n].startswith("*") or n.startswith("stride")}
    src = ASTSource(fn=fn, signature=signature, constexprs={k: const[k] for k in constexprs}, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps}).asm["ptx"]


@pytest.mark.parametrize("kernel", ["token", "amax", "head"])
def test_butterflies_stay_in_registers(kernel):
    ptx = compile_sm90(kernel, 128)
    shuffles = len(re.findall(r"shfl\.sync", ptx))
    assert shuffles <= 16, f"{kernel}: {shuffles} lane shuffles (a row left its thread)"
    assert not re.search(r"(ld|st)\.local", ptx), f"{kernel}: spills to local memory"
    assert len(re.findall(r"add\.f32|sub\.f32", ptx)) >= 7 * 128  # the 7 stages of 128 channels are there
