"""Functional (value) emulation of gfx950 code (see README.md in this folder).

Entry points: :func:`emulate_kernel` (a registered attention kernel vs ``zyfa.numerics``),
:func:`launch` (any kernel with an ``.amdgpu_metadata`` argument list, on host arrays),
:func:`run_snippet` (a few instructions on one wave).
"""

from zyfa.trace.emu.attention import emulate_kernel
from zyfa.trace.emu.errors import EmulationError
from zyfa.trace.emu.launch import launch
from zyfa.trace.emu.machine import run_snippet
from zyfa.trace.emu.result import EmulationResult, make_inputs

__all__ = ["EmulationError", "EmulationResult", "emulate_kernel", "launch", "make_inputs",
           "run_snippet"]
