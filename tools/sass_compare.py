"""Byte-for-byte comparison of SASS listings with a reference folder, for the tools' ``--against DIR``.

Shared by ``tools/hopper_sass.py`` and ``tools/hadamard_sass.py``: write the SASS of the old code
once (``OUT``), then run the tool on the new code ``--against OUT``; every kernel is reported
``same``, ``DIFFERS`` or ``(no reference)`` and the tool exits 1 unless all are ``same``. No side
effects on import (the tools import it from their own folder).
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "compare with DIR/NAME.sass; exit 1 on a difference"


def check_dir(ap: argparse.ArgumentParser, against: Path | None) -> None:
    """Exit through ``ap.error`` (one line naming --against) unless ``against`` is None or a folder."""
    if against is not None and not against.is_dir():
        ap.error(f"--against: {against} is not a folder")


def compare(sass: str, ref: Path) -> tuple[bool, str]:
    """Whether the listing ``sass`` equals the file ``ref`` byte for byte, and the word to print:
    ``same``, ``DIFFERS``, or ``(no reference)`` (a missing file counts as a difference)."""
    same = ref.is_file() and ref.read_text() == sass
    return same, "same" if same else ("DIFFERS" if ref.is_file() else "(no reference)")
