"""Where the "zyfa-fp8" transformers attention spends its time, one layer of Llama-3-8B's shape (GPU).

Run 10 measured the 8192-token prefill of a 2-layer Llama at 1.55x sdpa's time with "zyfa-fp8" and
0.99x with "zyfa" (bf16). This times, at that layer's attention shape (b1, 32 query heads, 8 KV heads,
d 128, causal, bf16 inputs in transformers' (batch, heads, seqlen, d) layout), each step of the FP8
attention function of ``zyfa.integrations.transformers`` and the whole function, next to sdpa and
the bf16 path. Each row: CUDA events around ``--reps`` back-to-back calls after warm-up (the way a
prefill issues them: host syncs inside a call show up as GPU idle time), ms per call.

    python3 benchmarks/fp8_prefill_breakdown.py [--seqlen 8192] [--reps 20]
"""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import torch

import zyfa
from zyfa.integrations.transformers import _rotate_quantise, zyfa_attention, zyfa_fp8_attention
from zyfa.interface import _check_values
from zyfa.kernels.triton.attn_fp8 import attention_fp8
from zyfa.numerics import quantize_fp8
from zyfa.timing import elapsed_s


def per_call_ms(fn, reps: int) -> float:
    """Mean ms per call over ``reps`` back-to-back calls, after three untimed ones."""
    elapsed_s(fn, 3, cuda=True)
    return 1e3 * elapsed_s(fn, reps, cuda=True) / reps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seqlen", type=int, default=8192, help="tokens (default 8192)")
    p.add_argument("--reps", type=int, default=20, help="timed calls per row (default 20)")
    args = p.parse_args()
    if not torch.cuda.is_available():
        p.error("needs a CUDA GPU")
    s, h, hk, d = args.seqlen, 32, 8, 128
    g = torch.Generator(device="cuda").manual_seed(0)
    query, key, value = (torch.randn(1, n, s, d, generator=g, device="cuda", dtype=torch.bfloat16) for n in (h, hk, hk))
    module = torch.nn.Module()
    module.is_causal = True
    q, k, v = (x.transpose(1, 2) for x in (query, key, value))  # what the integration passes on: (b, s, h, d) views
    (q8, dq), (k8, dk), (v8, dv) = _rotate_quantise(q, hk), _rotate_quantise(k, hk), quantize_fp8(v)
    scale = d ** -0.5
    checked = SimpleNamespace(q_descale=dq, k_descale=dk, v_descale=dv)  # the fields _check_values reads
    rows = {
        "sdpa bf16 (enable_gqa)": lambda: torch.nn.functional.scaled_dot_product_attention(
            query, key, value, is_causal=True, enable_gqa=True),
        '"zyfa" attention function (bf16)': lambda: zyfa_attention(module, query, key, value, None),
        '"zyfa-fp8" attention function (whole)': lambda: zyfa_fp8_attention(module, query, key, value, None),
        "  fused Hadamard + quantise of Q": lambda: _rotate_quantise(q, hk),
        "  fused Hadamard + quantise of K": lambda: _rotate_quantise(k, hk),
        "  quantise V (torch)": lambda: quantize_fp8(v),
        "  flash_attn_func FP8 (checks + op + kernel)": lambda: zyfa.flash_attn_func(
            q8, k8, v8, softmax_scale=scale, causal=True, q_descale=dq, k_descale=dk, v_descale=dv),
        "    attention_fp8 kernel call (zyfa-v2, V transpose included)": lambda: attention_fp8(
            q8, k8, v8, scale, True, dq, dk, dv, recipe="zyfa-v2"),
        "    descale value checks (3 descales, one host sync)": lambda: _check_values(checked),
    }
    print(f"b1 h{h}/{hk} s{s} d{d} causal, {torch.cuda.get_device_name()}, ms per call over {args.reps} back-to-back calls")
    for name, fn in rows.items():
        print(f"{name:<64} {per_call_ms(fn, args.reps):8.3f}")


if __name__ == "__main__":
    main()
