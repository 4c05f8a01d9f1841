"""How often the gfx950 kernels' out-of-line O rescale runs: zyfa-fp8-v1 (spec v1) vs zyfa-fp8-v2.

The cycle model takes the rescale branch as not taken in steady state (its inputs are not data),
so its v1/v2 cost rows leave this out. Here the branch is decided on real inputs: a wave of 32
query rows runs the rescale cluster on a key tile (128 keys) when, for any of its rows, the tile
raises the running max the kernel keeps: v1's integer ``ref = max(bm)``, ``bm = ceil(t * block
max)``; v2's fp32 ``M = max(t * block max)`` (docs/numerics.md). Scores are the float64 ones of the
recipe's quantised inputs (the fp32 rounding of the kernels moves a few ties only). The first
tile of every wave (always taken: O starts at 0) is counted apart. The extra VALU cycles per tile
are the rate times the rescale cluster's static VALU count (build meta) times 4 cycles (one wave64
VALU op on a SIMD16): an estimate, not simulated.

    python benchmarks/v2_rescale_rate.py --source llm --seqlen 32768 --heads 2 --waves 64
"""

from __future__ import annotations

import argparse
import math
import sys

import torch

from zyfa.cli import accuracy_main
from zyfa.kernels.gfx950 import build_for
from zyfa.shapes import AttnShape

ROWS_PER_WAVE, TILE, BLOCK = 32, 128, 64
CYCLES_PER_VALU = 4  # wave64 on a 16-lane SIMD


def rescale_valu(kernel: str) -> int:
    """Static VALU count of one execution of the kernel's out-of-line rescale cluster."""
    meta = build_for(kernel, AttnShape(seqlen_q=4096, seqlen_k=4096)).meta
    return next(c["units"]["VALU"] for c in meta["clusters"] if c["name"] == "rescale_O")


def rates(config: accuracy_main.StudyConfig, waves: int) -> dict:
    """Fractions of (wave, tile) pairs after each wave's first tile whose rescale runs, v1 and v2,
    over ``waves`` waves of 32 rows spread evenly over the sequence (every head and batch)."""
    q, k, v = accuracy_main.make_inputs(config)
    q8, k8, _, dq, dk, _ = accuracy_main._quantised(q, k, v, accuracy_main.RECIPES["zyfa-v2"])
    q, k = (accuracy_main._dequantised(a, b).to(torch.float64) for a, b in ((q8, dq), (k8, dk)))
    b, s, h, d = q.shape
    group = h // k.shape[2]
    scale = d ** -0.5 / math.log(2.0)
    total = s // ROWS_PER_WAVE
    picked = sorted({int(i) for i in torch.linspace(0, total - 1, min(waves, total))})
    rows = torch.cat([torch.arange(w * ROWS_PER_WAVE, (w + 1) * ROWS_PER_WAVE) for w in picked])
    taken = {"v1": 0, "v2": 0}
    pairs = 0
    pad = -s % TILE
    for bi in range(b):
        for hi in range(h):
            x = (q[bi, rows, hi] @ k[bi, :, hi // group].T) * scale  # log2-domain scores of the picked rows
            if config.causal:
                x = x.masked_fill(torch.arange(s)[None, :] > rows[:, None], -math.inf)
            x = torch.nn.functional.pad(x, (0, pad), value=-math.inf)
            tiles = x.reshape(len(rows), -1, TILE // BLOCK, BLOCK).amax(-1)  # (rows, tiles, blocks)
            for name, m in (("v1", torch.ceil(tiles).amax(-1)), ("v2", tiles.amax(-1))):
                # v1: integer max of the tile's bm = ceil(x_b); v2: max of the tile's x_b
                run = torch.cummax(m, dim=1).values
                grew = m > torch.cat([torch.full_like(m[:, :1], -math.inf), run[:, :-1]], dim=1)
                grew &= torch.isfinite(m)
                per_wave = grew.reshape(-1, ROWS_PER_WAVE, grew.shape[1]).any(1)  # (waves, tiles)
                live = torch.isfinite(m).reshape(-1, ROWS_PER_WAVE, m.shape[1]).any(1)
                first = live.to(torch.int8).argmax(1)
                after = live & (torch.arange(live.shape[1])[None, :] > first[:, None])
                taken[name] += int((per_wave & after).sum())
                if name == "v1":
                    pairs += int(after.sum())
    return {name: n / max(pairs, 1) for name, n in taken.items()} | {"pairs": pairs}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", nargs="+", default=["gaussian", "outliers", "llm"],
                        choices=["gaussian", "outliers", "llm", "smollm2", "real"])
    parser.add_argument("--seqlen", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--headdim", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--waves", type=int, default=64, help="waves of 32 rows sampled evenly over the sequence")
    args = parser.parse_args(argv)
    cost = {"v1": rescale_valu("zyfa-fp8-v1"), "v2": rescale_valu("zyfa-fp8-v2")}
    print(f"rescale cluster: v1 {cost['v1']} VALU, v2 {cost['v2']} VALU per execution (static, generated code)")
    print(f"{'source':<10} {'wave-tiles':>10} {'v1 taken':>9} {'v2 taken':>9} {'v1 +cyc/tile':>13} {'v2 +cyc/tile':>13}")
    for source in args.source:
        config = accuracy_main.StudyConfig(source=source, seqlen=args.seqlen, heads=args.heads,
                                           headdim=args.headdim, seed=args.seed)
        r = rates(config, args.waves)
        extra = {n: r[n] * cost[n] * CYCLES_PER_VALU for n in ("v1", "v2")}
        print(f"{source:<10} {r['pairs']:>10} {r['v1']:>9.4f} {r['v2']:>9.4f} {extra['v1']:>13.1f} {extra['v2']:>13.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
