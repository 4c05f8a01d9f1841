"""CDNA4 (gfx950) cycle model: runs real gfx950 code on a simulated MI355X CU (see README.md).

Launch (:mod:`.launch`): a kernel's build -> ``Launch``; per-CU simulation (:mod:`.sim`);
whole-kernel estimate (:mod:`.estimate`); tracer (:mod:`.tracer`): ``run_kernel_trace``. The
machine it simulates (asm front end, opcode table, hazards, SALU semantics) is
:mod:`zyfa.gfx950`. Outputs are simulated, never measured.
"""
