"""``zyfa-ui``: the browser schedule explorer (also ``zyfa-trace ui``).

Opens the trace files named and every ``*.parquet`` trace under each ``--trace-dir``; nothing
else on disk is served. With the CDNA4 cycle model installed the page can also re-simulate
kernels with other generator parameters (what-if: softmax variant, P scaling, ping-pong on/off),
and with no trace given it starts from the comparisons ``zyfa-trace kernel`` makes by default
(zyfa.kernels.baseline.default_pairs: ZYFA vs AITER's own code objects where the amd-aiter wheel
has them, and zyfa-fp8 vs aiter-like-fp8, our reconstruction of AITER's FP8 kernel), simulated at --shape.
Binds 127.0.0.1 unless --host says otherwise.

examples:
  zyfa-ui out/zyfa-fp8.parquet out/aiter-like-fp8.parquet
  zyfa-ui --trace-dir out/ --port 8060
  zyfa-ui --shape 4k            # no trace: simulate zyfa-trace kernel's default pairs at 4k first
"""

from __future__ import annotations

import argparse
import sys

from zyfa.cli.errors import Parser, add_debug_flag, guarded, pop_debug
from zyfa.shapes import parse_seqlen


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("traces", nargs="*", metavar="TRACE", help="trace files (.parquet with .json sidecar) to open")
    p.add_argument("--trace-dir", action="append", default=[], metavar="DIR",
                   help="directory whose .parquet traces may be opened (repeatable)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1, this machine only)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="another host name the page may be reached by (repeatable); requests naming any other "
                        "host in their Host or Origin header are refused (DNS rebinding)")
    p.add_argument("--port", type=int, default=8050, help="port (default 8050; 0 picks a free one)")
    p.add_argument("--shape", default="1k", metavar="SEQLEN",
                   help="sequence length of the start-up simulation when no trace is given (default 1k; b1 h1 d128)")
    p.add_argument("--no-simulate", dest="simulate", action="store_false",
                   help="with no trace given, start empty instead of simulating zyfa-trace kernel's default pairs")


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        print(f"zyfa-ui: --port must be in 0..65535, got {args.port}", file=sys.stderr)
        return 2
    try:
        args.seqlen = parse_seqlen(args.shape)
    except ValueError as exc:
        print(f"zyfa-ui: --shape: {exc}", file=sys.stderr)
        return 2
    # lazy: zyfa.webui.app (Dash, plotly) takes ~1.8 s to import on the 2-core box (measured);
    # --help and argument errors answer without it
    from zyfa.webui.app import serve

    return serve(args)


def main(argv: list[str] | None = None) -> int:
    argv, debug = pop_debug(sys.argv[1:] if argv is None else list(argv))
    parser = Parser(prog="zyfa-ui", description=(__doc__ or "").strip().split("\n\n")[0],
                    epilog="\n\n".join((__doc__ or "").strip().split("\n\n")[1:]),
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    add_debug_flag(parser)
    args = parser.parse_args(argv)
    return guarded("zyfa-ui", lambda: run(args), debug)  # Ctrl-C during the start-up simulation: one line


if __name__ == "__main__":
    sys.exit(main())
