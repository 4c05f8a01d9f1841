"""Exceptions shared by all tracers."""


class TracerUnavailable(RuntimeError):
    """A tracer cannot run on this machine (no GPU, no ROCm, no Triton ...).

    The message says what was looked for and what to use instead (usually the default
    ``--backend model``, the CDNA4 cycle model, which runs on any CPU).
    """
