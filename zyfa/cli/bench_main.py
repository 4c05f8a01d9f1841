"""``zyfa-bench``: attention forward backends side by side on one GPU, in one process.

For every shape, every backend runs on the same random inputs (Gaussian, unit variance; FP8
backends get them quantised per (batch, kv-head) with descale = amax / 448). Per backend:

* time: warm-up, then ``triton.testing.do_bench`` (CUDA events, L2 flushed between calls), median;
* TFLOP/s: :attr:`zyfa.shapes.AttnShape.flops` (``4 b h s_q s_k d``, halved for causal) / time;
* accuracy: relative L2 error ``||out - ref|| / ||ref||`` against fp64 attention on the
  *unquantised* inputs, over the first ``--acc-kv-heads`` KV heads (and their query heads);
* SM clock (MHz) and board power (W): NVML, sampled every ~5 ms on a thread during the timed loop;
  TFLOP/J = TFLOP/s / mean power (whole-board energy, idle power included).

Writes ``bench.csv`` and ``bench.html`` (plotly) under ``--out`` and prints a table.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional

from zyfa.cli.errors import Parser, add_debug_flag, guarded, pop_debug
from zyfa.shapes import AttnShape, parse_seqlen
from zyfa.trace.safeio import MAX_JSON_BYTES, atomic_path, check_folder, check_output, read_bytes, write_text

DEFAULT_SEQLENS = "1k,2k,4k,8k,16k,32k"
# Named model layers (b1, causal): (heads, heads_k, headdim, headdim_v)
MODEL_SHAPES = {
    "mha": (32, 32, 128, 128),
    "mistral-7b": (32, 8, 128, 128),
    "qwen3-8b": (32, 8, 128, 128),
    "mla": (16, 16, 192, 128),  # DeepSeek-V2-Lite prefill head shape
}
BACKENDS = ("zyfa-cute-fp8", "zyfa-triton-fp8", "zyfa-triton-bf16", "sdpa-cudnn", "sdpa-flash", "fa3-bf16", "fa3-fp8")


@dataclass(frozen=True)
class BenchRow:
    """One (shape, backend) measurement; empty numbers and an ``error`` when it could not run."""

    model: str
    shape: str
    seqlen: int
    backend: str
    ms: float = math.nan
    tflops: float = math.nan
    rel_l2: float = math.nan
    sm_mhz: float = math.nan
    power_w: float = math.nan
    tflop_per_j: float = math.nan
    error: str = ""


# -- inputs ----
def quantise_fp8(x, heads_k: int):
    """(b, s, h, d) -> (float8_e4m3fn tensor, float32 descale (b, h_k)); amax per KV-head group."""
    # lazy: torch (~1 s to import on the 2-core box) only when benchmarking; --html re-renders without it
    import torch
    b, s, h, d = x.shape
    amax = x.abs().reshape(b, s, heads_k, h // heads_k, d).amax(dim=(1, 3, 4)).float().clamp_min(1e-12)
    descale = amax / 448.0
    scaled = x.float() / descale.repeat_interleave(h // heads_k, 1)[:, None, :, None]
    return scaled.clamp(-448.0, 448.0).to(torch.float8_e4m3fn), descale.contiguous()


class Inputs:
    """BF16 inputs of one shape and their FP8 quantisation."""

    def __init__(self, shape: AttnShape, seed: int = 0):
        # lazy: torch (~1 s to import on the 2-core box) only when benchmarking; --html re-renders without it
        import torch
        gen = torch.Generator(device="cuda").manual_seed(seed)

        def randn(s, h, d):
            return torch.randn(shape.batch, s, h, d, generator=gen, device="cuda", dtype=torch.bfloat16)

        self.shape = shape
        self.q = randn(shape.seqlen_q, shape.heads, shape.headdim)
        self.k = randn(shape.seqlen_k, shape.heads_k, shape.headdim)
        self.v = randn(shape.seqlen_k, shape.heads_k, shape.headdim_v)
        self.q8, self.dq = quantise_fp8(self.q, shape.heads_k)
        self.k8, self.dk = quantise_fp8(self.k, shape.heads_k)
        self.v8, self.dv = quantise_fp8(self.v, shape.heads_k)
        self.scale = shape.headdim ** -0.5


# -- backends: name -> builder(inputs) -> zero-argument callable returning out (b, s, h, d_v) ----
def _zyfa_fp8(x: Inputs):
    # lazy: the Triton kernel modules import triton (optional dependency, extra [gpu])
    from zyfa.kernels.triton.attn_fp8 import attention_fp8
    return lambda: attention_fp8(x.q8, x.k8, x.v8, x.scale, x.shape.causal, x.dq, x.dk, x.dv)[0]


def _zyfa_fp8_hadamard(x: Inputs):
    """zyfa-triton-fp8 from BF16 Q and K: the fused Hadamard + FP8 quantise (per (batch, kv head))
    of Q and K inside the timed call, V quantised outside as for every FP8 row. Its time minus
    zyfa-triton-fp8's is what the rotation costs (Q K^T is unchanged by it)."""
    # lazy: the Triton kernel modules import triton (optional dependency, extra [gpu])
    from zyfa.kernels.triton.attn_fp8 import attention_fp8
    from zyfa.kernels.triton.hadamard_fp8 import hadamard_quantize_fp8

    def call():
        q8, dq = hadamard_quantize_fp8(x.q, "head", x.shape.heads_k)
        k8, dk = hadamard_quantize_fp8(x.k, "head", x.shape.heads_k)
        return attention_fp8(q8, k8, x.v8, x.scale, x.shape.causal, dq, dk, x.dv)[0]
    return call


def _zyfa_fp8_v2(x: Inputs):
    """zyfa-triton-fp8 with recipe zyfa-v2 (docs/numerics.md spec v2), the same autotuned launch."""
    # lazy: the Triton kernel modules import triton (optional dependency, extra [gpu])
    from zyfa.kernels.triton.attn_fp8 import attention_fp8
    return lambda: attention_fp8(x.q8, x.k8, x.v8, x.scale, x.shape.causal, x.dq, x.dk, x.dv, recipe="zyfa-v2")[0]


def _zyfa_fp8_quantise(x: Inputs):
    """zyfa-triton-fp8 from BF16 Q and K quantised inside the timed call by the fused kernel without
    its rotation (``rotate=False``: the quantisation pass an FP8 API from BF16 makes anyway): the
    reference for what the Hadamard adds in zyfa-triton-fp8-hadamard."""
    # lazy: the Triton kernel modules import triton (optional dependency, extra [gpu])
    from zyfa.kernels.triton.attn_fp8 import attention_fp8
    from zyfa.kernels.triton.hadamard_fp8 import hadamard_quantize_fp8

    def call():
        q8, dq = hadamard_quantize_fp8(x.q, "head", x.shape.heads_k, rotate=False)
        k8, dk = hadamard_quantize_fp8(x.k, "head", x.shape.heads_k, rotate=False)
        return attention_fp8(q8, k8, x.v8, x.scale, x.shape.causal, dq, dk, x.dv)[0]
    return call


def _zyfa_fp8_rope(fused: bool):
    """zyfa-triton-fp8 from BF16 Q and K before RoPE, as a model hands them over: ``fused=False``
    runs the RoPE pass (Triton, bf16 out) then the FP8 quantisation (``rotate=False``); ``fused=True``
    one RoPE + Hadamard + quantise pass (per (batch, kv head)). V is quantised outside, as for every
    FP8 row; the RoPE tables (positions 0..s-1, base 10000) are made outside the timed call."""
    def build(x: Inputs):
        # lazy: the Triton kernel modules import triton (optional dependency, extra [gpu])
        from zyfa.kernels.triton.attn_fp8 import attention_fp8
        from zyfa.kernels.triton.hadamard_fp8 import hadamard_quantize_fp8, rope_rows
        from zyfa.numerics import rope_tables
        cos, sin = (t.cuda() for t in rope_tables(x.shape.seqlen_k, x.shape.headdim))
        n = x.shape.seqlen_q

        def quantised(t, tab):
            c, s = tab
            if fused:
                return hadamard_quantize_fp8(t, "head", x.shape.heads_k, cos=c, sin=s)
            return hadamard_quantize_fp8(rope_rows(t, c, s), "head", x.shape.heads_k, rotate=False)

        def call():  # causal prefill: the queries are the last seqlen_q positions
            q8, dq = quantised(x.q, (cos[-n:], sin[-n:]))
            k8, dk = quantised(x.k, (cos, sin))
            return attention_fp8(q8, k8, x.v8, x.scale, x.shape.causal, dq, dk, x.dv)[0]
        return call
    return build


def _zyfa_cute_fp8(pingpong: bool, v_once: bool = False, n128: bool = False, lpt: bool = True, kv_stages: int = 4,
                   runmax: bool = False, t128: bool = False, grouped: int = 0):
    """The CuTe DSL kernel (variants: see ``attention_fp8_sm90``); ``v_once`` prepares V' once
    outside the timed call (as if the quantiser wrote it): the row times the attention kernel alone."""
    def build(x: Inputs):
        # lazy: imports the CuTe DSL (optional GPU dependency)
        from zyfa.kernels.hopper.attn_fp8_sm90 import attention_fp8_sm90
        from zyfa.kernels.hopper.vprep import prepare_v_triton
        vp = prepare_v_triton(x.v8) if v_once else None
        return lambda: attention_fp8_sm90(x.q8, x.k8, x.v8, x.scale, x.shape.causal, x.dq, x.dk, x.dv,
                                          pingpong=pingpong, v_prepared=vp, n128=n128, lpt=lpt, kv_stages=kv_stages,
                                          runmax=runmax, t128=t128, grouped=grouped)[0]
    return build


# zyfa-cute-fp8[-nopp][-vonce]: no ping-pong, V' outside the timed call
CUTE_VARIANTS = {"zyfa-cute-fp8" + "-nopp" * (not pp) + "-vonce" * vonce: _zyfa_cute_fp8(pp, vonce)
                 for pp in (True, False) for vonce in (False, True)}
# -n128: S over 128-key tiles; -nolpt: causal query tiles launched lightest first (the default is heaviest first)
CUTE_VARIANTS.update({"zyfa-cute-fp8-n128" + "-nopp" * (not pp): _zyfa_cute_fp8(pp, n128=True) for pp in (True, False)})
CUTE_VARIANTS.update({"zyfa-cute-fp8" + "-nopp" * (not pp) + "-nolpt": _zyfa_cute_fp8(pp, lpt=False) for pp in (True, False)})
# -s3: n128 with three 128-key K/V stages instead of two
CUTE_VARIANTS.update({"zyfa-cute-fp8-n128" + "-nopp" * (not pp) + "-s3": _zyfa_cute_fp8(pp, n128=True, kv_stages=3)
                      for pp in (True, False)})
# -runmax: recipe zyfa-runmax (codes against the row's running max per 128-key tile, PV accumulated in O)
CUTE_VARIANTS.update({"zyfa-cute-fp8-runmax" + "-nopp" * (not pp): _zyfa_cute_fp8(pp, n128=True, runmax=True)
                      for pp in (True, False)})
# -t128: recipe zyfa-v1 with 128-key scaling blocks (one PV GEMM and one merge per tile)
CUTE_VARIANTS.update({"zyfa-cute-fp8-t128" + "-nopp" * (not pp): _zyfa_cute_fp8(pp, n128=True, t128=True)
                      for pp in (True, False)})
# -gG: recipe zyfa-grouped (PV in the tensor core over groups of G 128-key tiles, O in shared memory)
CUTE_VARIANTS.update({f"zyfa-cute-fp8-g{g}" + "-nopp" * (not pp): _zyfa_cute_fp8(pp, n128=True, grouped=g)
                      for pp in (True, False) for g in (4, 8)})


def _zyfa_bf16(x: Inputs):
    # lazy: as above
    from zyfa.kernels.triton.attn_bf16 import attention_bf16
    return lambda: attention_bf16(x.q, x.k, x.v, x.scale, x.shape.causal)[0]


def _sdpa(kind: str):
    def build(x: Inputs):
        # lazy: torch (~1 s to import on the 2-core box) only when benchmarking; --html re-renders without it
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[kind]
        q, k, v = (t.transpose(1, 2) for t in (x.q, x.k, x.v))
        gqa = x.shape.heads != x.shape.heads_k

        def call():
            with sdpa_kernel(backend):
                out = torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=x.shape.causal, scale=x.scale, enable_gqa=gqa)
            return out.transpose(1, 2)
        return call
    return build


def _fa3(fp8: bool):
    def build(x: Inputs):
        # lazy: optional package fa3-fwd (FlashAttention-3)
        from fa3_fwd_interface import flash_attn_func as fa3

        def first(r):
            return r[0] if isinstance(r, tuple) else r
        if fp8:
            return lambda: first(fa3(x.q8, x.k8, x.v8, softmax_scale=x.scale, causal=x.shape.causal,
                                     q_descale=x.dq, k_descale=x.dk, v_descale=x.dv))
        return lambda: first(fa3(x.q, x.k, x.v, softmax_scale=x.scale, causal=x.shape.causal))
    return build


BUILDERS: dict[str, Callable] = {
    **CUTE_VARIANTS,
    "zyfa-triton-fp8": _zyfa_fp8, "zyfa-triton-fp8-v2": _zyfa_fp8_v2, "zyfa-triton-fp8-hadamard": _zyfa_fp8_hadamard,
    "zyfa-triton-fp8-quantise": _zyfa_fp8_quantise, "zyfa-triton-fp8-rope": _zyfa_fp8_rope(False),
    "zyfa-triton-fp8-rope-hadamard": _zyfa_fp8_rope(True), "zyfa-triton-bf16": _zyfa_bf16,
    "sdpa-cudnn": _sdpa("cudnn"), "sdpa-flash": _sdpa("flash"),
    "fa3-bf16": _fa3(False), "fa3-fp8": _fa3(True),
}


# -- measurement ----
class NvmlSampler:
    """Samples SM clock (MHz) and board power (W) on a thread while active (means over samples)."""

    def __init__(self, period_s: float = 0.005):
        self.period_s = period_s
        self.handle = None
        try:
            # lazy: optional dependency nvidia-ml-py (extra [gpu])
            import pynvml
            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception as exc:  # NVML missing or no NVIDIA driver: clocks/power stay NaN
            print(f"zyfa-bench: NVML unavailable ({exc}); no clock/power columns", file=sys.stderr)

    def __enter__(self):
        self.clocks, self.power = [], []
        self._stop = threading.Event()
        if self.handle is not None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self):
        nv = self.nvml
        while not self._stop.is_set():
            self.clocks.append(nv.nvmlDeviceGetClockInfo(self.handle, nv.NVML_CLOCK_SM))
            self.power.append(nv.nvmlDeviceGetPowerUsage(self.handle) / 1000.0)
            time.sleep(self.period_s)

    def __exit__(self, *exc):
        self._stop.set()
        if self.handle is not None:
            self._thread.join()

    def means(self) -> tuple[float, float]:
        if not self.clocks:
            return math.nan, math.nan
        return sum(self.clocks) / len(self.clocks), sum(self.power) / len(self.power)


def reference_fp64(x: Inputs, kv_heads: int):
    """fp64 attention of the unquantised inputs for the first ``kv_heads`` KV heads."""
    # lazy: flash_attn_func imports torch
    from zyfa import flash_attn_func
    g = x.shape.heads // x.shape.heads_k
    hk = min(kv_heads, x.shape.heads_k)
    q, k, v = x.q[:, :, :hk * g], x.k[:, :, :hk], x.v[:, :, :hk]
    return flash_attn_func(q, k, v, softmax_scale=x.scale, causal=x.shape.causal, backend="oracle"), hk * g


def measure(model: str, shape: AttnShape, backend: str, x: Inputs, ref, ref_heads: int,
            warmup_ms: float, rep_ms: float, sampler: NvmlSampler) -> BenchRow:
    # lazy: torch (~1 s to import on the 2-core box) only when benchmarking; --html re-renders without it
    import torch
    # lazy: triton, optional dependency (extra [gpu])
    import triton
    base = dict(model=model, shape=str(shape.with_(dtype="bf16")).removesuffix(" bf16"),
                seqlen=shape.seqlen_q, backend=backend)
    try:
        fn = BUILDERS[backend](x)
        out = fn()  # also compiles / autotunes
        torch.cuda.synchronize()
        rel = math.nan
        if ref is not None:
            o = out[:, :, :ref_heads].double()
            rel = float((o - ref).norm() / ref.norm())
        triton.testing.do_bench(fn, warmup=warmup_ms, rep=min(rep_ms, 25))
        with sampler:
            ms = triton.testing.do_bench(fn, warmup=0, rep=rep_ms, return_mode="median")
        mhz, watts = sampler.means()
    except Exception as exc:  # one backend failing must not stop the others
        return BenchRow(**base, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")
    tflops = shape.tflops(ms * 1e-3)
    return BenchRow(**base, ms=ms, tflops=tflops, rel_l2=rel, sm_mhz=mhz, power_w=watts,
                    tflop_per_j=tflops / watts if watts == watts and watts > 0 else math.nan)


def shapes_for(models: list[str], seqlens: list[int], causal: bool) -> list[tuple[str, AttnShape]]:
    out = []
    for model in models:
        if model not in MODEL_SHAPES:
            raise ValueError(f"unknown model shape {model!r}; known: {', '.join(MODEL_SHAPES)}")
        h, hk, d, dv = MODEL_SHAPES[model]
        for s in seqlens:
            out.append((model, AttnShape(batch=1, heads=h, heads_k=hk, seqlen_q=s, seqlen_k=s, headdim=d,
                                         headdim_v=dv, causal=causal, dtype="bf16")))
    return out


def write_html(rows: list[BenchRow], path: Path) -> bool:
    """Grouped TFLOP/s bars per model shape; False (and a message) when plotly is missing."""
    try:
        # lazy: plotly only for --html output
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots
    except ImportError:
        print("zyfa-bench: plotly is not installed; no HTML (zyfa-bench --html-from bench.csv makes it later)",
              file=sys.stderr)
        return False
    models = list(dict.fromkeys(r.model for r in rows))
    fig = make_subplots(rows=len(models), cols=1, subplot_titles=[f"{m}: TFLOP/s (median)" for m in models])
    for i, model in enumerate(models, 1):
        for backend in dict.fromkeys(r.backend for r in rows):
            pts = [r for r in rows if r.model == model and r.backend == backend and not r.error]
            if pts:
                fig.add_trace(go.Bar(name=backend, x=[str(r.seqlen) for r in pts], y=[r.tflops for r in pts],
                                     legendgroup=backend, showlegend=i == 1,
                                     hovertext=[f"{r.ms:.3f} ms, rel L2 {r.rel_l2:.2e}, {r.sm_mhz:.0f} MHz, "
                                                f"{r.power_w:.0f} W" for r in pts]), row=i, col=1)
    fig.update_layout(barmode="group", height=350 * len(models), title="zyfa-bench")
    write_text(path, fig.to_html(include_plotlyjs="cdn"))
    return True


def read_csv(path: Path) -> list[BenchRow]:
    """Rows of a bench.csv written by :func:`run` (numbers back to float, error text kept); a
    file that is not one (not a regular file, too big, other columns, bad numbers, no rows) is a
    ValueError naming it."""
    try:
        text = read_bytes(path, MAX_JSON_BYTES, "bench CSV").decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a zyfa-bench bench.csv (not UTF-8 text)") from None
    fields = [f.name for f in BenchRow.__dataclass_fields__.values()]
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if reader.fieldnames != fields:
        raise ValueError(f"{path}: not a zyfa-bench bench.csv (columns {reader.fieldnames}, expected {fields})")
    rows = []
    for line, rec in enumerate(reader, 2):
        try:
            typed = {k: (v if k in ("model", "shape", "backend", "error") else
                         int(v) if k == "seqlen" else float(v)) for k, v in rec.items()}
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}:{line}: not a zyfa-bench row ({exc})") from None
        rows.append(BenchRow(**typed))
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seqlens", default=DEFAULT_SEQLENS, help=f"comma list, e.g. 1k,16k (default {DEFAULT_SEQLENS})")
    p.add_argument("--models", default="mha", help=f"comma list of {', '.join(MODEL_SHAPES)} (default mha)")
    p.add_argument("--backends", default=",".join(BACKENDS), help="comma list (default: all)")
    p.add_argument("--non-causal", action="store_true", help="full attention instead of causal")
    p.add_argument("--warmup-ms", type=float, default=100.0)
    p.add_argument("--rep-ms", type=float, default=300.0)
    p.add_argument("--acc-kv-heads", type=int, default=1, help="KV heads checked against fp64 (0: skip)")
    p.add_argument("--out", default="zyfa-out/bench", help="output folder for bench.csv / bench.html")
    p.add_argument("--html-from", metavar="CSV", help="only render bench.html (next to CSV) from a saved bench.csv")
    p.add_argument("--force", action="store_true", help="overwrite an existing bench.csv / bench.html")


def check_args(args: argparse.Namespace) -> tuple[list[str], list[tuple[str, AttnShape]]]:
    """Every argument checked before a GPU is looked for (so a typo is reported as one on any
    machine): the backends and shapes to run. ValueError names the argument."""
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in backends if b not in BUILDERS]
    if unknown or not backends:
        raise ValueError(f"--backends: unknown {unknown or 'empty list'}; known: {', '.join(BUILDERS)}")
    try:
        seqlens = [parse_seqlen(s) for s in args.seqlens.split(",")]
    except ValueError as exc:
        raise ValueError(f"--seqlens: {exc}") from None
    shapes = shapes_for([m.strip() for m in args.models.split(",")], seqlens, not args.non_causal)
    for name, value, low in (("--warmup-ms", args.warmup_ms, 0.0), ("--rep-ms", args.rep_ms, 1e-9)):
        if not (math.isfinite(value) and value >= low):
            raise ValueError(f"{name} must be a finite number {'>= 0' if low == 0 else '> 0'}, got {value}")
    if args.acc_kv_heads < 0:
        raise ValueError(f"--acc-kv-heads must be >= 0, got {args.acc_kv_heads}")
    check_folder(args.out, "--out")
    for name in ("bench.csv", "bench.html"):
        check_output(Path(args.out) / name, force=args.force)
    return backends, shapes


def run(args: argparse.Namespace) -> int:
    if args.html_from:
        csv_path = Path(args.html_from)
        rows = read_csv(csv_path)  # first: it refuses a folder, whose name has no suffix to replace
        html_path = check_output(csv_path.with_suffix(".html"), force=args.force, inputs=[csv_path])
        return 0 if write_html(rows, html_path) else 1
    backends, shapes = check_args(args)
    # lazy: torch (~1 s to import on the 2-core box) only when benchmarking; --html re-renders without it
    import torch
    if not torch.cuda.is_available():
        print("zyfa-bench needs a CUDA or ROCm GPU; none is visible to torch", file=sys.stderr)
        return 2
    out_dir = Path(args.out)
    sampler = NvmlSampler()
    rows: list[BenchRow] = []
    print(f"# {torch.cuda.get_device_name()}  torch {torch.__version__}", flush=True)
    for model, shape in shapes:
        x = Inputs(shape)
        ref, ref_heads = reference_fp64(x, args.acc_kv_heads) if args.acc_kv_heads > 0 else (None, 0)
        for backend in backends:
            row = measure(model, shape, backend, x, ref, ref_heads, args.warmup_ms, args.rep_ms, sampler)
            rows.append(row)
            print(format_row(row), flush=True)
        del x, ref
        torch.cuda.empty_cache()
    with atomic_path(out_dir / "bench.csv") as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
    html = write_html(rows, out_dir / "bench.html")
    print(f"wrote {out_dir / 'bench.csv'}" + (f" and {out_dir / 'bench.html'}" if html else ""))
    return 0


def format_row(r: BenchRow) -> str:
    if r.error:
        return f"{r.model:11s} {r.seqlen:6d} {r.backend:17s} ERROR {r.error}"
    return (f"{r.model:11s} {r.seqlen:6d} {r.backend:17s} {r.ms:8.3f} ms {r.tflops:7.1f} TFLOP/s "
            f"relL2 {r.rel_l2:8.2e} {r.sm_mhz:6.0f} MHz {r.power_w:5.0f} W {r.tflop_per_j:5.2f} TFLOP/J")


def main(argv: Optional[list[str]] = None) -> int:
    argv, debug = pop_debug(sys.argv[1:] if argv is None else list(argv))
    parser = Parser(prog="zyfa-bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    add_debug_flag(parser)
    args = parser.parse_args(argv)
    return guarded("zyfa-bench", lambda: run(args), debug)


if __name__ == "__main__":
    sys.exit(main())
