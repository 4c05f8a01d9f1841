#!/usr/bin/env python3
"""SASS counts of the fused RoPE + Hadamard + FP8 quantise kernels, compiled for sm_90a without a GPU.

Usage: ``python3 tools/hadamard_sass.py [--headdim 128] [--no-rope] [--granularity token] [--out DIR] [--force]
[--against DIR]``
       ``python3 tools/hadamard_sass.py --sweep [--jobs N]``  (the launches of ``fused_rope_quant.py --sweep``)

Compiles each kernel variant of ``zyfa.kernels.triton.hadamard_fp8`` (per token or, with
``--granularity head``, its two passes; RoPE tables on, bf16 input, the launch the wrapper makes) with the installed Triton (3.9 on the CPU box, 3.6 on the
H200: run it under both), disassembles the cubin with the ``nvdisasm`` the triton wheel ships, and
prints per kernel: SASS instructions per element (static count / elements per thread; the kernels
are straight-line code but for the per-row divisions' slow paths and the rare-data branches, so the
static count bounds what a thread executes on normal data from above), registers and spill bytes
(``ptxas -v``), shared-memory instructions and barriers, lane shuffles, and the largest instruction
classes. ``--out DIR`` also writes ``NAME.sass``. ``--against DIR`` compares each kernel's SASS with
``DIR/NAME.sass`` byte for byte (``same`` / ``DIFFERS`` after its line, exit 1 on a difference;
tools/sass_compare.py, as tools/hopper_sass.py): write ``--out REF`` on the old code, then run the
new code ``--against REF`` with the same options to show a change leaves the machine code as it
was. Nothing is timed: these are counts.

``--sweep``: the same counts for every launch of ``benchmarks/fused_rope_quant.py``'s ``SWEEP``
(variant, rows per program, warps, ``maxnreg`` register cap; d128, RoPE, bf16), plus the warps per
SM its registers allow (sm_90: 65536 registers per SM allocated per warp in units of 256, at most 64
warps and 32 programs; shared memory is not the limit for these kernels), i.e. whether a cap buys
occupancy and what it costs in spill bytes. ``--jobs N`` compiles N launches at once.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import multiprocessing
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas
from triton.compiler import ASTSource

from zyfa.kernels.triton import hadamard_fp8 as H

# tools/sass_compare.py: this folder is on sys.path when the tool runs as a script, not under python3 -P
# (the H200 scripts) or when a test loads it from its file
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))
from sass_compare import HELP as AGAINST_HELP, check_dir, compare  # noqa: E402

NVDISASM = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
SHARED, BARRIER, SHUFFLE = r"(LDS|STS|LDSM|STSM)\b", r"BAR\b", r"SHFL\b"  # opcode patterns for Counts.count
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
# argument types of the kernels' runtime arguments (bf16 x, fp8 codes), in order; the rest constexpr
_TYPES = {
    "_hadamard_fp8_token": ["*bf16", "*fp8e4nv", "*fp32", "*fp32", "*fp32"] + ["i32"] * 11,
    "_hadamard_fp8_token_rows": ["*bf16", "*fp8e4nv", "*fp32", "*fp32", "*fp32"] + ["i32"] * 11,
    "_hadamard_fp8_token_pairs": ["*bf16", "*fp8e4nv", "*fp32", "*fp32", "*fp32"] + ["i32"] * 11,
    "_hadamard_amax_head": ["*bf16", "*fp32", "*fp32", "*fp32"] + ["i32"] * 7,
    "_hadamard_fp8_head": ["*bf16", "*fp8e4nv", "*fp32", "*fp32", "*fp32", "*fp32"] + ["i32"] * 10,
    "_hadamard_amax_head_pairs": ["*bf16", "*fp32", "*fp32", "*fp32"] + ["i32"] * 7,
    "_hadamard_fp8_head_pairs": ["*bf16", "*fp8e4nv", "*fp32", "*fp32", "*fp32", "*fp32"] + ["i32"] * 10,
    "_hadamard_amax_head_rows": ["*bf16", "*fp32", "*fp32", "*fp32"] + ["i32"] * 7,
    "_hadamard_fp8_head_rows": ["*bf16", "*fp8e4nv", "*fp32", "*fp32", "*fp32", "*fp32"] + ["i32"] * 10,
    "_rope_kernel": ["*bf16", "*bf16", "*fp32", "*fp32"] + ["i32"] * 9,
    "_rope_rows_kernel": ["*bf16", "*bf16", "*fp32", "*fp32"] + ["i32"] * 9,
}


@dataclass(frozen=True)
class Counts:
    """What one compiled kernel does per element (static SASS) and what it holds per thread."""
    instructions: int
    elements_per_thread: int
    registers: int
    spill_bytes: int
    classes: dict[str, int]

    @property
    def per_element(self) -> float:
        return self.instructions / self.elements_per_thread

    def count(self, pattern: str) -> int:
        """Instructions whose opcode matches the regular expression ``pattern`` (from its start)."""
        return sum(n for op, n in self.classes.items() if re.match(pattern, op))


def compile_sm90(kernel: str, constexprs: dict, num_warps: int = H.NUM_WARPS, fp_fusion: bool = False,
                 maxnreg: int | None = None):
    """``triton.compile`` of hadamard_fp8's ``kernel`` for sm_90a (no GPU needed), as the wrapper
    launches it: 16-divisible pointers and strides, no FP contraction unless ``fp_fusion``."""
    fn = getattr(H, kernel)
    names = fn.arg_names
    runtime = [n for n in names if n not in constexprs]
    signature = dict(zip(runtime, _TYPES[kernel]), **{n: "constexpr" for n in names if n in constexprs})
    signature = {n: signature[n] for n in names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names)
             if signature[n].startswith("*") or n.startswith("stride")}
    src = ASTSource(fn=fn, signature=signature, constexprs=dict(constexprs), attrs=attrs)
    options = {"num_warps": num_warps, "enable_fp_fusion": fp_fusion, **({"maxnreg": maxnreg} if maxnreg else {})}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def sass(compiled) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        return subprocess.run([str(NVDISASM), "-c", str(cubin)], check=True, capture_output=True, text=True).stdout


def ptxas_usage(ptx: str) -> tuple[int, int]:
    """(registers, spill store bytes) that ptxas -v reports for sm_90a."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        out = subprocess.run([get_ptxas(90).path, "-arch=sm_90a", "-v", str(src), "-o", str(Path(tmp) / "k.cubin")],
                             capture_output=True, text=True, check=True).stderr
    return (int(re.search(r"Used (\d+) registers", out).group(1)),
            int(re.search(r"(\d+) bytes spill stores", out).group(1)))


def counts(compiled, elements_per_thread: int) -> Counts:
    classes = collections.Counter(m.group(1) for line in sass(compiled).splitlines()
                                  if (m := _INSTRUCTION.match(line)))
    registers, spills = ptxas_usage(compiled.asm["ptx"])
    return Counts(sum(classes.values()), elements_per_thread, registers, spills, dict(classes))


def kernels(d: int = 128, rope: bool = True, granularity: str = "token",
            num_warps: int = H.NUM_WARPS, block_s: int | None = None) -> dict[str, list[tuple[str, dict, int]]]:
    """name -> [(kernel, constexprs, elements per thread), ...] of the launches the wrapper makes for
    ``granularity`` (bf16 x, RoPE tables if ``rope``; per head: the amax pass, then the quantise pass):
    every variant, and (per token) the two RoPE passes alone. ``block_s``: rows per program of the
    fused kernels (default: the wrapper's at ``num_warps``; at least one row per thread)."""
    threads = 32 * num_warps
    out = {}
    for name, flags in H.VARIANTS.items():
        if flags["ROWS"]:
            form = "pairs" if flags["PAIRS"] else "rows"
            rows = block_s or (H.PAIR_ROWS_PER_WARP if flags["PAIRS"] else H.ROWS_PER_WARP) * num_warps
            const = dict(D=d, BLOCK_S=rows, ROTATE=True, ROPE=rope, WORDS=True)
            quantise = dict(const, NEG_INV_SQRT_D=-(d ** -0.5), OUT_F32=False)
            out[name] = ([(f"_hadamard_fp8_token_{form}", quantise, rows * d // threads)] if granularity == "token" else
                         [(f"_hadamard_amax_head_{form}", dict(const, INV_SQRT_D=d ** -0.5), rows * d // threads),
                          (f"_hadamard_fp8_head_{form}", quantise, rows * d // threads)])
        else:
            rows = block_s or (H.BLOCK_S_ROPE if rope else H.BLOCK_S)[granularity] * num_warps // H.NUM_WARPS
            const = dict(D=d, BLOCK_S=rows, INV_SQRT_D=d ** -0.5, ROTATE=True, ROPE=rope, TABLES_X=flags["TABLES_X"])
            quantise = dict(const, OUT_F32=False, CLAMP=flags["CLAMP"], SIGN_BITS=flags["SIGN_BITS"])
            out[name] = ([("_hadamard_fp8_token", quantise, rows * d // threads)] if granularity == "token" else
                         [("_hadamard_amax_head", const, rows * d // threads),
                          ("_hadamard_fp8_head", quantise, rows * d // threads)])
    if granularity == "token":
        rows = H.BLOCK_S["token"] * num_warps // H.NUM_WARPS
        out["rope_pass_run25"] = [("_rope_kernel", dict(D=d, BLOCK_S=rows, OUT_F32=False, TABLES_X=False),
                                   rows * d // threads)]
        rows = H.ROWS_PER_WARP * num_warps
        out["rope_pass_rows"] = [("_rope_rows_kernel", dict(D=d, BLOCK_S=rows, OUT_F32=False, WORDS=True),
                                  rows * d // threads)]
    return out


def total(launches: list[tuple[str, dict, int]], num_warps: int = H.NUM_WARPS, maxnreg: int | None = None) -> Counts:
    """Counts of a sequence of launches over the same elements: instructions and classes added,
    registers and spills the largest of them."""
    parts = [counts(compile_sm90(kernel, const, num_warps, maxnreg=maxnreg), n) for kernel, const, n in launches]
    classes = collections.Counter()
    for c in parts:
        classes.update(c.classes)
    per_thread = {c.elements_per_thread for c in parts}
    assert len(per_thread) == 1, "launches over different elements per thread"
    return Counts(sum(c.instructions for c in parts), per_thread.pop(), max(c.registers for c in parts),
                  max(c.spill_bytes for c in parts), dict(classes))


def warps_per_sm(registers: int, num_warps: int) -> int:
    """Warps of whole programs that fit an sm_90 SM by registers (65536, allocated per warp in units of
    256), at most 64 warps and 32 programs."""
    per_warp = -(-registers * 32 // 256) * 256
    programs = min(65536 // per_warp // num_warps, 64 // num_warps, 32)
    return programs * num_warps


def load_sweep() -> list[tuple]:
    """``SWEEP`` of benchmarks/fused_rope_quant.py (the launches H200 run 33 times), read from its file."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "fused_rope_quant.py"
    spec = importlib.util.spec_from_file_location("fused_rope_quant", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SWEEP


def _sweep_line(point: tuple, d: int = 128) -> str:
    granularity, variant, block_s, num_warps, maxnreg = point
    c = total(kernels(d, True, granularity, num_warps, block_s)[variant], num_warps, maxnreg)
    return (f"{granularity:<6} {variant:<6} {block_s:>5} {num_warps:>5} {str(maxnreg or '-'):>7} {c.per_element:>10.2f} "
            f"{c.registers:>5} {c.spill_bytes:>8} {warps_per_sm(c.registers, num_warps):>8}")


def sweep(jobs: int) -> int:
    """Prints the counts of every ``SWEEP`` launch (d128, RoPE on, bf16 x; per head both passes)."""
    points = load_sweep()
    print(f"triton {triton.__version__}, sm_90a, d128, RoPE on, bf16 x; static SASS per element (per head: both "
          "passes); warps/SM: what the registers allow")
    print(f"{'gran':<6} {'var':<6} {'rows':>5} {'warps':>5} {'maxnreg':>7} {'instr/elem':>10} {'regs':>5} "
          f"{'spill B':>8} {'warps/SM':>8}")
    if jobs > 1:  # fork: the workers inherit the loaded modules (Triton compiles on the CPU only)
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            lines = pool.imap(_sweep_line, points)
            for line in lines:
                print(line, flush=True)
    else:
        for point in points:
            print(_sweep_line(point), flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--headdim", type=int, default=128, choices=(16, 32, 64, 128, 256))
    ap.add_argument("--no-rope", action="store_true", help="the kernels without RoPE tables")
    ap.add_argument("--granularity", choices=H.GRANULARITIES, default="token",
                    help="per token (one kernel) or per head (amax pass + quantise pass, counted together)")
    ap.add_argument("--out", type=Path, help="also write NAME.sass here (created)")
    ap.add_argument("--force", action="store_true", help="overwrite existing NAME.sass in --out")
    ap.add_argument("--against", type=Path, metavar="DIR", help=AGAINST_HELP)
    ap.add_argument("--sweep", action="store_true",
                    help="count every launch of benchmarks/fused_rope_quant.py's SWEEP instead (d128, RoPE)")
    ap.add_argument("--jobs", type=int, default=1, help="--sweep: compile this many launches at once (default 1)")
    a = ap.parse_args(argv)
    check_dir(ap, a.against)
    if a.jobs < 1:
        ap.error(f"--jobs must be >= 1, got {a.jobs}")
    if a.sweep:
        if a.out is not None or a.against is not None or a.granularity != "token" or a.headdim != 128 or a.no_rope:
            ap.error("--sweep counts its own launches (d128, RoPE, both granularities): drop --out, --against, "
                     "--granularity, --headdim and --no-rope")
        return sweep(a.jobs)
    launches = kernels(a.headdim, not a.no_rope, a.granularity)
    if a.out is not None:
        a.out.mkdir(parents=True, exist_ok=True)
        exists = [n for n in launches if (a.out / f"{n}.sass").exists()]
        if exists and not a.force:
            ap.error(f"--out: {a.out} already holds {exists[0]}.sass (--force overwrites)")
    print(f"triton {triton.__version__}, sm_90a, per {a.granularity}, bf16 x, d{a.headdim}, "
          f"RoPE {'off' if a.no_rope else 'on'}; static SASS per element (per head: both passes)")
    print(f"{'kernel':<20} {'instr/elem':>10} {'regs':>5} {'spill B':>8} {'smem ld/st':>10} {'bar':>4} {'shfl':>5}  "
          "largest classes")
    differ = 0
    for name, parts in launches.items():
        c = total(parts)
        top = ", ".join(f"{op} {n}" for op, n in sorted(c.classes.items(), key=lambda kv: -kv[1])[:5])
        smem, bar, shfl = c.count(SHARED), c.count(BARRIER), c.count(SHUFFLE)
        line = f"{name:<20} {c.per_element:>10.2f} {c.registers:>5} {c.spill_bytes:>8} {smem:>10} {bar:>4} {shfl:>5}  {top}"
        if a.out is not None or a.against is not None:
            listing = "".join(sass(compile_sm90(k, const)) for k, const, _ in parts)
            if a.out is not None:
                (a.out / f"{name}.sass").write_text(listing)
            if a.against is not None:
                same, word = compare(listing, a.against / f"{name}.sass")
                differ += not same
                line += f"  [{word}]"
        print(line)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
