"""What the non-finite rules (docs/numerics.md, "Non-finite inputs") cost in the Triton kernels.

Times ``attention_fp8`` and ``attention_bf16`` with ``nan_checks=True`` (the shipped kernels) and
``nan_checks=False`` (the same kernels compiled without the NaN/Inf bookkeeping) on one shape, in
one process, with one fixed tile config per dtype (no autotuning: every config is a compile, and
the device budget is small), and prints the median time per call and the ratio. On finite input
both must give the same bits; the script checks that too.

    python3 -P benchmarks/bench_nan_checks.py                  # b1 h32 s16384 d128 causal, CUDA GPU
    TRITON_INTERPRET=1 python3 benchmarks/bench_nan_checks.py --device cpu --seqlen 128 --heads 1
        (a smoke test of the script in Triton's interpreter: its times are not kernel times)
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch

from zyfa.kernels.triton._common import TileConfig, interpreting
from zyfa.kernels.triton.attn_bf16 import attention_bf16
from zyfa.kernels.triton.attn_fp8 import attention_fp8
from zyfa.timing import elapsed_s


def _config(text: str, name: str) -> TileConfig:
    try:
        fields = [int(x) for x in text.split(",")]
        if len(fields) not in (3, 4):
            raise ValueError
        block_m, warps, stages = fields[:3]
        extra = {"block_n": fields[3]} if len(fields) == 4 else {}
        return TileConfig(block_m, warps, stages, **extra)
    except ValueError as exc:
        raise SystemExit(f"bench_nan_checks: error: {name} must be BLOCK_M,WARPS,STAGES[,BLOCK_N] "
                         f"(a valid TileConfig), got {text!r}{': ' + str(exc) if str(exc) else ''}") from None


def _parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--seqlen", type=int, default=16384)
    p.add_argument("--headdim", type=int, default=128)
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds (with, without) per dtype")
    p.add_argument("--reps", type=int, default=10, help="calls timed together per round")
    p.add_argument("--fp8-config", default="128,8,3", help="FP8 tile: BLOCK_M,WARPS,STAGES (default %(default)s)")
    p.add_argument("--bf16-config", default="128,8,2,128",
                   help="BF16 tile: BLOCK_M,WARPS,STAGES[,BLOCK_N] (default %(default)s)")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                   help="cpu only under TRITON_INTERPRET=1 (a smoke test; times are the interpreter's)")
    args = p.parse_args(argv)
    for name in ("batch", "heads", "seqlen", "headdim", "rounds", "reps"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA GPU here (use --device cpu with TRITON_INTERPRET=1 for a smoke test)")
    if args.device == "cpu" and not interpreting():
        p.error("--device cpu needs TRITON_INTERPRET=1 (Triton compiles for GPUs only)")
    return args


def _measure(label, call, rounds, reps, cuda):
    """Median ms per call of each variant, alternating them round by round (drift hits both)."""
    outs = {flag: call(flag) for flag in (True, False)}  # compile + warm up
    same = all(torch.equal(a, b) for a, b in zip(outs[True], outs[False]))
    times = {True: [], False: []}
    for _ in range(rounds):
        for flag in (True, False):
            times[flag].append(1e3 * elapsed_s(lambda: call(flag), reps, cuda) / reps)
    on, off = statistics.median(times[True]), statistics.median(times[False])
    print(f"{label}: with NaN checks {on:.3f} ms, without {off:.3f} ms, with/without {on / off:.4f} "
          f"(cost {100 * (on / off - 1):+.2f} %); rounds with: {' '.join(f'{t:.3f}' for t in times[True])}; "
          f"without: {' '.join(f'{t:.3f}' for t in times[False])}; finite input, same bits: {same}", flush=True)
    return on, off, same


def main(argv=None) -> int:
    args = _parse(argv)
    dev = args.device
    b, h, s, d = args.batch, args.heads, args.seqlen, args.headdim
    fp8_cfg, bf16_cfg = _config(args.fp8_config, "--fp8-config"), _config(args.bf16_config, "--bf16-config")
    where = torch.cuda.get_device_name() if dev == "cuda" else "Triton interpreter on the CPU (not kernel times)"
    print(f"bench_nan_checks: b{b} h{h} s{s} d{d} causal on {where}; torch {torch.__version__}; "
          f"fp8 tile {fp8_cfg}; bf16 tile {bf16_cfg}; {args.rounds} rounds x {args.reps} calls", flush=True)
    g = torch.Generator(device=dev).manual_seed(0)
    q, k, v = (torch.randn(b, s, h, d, generator=g, device=dev, dtype=torch.bfloat16) for _ in range(3))
    scale = d ** -0.5
    q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))

    def fp8(flag):
        return attention_fp8(q8, k8, v8, scale, True, config=fp8_cfg, nan_checks=flag)

    def bf16(flag):
        return attention_bf16(q, k, v, scale, True, config=bf16_cfg, nan_checks=flag)

    rows = [_measure("fp8 ", fp8, args.rounds, args.reps, dev == "cuda"),
            _measure("bf16", bf16, args.rounds, args.reps, dev == "cuda")]
    if not all(same for _, _, same in rows):
        print("bench_nan_checks: error: the kernels with and without NaN checks differ on finite input",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
