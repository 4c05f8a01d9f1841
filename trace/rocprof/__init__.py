"""Hardware thread traces from AMD Instinct GPUs (``zyfa.trace.rocprof``).

Two routes into trace schema v1 (``source="rocprof-att"``), both ending in ``records.py``:

* :func:`import_att_dir` reads what ``rocprofv3 --att`` already wrote to disk (any machine).
* :func:`run_kernel_trace` traces one of our kernels in this process through a ctypes binding to
  ``librocprofiler-sdk.so`` and ``librocprof-trace-decoder.so`` (MI3xx with ROCm >= 7.0 only;
  elsewhere it raises :class:`zyfa.trace.errors.TracerUnavailable`).

See README.md in this folder for the file map and how a Python process registers as a
rocprofiler-sdk tool.
"""

from zyfa.trace.rocprof.att_dir import AttFormatError, dispatch_dirs, import_att_dir
from zyfa.trace.rocprof.sdk import ThreadTraceParams
from zyfa.trace.rocprof.tracer import check_available, run_kernel_trace

__all__ = ["AttFormatError", "ThreadTraceParams", "check_available", "dispatch_dirs", "import_att_dir",
           "run_kernel_trace"]
