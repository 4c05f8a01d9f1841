"""What a fused RoPE + Hadamard + FP8 quantise pass of Q and K costs beyond the RoPE pass a model runs
anyway, as a share of the zyfa FP8 attention time, on a CUDA GPU (the lent H200), in one process.

    python3 -P benchmarks/fused_rope_quant.py [--seqlen 16384 --heads 32 --headdim 128] [--csv FILE] [--sweep]
        # zyfa must be importable (an install, or benchmarks/results/scripts/h200_setup.sh on the device)

Inputs: zyfa-bench's (b1, MHA, causal, bf16 Q and K from one seeded generator), RoPE tables of
positions 0..s-1 (base 10000, ``zyfa.numerics.rope_tables``). Every op is applied to Q and K and the
two times added (triton.testing.do_bench medians, ms). Ops, each in two alternated rounds so that
clock drift hits all alike:

- ``rope_torch``: the usual torch form in bf16 (Hugging Face's ``q * cos + rotate_half(q) * sin``
  with bf16 tables of width d), several elementwise kernels;
- ``rope_triton``: ``rope_rows`` (one Triton pass, bf16 out), the fused kernel's own RoPE alone;
- ``quantise``: ``hadamard_quantize_fp8(rotate=False)``, the quantisation an FP8 API makes from bf16;
- ``rope_quantise``: RoPE + quantise in one pass (``rotate=False`` with tables);
- ``rope_hadamard_quantise``: the fused pass (default variant and launch, with the host check);
- ``cast``: a bf16 -> fp8 cast (the bytes one pass must move: a floor);
- ``fused_{head,token}_{variant}_rows{32,64,128}_nosync``: every kernel variant
  (``hadamard_fp8.VARIANTS``) at 32, 64 and 128 rows per 4 warps, ``check_finite=False`` (no host
  synchronisation, like ``rope_triton`` and ``cast``); variant ``rows`` (one row per thread) at 32
  rows per warp with 2, 4 and 8 warps (``..._rows{64,128,256}_nosync``);
  ``rope_triton_{variant}_rows{...}``: the RoPE pass with run 25's table layout, with x's, and in the
  ``rows`` form; ``fused_*_rows64_maxnreg{168,128}_nosync``: run25 and lean under a register cap
  (``maxnreg``). Every variant is checked bit for bit first.

The attention times are zyfa-bench's rows measured here: ``zyfa-triton-fp8`` (recipe zyfa-v1, its
default) and ``zyfa-triton-fp8-v2``. (Whole-pipeline rows, ``zyfa-triton-fp8-rope`` and
``-rope-hadamard``, differ by less than the drift between rows, run 25: the op times measure.)

The figure a "<= 0.5 % of the attention" goal can apply to is the fused pass's marginal cost over
the RoPE pass: ``rope_hadamard_quantise - rope_triton`` (and, against the torch form,
``- rope_torch``), divided by the attention time. Before any timing, the fused op's codes and
descales are checked bit for bit against the torch path ``quantize_fp8(hadamard(rope(x)))`` on the
GPU, and ``rope_triton`` against ``rope(x).to(bf16)``. Prints a report; writes the CSV if asked.

``--sweep`` (H200 run 33) times launch parameters instead of variants: the ``SWEEP`` launches (rows
per program, warps, ``maxnreg`` register cap; below), each bit-checked as above, beside the cast, run
25's RoPE pass at ``SWEEP_ROPE`` rows per program (each checked) and ``zyfa-triton-fp8`` (v1) alone,
and prints for each launch and for the fastest per granularity the same "fused minus the fastest RoPE
pass, % of v1's attention" figure. ``tools/hadamard_sass.py --sweep`` counts the same launches.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import torch
import triton

from zyfa import numerics
from zyfa.cli import bench_main
from zyfa.kernels.triton.hadamard_fp8 import VARIANTS, hadamard_quantize_fp8, rope_rows
from zyfa.shapes import AttnShape

GRANULARITIES = ("head", "token")
BENCH_ROWS = ("zyfa-triton-fp8", "zyfa-triton-fp8-v2")
# rows per program at 4 warps: four threads per row (94 registers per token, sm_90a on the CPU box:
# 5 programs per SM, not timed yet), two (the default), one
LAUNCH_ROWS = (32, 64, 128)
ROWS_WARPS = (2, 4, 8)  # variant "rows": one row per thread, 32 rows per warp


def launches(variant: str) -> list[tuple[int, int]]:
    """(rows per program, warps) timed for a kernel variant."""
    if VARIANTS[variant]["ROWS"]:
        return [(32 * w, w) for w in ROWS_WARPS]
    return [(r, 4) for r in LAUNCH_ROWS]

MAXNREG = (168, 128)  # register caps per thread: 3 / 4 programs of 4 warps per SM (65536 registers)


# --sweep (H200 run 33): run 32 timed "rows" per token fastest at 64 rows x 2 warps (0.2132 ms, Q + K)
# and ncu found it latency-bound: 168 registers, 18.75 % theoretical occupancy (12 warps per SM),
# issue slots 35 %, DRAM 37 %. Launches (granularity, variant, rows per program, warps, maxnreg):
# per token 32 rows per warp at 1-8 warps under register caps that let more warps share an SM
# (tools/hadamard_sass.py --sweep on the CPU box, Triton 3.9, sm_90a, 64 rows x 2 warps: no cap 168
# registers, no spill, 12 warps per SM; 144: 12 bytes of spill stores, 14; 136: 152 B, 14; 128:
# 484 B, 16; 96: 1832 B, 20), and two rows per thread (more loads in flight per thread; 255 registers,
# 664 B, 8); per head "rows" at 2 and 4 warps with and without a cap, and "lean" at 64 rows x 4 warps
# (run 32's fastest per head with maxnreg 128, 0.3756 ms) at caps 128 and 96. num_stages does not
# apply: the kernels have no loop for Triton to pipeline.
SWEEP_CAPS = (None, 144, 128, 96)
SWEEP = ([("token", "rows", 32 * w, w, cap) for w in (1, 2, 4, 8) for cap in SWEEP_CAPS]
         + [("token", "rows", 32 * w, w, 136) for w in (1, 2)]
         + [("token", "rows", 64 * w, w, None) for w in (1, 2)]
         + [("head", "rows", 32 * w, w, cap) for w in (2, 4) for cap in (None, 128)]
         + [("head", "lean", 64, 4, cap) for cap in (128, 96)]
         # variant "pairs" (a row in two threads: 16 rows per warp, 88-96 registers, 5 programs of 4 warps per SM)
         + [("token", "pairs", 16 * w, w, None) for w in (1, 2, 4, 8)]
         + [("head", "pairs", 16 * w, w, None) for w in (2, 4)])
SWEEP_ROPE = (16, 32, 64, 128)  # rows per program of run 25's RoPE pass (4 warps; run 32's fastest: 32)


def sweep_name(granularity: str, variant: str, block_s: int, num_warps: int, maxnreg: int | None) -> str:
    return f"fused_{granularity}_{variant}_rows{block_s}_w{num_warps}" + (f"_maxnreg{maxnreg}" if maxnreg else "")


def rope_torch(x: torch.Tensor, cos2: torch.Tensor, sin2: torch.Tensor) -> torch.Tensor:
    """Hugging Face's apply_rotary_pos_emb on one tensor, in x's dtype (bf16), tables (s, d)."""
    d = x.shape[-1]
    rot = torch.cat((-x[..., d // 2:], x[..., : d // 2]), dim=-1)
    return x * cos2 + rot * sin2


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype == torch.float8_e4m3fn:
        a, b = a.view(torch.uint8), b.view(torch.uint8)
    return bool(torch.equal(a, b))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqlen", type=int, default=16384)
    ap.add_argument("--heads", type=int, default=32, help="query = kv heads (MHA, zyfa-bench's 'mha' shape)")
    ap.add_argument("--headdim", type=int, default=128)
    ap.add_argument("--csv", type=Path, default=None, help="write the op and row times here")
    ap.add_argument("--force", action="store_true", help="overwrite an existing --csv file")
    ap.add_argument("--sweep", action="store_true",
                    help="time the SWEEP launches (rows per program, warps, maxnreg) instead of every variant")
    args = ap.parse_args(argv)
    if args.csv is not None and args.csv.exists() and not args.force:
        print(f"fused_rope_quant: --csv {args.csv} exists (use --force to overwrite)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("fused_rope_quant: needs a CUDA/ROCm GPU (the Triton kernels)", file=sys.stderr)
        return 2
    shape = AttnShape(batch=1, seqlen_q=args.seqlen, seqlen_k=args.seqlen, heads=args.heads,
                                 heads_k=args.heads, headdim=args.headdim, headdim_v=args.headdim, causal=True)
    x = bench_main.Inputs(shape)
    h, d = args.heads, args.headdim
    cos, sin = (t.cuda() for t in numerics.rope_tables(args.seqlen, d))
    cos2, sin2 = (torch.cat((t, t), dim=-1)[None, :, None, :].to(torch.bfloat16) for t in (cos, sin))
    qk = {"q": x.q, "k": x.k}
    print(f"shape b1 h{h} s{args.seqlen} d{d} bf16 (Q and K each), {torch.cuda.get_device_name()}")
    if args.sweep:
        return sweep(args, shape, x, qk, cos, sin)

    # -- bit-identity with the torch path, on this GPU ------------------------------------------
    equal = {}
    for name, t in qk.items():
        equal[f"rope_triton_{name}"] = same_bits(rope_rows(t, cos, sin), numerics.rope(t, cos, sin).to(t.dtype))
        for gran in GRANULARITIES:
            ref = numerics.quantize_fp8(numerics.hadamard(numerics.rope(t, cos, sin)), gran, nheads_k=h)
            got = hadamard_quantize_fp8(t, gran, h, cos=cos, sin=sin)
            equal[f"fused_{gran}_{name}"] = same_bits(got[0], ref[0]) and same_bits(got[1], ref[1])
            for variant in VARIANTS:
                for nrows, warps in launches(variant):
                    got = hadamard_quantize_fp8(t, gran, h, block_s=nrows, num_warps=warps, cos=cos, sin=sin,
                                                variant=variant)
                    equal[f"fused_{gran}_{variant}_rows{nrows}_{name}"] = (same_bits(got[0], ref[0])
                                                                         and same_bits(got[1], ref[1]))
            for variant in ("run25", "lean"):
                for cap in MAXNREG:
                    got = hadamard_quantize_fp8(t, gran, h, block_s=64, cos=cos, sin=sin, variant=variant, maxnreg=cap)
                    equal[f"fused_{gran}_{variant}_rows64_maxnreg{cap}_{name}"] = (same_bits(got[0], ref[0])
                                                                                  and same_bits(got[1], ref[1]))
        for variant in ("tables_x", "rows"):
            equal[f"rope_triton_{variant}_{name}"] = same_bits(rope_rows(t, cos, sin, variant=variant),
                                                               numerics.rope(t, cos, sin).to(t.dtype))
    print("bit-identical to the torch path (codes and descales; RoPE pass vs rope(x).to(bf16)): "
          + ", ".join(f"{k} {v}" for k, v in equal.items()))

    # -- zyfa-bench rows (attention times) in this process -------------------------------------
    sampler = bench_main.NvmlSampler()
    rows = {}
    for backend in BENCH_ROWS:
        row = bench_main.measure("mha", shape, backend, x, None, 0, 100.0, 300.0, sampler)
        print("  zyfa-bench row: " + bench_main.format_row(row) + (f"  ERROR {row.error}" if row.error else ""))
        rows[backend] = row.ms

    # -- op times, Q + K, two alternated rounds ---------------------------------------------------
    ops = {"cast": lambda t: t.to(torch.float8_e4m3fn),
           "rope_torch": lambda t: rope_torch(t, cos2, sin2),
           "rope_triton": lambda t: rope_rows(t, cos, sin)}
    for gran in GRANULARITIES:
        ops[f"quantise_{gran}"] = lambda t, g=gran: hadamard_quantize_fp8(t, g, h, rotate=False)
        ops[f"rope_quantise_{gran}"] = lambda t, g=gran: hadamard_quantize_fp8(t, g, h, rotate=False, cos=cos, sin=sin)
        ops[f"rope_hadamard_quantise_{gran}"] = lambda t, g=gran: hadamard_quantize_fp8(t, g, h, cos=cos, sin=sin)
    # kernel variants (hadamard_fp8.VARIANTS) x rows per 4 warps, without the host check of the
    # descales (check_finite=False: no synchronisation, as rope_rows and the cast); "nosync" is the
    # default kernel so, i.e. what the check costs; and the RoPE pass with its tables in x's layout
    for gran in GRANULARITIES:
        for variant in VARIANTS:
            for nrows, warps in launches(variant):
                ops[f"fused_{gran}_{variant}_rows{nrows}_nosync"] = (
                    lambda t, g=gran, v=variant, r=nrows, w=warps: hadamard_quantize_fp8(
                        t, g, h, block_s=r, num_warps=w, cos=cos, sin=sin, variant=v, check_finite=False))
        for variant in ("run25", "lean"):  # a register cap: 3 (168) or 4 (128) programs of 4 warps per SM
            for cap in MAXNREG:
                ops[f"fused_{gran}_{variant}_rows64_maxnreg{cap}_nosync"] = (
                    lambda t, g=gran, v=variant, m=cap: hadamard_quantize_fp8(
                        t, g, h, block_s=64, cos=cos, sin=sin, variant=v, check_finite=False, maxnreg=m))
    for variant in ("run25", "tables_x", "rows"):
        for nrows, warps in launches(variant):
            ops[f"rope_triton_{variant}_rows{nrows}"] = (
                lambda t, v=variant, r=nrows, w=warps: rope_rows(t, cos, sin, r, w, variant=v))
    times = time_ops(ops, qk)
    best = {name: min(ts) for name, ts in times.items()}
    attn_v1, attn_v2 = rows["zyfa-triton-fp8"], rows["zyfa-triton-fp8-v2"]
    print_times(times, best, attn_v1)
    print(f"attention: zyfa-triton-fp8 (v1) {attn_v1:.3f} ms, zyfa-triton-fp8-v2 {attn_v2:.3f} ms")
    for gran in GRANULARITIES:
        fused = best[f"rope_hadamard_quantise_{gran}"]
        for base in ("rope_triton", "rope_torch"):
            extra = fused - best[base]
            print(f"  per {gran}: fused RoPE + Hadamard + quantise {fused:.4f} ms - {base} {best[base]:.4f} ms = "
                  f"{extra:+.4f} ms = {100 * extra / attn_v1:+.2f}% of v1's attention, {100 * extra / attn_v2:+.2f}% "
                  f"of v2's")
        quant = best[f"quantise_{gran}"]
        print(f"  per {gran}: fused / quantise-only {fused / quant:.2f}x ({fused - quant:+.4f} ms = "
              f"{100 * (fused - quant) / attn_v1:+.2f}% of v1's attention); RoPE + quantise in one pass "
              f"{best[f'rope_quantise_{gran}']:.4f} ms vs RoPE pass then quantise "
              f"{best['rope_triton'] + quant:.4f} ms")
    print_fastest(best, equal, attn_v1, attn_v2)
    if args.csv is not None:
        special = {"rope_triton": all(v for k, v in equal.items() if k.startswith("rope_triton")),
                   **{f"rope_hadamard_quantise_{g}": equal[f"fused_{g}_q"] and equal[f"fused_{g}_k"]
                      for g in GRANULARITIES}}
        write_csv(args.csv, times, best, rows, lambda name: (checked(equal, name) if name.startswith("fused_")
                                                             else special.get(name, "")))
    return 0 if all(equal.values()) else 1


def checked(equal: dict[str, bool], name: str) -> bool:
    """Whether op ``name``'s Q and K outputs were both bit-identical to the torch path."""
    key = name.removesuffix("_nosync")
    return equal[f"{key}_q"] and equal[f"{key}_k"]


def time_ops(ops: dict, qk: dict[str, torch.Tensor]) -> dict[str, list[float]]:
    """Q + K time of each op (do_bench medians, ms), two rounds alternating over the ops."""
    times: dict[str, list[float]] = {}
    for _ in range(2):
        for name, op in ops.items():
            times.setdefault(name, []).append(sum(triton.testing.do_bench(lambda t=t: op(t)) for t in qk.values()))
    return times


def print_times(times: dict[str, list[float]], best: dict[str, float], attn_v1: float) -> None:
    print("op times, Q + K (ms, rounds):")
    for name, ts in times.items():
        print(f"  {name:<46} {best[name]:.4f}  {[round(t, 4) for t in ts]}  {100 * best[name] / attn_v1:.2f}% of "
              f"zyfa-triton-fp8")


def print_fastest(best: dict[str, float], equal: dict[str, bool], attn_v1: float, attn_v2: float | None) -> None:
    """The figure a "<= 0.5 %" goal applies to: per granularity the fastest bit-identical fused op minus
    the fastest RoPE pass, over v1's (and v2's) attention."""
    base = min(best[k] for k in best if k.startswith("rope_triton"))
    for gran in GRANULARITIES:
        fused = [k for k in best if k.startswith(f"fused_{gran}_") and checked(equal, k)]  # bit-identical ones only
        if not fused:
            print(f"  fastest per {gran}: no bit-identical fused op")
            continue
        name = min(fused, key=best.get)
        extra = best[name] - base
        v2 = "" if attn_v2 is None else f", {100 * extra / attn_v2:+.2f}% of v2's"
        print(f"  fastest per {gran}: {name} {best[name]:.4f} ms - fastest RoPE pass {base:.4f} ms = {extra:+.4f} ms = "
              f"{100 * extra / attn_v1:+.2f}% of v1's attention{v2}; {best[name] / best['cast']:.2f}x the cast")


def write_csv(path: Path, times: dict[str, list[float]], best: dict[str, float], rows: dict[str, float],
              ok) -> None:
    """One line per op (``ok(name)``: its bit check, "" if it has none) and per zyfa-bench row."""
    attn_v1 = rows["zyfa-triton-fp8"]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kind", "name", "ms_best", "ms_round1", "ms_round2", "pct_of_v1_attention", "bit_identical"])
        for name, ts in times.items():
            w.writerow(["op_q_plus_k", name, f"{best[name]:.5f}", f"{ts[0]:.5f}", f"{ts[1]:.5f}",
                        f"{100 * best[name] / attn_v1:.3f}", ok(name)])
        for backend, ms in rows.items():
            w.writerow(["zyfa_bench_row", backend, f"{ms:.5f}", "", "", "", ""])
    print(f"wrote {path}")


def sweep(args, shape: AttnShape, x, qk: dict[str, torch.Tensor], cos: torch.Tensor, sin: torch.Tensor) -> int:
    """``--sweep``: the SWEEP launches, each checked bit for bit, timed beside the cast, run 25's RoPE pass
    at SWEEP_ROPE rows and v1's attention; the "<= 0.5 %" figure for each launch and the fastest."""
    h = args.heads
    equal = {}
    for name, t in qk.items():
        ref_rope = numerics.rope(t, cos, sin).to(t.dtype)
        for nrows in SWEEP_ROPE:
            equal[f"rope_triton_run25_rows{nrows}_{name}"] = same_bits(rope_rows(t, cos, sin, nrows, variant="run25"),
                                                                       ref_rope)
        for gran in GRANULARITIES:
            ref = numerics.quantize_fp8(numerics.hadamard(numerics.rope(t, cos, sin)), gran, nheads_k=h)
            for g, variant, nrows, warps, cap in SWEEP:
                if g == gran:
                    got = hadamard_quantize_fp8(t, gran, h, block_s=nrows, num_warps=warps, cos=cos, sin=sin,
                                                variant=variant, maxnreg=cap)
                    equal[f"{sweep_name(gran, variant, nrows, warps, cap)}_{name}"] = (same_bits(got[0], ref[0])
                                                                                       and same_bits(got[1], ref[1]))
    print("bit-identical to the torch path (codes and descales; RoPE pass vs rope(x).to(bf16)): "
          + ", ".join(f"{k} {v}" for k, v in equal.items()))
    row = bench_main.measure("mha", shape, BENCH_ROWS[0], x, None, 0, 100.0, 300.0, bench_main.NvmlSampler())
    print("  zyfa-bench row: " + bench_main.format_row(row) + (f"  ERROR {row.error}" if row.error else ""))
    rows = {BENCH_ROWS[0]: row.ms}
    ops = {"cast": lambda t: t.to(torch.float8_e4m3fn)}
    for nrows in SWEEP_ROPE:
        ops[f"rope_triton_run25_rows{nrows}"] = lambda t, r=nrows: rope_rows(t, cos, sin, r, variant="run25")
    for gran, variant, nrows, warps, cap in SWEEP:
        ops[f"{sweep_name(gran, variant, nrows, warps, cap)}_nosync"] = (
            lambda t, g=gran, v=variant, r=nrows, w=warps, m=cap: hadamard_quantize_fp8(
                t, g, h, block_s=r, num_warps=w, cos=cos, sin=sin, variant=v, check_finite=False, maxnreg=m))
    times = time_ops(ops, qk)
    best = {name: min(ts) for name, ts in times.items()}
    attn_v1 = row.ms
    print_times(times, best, attn_v1)
    base = min(best[k] for k in best if k.startswith("rope_triton"))
    print(f"attention: zyfa-triton-fp8 (v1) {attn_v1:.3f} ms; fastest RoPE pass {base:.4f} ms; per launch, fused - "
          "fastest RoPE pass (% of v1's attention; bit-identical):")
    for name in ops:
        if name.startswith("fused_"):
            extra = best[name] - base
            print(f"  {name:<46} {extra:+.4f} ms = {100 * extra / attn_v1:+.2f}%  {checked(equal, name)}")
    print_fastest(best, equal, attn_v1, None)
    if args.csv is not None:
        write_csv(args.csv, times, best, rows,
                  lambda name: checked(equal, name) if name.startswith(("fused_", "rope_triton")) else "")
    return 0 if all(equal.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
