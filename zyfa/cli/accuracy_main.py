"""Placeholder entry point: replaced by its issue's implementation."""

import sys


def add_arguments(p):
    pass


def run(args):
    print("accuracy: not yet available in this build", file=sys.stderr)
    return 1


def main(argv=None):
    return run(None)
