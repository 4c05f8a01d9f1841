"""Error floor of FP8 probabilities: the kernel-only error any recipe that rounds P to e4m3 has.

For one ``zyfa-accuracy`` input (same sources and quantisation as its rows), per query row: the
fp64 scores of the *quantised* inputs, ``p = exp(s - max)``, and the output with P replaced by

* ``rne x{1,256,448}``: P (max 1) times 1, 256 or 448, correctly rounded to e4m3 (RNE), divided
  back; ``exact-sum`` normalises by the sum of the unrounded p (AITER, CK, FA3), ``rounded-sum``
  by the sum of the rounded P (ZYFA);
* ``bf16 P``: P rounded to bf16 (for scale).

The printed numbers are kernel-only relative L2 errors (against fp64 attention of the same
quantised inputs, as the ``kernel`` column of ``zyfa-accuracy``): with ``x256`` / ``x448``
nothing is flushed, so they are the error of correct rounding itself, which no recipe whose PV
product reads e4m3 P goes below (up to luck). Compare a recipe's ``kernel`` column with it.

    python benchmarks/fp8_p_floor.py --source llm --seqlen 4096 --queries 512 [--device cuda]
"""

from __future__ import annotations

import argparse
import sys

import torch

from zyfa import numerics
from zyfa.cli import accuracy_main


def floors(config: accuracy_main.StudyConfig, recipe: str) -> dict[str, float]:
    q, k, v = accuracy_main.make_inputs(config)
    q8, k8, v8, dq, dk, dv = accuracy_main._quantised(q, k, v, accuracy_main.RECIPES[recipe])
    q, k, v = (accuracy_main._dequantised(a, b).to(config.device, torch.float64)[0]
               for a, b in ((q8, dq), (k8, dk), (v8, dv)))
    s, nq = k.shape[0], config.queries or k.shape[0]
    out = {}
    errs: dict[str, list[torch.Tensor]] = {}
    ref_sq = torch.zeros((), dtype=torch.float64, device=config.device)
    for h in range(q.shape[1]):
        scores = (q[-nq:, h] @ k[:, h].T) * q.shape[-1] ** -0.5
        if config.causal:
            allowed = torch.arange(s, device=config.device)[None, :] <= torch.arange(s - nq, s, device=config.device)[:, None]
            scores = scores.masked_fill(~allowed, float("-inf"))
        p = torch.exp(scores - scores.amax(1, keepdim=True))
        ref = (p @ v[:, h]) / p.sum(1, keepdim=True)
        ref_sq += (ref ** 2).sum()
        cases = {}
        for scale in (1.0, 256.0, 448.0):
            pt = numerics.round_e4m3(p * scale).to(torch.float64) / scale
            cases[f"rne x{scale:g} exact-sum"] = (pt @ v[:, h]) / p.sum(1, keepdim=True)
            cases[f"rne x{scale:g} rounded-sum"] = (pt @ v[:, h]) / pt.sum(1, keepdim=True)
        pb = p.to(torch.bfloat16).to(torch.float64)
        cases["bf16 P rounded-sum"] = (pb @ v[:, h]) / pb.sum(1, keepdim=True)
        for name, o in cases.items():
            errs.setdefault(name, []).append(((o - ref) ** 2).sum())
    for name, e in errs.items():
        out[name] = float((torch.stack(e).sum() / ref_sq).sqrt())
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", choices=accuracy_main.SOURCES, default="llm")
    p.add_argument("--seqlen", type=int, default=4096)
    p.add_argument("--queries", type=int, default=512, help="the last N query rows (default 512)")
    p.add_argument("--heads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--recipes", default="aiter-v3,zyfa-v2",
                   help="whose quantised inputs to use (comma list of zyfa-accuracy rows; default aiter-v3,zyfa-v2)")
    args = p.parse_args(argv)
    try:
        config = accuracy_main.StudyConfig(source=args.source, heads=args.heads, seqlen=args.seqlen,
                                           queries=args.queries, headdim=128, device=args.device)
        recipes = [r for r in args.recipes.split(",") if r]
        unknown = [r for r in recipes if r not in accuracy_main.RECIPES or accuracy_main.RECIPES[r].kind != "fp8"]
        if unknown:
            raise ValueError(f"--recipes: not FP8 zyfa-accuracy rows: {unknown}")
    except ValueError as exc:
        print(f"fp8_p_floor: {exc}", file=sys.stderr)
        return 2
    print(f"source {args.source}, s{args.seqlen}, last {args.queries} queries, h{args.heads} d128, causal, {args.device}")
    for recipe in recipes:
        for name, err in floors(config, recipe).items():
            print(f"  inputs of {recipe:<9} {name:<24} kernel-only rel L2 {err:.4e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
