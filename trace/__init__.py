"""Tracers that all emit one trace schema (``zyfa.trace``): the CDNA4 cycle model, rocprofiler
thread trace and Triton Proton. Installed as ``zyfa.trace``, never as a top-level ``trace``."""
