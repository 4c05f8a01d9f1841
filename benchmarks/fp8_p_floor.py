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

The ``input`` line is the total error the quantised inputs alone carry (exact attention on them
against exact attention on the unquantised inputs): no kernel on those inputs goes below it (up
to luck). ``--targets`` also runs the AITER v3 and ZYFA v2 rows of ``zyfa-accuracy`` and prints
the issue's ratios beside the ratios of these floors, so whether a target is reachable at all is
read off the output.

    python benchmarks/fp8_p_floor.py --source llm --seqlen 4096 --queries 512 [--device cuda] [--targets]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

import torch

from zyfa import numerics
from zyfa.cli import accuracy_main


def floors(config: accuracy_main.StudyConfig, recipe: str) -> dict[str, float]:
    """Kernel-only rel. L2 of each P rounding on ``recipe``'s quantised inputs (the cases above),
    and ``input``: fp64 attention of those inputs against fp64 attention of the unquantised ones
    (the total error every kernel on these inputs starts from)."""
    q0, k0, v0 = accuracy_main.make_inputs(config)
    q8, k8, v8, dq, dk, dv = accuracy_main._quantised(q0, k0, v0, accuracy_main.RECIPES[recipe])
    q, k, v = (accuracy_main._dequantised(a, b).to(config.device, torch.float64) for a, b in ((q8, dq), (k8, dk), (v8, dv)))
    q0, k0, v0 = (x.to(config.device, torch.float64) for x in (q0, k0, v0))
    s, nq = k.shape[1], config.queries or k.shape[1]
    group = q.shape[2] // k.shape[2]
    errs: dict[str, list[torch.Tensor]] = {}
    ref_sq = torch.zeros((), dtype=torch.float64, device=config.device)
    oracle_sq = torch.zeros((), dtype=torch.float64, device=config.device)

    def attention_weights(qh, kh):
        scores = (qh[-nq:] @ kh.T) * q.shape[-1] ** -0.5
        if config.causal:
            allowed = torch.arange(s, device=config.device)[None, :] <= torch.arange(s - nq, s, device=config.device)[:, None]
            scores = scores.masked_fill(~allowed, float("-inf"))
        return torch.exp(scores - scores.amax(1, keepdim=True))

    for b in range(q.shape[0]):
        for h in range(q.shape[2]):
            p = attention_weights(q[b, :, h], k[b, :, h // group])
            ref = (p @ v[b, :, h // group]) / p.sum(1, keepdim=True)
            ref_sq += (ref ** 2).sum()
            p0 = attention_weights(q0[b, :, h], k0[b, :, h // group])
            oracle = (p0 @ v0[b, :, h // group]) / p0.sum(1, keepdim=True)
            oracle_sq += (oracle ** 2).sum()
            errs.setdefault("input (fp64 of the quantised inputs vs unquantised)", []).append(((ref - oracle) ** 2).sum())
            cases = {}
            for scale in (1.0, 256.0, 448.0):
                pt = numerics.round_e4m3(p * scale).to(torch.float64) / scale
                cases[f"rne x{scale:g} exact-sum"] = (pt @ v[b, :, h // group]) / p.sum(1, keepdim=True)
                cases[f"rne x{scale:g} rounded-sum"] = (pt @ v[b, :, h // group]) / pt.sum(1, keepdim=True)
            pb = p.to(torch.bfloat16).to(torch.float64)
            cases["bf16 P rounded-sum"] = (pb @ v[b, :, h // group]) / pb.sum(1, keepdim=True)
            for name, o in cases.items():
                errs.setdefault(name, []).append(((o - ref) ** 2).sum())
    return {name: float((torch.stack(e).sum() / (oracle_sq if name.startswith("input") else ref_sq)).sqrt())
            for name, e in errs.items()}


E4M3_FLOOR_CASES = ("rne x256 exact-sum", "rne x256 rounded-sum", "rne x448 exact-sum", "rne x448 rounded-sum")


def targets(config: accuracy_main.StudyConfig) -> list[str]:
    """The issue's accuracy targets on this input, against what any e4m3-P recipe can reach: lines."""
    rows = {r.key: r for r in accuracy_main.run_study(replace(config, rows=("aiter-v3", "zyfa-v2")))}
    aiter, v2 = rows["aiter-v3"], rows["zyfa-v2"]
    f = floors(config, "zyfa-v2")
    floor = min(f[c] for c in E4M3_FLOOR_CASES)
    inputs = f["input (fp64 of the quantised inputs vs unquantised)"]
    lines = [f"  AITER v3: kernel-only {aiter.kernel_rel_l2:.4e}, KL {aiter.kl:.3e}, total {aiter.rel_l2:.4e}, "
             f"flushed {aiter.flushed:.2e}",
             f"  ZYFA v2:  kernel-only {v2.kernel_rel_l2:.4e}, KL {v2.kl:.3e}, total {v2.rel_l2:.4e}, "
             f"flushed {v2.flushed:.2e}, LSE bias {v2.lse_bias:+.4f}"]
    for name, value, target, floor_value, floor_name in (
            ("kernel-only", v2.kernel_rel_l2 / aiter.kernel_rel_l2, 0.3, floor / aiter.kernel_rel_l2,
             "correctly rounded e4m3 P (best of RNE x256/x448, either sum) on v2's inputs"),
            ("total", v2.rel_l2 / aiter.rel_l2, 0.6, inputs / aiter.rel_l2,
             "exact attention of v2's quantised inputs (input quantisation alone)"),
            ("KL", v2.kl / aiter.kl, 0.3, None, "")):
        line = f"  {name:<11} v2 / AITER v3 {value:.3f}x (target <= {target}x: {'met' if value <= target else 'not met'})"
        if floor_value is not None:
            reach = ("below the target" if floor_value <= target
                     else "above the target: meeting it needs less error than this, i.e. luck")
            line += (f"; floor {floor_value:.3f}x = {floor_name} ({reach}); v2 at "
                     f"{value / floor_value:.2f}x the floor")
        lines.append(line)
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", choices=accuracy_main.SOURCES, default="llm")
    p.add_argument("--seqlen", type=int, default=4096)
    p.add_argument("--queries", type=int, default=512, help="the last N query rows (default 512)")
    p.add_argument("--heads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--targets", action="store_true",
                   help="also run the zyfa-accuracy rows aiter-v3 and zyfa-v2 on the input and print the issue's "
                        "targets (kernel-only <= 0.3x, KL <= 0.3x, total <= 0.6x AITER v3) beside their floors")
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
            kind = "total" if name.startswith("input") else "kernel-only"
            print(f"  inputs of {recipe:<9} {name:<24} {kind} rel L2 {err:.4e}")
    if args.targets:
        print("targets (issue 20) on this input:")
        for line in targets(config):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
