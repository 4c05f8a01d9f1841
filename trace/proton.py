"""Triton Proton intra-kernel traces of the Triton FP8 kernel, converted to the trace schema.

The FP8 kernel (:mod:`zyfa.kernels.triton.attn_fp8`) compiled with ``proton_scopes=True`` records
three Proton scopes per key block in every sampled warp: ``qk`` (the QK^T tensor-core product),
``softmax`` (max, Lean P codes, scales) and ``pv`` (the PV product and the rescale). Proton's
``instrumentation`` backend stores each scope's start/end clock per warp and writes a Chrome
trace-event file; :func:`trace_from_chrome` turns it into a :class:`zyfa.trace.schema.Trace`.

Mapping to schema v1 (docs/trace-schema.md), one row per recorded scope instance:
``cu`` = SM id, ``simd`` = warp group (warp // 4), ``wave`` = CTA id * 32 + warp id (unique on the
SM even when several CTAs share it), ``slot`` = warp within its group, ``opcode`` = ``region`` =
scope name, ``unit`` = ``REGION``, ``issue`` = ``start`` = scope entry and ``end`` = scope exit in
Proton's counter ticks relative to the earliest record (see Timestamps), ``stall`` = 0,
``iteration`` = index of that scope among the warp's records (the key block, counted per warp;
Proton's circular buffer may have dropped the earliest ones when it filled).
Null: ``pc``, ``operands``, ``stall_reason`` (Proton records no instructions and no stalls).

Timestamps: Proton writes ``ts``/``dur`` in microseconds computed from its per-warp cycle counter
with a nominal frequency (``args["Frequency (MHz)"]``); we undo that division, so cycles here are
the counter's ticks. ``clock_mhz`` in the metadata is the SM clock NVML read right after capture.

Caveat (Proton documents it): Triton's compiler pipelines and reorders the loop, so a scope's
interval is where its markers landed in the scheduled code, not a hardware unit's busy time; the
phase fractions below are *region* fractions. Instrumentation overhead is measured, not assumed
(``capture`` times the kernel with and without scopes in the same process).
"""

from __future__ import annotations

import gzip
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from zyfa.shapes import AttnShape
from zyfa.trace.errors import TracerUnavailable
from zyfa.trace.schema import Trace, TraceError, TraceMeta

SCOPES = ("qk", "softmax", "pv")
TENSOR_CORE_SCOPES = ("qk", "pv")
WARPS_PER_GROUP = 4  # a Hopper warp group: 4 consecutive warps issue one wgmma together
_INT = re.compile(r"(\d+)")


@dataclass(frozen=True)
class ProtonConfig:
    """How to capture: launch tile, which warps Proton samples, its per-CTA buffer.

    ``sampled_warps``: warp ids Proton records (``selective`` sampling); default one warp per
    warp group of an 8-warp program. ``buffer_size``: bytes per CTA, 0 = Proton's default.
    """

    block_m: int = 128
    num_warps: int = 8
    num_stages: int = 2
    sampled_warps: tuple[int, ...] = (0, 4)
    buffer_size: int = 0

    def __post_init__(self):
        if not self.sampled_warps:
            raise ValueError("ProtonConfig.sampled_warps must name at least one warp")
        bad = [w for w in self.sampled_warps if not 0 <= w < self.num_warps]
        if bad:
            raise ValueError(f"ProtonConfig.sampled_warps {bad} outside 0..{self.num_warps - 1}")
        if self.buffer_size < 0:
            raise ValueError(f"ProtonConfig.buffer_size must be >= 0, got {self.buffer_size}")

    @property
    def mode(self) -> str:
        warps = ",".join(str(w) for w in self.sampled_warps)
        mode = f"default:sampling_strategy=selective:sampling_options={warps}"
        return mode + (f":buffer_size={self.buffer_size}" if self.buffer_size else "")


# -- Chrome trace -> schema ----
_CORE = re.compile(r"Core(\d+)")
_CTA = re.compile(r"CTA(\d+)")
_WARP = re.compile(r"warp (\d+)")
MAX_WARPS = 32  # warps per CTA at most (1024 threads): wave = CTA * MAX_WARPS + warp


def _event_location(ev: dict) -> tuple[int, int, int]:
    """(sm, cta, warp) of one Proton event: ``pid`` = "<kernel> Core<sm> CTA<cta>", ``tid`` = "warp <w> ..."."""
    pid, tid = str(ev.get("pid", "")), str(ev.get("tid", ""))
    core, cta, warp = _CORE.search(pid), _CTA.search(pid), _WARP.search(tid)
    if core is None or warp is None:
        raise ValueError(f"Proton event without 'Core<n>' in pid / 'warp <n>' in tid: pid={pid!r} tid={tid!r}")
    return int(core.group(1)), int(cta.group(1)) if cta else 0, int(warp.group(1))


def records_from_chrome(events: list[dict]) -> list[dict]:
    """Schema records from Proton's complete ("X") scope events.

    Proton writes ``ts``/``dur`` in microseconds computed as cycles / ``args["Frequency (MHz)"]``
    (a nominal 1000 MHz, not the SM clock), so cycles = us * that frequency, exactly.
    """
    rows = [ev for ev in events if ev.get("ph") == "X" and ev.get("name") in SCOPES]
    if not rows:
        return []

    def cycles(ev, key):
        return float(ev[key]) * float((ev.get("args") or {}).get("Frequency (MHz)", 1000.0))

    t0 = min(cycles(ev, "ts") for ev in rows)
    seen: dict[tuple[int, int, int, str], int] = {}
    out = []
    for ev in sorted(rows, key=lambda e: (_event_location(e), float(e["ts"]))):
        sm, cta, warp = _event_location(ev)
        start = int(round(cycles(ev, "ts") - t0))
        end = start + max(0, int(round(cycles(ev, "dur"))))
        key = (sm, cta, warp, ev["name"])
        iteration = seen.get(key, 0)
        seen[key] = iteration + 1
        out.append(dict(cu=sm, simd=warp // WARPS_PER_GROUP, wave=cta * MAX_WARPS + warp, slot=warp % WARPS_PER_GROUP,
                        pc=None, opcode=ev["name"], operands=None, unit="REGION", issue=start, start=start,
                        end=end, stall=0, stall_reason=None, iteration=iteration, region=ev["name"]))
    return out


def trace_from_chrome(path: str | Path, meta_fields: dict, clock_mhz: Optional[float] = None):
    """Reads a Proton Chrome trace file (``.gz`` too) into a :class:`zyfa.trace.schema.Trace` (source "proton").

    ``clock_mhz``: the SM clock during the capture (converts cycles to time; None if unknown).
    """
    path = Path(path)
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        data = json.loads(raw)
    except (OSError, EOFError, gzip.BadGzipFile, json.JSONDecodeError) as exc:
        raise TraceError(path, "traceEvents", f"cannot read Proton Chrome trace: {exc}") from exc
    events = data["traceEvents"] if isinstance(data, dict) else data
    try:
        records = records_from_chrome(events)
    except (KeyError, TypeError, ValueError) as exc:
        raise TraceError(path, "traceEvents", f"malformed Proton event: {exc}") from exc
    if not records:
        raise TraceError(path, "traceEvents", f"no complete events named {SCOPES}")
    meta = TraceMeta(source="proton", clock_mhz=clock_mhz, simulated=False, **meta_fields)
    return Trace.from_records(records, meta)


# -- analyzer-facing metrics ----
def _intervals(df, group: tuple[int, int], scopes) -> np.ndarray:
    sel = df[(df["cu"] == group[0]) & (df["simd"] == group[1]) & df["opcode"].isin(list(scopes))]
    return np.stack([sel["start"].to_numpy(np.int64), sel["end"].to_numpy(np.int64)], axis=1) if len(sel) \
        else np.zeros((0, 2), np.int64)


def _union_length(iv: np.ndarray) -> int:
    if len(iv) == 0:
        return 0
    iv = iv[np.argsort(iv[:, 0])]
    total, cur_s, cur_e = 0, int(iv[0, 0]), int(iv[0, 1])
    for s, e in iv[1:]:
        if s > cur_e:
            total += cur_e - cur_s
            cur_s, cur_e = int(s), int(e)
        else:
            cur_e = max(cur_e, int(e))
    return total + cur_e - cur_s


def _intersection_length(a: np.ndarray, b: np.ndarray) -> int:
    """Length of (union of a) intersected with (union of b)."""
    def merged(iv):
        if len(iv) == 0:
            return []
        iv = iv[np.argsort(iv[:, 0])]
        out = [[int(iv[0, 0]), int(iv[0, 1])]]
        for s, e in iv[1:]:
            if s > out[-1][1]:
                out.append([int(s), int(e)])
            else:
                out[-1][1] = max(out[-1][1], int(e))
        return out
    ma, mb = merged(a), merged(b)
    i = j = total = 0
    while i < len(ma) and j < len(mb):
        lo, hi = max(ma[i][0], mb[j][0]), min(ma[i][1], mb[j][1])
        total += max(0, hi - lo)
        if ma[i][1] < mb[j][1]:
            i += 1
        else:
            j += 1
    return total


def phase_cycles(trace) -> pd.DataFrame:
    """Per scope: count, mean and median length (end - start, counter ticks) over all warps."""
    df = trace.df
    length = (df["end"] - df["start"]).astype("int64")
    stats = length.groupby(df["opcode"]).agg(["count", "mean", "median"])
    return stats.reindex([s for s in SCOPES if s in stats.index]).reset_index(names="scope")


def tensor_core_phase_busy(trace) -> pd.DataFrame:
    """Per (SM, warp group): fraction of the group's recorded span spent in tensor-core scopes.

    ``span`` = last scope end - first scope start of that (cu, simd); ``busy`` = length of the
    union of its ``qk`` and ``pv`` intervals; ``busy_fraction`` = busy / span.
    """
    df = trace.df
    rows = []
    for (cu, simd), g in df.groupby(["cu", "simd"], sort=True):
        span = int(g["end"].max() - g["start"].min())
        busy = _union_length(_intervals(df, (cu, simd), TENSOR_CORE_SCOPES))
        rows.append(dict(cu=int(cu), simd=int(simd), span=span, busy=busy,
                         busy_fraction=busy / span if span > 0 else float("nan")))
    return pd.DataFrame(rows)


def tensor_core_overlap(trace) -> pd.DataFrame:
    """Per SM with >= 2 warp groups: how much tensor-core work of one group overlaps the other's softmax.

    For groups 0 and 1 of an SM: ``overlap`` = length of (union of group 0's qk/pv) intersected
    with (union of group 1's softmax) plus the same with the groups swapped; ``overlap_fraction``
    = overlap / (total softmax length of both groups): 1.0 means every softmax cycle of one group
    ran while the other group was inside a tensor-core scope (perfect ping-pong).
    """
    df = trace.df
    rows = []
    for cu, g in df.groupby("cu", sort=True):
        groups = sorted(int(s) for s in g["simd"].unique())
        if len(groups) < 2:
            continue
        a, b = groups[0], groups[1]
        tc_a, tc_b = _intervals(df, (cu, a), TENSOR_CORE_SCOPES), _intervals(df, (cu, b), TENSOR_CORE_SCOPES)
        sm_a, sm_b = _intervals(df, (cu, a), ("softmax",)), _intervals(df, (cu, b), ("softmax",))
        overlap = _intersection_length(tc_a, sm_b) + _intersection_length(tc_b, sm_a)
        softmax = _union_length(sm_a) + _union_length(sm_b)
        rows.append(dict(cu=int(cu), groups=f"{a},{b}", overlap=overlap, softmax=softmax,
                         overlap_fraction=overlap / softmax if softmax > 0 else float("nan")))
    return pd.DataFrame(rows)


# -- capture on a GPU ----
def _require_gpu() -> None:
    try:
        # lazy: optional GPU dependencies, and torch alone takes ~1 s to import (2-core box)
        import torch
        import triton  # noqa: F401
    except ImportError as exc:
        raise TracerUnavailable(f"the Proton tracer needs torch and triton ({exc}); "
                                "use the default CDNA4 cycle model (--backend model) instead") from exc
    if not torch.cuda.is_available():
        raise TracerUnavailable("the Proton tracer needs a CUDA or ROCm GPU and torch sees none; "
                                "use the default CDNA4 cycle model (--backend model), which runs on any CPU")


def _fp8_problem(shape: AttnShape, seed: int):
    # lazy: torch (~1 s to import on the 2-core box) only when capturing on a GPU
    import torch

    from zyfa.numerics import quantize_fp8  # lazy: imports torch
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dims = ((shape.seqlen_q, shape.heads, shape.headdim), (shape.seqlen_k, shape.heads_k, shape.headdim),
            (shape.seqlen_k, shape.heads_k, shape.headdim_v))
    q, k, v = (torch.randn(shape.batch, s, h, d, generator=gen, device="cuda", dtype=torch.bfloat16) for s, h, d in dims)
    return [quantize_fp8(x, nheads_k=shape.heads_k) for x in (q, k, v)]


def capture(shape: AttnShape, out_dir: str | Path, config: ProtonConfig = ProtonConfig(),
            timing_shape: Optional[AttnShape] = None, seed: int = 0) -> dict:
    """Runs the FP8 kernel with Proton scopes once under a ``data="trace"`` session (Chrome trace
    ``<out_dir>/proton.chrome_trace``), then measures the scopes' overhead on ``timing_shape``
    (default ``shape``): median ms of the plain and the scoped kernel inside one instrumentation
    session (``data="tree"``), and of the plain kernel with no session. Needs a GPU.
    """
    _require_gpu()
    # lazy: the GPU capture's optional dependencies (torch ~1 s to import; triton, which the Triton
    # kernel modules import at their top)
    import torch
    import triton
    import triton.profiler as proton
    import triton.profiler.language as pl

    from zyfa.kernels.triton._common import TileConfig  # lazy: imports triton
    from zyfa.kernels.triton.attn_fp8 import attention_fp8  # lazy: imports triton

    if hasattr(pl, "enable_semantic"):  # Proton instruments only Gluon kernels unless asked
        pl.enable_semantic("triton")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tile = TileConfig(config.block_m, config.num_warps, config.num_stages)

    def caller(problem_shape: AttnShape):
        (q8, dq), (k8, dk), (v8, dv) = _fp8_problem(problem_shape, seed)
        return lambda scopes: attention_fp8(q8, k8, v8, problem_shape.headdim ** -0.5, problem_shape.causal,
                                            dq, dk, dv, config=tile, proton_scopes=scopes)[0]

    call = caller(shape)
    plain = call(False)
    proton.start(str(out_dir / "proton"), data="trace", backend="instrumentation", mode=config.mode)
    scoped = call(True)
    torch.cuda.synchronize()
    proton.finalize()
    timed = caller(timing_shape or shape)
    timed(False)
    ms_no_session = triton.testing.do_bench(lambda: timed(False), return_mode="median")
    proton.start(str(out_dir / "overhead"), data="tree", backend="instrumentation", mode=config.mode)
    ms_plain = triton.testing.do_bench(lambda: timed(False), return_mode="median")
    ms_scoped = triton.testing.do_bench(lambda: timed(True), return_mode="median")
    proton.finalize()
    clock = float("nan")
    try:
        import pynvml  # lazy: optional dependency (extra [gpu]: nvidia-ml-py)
        pynvml.nvmlInit()
        clock = float(pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM))
    except Exception:  # NVML missing: the clock stays unknown (NaN)
        pass
    return dict(chrome_trace=str(out_dir / "proton.chrome_trace"), clock_mhz=clock, shape=str(shape),
                timing_shape=str(timing_shape or shape), ms_no_session=ms_no_session, ms_plain=ms_plain,
                ms_scoped=ms_scoped, overhead=ms_scoped / ms_plain - 1.0,
                outputs_equal=bool(torch.equal(plain, scoped)), mode=config.mode,
                date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


def run_kernel_trace(kernel: str, shape: AttnShape, out_dir: str | Path,
                     config: Optional[ProtonConfig] = None):
    """Captures a Proton trace of ``kernel`` (``triton-fp8``) on this GPU and returns it as a Trace.

    Raises :class:`zyfa.trace.errors.TracerUnavailable` without a GPU (the message points to the
    default CDNA4 cycle model) and ``ValueError`` for kernels without Proton scopes.
    """
    if kernel != "triton-fp8":
        raise ValueError(f"kernel {kernel!r} has no Proton scopes; the Proton tracer supports 'triton-fp8'")
    _require_gpu()
    import torch  # lazy: torch (~1 s to import) only when capturing on a GPU
    cfg = config or ProtonConfig()
    info = capture(shape, out_dir, cfg)
    if not Path(info["chrome_trace"]).is_file():
        raise TracerUnavailable(f"Proton wrote no Chrome trace at {info['chrome_trace']}")
    fields = dict(kernel=kernel, arch=f"sm_{''.join(map(str, torch.cuda.get_device_capability()))}",
                  shape={f: getattr(shape, f) for f in shape.__dataclass_fields__},
                  grid=(shape.batch * shape.heads, -(-shape.seqlen_q // cfg.block_m), 1),
                  workgroup_size=cfg.num_warps * 32,
                  provenance={"tool": "triton.profiler (proton) instrumentation", "date": info["date"],
                              "mode": info["mode"]},
                  extra={k: info[k] for k in ("ms_no_session", "ms_plain", "ms_scoped", "overhead", "timing_shape")})
    clock = info["clock_mhz"]
    return trace_from_chrome(info["chrome_trace"], fields, clock if clock == clock else None)
