"""The emulator's one exception type."""


class EmulationError(RuntimeError):
    """A program cannot be emulated: unknown opcode or operand, out-of-bounds memory access,
    bad kernel arguments. The message names the instruction (index, source line, text) when
    one is involved."""
