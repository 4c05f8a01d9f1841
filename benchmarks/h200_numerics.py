"""FP8 numerics spec v2 and the fused Hadamard + FP8 quantise kernel on a CUDA GPU (the lent H200).

Run from the repository root (no install needed; zyfa is made importable from the checkout):

    python3 benchmarks/h200_numerics.py [--skip-attention-check] [--accuracy-sources llm --accuracy-rows ...]
        # prints a report; with $OUT set also writes $OUT/h200_numerics.json and $OUT/h200_numerics.log

Checks and measures, in this order (at most about 4 minutes, most of it Triton compiles):

1. Triton FP8 kernel, recipe zyfa-v2 == zyfa.numerics emulator (run on the GPU), bit for bit on
   the fp32 output, on inputs whose every fp32 partial sum is exact (integer Q, K; V in {-1,0,1})
   with IEEE fp32 accumulation (``precise_acc``); softmax_lse max |diff| (the kernel's fp32 log2).
   Also v1 (magic rounding) the same way, and v2 on Gaussian inputs with Hopper's default fp8
   accumulation (rel. L2 only: that accumulation is not IEEE).
2. Fused Hadamard + FP8 quantise (kernels/triton/hadamard_fp8.py) == the torch path
   ``quantize_fp8(hadamard(x))`` bit for bit (codes and descales), Q and K at b1 s16k h32 d128 bf16,
   per (batch, kv head) and per token; and ``quantize_fp8`` itself on the GPU == on the CPU.
3. Times (triton.testing.do_bench, median ms) at b1 h32 s16384 d128 causal: zyfa-bench's rows
   zyfa-triton-fp8 and zyfa-triton-fp8-v2 (autotuned attention_fp8, recipes zyfa-v1 / zyfa-v2;
   each twice), zyfa-triton-fp8-quantise and zyfa-triton-fp8-hadamard (Q and K quantised from bf16
   inside the timed call by the fused kernel without / with its rotation), measured with
   zyfa-bench's own code in this process; the fused op on Q and K with and without the rotation
   (alternated), the unfused torch path, and a bf16 -> fp8 cast of Q and K (the same bytes as the
   one-pass op: its floor here); prints the rotation's marginal cost and the fused time as % of
   the attention time and the fused time as a multiple of the floor.
4. zyfa-accuracy rows (emulator on the GPU) on the LLM-like sink input, then Gaussian and
   outlier-K inputs, at d128, 16K keys, the last 2048 query rows: total / kernel-only rel. L2,
   row KL, flushed mass, LSE bias per kernel family and ablation, and the issue's ratios
   ZYFA v2 / AITER v3. Rows still missing when the script has run ACCURACY_UNTIL_S seconds are skipped
   (and said so). Runs before step 3, whose autotuning takes the longest.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _importable_checkout() -> None:
    """Makes ``import zyfa`` load this checkout (package folders mapped as setup.py maps them)."""
    try:
        import zyfa.kernels.triton  # noqa: F401
        return
    except ImportError:
        pass
    root = Path(tempfile.mkdtemp(prefix="zyfa-path-")) / "zyfa"
    root.mkdir()
    for f in (REPO / "zyfa").iterdir():
        (root / f.name).symlink_to(f)
    for d in ("kernels", "trace", "analyzer", "webui"):
        (root / d).symlink_to(REPO / d)
    sys.path.insert(0, str(root.parent))
    for name in [m for m in sys.modules if m == "zyfa" or m.startswith("zyfa.")]:
        del sys.modules[name]


_importable_checkout()  # before the zyfa imports below: the script runs without an install

import torch  # noqa: E402
import triton  # noqa: E402

from zyfa import numerics  # noqa: E402
from zyfa.cli import accuracy_main, bench_main  # noqa: E402
from zyfa.kernels.triton._common import TileConfig  # noqa: E402
from zyfa.kernels.triton.attn_fp8 import attention_fp8  # noqa: E402
from zyfa.kernels.triton.hadamard_fp8 import hadamard_quantize_fp8  # noqa: E402

LINES: list[str] = []
RESULTS: dict = {}


def say(msg: str = "") -> None:
    print(msg, flush=True)
    LINES.append(msg)


def exact_inputs(b, s, h, hk, d, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(-8, 9, (b, s, h, d), generator=g).float()
    k = torch.randint(-8, 9, (b, s, hk, d), generator=g).float()
    k[..., :2] *= 8  # wide score range: the running max grows, blocks sit below it
    v = torch.randint(-1, 2, (b, s, hk, d), generator=g).float()
    scales = [torch.rand(b, hk, generator=g) * 0.2 + 0.01 for _ in range(3)]
    return [x.to(torch.float8_e4m3fn).cuda() for x in (q, k, v)] + [x.cuda() for x in scales]


def check_attention() -> None:
    say("== 1. Triton FP8 attention vs the zyfa.numerics emulator (b1 s1024 h4/2 d128 causal)")
    q8, k8, v8, dq, dk, dv = exact_inputs(1, 1024, 4, 2, 128, seed=1)
    scale = q8.shape[-1] ** -0.5
    precise = TileConfig(128, 8, 3, precise_acc=True)
    for recipe, variant, rounding in (("zyfa-v2", "zyfa-v2", "trunc"), ("zyfa-v1", "zyfa", "magic")):
        ref, ref_lse = numerics.zyfa_fp8_attention(q8, k8, v8, dq, dk, dv, causal=True, softmax_scale=scale,
                                                   variant=variant, rounding=rounding, out_dtype=torch.float32)
        out, lse = attention_fp8(q8, k8, v8, scale, True, dq, dk, dv, out_dtype=torch.float32,
                                 config=precise, recipe=recipe)
        equal = bool(torch.equal(out, ref))
        diff = int((out != ref).sum())
        lse_err = float((lse - ref_lse).abs().max())
        say(f"  {recipe} exact inputs, precise_acc: fp32 out bitwise equal: {equal} ({diff} of {out.numel()} differ); "
            f"lse max |diff| {lse_err:.2e}")
        RESULTS[f"attention_{recipe}_exact"] = dict(bitwise_equal=equal, differing=diff, lse_max_abs=lse_err)
    g = torch.Generator(device="cuda").manual_seed(2)
    x = [torch.randn(1, 1024, n, 128, generator=g, device="cuda") for n in (4, 2, 2)]
    (q8, dq), (k8, dk), (v8, dv) = (numerics.quantize_fp8(t, nheads_k=2) for t in x)
    ref, _ = numerics.zyfa_fp8_attention(q8, k8, v8, dq, dk, dv, causal=True, variant="zyfa-v2", out_dtype=torch.float32)
    out, _ = attention_fp8(q8, k8, v8, 128 ** -0.5, True, dq, dk, dv, out_dtype=torch.float32, recipe="zyfa-v2",
                           config=TileConfig(64, 4, 3))
    rel = float((out - ref).double().norm() / ref.double().norm())
    say(f"  zyfa-v2 Gaussian inputs, Hopper fp8 accumulation: rel. L2 vs emulator {rel:.2e}")
    RESULTS["attention_zyfa-v2_gaussian_hopper_acc_rel_l2"] = rel


def check_hadamard(x: dict) -> None:
    say("== 2. fused Hadamard + FP8 quantise vs quantize_fp8(hadamard(x)) (b1 s16384 d128 bf16)")
    for gran in ("head", "token"):  # the torch path itself: the same bits on the GPU as on the CPU
        (g8, gds), (c8, cds) = (numerics.quantize_fp8(x["q"].to(dev), gran) for dev in ("cuda", "cpu"))
        same = torch.equal(g8.view(torch.uint8).cpu(), c8.view(torch.uint8)) and torch.equal(gds.cpu(), cds)
        say(f"  quantize_fp8(q, {gran!r}) on the GPU == on the CPU (codes and descales): {same}")
        RESULTS[f"quantize_gpu_equals_cpu_{gran}"] = same
    for name, t, hk in (("q", x["q"], 32), ("k", x["k"], 32)):
        for gran in ("head", "token"):
            x8, ds = hadamard_quantize_fp8(t, gran, nheads_k=hk)
            ref8, ref_ds = numerics.quantize_fp8(numerics.hadamard(t), gran, nheads_k=hk)
            codes = bool(torch.equal(x8.view(torch.uint8), ref8.view(torch.uint8)))
            scales = bool(torch.equal(ds, ref_ds))
            diff = int((x8.view(torch.uint8) != ref8.view(torch.uint8)).sum())
            say(f"  {name} per {gran}: codes bitwise equal {codes} ({diff} differ), descales equal {scales}")
            RESULTS[f"hadamard_{name}_{gran}"] = dict(codes_equal=codes, descales_equal=scales, differing=diff)
            # the same kernel without the rotation: the quantisation alone == quantize_fp8(x)
            x8, ds = hadamard_quantize_fp8(t, gran, nheads_k=hk, rotate=False)
            ref8, ref_ds = numerics.quantize_fp8(t, gran, nheads_k=hk)
            codes = bool(torch.equal(x8.view(torch.uint8), ref8.view(torch.uint8)))
            scales = bool(torch.equal(ds, ref_ds))
            say(f"  {name} per {gran}, rotate=False (quantise only) vs quantize_fp8(x): codes equal {codes}, "
                f"descales equal {scales}")
            RESULTS[f"quantise_only_{name}_{gran}"] = dict(codes_equal=codes, descales_equal=scales)


# zyfa-bench rows timed in this order (v1 and v2 twice, interleaved: the repeats bound the noise)
BENCH_ROWS = ("zyfa-triton-fp8", "zyfa-triton-fp8-v2", "zyfa-triton-fp8-quantise", "zyfa-triton-fp8-hadamard",
              "zyfa-triton-fp8", "zyfa-triton-fp8-v2")


def bench(x: dict) -> None:
    say("== 3. times at b1 h32 s16384 d128 causal (median ms, triton.testing.do_bench)")
    # zyfa-bench's own rows, in this process: zyfa-triton-fp8 (the autotuned attention_fp8 call,
    # recipe zyfa-v1, FP8 inputs quantised outside) and zyfa-triton-fp8-hadamard (the same with the
    # fused Hadamard + quantise of the bf16 Q and K inside the timed call)
    model, shape = bench_main.shapes_for(["mha"], [16384], True)[0]
    inputs = bench_main.Inputs(shape)
    sampler = bench_main.NvmlSampler()
    ms = {}
    for backend in BENCH_ROWS:
        row = bench_main.measure(model, shape, backend, inputs, None, 0, 100.0, 300.0, sampler)
        say("  zyfa-bench row: " + bench_main.format_row(row) + (f"  ERROR {row.error}" if row.error else ""))
        ms.setdefault(backend, []).append(row.ms)
    attn = min(ms["zyfa-triton-fp8"])
    ms["attention"] = attn
    v1, v2 = (min(ms[b]) for b in ("zyfa-triton-fp8", "zyfa-triton-fp8-v2"))
    say(f"  recipe zyfa-v2 / zyfa-v1 (autotuned attention_fp8, best of the runs): {v2:.3f} / {v1:.3f} ms = "
        f"{v2 / v1:.3f}x; runs v1 {ms['zyfa-triton-fp8']}, v2 {ms['zyfa-triton-fp8-v2']}")
    had, quant = ms["zyfa-triton-fp8-hadamard"][0], ms["zyfa-triton-fp8-quantise"][0]
    say(f"  zyfa-bench rows from BF16 Q, K: quantise + attention {quant:.3f} ms, Hadamard + quantise + attention "
        f"{had:.3f} ms: the rotation adds {had - quant:+.3f} ms = {100 * (had - quant) / attn:+.2f}% of the "
        f"attention ({attn:.3f} ms); plain rows {ms['zyfa-triton-fp8']} bound the noise")
    elems = x["q"].numel() + x["k"].numel()
    # the floor on this machine: a bf16 -> fp8 cast of Q and K moves what the one-pass op must move
    cast = sum(triton.testing.do_bench(lambda t=x[n]: t.to(torch.float8_e4m3fn)) for n in ("q", "k"))
    ms["cast_floor"] = cast
    say(f"  floor: torch bf16 -> fp8 cast of Q and K (read 2 B, write 1 B per element): {cast:.3f} ms, "
        f"{3 * elems / cast / 1e6:.0f} GB/s; {100 * cast / attn:.2f}% of the attention ({attn:.3f} ms)")
    for gran in ("head", "token"):
        passes = 2 if gran == "head" else 1  # head scales read x twice (amax pass + quantise pass)
        moved = elems * (2 * passes + 1) + (elems // 128) * 4 * (gran == "token")
        times = {}
        for rotate in (False, True, False, True):  # alternated: drift hits both alike
            t = sum(triton.testing.do_bench(lambda n=n: hadamard_quantize_fp8(x[n], gran, 32, rotate=rotate))
                    for n in ("q", "k"))
            times.setdefault(rotate, []).append(t)
        fused, quant = min(times[True]), min(times[False])
        ms[f"fused_{gran}"], ms[f"quantise_only_{gran}"] = times[True], times[False]
        say(f"  Q and K per {gran} (default launch): quantise only {quant:.3f} ms {times[False]}, Hadamard + "
            f"quantise {fused:.3f} ms {times[True]}: the rotation adds {fused - quant:+.3f} ms = "
            f"{100 * (fused - quant) / attn:+.2f}% of the attention; fused {100 * fused / attn:.2f}% of it, "
            f"{moved / fused / 1e6:.0f} GB/s, {fused / cast:.2f}x the cast floor")
        torch_ms = sum(triton.testing.do_bench(lambda t=x[n]: numerics.quantize_fp8(numerics.hadamard(t), gran, nheads_k=32))
                       for n in ("q", "k"))
        ms[f"torch_{gran}"] = torch_ms
        say(f"  unfused torch path per {gran}: {torch_ms:.3f} ms")
    RESULTS["ms"] = ms


class _OutOfTime(Exception):
    pass


ACCURACY = {"until_s": 90,  # rows still missing this long after the script started are skipped
            "rows": ("aiter-v3", "naive", "ck", "zyfa-v2", "zyfa-v2-head", "input-hadamard"),
            "sources": ("llm", "gaussian", "outliers")}


def accuracy(start: float) -> None:
    ACCURACY_UNTIL_S, ACCURACY_ROWS = ACCURACY["until_s"], ACCURACY["rows"]
    for source in ACCURACY["sources"]:
        say(f"== 4. zyfa-accuracy, --source {source}, b1 h1 s16384 d128 causal, last 2048 queries (emulator on the GPU)")
        config = accuracy_main.StudyConfig(source=source, heads=1, seqlen=16384, queries=2048, headdim=128,
                                           device="cuda", rows=ACCURACY_ROWS)
        rows = {}

        def progress(r):
            rows[r.key] = r
            kernel = f"{r.kernel_rel_l2:.3e}" if r.kernel_rel_l2 is not None else "-"
            extra = (f"kl {r.kl:.2e}  flushed {r.flushed:.2e}  lse_bias {r.lse_bias:+.4f}"
                     if r.lse_bias is not None else "")
            say(f"  {r.key:<14} rel_l2 {r.rel_l2:.3e}  kernel {kernel}  {extra}  ({r.seconds:.0f} s)")
            if time.time() - start > ACCURACY_UNTIL_S and len(rows) < len(config.rows):
                raise _OutOfTime

        try:
            accuracy_main.run_study(config, progress)
        except _OutOfTime:
            say(f"  stopped for time after {len(rows)} of {len(config.rows)} rows")
        RESULTS[f"accuracy_{source}_16k"] = {k: dict(rel_l2=r.rel_l2, kernel_rel_l2=r.kernel_rel_l2, kl=r.kl,
                                                     flushed=r.flushed, lse_bias=r.lse_bias) for k, r in rows.items()}
        if "aiter-v3" in rows:
            a = rows["aiter-v3"]
            for key in ("zyfa-v2", "zyfa-v2-head", "ck"):
                if key in rows:
                    v = rows[key]
                    say(f"  {key} / AITER v3: kernel-only {v.kernel_rel_l2 / a.kernel_rel_l2:.3f} (target <= 0.3), "
                        f"KL {v.kl / a.kl:.3f} (<= 0.3), total {v.rel_l2 / a.rel_l2:.3f} (<= 0.6); "
                        f"LSE bias {v.lse_bias:+.4f} (|.| <= 0.005)")
        if time.time() - start > ACCURACY_UNTIL_S:
            say("  out of time: later sources skipped")
            return


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-attention-check", action="store_true")
    parser.add_argument("--accuracy-until", type=float, default=ACCURACY["until_s"],
                        help="seconds after the start past which the accuracy step stops (default %(default)s)")
    parser.add_argument("--accuracy-rows", default=",".join(ACCURACY["rows"]))
    parser.add_argument("--accuracy-sources", default=",".join(ACCURACY["sources"]))
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    ACCURACY.update(until_s=args.accuracy_until, rows=tuple(args.accuracy_rows.split(",")),
                    sources=tuple(args.accuracy_sources.split(",")))
    if not torch.cuda.is_available():
        print("h200_numerics: needs a CUDA GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    start = time.time()
    say(f"zyfa h200_numerics: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    status = 0
    g = torch.Generator(device="cuda").manual_seed(0)
    x = {n: torch.randn(1, 16384, 32, 128, generator=g, device="cuda", dtype=torch.bfloat16) for n in ("q", "k", "v")}
    x["k"][..., :4] *= 8  # K outlier channels, what the rotation is for
    steps = [lambda: check_hadamard(x), lambda: accuracy(start), lambda: bench(x)]
    if not args.skip_attention_check:
        steps.insert(0, check_attention)
    # order: the checks, the accuracy rows (time-boxed), then the timings (autotuning takes a while)
    for step in steps:
        try:
            step()
        except Exception as exc:  # report and go on: one failing step must not hide the others
            status = 1
            say(f"  FAILED: {type(exc).__name__}: {str(exc)[:2000]}")
    say(f"== done in {time.time() - start:.0f} s")
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "h200_numerics.json").write_text(json.dumps(RESULTS, indent=2))
        (Path(out) / "h200_numerics.log").write_text("\n".join(LINES) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
