"""One policy for every command-line error: one line on stderr naming the file or argument, exit
code 2, no traceback (``--debug`` shows it); Ctrl-C is one line and exit code 130.

Each entry point parses with :class:`Parser` and runs its command through :func:`guarded`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from zyfa.trace.errors import TracerUnavailable

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C

# exceptions whose message is written for the user: shown as is (others get their type name)
_USER_ERRORS = (ValueError, TypeError, OSError, LookupError, NotImplementedError, TracerUnavailable)


class Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error (argparse prints the usage block, then the message)."""

    def error(self, message: str):
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_debug_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--debug", action="store_true",
                        help="on an error, show the full Python traceback instead of one line")


def pop_debug(argv: list[str]) -> tuple[list[str], bool]:
    """``argv`` without ``--debug`` (accepted anywhere on the line) and whether it was there."""
    return [a for a in argv if a != "--debug"], "--debug" in argv


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, _USER_ERRORS):
        return text
    return f"internal error: {type(exc).__name__}: {text} (run again with --debug for the traceback)"


def guarded(prog: str, command: Callable[[], int], debug: bool) -> int:
    """Runs ``command``; an exception becomes one stderr line and exit code 2 (130 for Ctrl-C)."""
    try:
        return int(command() or 0)
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # the CLI boundary: nothing else reaches the user as a traceback
        if debug:
            raise
        print(f"{prog}: {one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
