"""How often the gfx950 kernels' out-of-line O rescale runs: zyfa-fp8-v1 (spec v1), zyfa-fp8-v2, zyfa-fp8 (folded).

The cycle model takes the rescale branch as not taken in steady state (its inputs are not data),
so its v1/v2 cost rows leave this out. Here the branch is decided on real inputs: a wave of 32
query rows runs the rescale cluster on a key tile (128 keys) when, for any of its rows, the tile
raises the running max the kernel keeps: v1's integer ``ref = max(bm)``, ``bm = ceil(t * block
max)``; v2's fp32 ``M = max(t * block max)`` (docs/numerics.md), scores the float64 ones of the
recipe's quantised inputs (the fp32 rounding of the kernels moves a few ties only). zyfa-fp8 (the
folded recipe, docs/numerics.md "Folded Lean P") is followed in its own fp32 arithmetic
(:func:`folded_fixups`: Q re-quantised by :func:`zyfa.numerics.fold_q`, ``y = 120.5 + 8 (x -
ref)`` per lane, the check ``|max(y max, -HALF) - MID| < HALF``): a lane branches when a code would
pass 126 (``x >= ref + 0.8125``; a fix-up puts ``ref`` FOLD_HEADROOM = 1 to 2 doublings above the
row's max), which includes a row still at ``REF0 = -3 2^12`` (its first live tile); a lane whose 64
keys of the tile are all masked (diagonal tiles) passes (its max is the floor -HALF). The first
tile of every wave (always taken: O starts at 0) is counted apart ("taken"); "all" counts every
execution of the branch (first and fully masked tiles included), the rate the cycle model takes
(``zyfa-trace kernel --rescale-rate R``). The extra VALU cycles per tile are the "taken" rate
times the rescale cluster's static VALU count (build meta) times 4 cycles (one wave64 VALU op on
a SIMD16): an estimate, not simulated. v1/v2 "all" assume their branch is not taken on a fully
masked tile (its clamped max does not grow); only the folded rule is checked against the emulator.

    python benchmarks/v2_rescale_rate.py --source llm --seqlen 32768 --heads 2 --waves 64

``--check-emulator`` first compares the folded rule with the functional emulator's branch counts
(``trace/emu``: runs and jumps of each ``s_cbranch_execnz .L_rescale*``) for zyfa-fp8 on a small
shape (b1 h1, Gaussian inputs of the emulator's own ``make_inputs``).
"""

from __future__ import annotations

import argparse
import math
import sys

import torch

from zyfa import numerics
from zyfa.cli import accuracy_main
from zyfa.kernels.gfx950 import build_for, rescale_branches
from zyfa.shapes import AttnShape
from zyfa.trace.emu.attention import emulate_kernel, make_inputs

ROWS_PER_WAVE, TILE, BLOCK, ROWS_PER_WG = 32, 128, 64, 256
CYCLES_PER_VALU = 4  # wave64 on a 16-lane SIMD
KERNELS = {"v1": "zyfa-fp8-v1", "v2": "zyfa-fp8-v2", "folded": "zyfa-fp8"}


def folded_fixups(qf: torch.Tensor, k: torch.Tensor, rows: torch.Tensor, causal: bool,
                  headroom: int = numerics.FOLD_HEADROOM) -> tuple:
    """The folded kernel's per-tile check, as its fp32 arithmetic does it (docs/numerics.md, Folded
    Lean P, steps 1-2): ``qf`` = ``2^a q'`` (rows, d) and ``k`` (sk, d) as float64 (the e4m3 products
    and 64-term sums are exact there), tiles of 128 keys in order. Per tile ``y = RN(RN(off + S_lo)
    + S_hi)`` with ``off = 120.5 - 8 ref`` (``ref`` from ``FOLD_REF0 = -3 2^12``), masked keys -inf;
    each of a row's two lanes holds 64 of its keys (half ``h``: key ``32 t + 16 h + r`` of sub-tile
    ``t``, register ``r``, as the generator's masking states) and fails ``|fp32(max(max, FLOOR) -
    MID)| < HALF`` (max >= 127, a row still at REF0, NaN); a row whose finite max fails moves ``ref``
    by ``d = ceil(fp32(fp32(M - (120.5 - 8 headroom)) * 0.125))`` (the recipe's
    ``numerics.FOLD_HEADROOM`` = 1: 112.5; other ``headroom`` values are what-ifs). Returns ((rows,
    tiles) bool: a lane of the row branched to the fix-up, (rows, tiles) row maxima of ``y`` (-inf:
    nothing allowed))."""
    sk, d = k.shape
    tiles = -(-sk // TILE)
    k = torch.nn.functional.pad(k, (0, 0, 0, tiles * TILE - sk))
    ref = torch.full((len(rows),), numerics.FOLD_REF0, dtype=torch.float32)
    fails = torch.zeros(len(rows), tiles, dtype=torch.bool)
    maxima = torch.zeros(len(rows), tiles, dtype=torch.float64)
    keys = torch.arange(tiles * TILE)
    for j in range(tiles):
        kt = k[j * TILE:(j + 1) * TILE]
        lo, hi = qf[:, :d // 2] @ kt[:, :d // 2].T, qf[:, d // 2:] @ kt[:, d // 2:].T
        off = (120.5 - 8.0 * ref).to(torch.float64)[:, None]
        y = ((off + lo).to(torch.float32).to(torch.float64) + hi).to(torch.float32)
        allowed = keys[None, j * TILE:(j + 1) * TILE] < sk
        if causal:
            allowed = allowed & (keys[None, j * TILE:(j + 1) * TILE] <= rows[:, None])
        y = y.masked_fill(~allowed, -math.inf)
        lane = y.reshape(len(rows), TILE // 32, 2, 16).amax(3).amax(1)  # lane half h: keys 32 t + 16 h + r
        checked = torch.clamp(lane, min=numerics.FOLD_FLOOR)  # the kernel's max chain holds -HALF (NaN stays)
        fails[:, j] = ~((checked - numerics.FOLD_MID).abs() < numerics.FOLD_HALF).all(-1)
        m = lane.amax(-1)
        m_checked = torch.clamp(m, min=numerics.FOLD_FLOOR)
        fix = torch.isfinite(m_checked) & ~((m_checked - numerics.FOLD_MID).abs() < numerics.FOLD_HALF)
        step = torch.ceil((m - (numerics.LEANP_BIAS - 8.0 * headroom)) * 0.125)  # fp32 ops, as the kernel
        ref = torch.where(fix, ref + step, ref)
        maxima[:, j] = m.to(torch.float64)
    return fails, maxima


def folded_operands(q8: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``2^a q'`` (float64) of Q's e4m3 values ``q8`` (rows, d) with the per-row ``t`` (rows,) fp32:
    Q re-quantised with ``8 t``'s non-power-of-two part folded in (:func:`zyfa.numerics.fold_q`)."""
    qf, scale = numerics.fold_q(q8.to(torch.float64), (8.0 * t.to(torch.float32))[:, None])
    return qf * scale


def wg_tiles(rows: torch.Tensor, seqlen_k: int) -> torch.Tensor:
    """Per row, the key tiles its workgroup's loop runs (causal): up to its 256-row block's last key."""
    return torch.clamp(-(-((rows // ROWS_PER_WG + 1) * ROWS_PER_WG) // TILE), max=-(-seqlen_k // TILE))


def wave_runs(grew: torch.Tensor, m: torch.Tensor, loop: torch.Tensor) -> tuple[int, int, int, int]:
    """(wave-tiles whose rescale runs, wave-tiles), both after each wave's first live tile, then
    the same over every wave-tile the kernel's loop executes (the branch's executions, first and
    fully masked tiles included: the rate the cycle model takes): ``grew`` (rows, tiles) where a
    row's lanes branch, ``m`` the rows' tile maxima (-inf: nothing allowed), ``loop`` per row the
    tiles its workgroup runs."""
    per_wave = grew.reshape(-1, ROWS_PER_WAVE, grew.shape[1]).any(1)  # (waves, tiles)
    live = torch.isfinite(m).reshape(-1, ROWS_PER_WAVE, m.shape[1]).any(1)
    first = live.to(torch.int8).argmax(1)
    after = live & (torch.arange(live.shape[1])[None, :] > first[:, None])
    runs = torch.arange(grew.shape[1])[None, :] < loop[::ROWS_PER_WAVE, None]
    return int((per_wave & after).sum()), int(after.sum()), int((per_wave & runs).sum()), int(runs.sum())


def tile_maxima(x: torch.Tensor, rows: torch.Tensor, causal: bool) -> torch.Tensor:
    """(rows, tiles, blocks): per 64-key block maxima of scores ``x`` (rows, sk), causal-masked."""
    s = x.shape[1]
    if causal:
        x = x.masked_fill(torch.arange(s)[None, :] > rows[:, None], -math.inf)
    x = torch.nn.functional.pad(x, (0, -s % TILE), value=-math.inf)
    return x.reshape(len(rows), -1, TILE // BLOCK, BLOCK).amax(-1)


def rescale_valu(kernel: str) -> int:
    """Static VALU count of one execution of the kernel's out-of-line rescale cluster."""
    meta = build_for(kernel, AttnShape(seqlen_q=4096, seqlen_k=4096)).meta
    return next(c["units"]["VALU"] for c in meta["clusters"] if c["name"] == "rescale_O")


def rates(config: accuracy_main.StudyConfig, waves: int, headroom: int = numerics.FOLD_HEADROOM) -> dict:
    """Fractions of (wave, tile) pairs after each wave's first tile whose rescale runs, v1, v2 and
    folded (its fix-up target ``headroom`` doublings below the overflow), over ``waves`` waves of
    32 rows spread evenly over the sequence (every head and batch)."""
    q, k, v = accuracy_main.make_inputs(config)
    q8, k8, _, dq, dk, _ = accuracy_main._quantised(q, k, v, accuracy_main.RECIPES["zyfa-v2"])
    if dk.dim() != 2:
        raise ValueError("the folded rule needs per-(batch, kv head) K scales")
    q, k = (accuracy_main._dequantised(a, b).to(torch.float64) for a, b in ((q8, dq), (k8, dk)))
    b, s, h, d = q.shape
    group = h // k.shape[2]
    scale = d ** -0.5 / math.log(2.0)
    # the folded kernel's per-row t = softmax_scale log2(e) dq dk (Q scales per token: one t per row)
    dq_rows = dq if dq.dim() == 3 else dq.repeat_interleave(group, dim=1)[:, None, :].expand(b, s, h)
    c = torch.tensor(d ** -0.5, dtype=torch.float32) * torch.tensor(numerics.LOG2E_F32, dtype=torch.float32)
    t = c * (dq_rows.to(torch.float32) * dk.repeat_interleave(group, dim=1)[:, None, :].to(torch.float32))
    total = s // ROWS_PER_WAVE
    picked = sorted({int(i) for i in torch.linspace(0, total - 1, min(waves, total))})
    rows = torch.cat([torch.arange(w * ROWS_PER_WAVE, (w + 1) * ROWS_PER_WAVE) for w in picked])
    taken = dict.fromkeys(KERNELS, 0)
    jumps = dict.fromkeys(KERNELS, 0)
    pairs = executions = 0
    loop = wg_tiles(rows, s) if config.causal else torch.full_like(rows, -(-s // TILE))
    for bi in range(b):
        for hi in range(h):
            x = (q[bi, rows, hi] @ k[bi, :, hi // group].T) * scale  # log2-domain scores of the picked rows
            tiles = tile_maxima(x, rows, config.causal)
            qf = folded_operands(q8[bi, rows, hi], t[bi, rows, hi])
            fails, folded = folded_fixups(qf, k8[bi, :, hi // group].to(torch.float64), rows, config.causal,
                                          headroom)
            for name, m in (("v1", torch.ceil(tiles).amax(-1)), ("v2", tiles.amax(-1)), ("folded", folded)):
                # v1: integer max of the tile's bm = ceil(x_b); v2: max of the tile's x_b
                if name == "folded":
                    grew = fails
                else:  # a fully masked tile leaves the clamped running max: not taken; the first live tile is
                    run = torch.cummax(m, dim=1).values
                    grew = m > torch.cat([torch.full_like(m[:, :1], -math.inf), run[:, :-1]], dim=1)
                    grew &= torch.isfinite(m)
                n, after, n_all, runs = wave_runs(grew, m, loop)
                taken[name] += n
                jumps[name] += n_all
                if name == "v1":
                    pairs += after
                    executions += runs
    return ({name: n / max(pairs, 1) for name, n in taken.items()} | {"pairs": pairs, "executions": executions}
            | {f"{name} all": n / max(executions, 1) for name, n in jumps.items()})


def headroom_accuracy(config: accuracy_main.StudyConfig, headroom: int) -> dict:
    """What a fix-up headroom of ``headroom`` doublings costs the folded recipe on ``config``'s
    inputs (quantised as :func:`rates` does): zyfa.numerics' zyfa-folded output against fp64
    attention of the same quantised inputs (``kernel``: rel. L2) and the fp64 attention mass per row
    on allowed keys whose e4m3 code is 0 (``flushed``: mean and max over rows)."""
    q, k, v = accuracy_main.make_inputs(config)
    q8, k8, v8, dq, dk, dv = accuracy_main._quantised(q, k, v, accuracy_main.RECIPES["zyfa-v2"])
    ops = numerics._fp8_operands(q8, k8, v8, dq, dk, dv, config.causal, None, "zyfa-folded", "trunc",
                                 numerics.KEY_BLOCK)
    x = torch.matmul(ops.q, ops.k.transpose(-1, -2)) * ops.t.to(torch.float64)  # log2-domain scores
    keys = torch.arange(x.shape[-1])
    allowed = (keys < ops.sk)[None, :] & (keys[None, :] <= torch.arange(ops.sq)[:, None] + (ops.sk - ops.sq)
                                          if config.causal else True)
    x = x.masked_fill(~allowed, -math.inf)
    p = torch.softmax(x * math.log(2.0), dim=-1)
    ref = torch.matmul(p, ops.v) * ops.v_scale
    flushed = torch.zeros(p.shape[:-1], dtype=torch.float64)

    def on_codes(r0, k0, code, allowed):
        zero = (code == 0) & allowed
        flushed[..., r0:] += torch.where(zero, p[..., r0:, k0:k0 + code.shape[-1]], 0.0).sum(-1)

    out = numerics._forward_folded(ops, headroom, on_codes)[0].to(torch.float64)
    return {"kernel": float((out - ref).norm() / ref.norm()), "flushed mean": float(flushed.mean()),
            "flushed max": float(flushed.max())}


def check_emulator(seqlen: int, seed: int) -> None:
    """Print the folded rule's wave-level rescale runs next to the functional emulator's branch
    counts for zyfa-fp8 (b1 h1 ``seqlen``, the emulator's Gaussian inputs from ``seed``)."""
    shape = AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=seqlen, seqlen_k=seqlen)
    inputs = make_inputs(shape, seed)
    result = emulate_kernel("zyfa-fp8", shape, inputs=inputs)
    build = build_for("zyfa-fp8", shape)
    rescale = {a["index"] for a in rescale_branches(build.meta["branch_assumptions"])}
    runs = sum(result.stats.branch_runs[i] for i in rescale)
    jumps = sum(int(result.stats.branch_taken[i]) for i in rescale)
    # the emulator's constants: t = fp32(fp32(scale log2 e) fp32(dq dk)) per (batch, kv head)
    c = torch.tensor(shape.headdim ** -0.5, dtype=torch.float32) * torch.tensor(numerics.LOG2E_F32, dtype=torch.float32)
    t = (c * (inputs["q_descale"] * inputs["k_descale"])).reshape(()).expand(seqlen)
    rows = torch.arange(seqlen)
    qf = folded_operands(inputs["q"][0, :, 0].to(torch.float64), t)
    fails, maxima = folded_fixups(qf, inputs["k"][0, :, 0].to(torch.float64), rows, True)
    _, _, predicted, executions = wave_runs(fails, maxima, wg_tiles(rows, seqlen))
    ok = (predicted, executions) == (jumps, runs)
    print(f"emulator check (zyfa-fp8, b1 h1 s{seqlen}, Gaussian, seed {seed}): rescale branch ran {runs} times, "
          f"jumped {jumps}; the folded rule predicts {executions} runs, {predicted} jumps -- "
          + ("MATCH" if ok else "MISMATCH"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", nargs="+", default=["gaussian", "outliers", "llm"],
                        choices=["gaussian", "outliers", "llm", "smollm2", "real"])
    parser.add_argument("--seqlen", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--headdim", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--waves", type=int, default=64, help="waves of 32 rows sampled evenly over the sequence")
    parser.add_argument("--fold-headroom", type=int, nargs="+", default=None, metavar="H",
                        help="instead of the table: the folded kernel's rate with its fix-up target H doublings below "
                             f"the overflow (the recipe: {numerics.FOLD_HEADROOM}), and what H costs in accuracy "
                             "at --accuracy-seqlen")
    parser.add_argument("--accuracy-seqlen", type=int, default=2048,
                        help="seqlen of the --fold-headroom accuracy columns (fp64 probabilities: memory ~ seqlen^2)")
    parser.add_argument("--check-emulator", type=int, default=None, metavar="SEQLEN",
                        help="first compare the folded rule with the emulator's branch counts at b1 h1 SEQLEN (e.g. 512)")
    args = parser.parse_args(argv)
    if args.check_emulator is not None:
        check_emulator(args.check_emulator, args.seed)
    if args.fold_headroom is not None:
        if min(args.fold_headroom) < 0:
            parser.error("--fold-headroom: H must be >= 0 doublings")
        print(f"zyfa-fp8 (folded) fix-up headroom H: rate at s{args.seqlen} (h{args.heads}, {args.waves} waves of 32 rows "
              f"per head); accuracy of zyfa.numerics zyfa-folded at s{args.accuracy_seqlen} (h{args.heads}) vs fp64 "
              "attention of the same quantised inputs; flushed: fp64 mass per row on allowed keys with code 0")
        print(f"{'source':<10} {'H':>2} {'taken':>8} {'all':>8} {'rel L2':>9} {'flushed mean':>13} {'flushed max':>12}")
        for source in args.source:
            config = accuracy_main.StudyConfig(source=source, seqlen=args.seqlen, heads=args.heads,
                                               headdim=args.headdim, seed=args.seed)
            small = accuracy_main.StudyConfig(source=source, seqlen=args.accuracy_seqlen, heads=args.heads,
                                              headdim=args.headdim, seed=args.seed)
            for h in args.fold_headroom:
                r, a = rates(config, args.waves, h), headroom_accuracy(small, h)
                print(f"{source:<10} {h:>2} {r['folded']:>8.4f} {r['folded all']:>8.4f} {a['kernel']:>9.5f} "
                      f"{a['flushed mean']:>13.3e} {a['flushed max']:>12.3e}", flush=True)
        return 0
    cost = {n: rescale_valu(k) for n, k in KERNELS.items()}
    print("rescale cluster per execution (static, generated code): "
          + ", ".join(f"{n} ({KERNELS[n]}) {c} VALU" for n, c in cost.items()))
    print("'taken': wave-tiles after each wave's first live tile; 'all': every execution of the branch "
          "(first and fully masked tiles included: the cycle model's rate)")
    print(f"{'source':<10} {'wave-tiles':>10} " + " ".join(f"{n + ' taken':>12}" for n in KERNELS)
          + " " + " ".join(f"{n + ' +cyc/tile':>17}" for n in KERNELS)
          + f" {'executions':>10} " + " ".join(f"{n + ' all':>10}" for n in KERNELS))
    for source in args.source:
        config = accuracy_main.StudyConfig(source=source, seqlen=args.seqlen, heads=args.heads,
                                           headdim=args.headdim, seed=args.seed)
        r = rates(config, args.waves)
        print(f"{source:<10} {r['pairs']:>10} " + " ".join(f"{r[n]:>12.4f}" for n in KERNELS) + " "
              + " ".join(f"{r[n] * cost[n] * CYCLES_PER_VALU:>17.1f}" for n in KERNELS)
              + f" {r['executions']:>10} " + " ".join(f"{r[n + ' all']:>10.4f}" for n in KERNELS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
