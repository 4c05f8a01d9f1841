"""``zyfa-trace``: trace, analyse and compare attention-kernel schedules.

Subcommands are modules of :mod:`zyfa.cli` loaded on demand, so ``zyfa-trace --help`` stays fast
and a subcommand whose dependencies are missing fails alone, with a message.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from zyfa.cli.errors import Parser, add_debug_flag, guarded, pop_debug

# name -> (module in zyfa.cli, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "kernel": ("kernel_cmd", "run a kernel through a tracer (default: the CDNA4 cycle model) and summarise it"),
    "analyze": ("analyze_cmd", "compute pipeline metrics of a saved trace (optionally against another)"),
    "export": ("export_cmd", "export a saved trace (Perfetto/Chrome trace-event JSON, CSV)"),
    "import-att": ("import_att_cmd", "import a rocprofv3 --att output directory into the trace schema"),
    "accuracy": ("accuracy_main", "FP8 accuracy study: error of each ZYFA ingredient vs fp64"),
    "fidelity": ("fidelity_cmd", "published MI355X TFLOP/s vs the cycle model's prediction (with its predicted clock)"),
    "sweep": ("sweep_cmd", "schedule design-space sweep over the cycle model (Ray)"),
    "ui": ("ui_main", "open the browser schedule explorer"),
    "demo": ("demo_cmd", "run flash_attn_func on the reference backend and check it against fp64"),
}


def build_parser(command: str | None = None) -> tuple[argparse.ArgumentParser, dict[str, object]]:
    """The top-level parser. Only ``command``'s module is imported (its options added), so
    ``zyfa-trace kernel`` never imports the UI or torch-heavy subcommands."""
    parser = Parser(
        prog="zyfa-trace",
        description=(
            "Trace-driven pipeline analysis of FP8/BF16 attention kernels for AMD CDNA4 (gfx950). "
            "Without an MI355X the tracer is the CDNA4 cycle model: its outputs are simulated."
        ),
    )
    add_debug_flag(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules: dict[str, object] = {}
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        if name != command:
            sub.add_parser(name, help=help_text, add_help=False)
            continue
        module = importlib.import_module(f"zyfa.cli.{module_name}")
        p = sub.add_parser(name, help=help_text, description=(module.__doc__ or help_text).strip(),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        modules[name] = module
    return parser, modules


def main(argv: list[str] | None = None) -> int:
    """Errors anywhere end as one stderr line naming the file/argument, exit code 2 (``--debug``,
    accepted anywhere on the line, shows the traceback); Ctrl-C prints one line, exit code 130."""
    argv, debug = pop_debug(sys.argv[1:] if argv is None else list(argv))
    command = next((a for a in argv if not a.startswith("-")), None)
    parser, modules = build_parser(command if command in SUBCOMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return guarded(f"zyfa-trace {args.command}", lambda: modules[args.command].run(args), debug)


if __name__ == "__main__":
    sys.exit(main())
