"""``zyfa-ui``: the browser schedule explorer."""

from __future__ import annotations

import argparse
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("traces", nargs="*", help="trace files to open")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8050)


def run(args: argparse.Namespace) -> int:
    try:
        from zyfa.webui.app import serve
    except ModuleNotFoundError:
        print("zyfa-ui: the schedule explorer is not available in this build yet", file=sys.stderr)
        return 1
    return serve(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="zyfa-ui", description="Browser schedule explorer for zyfa traces.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
