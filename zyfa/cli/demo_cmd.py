"""Run zyfa.flash_attn_func on random causal inputs and compare it with the fp64 oracle.

Prints the relative L2 error of the chosen backend. Works on any CPU.
"""

from __future__ import annotations

import argparse
import time

import torch

import zyfa


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seqlen", type=int, default=512)
    p.add_argument("--headdim", type=int, default=128)
    p.add_argument("--backend", default="reference", help="backend name (see zyfa.available_backends())")
    p.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    for name in ("batch", "seqlen", "heads", "headdim"):
        if getattr(args, name) < 1:  # an empty problem printed "rel. L2 vs fp64 nan" with exit code 0
            raise ValueError(f"--{name} must be >= 1, got {getattr(args, name)}")
    gen = torch.Generator().manual_seed(args.seed)
    shape = (args.batch, args.seqlen, args.heads, args.headdim)
    q, k, v = (torch.randn(shape, generator=gen).to(torch.bfloat16) for _ in range(3))
    start = time.perf_counter()
    out = zyfa.flash_attn_func(q, k, v, causal=True, backend=args.backend)
    elapsed = time.perf_counter() - start
    ref = zyfa.flash_attn_func(q, k, v, causal=True, backend="oracle")
    err = ((out.double() - ref).norm() / ref.norm()).item()
    print(f"flash_attn_func backend={args.backend} b{args.batch} h{args.heads} s{args.seqlen} "
          f"d{args.headdim} causal bf16: {elapsed * 1e3:.1f} ms on {q.device}, rel. L2 vs fp64 {err:.3e}")
    return 0
