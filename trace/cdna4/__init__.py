"""CDNA4 (gfx950) cycle model: runs real gfx950 code on a simulated MI355X CU (see README.md).

Front end (:mod:`.isa`): ``parse_asm``, ``parse_objdump``, ``disassemble``, ``Program``.
Static checks (:mod:`.hazards`): ``check_hazards``. Tracer (:mod:`.tracer`): ``run_kernel_trace``.
Outputs are simulated, never measured.
"""

from zyfa.trace.cdna4.hazards import Violation, check_hazards
from zyfa.trace.cdna4.isa import (Instruction, KernelArg, KernelDescriptor, Program, classify, disassemble, load_program,
                                  parse_asm, parse_objdump)

__all__ = ["Instruction", "KernelArg", "KernelDescriptor", "Program", "Violation", "check_hazards", "classify",
           "disassemble", "load_program", "parse_asm", "parse_objdump"]
