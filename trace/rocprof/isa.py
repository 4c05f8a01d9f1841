"""From ISA text and decoder categories to schema units (``zyfa.trace.rocprof.isa``).

rocprof-trace-decoder classifies each traced instruction by hardware pipe
(``rocprofiler_thread_trace_decoder_inst_category_t``); it reports MFMA and transcendental ops as
plain VALU. The unit therefore comes from the ISA text whenever it is known, and from the decoder
category only for instructions the disassembly does not cover. The text rules are the cycle
model's (:func:`zyfa.gfx950.isa.classify`), so a hardware trace and a model trace of one
kernel put every instruction on the same unit.
"""

from __future__ import annotations

import re

from zyfa.gfx950.isa import classify

# rocprofiler_thread_trace_decoder_inst_category_t, trace_decoder_types.h (rocprof-trace-decoder 0.1.3+,
# rocprofiler-sdk experimental/thread-trace/trace_decoder_types.h): value -> (name, schema unit)
CATEGORIES: dict[int, tuple[str, str]] = {
    0: ("NONE", "MISC"),
    1: ("SMEM", "SMEM"),
    2: ("SALU", "SALU"),
    3: ("VMEM", "VMEM"),
    4: ("FLAT", "VMEM"),  # flat addressing: global memory or LDS, the text decides
    5: ("LDS", "LDS"),
    6: ("VALU", "VALU"),  # includes MFMA and transcendentals: the text decides
    7: ("JUMP", "BRANCH"),  # branch taken
    8: ("NEXT", "BRANCH"),  # branch not taken
    9: ("IMMED", "MISC"),  # internal: s_nop, s_waitcnt, s_barrier, s_setprio ...
    10: ("CONTEXT", "MISC"),  # wave context switch
    11: ("MESSAGE", "MISC"),  # s_sendmsg
    12: ("BVH", "VMEM"),  # ray tracing (not on CDNA)
}

# mnemonic pattern -> stall_reason for an instruction that stalled before issue
_STALL_RULES: tuple[tuple[re.Pattern, str], ...] = tuple((re.compile(p), r) for p, r in (
    (r"^s_waitcnt", "waitcnt"),
    (r"^s_barrier", "barrier"),
    (r"^s_(nop|sleep)", "nop"),
))


def split_isa(text: str) -> tuple[str, str | None]:
    """``"v_add_f32 v0, v1, v2 // comment"`` -> ``("v_add_f32", "v0, v1, v2")``.

    Trailing ``//`` or ``;`` comments are dropped; an instruction without operands gets ``None``.
    """
    if not isinstance(text, str):
        raise TypeError(f"split_isa: text must be a str, got {type(text).__name__}")
    body = re.split(r"\s//|\s;", text.strip(), maxsplit=1)[0].strip()
    if not body:
        raise ValueError(f"split_isa: no instruction in {text!r}")
    parts = body.split(None, 1)
    operands = parts[1].strip() if len(parts) > 1 else None
    return parts[0].lower(), operands or None


def canonical_opcode(mnemonic: str) -> str:
    """The mnemonic as assembly spells it: without the ``_e32``/``_e64`` encoding-size suffix that
    llvm-objdump (and rocprofv3's disassembly) adds to VOP1/VOP2/VOPC ops; ``_sdwa``/``_dpp`` stay,
    they are written in assembly. The cycle model reports our kernels' opcodes in this spelling."""
    return re.sub(r"_e(32|64)$", "", mnemonic.lower())


def unit_of(opcode: str | None, category: int | None = None) -> str:
    """Schema unit of an instruction: from its mnemonic, else from its decoder category.

    Raises ValueError when neither is known (an unknown category number included).
    """
    if opcode:
        return classify(opcode)
    if category is None:
        raise ValueError("unit_of: need an opcode or a decoder category")
    if category not in CATEGORIES:
        raise ValueError(f"unit_of: unknown decoder category {category!r}; expected one of {sorted(CATEGORIES)}")
    return CATEGORIES[category][1]


def stall_reason(opcode: str | None, stall: int) -> str | None:
    """Why an instruction waited ``stall`` cycles before issue, as far as the trace tells.

    gfx9 thread trace reports only that the pipe did not accept the instruction; explicit waits
    are named after the instruction, everything else is ``unit_busy`` (the decoder's own reading
    of a stall: "the hardware pipe couldn't issue", e.g. TA or LDS back pressure).
    """
    if stall <= 0:
        return None
    for pattern, reason in _STALL_RULES:
        if opcode and pattern.match(opcode):
            return reason
    return "unit_busy"
