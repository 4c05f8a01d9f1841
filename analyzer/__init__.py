"""Pure metric functions over traces (``zyfa.analyzer``).

Every metric is a function ``(trace, window="whole")`` whose docstring defines it; scalar metrics
are registered in :data:`METRICS`, table metrics in :data:`TABLES` (name -> :class:`Metric`), so
the CLI and the web UI iterate them. Windows: ``"whole"``, ``"steady"`` (:func:`steady_window`),
``(start, end)`` or ``"start:end"`` in cycles.

Modules: ``arrays`` (the cached numpy form of a trace), ``intervals`` (vectorised interval
arithmetic), ``window``, ``metrics``, ``tables`` (flops per MFMA, per-arch sizes, opcode classes,
with sources), ``report`` (table/markdown/CSV/JSON rendering), ``perfetto`` (trace-event export).
"""

from zyfa.analyzer.metrics import (METRICS, TABLES, Metric, blocks, compare, cycles, cycles_by_region,
                                   handover_gap_histogram, handover_gap_mean, handover_gaps, handovers, issue_per_wave,
                                   issue_utilisation,
                                   mfma_busy, mfma_busy_per_simd, mfma_flops_total, mfma_idle, pingpong_overlap,
                                   pingpong_overlap_per_simd, pingpong_overlap_per_wave, simds, stall_breakdown,
                                   stall_fraction, summary, tflops, tflops_device, trans_cycles_per_block,
                                   trans_ops_per_block, unknown_mfma_opcodes, valu_by_class, valu_cycles_per_block,
                                   valu_ops_per_block, waves)
from zyfa.analyzer.window import Window, resolve_window, steady_window, whole_window

__all__ = [
    "METRICS", "TABLES", "Metric", "Window", "blocks", "compare", "cycles", "cycles_by_region",
    "handover_gap_histogram",
    "handover_gap_mean", "handover_gaps", "handovers", "issue_per_wave", "issue_utilisation", "mfma_busy",
    "mfma_busy_per_simd", "mfma_flops_total", "mfma_idle", "pingpong_overlap", "pingpong_overlap_per_simd",
    "pingpong_overlap_per_wave", "resolve_window", "simds", "stall_breakdown", "stall_fraction", "steady_window",
    "summary", "tflops", "tflops_device", "trans_cycles_per_block", "trans_ops_per_block", "unknown_mfma_opcodes",
    "valu_by_class", "valu_cycles_per_block", "valu_ops_per_block", "waves", "whole_window",
]
