"""``zyfa-ui``: the browser schedule explorer (also ``zyfa-trace ui``).

Opens the trace files named and every ``*.parquet`` trace under each ``--trace-dir``; nothing
else on disk is served. With the CDNA4 cycle model installed the page can also simulate kernels
(what-if: softmax variant, ping-pong on/off, priority hand-over points). Binds 127.0.0.1 unless
``--host`` says otherwise.

examples:
  zyfa-ui out/zyfa-fp8.parquet out/aiter-like-fp8.parquet
  zyfa-ui --trace-dir out/ --port 8060
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("traces", nargs="*", metavar="TRACE", help="trace files (.parquet with .json sidecar) to open")
    p.add_argument("--trace-dir", action="append", default=[], metavar="DIR",
                   help="directory whose .parquet traces may be opened (repeatable)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=8050, help="port (default 8050; 0 picks a free one)")


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        print(f"zyfa-ui: --port must be in 0..65535, got {args.port}", file=sys.stderr)
        return 2
    from zyfa.webui.app import serve

    return serve(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="zyfa-ui", description=(__doc__ or "").strip().split("\n\n")[0],
                                     epilog="\n\n".join((__doc__ or "").strip().split("\n\n")[1:]),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
