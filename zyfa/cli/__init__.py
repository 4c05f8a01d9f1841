"""Command-line entry points. Each ``zyfa-trace`` subcommand lives in its own module here and
exposes ``add_arguments(parser)`` and ``run(args) -> int``; see :mod:`zyfa.cli.trace_main`."""
