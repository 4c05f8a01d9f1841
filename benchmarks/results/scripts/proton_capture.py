"""Captures a Proton trace of the FP8 kernel (b1 h4 s2048 d128 causal) into the folder argv[1]
(raw Chrome trace + schema Parquet/JSON), prints busy/overlap metrics, and measures the scopes'
overhead at b1 h32 s16k d128 causal."""

import json
import sys

import torch

from zyfa.shapes import AttnShape
from zyfa.trace import proton

out = sys.argv[1]
shape = AttnShape(batch=1, heads=4, heads_k=4, seqlen_q=2048, seqlen_k=2048, headdim=128, headdim_v=128, causal=True)
timing = shape.with_(heads=32, heads_k=32, seqlen_q=16384, seqlen_k=16384)
info = proton.capture(shape, out, timing_shape=timing)
print(json.dumps(info, indent=1))
json.dump(info, open(f"{out}/capture.json", "w"), indent=1)
fields = dict(kernel="triton-fp8", arch="sm_%d%d" % torch.cuda.get_device_capability(),
              shape={f: getattr(shape, f) for f in shape.__dataclass_fields__},
              provenance={"command": "python3 -P benchmarks/results/scripts/proton_capture.py OUT", "date": info["date"],
                          "tool": "triton.profiler instrumentation, " + info["mode"]}, extra=info)
t = proton.trace_from_chrome(info["chrome_trace"], fields, info["clock_mhz"])
t.save(f"{out}/triton-fp8-proton")
print(t)
print(proton.tensor_core_phase_busy(t).describe().to_string())
print(proton.tensor_core_overlap(t).describe().to_string())
