"""Accuracy of the Hopper kernel's tile recipes at 16K keys, on the GPU: n128 (zyfa-v1, 64-key scaling
blocks), t128 (zyfa-v1 with 128-key blocks), runmax (zyfa-runmax: codes against the running max,
PV accumulated in O by the tensor core) and g4 / g8 (zyfa-grouped: runmax within groups of 4 / 8 tiles,
each group added into an fp32 O).

Usage: python3 hopper_tile_accuracy.py [NAME ...] (default: n128 t128 runmax, run 28's rows). b1 h2 s16384 d128 causal, Gaussian and LLM-like inputs (attention
sink of 10 nats on key 0, ``zyfa.activations.llm_like_qkv``), quantised per head (no Hadamard). Per
variant: the kernel's fp32 output of the last 512 query rows against (1) its recipe's emulator
(``zyfa.numerics``, magic rounding; bottom-right causal alignment keeps those rows' full context) and
(2) fp64 attention of the unquantised inputs; the emulator's own error against (2) beside it.
"""

import sys

import torch

from zyfa import numerics
from zyfa.activations import llm_like_qkv
from zyfa.kernels.hopper.attn_fp8_sm90 import attention_fp8_sm90

B, S, H, D, LAST = 1, 16384, 2, 128, 512
VARIANTS = {"n128": (dict(), "zyfa", 64, 1), "t128": (dict(t128=True), "zyfa", 128, 1),
            "runmax": (dict(runmax=True), "zyfa-runmax", 128, 1),
            "g4": (dict(grouped=4), "zyfa-grouped", 128, 4), "g8": (dict(grouped=8), "zyfa-grouped", 128, 8)}
names = sys.argv[1:] or ["n128", "t128", "runmax"]
unknown = [n for n in names if n not in VARIANTS]
if unknown:
    sys.exit(f"hopper_tile_accuracy: unknown variant {unknown[0]!r} (known: {', '.join(VARIANTS)})")


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def inputs(source):
    if source == "llm":
        return llm_like_qkv(B, S, H, H, D, seed=0)
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(B, S, H, D, generator=g) for _ in range(3))


for source in ("gaussian", "llm"):
    q, k, v = inputs(source)
    (q8, dq), (k8, dk), (v8, dv) = (numerics.quantize_fp8(x, nheads_k=H) for x in (q, k, v))
    qg, kg, vg = (x.double().cuda().transpose(1, 2) for x in (q[:, -LAST:], k, v))
    mask = torch.ones(LAST, S, dtype=torch.bool, device="cuda").tril(S - LAST)
    oracle = (torch.softmax((qg @ kg.transpose(-1, -2) * D ** -0.5).masked_fill(~mask, float("-inf")), -1) @ vg)
    oracle = oracle.transpose(1, 2).cpu()
    gpu = [x.cuda() for x in (q8, k8, v8, dq, dk, dv)]
    for name in names:
        opts, variant, block, group = VARIANTS[name]
        out, _ = attention_fp8_sm90(gpu[0], gpu[1], gpu[2], D ** -0.5, True, gpu[3], gpu[4], gpu[5],
                                    out_dtype=torch.float32, n128=True, pingpong=False, **opts)
        out = out[:, -LAST:].cpu()
        emu, _ = numerics.zyfa_fp8_attention(q8[:, -LAST:], k8, v8, dq, dk, dv, causal=True, softmax_scale=D ** -0.5,
                                             variant=variant, rounding="magic", block=block, group=group,
                                             out_dtype=torch.float32)
        print(f"ACC {source:8s} {name:7s} kernel vs its emulator {rel(out, emu):.3e}; vs fp64 {rel(out, oracle):.4e} "
              f"(emulator vs fp64 {rel(emu, oracle):.4e})", flush=True)
