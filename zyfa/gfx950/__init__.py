"""The gfx950 (CDNA4, MI350X/MI355X) machine description, at the bottom of the import stack.

Shared by the cycle model (:mod:`zyfa.trace.cdna4`), the functional emulator
(:mod:`zyfa.trace.emu`), the assembly generator (:mod:`zyfa.kernels.gfx950`) and the hardware
trace importer (:mod:`zyfa.trace.rocprof`); it imports nothing of theirs (see README.md).

- :mod:`.isa`: the asm / ``llvm-objdump`` / code-object front end (``parse_asm``,
  ``parse_objdump``, ``disassemble``, ``load_program``, ``Program``) and opcode -> unit ``classify``;
- :mod:`.timing`: the sourced opcode -> class table (passes, latencies, MFMA shapes and FLOPs),
  machine parameters and hazard rules;
- :mod:`.hazards`: wait states a producer/consumer pair needs (``required_wait_states``) and the
  static checker ``check_hazards``;
- :mod:`.scalar`: SALU semantics (scalar registers, SCC, branches).
"""

from zyfa.gfx950.hazards import Violation, check_hazards
from zyfa.gfx950.isa import (Instruction, KernelArg, KernelDescriptor, Program, classify, disassemble, load_program,
                             parse_asm, parse_objdump)

__all__ = ["Instruction", "KernelArg", "KernelDescriptor", "Program", "Violation", "check_hazards", "classify",
           "disassemble", "load_program", "parse_asm", "parse_objdump"]
