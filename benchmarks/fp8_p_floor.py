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

``--decompose`` (issue 20: where v2's extra kernel-only error on sink-free inputs comes from) adds,
on the same inputs, P paths that differ from v2's in one ingredient at a time (x = log2 of p
relative to the row max, blocks of 64 keys aligned to key 0, ``ub`` a block's largest x):

* ``rne block-offset``: correct rounding of ``p 2^(8 - ceil(ub))``, v2's block offset (the block's
  largest P in (128, 256]; the common 2^phi of v2's hybrid offset cancels, so only ceil(ub) stays);
* ``leanp row-offset`` / ``leanp block-offset``: v2's one FMA + one truncating convert,
  ``code = trunc(8 (x - off) + c)``, c = v2's 120.0433, with off = 0 (the row's max) or ceil(ub);
  decoded codes normalised by their own sum (``rounded-sum``) or by the exact sum;

and prints the ladder from the correctly rounded floor to v2 with each step's factor, then the
per-element argument: over a uniform position of log2 p in the e4m3 grid, the rms relative error
of the decoded P (mean removed: normalisation cancels it) for RNE, for Lean P at v2's c, and the
least over every c (the only free constant of one FMA + one convert). If that least spread is above
RNE's, the gap is intrinsic to the cost.

    python benchmarks/fp8_p_floor.py --source llm --seqlen 4096 --queries 512 [--device cuda] [--targets]
    python benchmarks/fp8_p_floor.py --source gaussian --seqlen 4096 --queries 512 --recipes zyfa-v2 --decompose
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace

import torch

from zyfa import numerics
from zyfa.cli import accuracy_main


def leanp_decoded(x: torch.Tensor, offset: torch.Tensor, c: float = numerics.LEANP_BIAS_V2) -> torch.Tensor:
    """Lean P's decoded value times 2^(offset - 8) (float64): ``code = trunc(8 (x - offset) + c)``
    clamped to [0, 126] (0 below 0), as v2's FMA + convert for x = log2 p (fp64 here, not v2's fp32)."""
    y = 8.0 * (x - offset) + c
    code = torch.where(y >= 0, torch.trunc(y).clamp(max=numerics.E4M3_MAX_CODE), 0.0).to(torch.uint8)
    return numerics.decode_e4m3(code).to(torch.float64) * torch.exp2(offset - 8.0)


def block_offsets(x: torch.Tensor, block: int = numerics.KEY_BLOCK) -> torch.Tensor:
    """ceil of each 64-key block's largest x (log2 p vs the row max), broadcast to x's columns; 0 for
    a block without an allowed key."""
    n = x.shape[-1]
    pad = (-n) % block
    xb = torch.nn.functional.pad(x, (0, pad), value=-math.inf).reshape(*x.shape[:-1], -1, block)
    ub = xb.amax(-1, keepdim=True)
    off = torch.where(torch.isfinite(ub), torch.ceil(ub), 0.0).expand_as(xb)
    return off.reshape(*x.shape[:-1], n + pad)[..., :n]


DECOMPOSE_CASES = ("rne block-offset rounded-sum", "leanp row-offset rounded-sum", "leanp block-offset rounded-sum",
                   "leanp block-offset exact-sum")


def floors(config: accuracy_main.StudyConfig, recipe: str, decompose: bool = False) -> dict[str, float]:
    """Kernel-only rel. L2 of each P rounding on ``recipe``'s quantised inputs (the cases above),
    and ``input``: fp64 attention of those inputs against fp64 attention of the unquantised ones
    (the total error every kernel on these inputs starts from). ``decompose`` adds DECOMPOSE_CASES."""
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
            if decompose:
                x = torch.log2(p)  # -inf where masked
                off = block_offsets(x)
                rb = numerics.round_e4m3(p * torch.exp2(8.0 - off)).to(torch.float64) * torch.exp2(off - 8.0)
                for name, pt in (("rne block-offset", rb), ("leanp row-offset", leanp_decoded(x, torch.zeros_like(x))),
                                 ("leanp block-offset", leanp_decoded(x, off))):
                    cases[f"{name} rounded-sum"] = (pt @ v[b, :, h // group]) / pt.sum(1, keepdim=True)
                cases["leanp block-offset exact-sum"] = (pt @ v[b, :, h // group]) / p.sum(1, keepdim=True)
            for name, o in cases.items():
                errs.setdefault(name, []).append(((o - ref) ** 2).sum())
    return {name: float((torch.stack(e).sum() / (oracle_sq if name.startswith("input") else ref_sq)).sqrt())
            for name, e in errs.items()}


E4M3_FLOOR_CASES = ("rne x256 exact-sum", "rne x256 rounded-sum", "rne x448 exact-sum", "rne x448 rounded-sum")


def element_spread(points: int = 1 << 16) -> dict[str, float]:
    """rms of decoded / exact - 1 after dividing by its mean (normalisation cancels the mean), for p
    with log2 p uniform over one e4m3 binade (normal range): RNE, Lean P at v2's constant, and Lean P
    at every constant 120 + delta (delta over [0, 1) in 1/256 steps): the least and the most spread."""
    w = (torch.arange(points, dtype=torch.float64) + 0.5) / points  # position in the binade
    x = w - 2.0                                                       # log2 p in [-2, -1): normal e4m3 at x256
    exact = torch.exp2(x)

    def rms(decoded):
        r = decoded / exact
        return float(((r / r.mean() - 1.0) ** 2).mean().sqrt())

    zero = torch.zeros_like(x)
    every_c = [rms(leanp_decoded(x, zero, 120.0 + k / 256.0)) for k in range(256)]
    return {"rne": rms(numerics.round_e4m3(exact * 256.0).to(torch.float64) / 256.0),
            "leanp (v2's c)": rms(leanp_decoded(x, zero)),
            "leanp, least over every c": min(every_c), "leanp, most over every c": max(every_c)}


def ladder(f: dict[str, float]) -> list[str]:
    """The decomposition's lines: each step's kernel-only error and its factor over the step before."""
    steps = (("rne x256 exact-sum", "floor: correct rounding, row max -> 256, exact sum"),
             ("rne x256 rounded-sum", "+ the rounded sum"),
             ("rne block-offset rounded-sum", "+ v2's block offset (largest P of each block in (128, 256])"),
             ("leanp block-offset rounded-sum", "+ Lean P instead of correct rounding (= v2's P path in fp64)"))
    lines, prev = [], None
    for key, label in steps:
        step = "" if prev is None else f"  x{f[key] / f[prev]:.3f} over the step before"
        lines.append(f"  {f[key]:.4e}  {label}{step}")
        prev = key
    lines.append(f"  ({f['leanp row-offset rounded-sum']:.4e}  Lean P with the row's offset only; "
                 f"{f['leanp block-offset exact-sum']:.4e}  Lean P, block offset, exact sum)")
    return lines


def targets(config: accuracy_main.StudyConfig, f: dict[str, float] | None = None) -> list[str]:
    """The issue's accuracy targets on this input, against what any e4m3-P recipe can reach: lines.
    ``f``: floors(config, "zyfa-v2") if already computed."""
    rows = {r.key: r for r in accuracy_main.run_study(replace(config, rows=("aiter-v3", "zyfa-v2")))}
    aiter, v2 = rows["aiter-v3"], rows["zyfa-v2"]
    f = f or floors(config, "zyfa-v2")
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
    # "no worse than naive" in total error: with the kernel's error adding to the input's in quadrature
    # (checked on v2's own rows), what kernel-only error v2 could have at most
    room = aiter.rel_l2 ** 2 - inputs ** 2
    allowed = f"{math.sqrt(room):.4e} = {math.sqrt(room) / floor:.3f}x the e4m3-P floor" if room > 0 else "none"
    lines.append(f"  total <= AITER v3's needs v2 kernel-only <= sqrt(total_aiter^2 - input_v2^2) = {allowed} "
                 f"(quadrature check on v2: sqrt(input^2 + kernel^2) = "
                 f"{math.sqrt(inputs ** 2 + v2.kernel_rel_l2 ** 2):.4e} vs its total {v2.rel_l2:.4e})")
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
    p.add_argument("--decompose", action="store_true",
                   help="also the ladder from the correctly rounded floor to v2's P path, one ingredient at a time, "
                        "and Lean P's per-element spread against RNE's (see the module docstring)")
    args = p.parse_args(argv)
    try:
        shape = accuracy_main.FIXED_SHAPES.get(args.source, (None, dict(heads=args.heads, headdim=128)))[1]
        config = accuracy_main.StudyConfig(source=args.source, seqlen=args.seqlen, queries=args.queries,
                                           device=args.device, **shape)
        recipes = [r for r in args.recipes.split(",") if r]
        unknown = [r for r in recipes if r not in accuracy_main.RECIPES or accuracy_main.RECIPES[r].kind != "fp8"]
        if unknown:
            raise ValueError(f"--recipes: not FP8 zyfa-accuracy rows: {unknown}")
    except ValueError as exc:
        print(f"fp8_p_floor: {exc}", file=sys.stderr)
        return 2
    print(accuracy_main.describe(config))
    computed = {}
    for recipe in recipes:
        f = computed[recipe] = floors(config, recipe, args.decompose)
        for name, err in f.items():
            kind = "total" if name.startswith("input") else "kernel-only"
            print(f"  inputs of {recipe:<9} {name:<24} {kind} rel L2 {err:.4e}")
        if args.decompose:
            print(f"ladder on {recipe}'s inputs (kernel-only rel L2):")
            for line in ladder(f):
                print(line)
    if args.decompose:
        print("per-element spread of decoded P (rms rel. error, mean removed; log2 p uniform over a binade):")
        for name, value in element_spread().items():
            print(f"  {name:<28} {100 * value:.3f} %")
    if args.targets:
        print("targets (issue 20) on this input:")
        for line in targets(config, computed.get("zyfa-v2")):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
