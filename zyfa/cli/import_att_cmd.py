"""Import a rocprofv3 --att output directory into the zyfa trace schema.

    zyfa-trace import-att DIR -o TRACE [--dispatch N] [--kernel NAME] [--arch gfx950] [--clock-mhz F]
                          [--program KERNEL.s|KERNEL.co|NAME [--headdim D] [--dtype fp8|bf16]]

DIR is a ``ui_output_agent_<agent>_dispatch_<id>`` directory or the rocprofv3 output directory
holding it (capture with ``rocprofv3 --att -d DIR -- <app>`` on an MI3xx). Writes TRACE.parquet
and TRACE.json; the trace is hardware data (source rocprof-att), cycles in shader clocks.
An existing TRACE is kept unless --force; TRACE may not lie inside DIR (the capture is input).
Wave-file names in filenames.json are confined to the dispatch directory.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from zyfa.gfx950.isa import load_program
from zyfa.kernels.registry import get_kernel
from zyfa.shapes import AttnShape
from zyfa.trace.rocprof import import_att_dir
from zyfa.trace.rocprof.records import RegionMap
from zyfa.trace.rocprof.timing import model_mfma_cycles
from zyfa.trace.safeio import SafeIOError, check_output
from zyfa.trace.schema import Trace


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("directory", metavar="DIR", help="rocprofv3 --att output (or one ui_output_agent_* dir)")
    p.add_argument("-o", "--output", required=True, metavar="TRACE", help="output stem (writes .parquet + .json)")
    p.add_argument("--force", action="store_true", help="overwrite an existing TRACE")
    p.add_argument("--dispatch", type=int, default=None, help="dispatch id, when DIR holds several")
    p.add_argument("--kernel", default=None, help="kernel name to record (default: from occupancy.json)")
    p.add_argument("--arch", default=None, help="gfx target (default: from the *_code_object_id_*.out names)")
    p.add_argument("--clock-mhz", type=float, default=None, help="shader clock of the capture, if known")
    p.add_argument("--program", default=None, metavar="PATH|KERNEL",
                   help="the kernel's .s or code object, or a registered kernel name (zyfa-fp8 ...): fills "
                        "region/iteration from its schedule clusters or labels, as the cycle model does")
    p.add_argument("--headdim", type=int, default=128, help="head dim of a registered --program kernel (default 128)")
    p.add_argument("--dtype", choices=("fp8", "bf16"), default=None,
                   help="dtype of a registered --program kernel (default: the kernel's own)")


def _check_outputs(args: argparse.Namespace) -> None:
    """Every refusal before the capture is read: TRACE inside DIR or equal to --program, or existing."""
    capture = Path(args.directory).resolve()
    inputs = [args.program] if args.program and Path(args.program).exists() else []
    for out in Trace.files(args.output):
        if out.resolve().is_relative_to(capture):
            raise SafeIOError(out, f"is inside the capture directory {args.directory} (an input); write the trace "
                                   "elsewhere")
        check_output(out, force=args.force, inputs=inputs)


def run(args: argparse.Namespace) -> int:
    _check_outputs(args)
    regions = None if args.program is None else _regions(args)
    trace = import_att_dir(args.directory, dispatch=args.dispatch, kernel=args.kernel, arch=args.arch,
                           clock_mhz=args.clock_mhz, mfma_cycles=model_mfma_cycles(), regions=regions,
                           provenance={"command": " ".join(sys.argv)})
    path = trace.save(args.output)
    extra = trace.meta.extra
    print(f"{trace.meta.kernel} ({trace.meta.arch}, {trace.meta.label}): {len(trace)} records from "
          f"{extra['waves']} waves, {extra['unmapped_records']} without a code address -> {path}")
    print(f"MFMA end: {extra['mfma_end']}")
    return 0


def _regions(args):
    """RegionMap of ``--program``: a .s/.co file (labels), else a registered kernel built for its head
    dim (its schedule clusters, as the cycle model uses them)."""
    if Path(args.program).suffix in (".s", ".co", ".hsaco", ".o", ".elf"):
        if not Path(args.program).is_file():
            raise FileNotFoundError(f"--program {args.program}: no such file (give the kernel's .s or code object, "
                                    "or a registered kernel name)")
        return RegionMap.from_program(load_program(args.program))
    spec = get_kernel(args.program)
    return RegionMap.from_build(spec.build(AttnShape(headdim=args.headdim, headdim_v=args.headdim,
                                                     dtype=args.dtype or spec.dtype)))

