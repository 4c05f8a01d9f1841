"""A/B of spec v2 before and after its refinement for bit-exact backends (issue 20, third session):
the pre-refinement zyfa.numerics (per-64-key running max, correctly rounded alpha in one FMA,
correctly rounded scores) loaded from git beside the current one, both run on the same quantised
inputs of each zyfa-accuracy source. Prints total / kernel-only rel. L2 and LSE bias of each, and
how many output bits the refinement changed.

    python benchmarks/results/scripts/v2_refinement_ab.py [--rev 3d07fcb]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import torch

import zyfa
from zyfa import numerics
from zyfa.cli import accuracy_main

REPO = Path(__file__).resolve().parents[3]
SOURCES = {"gaussian": dict(seqlen=4096, queries=512, heads=2), "outliers": dict(seqlen=4096, queries=512, heads=2),
           "llm": dict(seqlen=8192, queries=512, heads=1), "smollm2": dict(seqlen=1024, queries=128),
           "real": dict(seqlen=512)}


def numerics_at(rev: str):
    """zyfa/numerics.py of git revision ``rev`` as a module (its backend registration is undone)."""
    src = subprocess.run(["git", "show", f"{rev}:zyfa/numerics.py"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(f"numerics_{rev}", loader=None))
    exec(compile(src, f"numerics_{rev}.py", "exec"), module.__dict__)
    importlib.reload(numerics)  # the current module registers the "emulator" backend again
    return module


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="3d07fcb", help="a revision before the refinement (default %(default)s)")
    parser.add_argument("--sources", default=",".join(SOURCES))
    args = parser.parse_args(argv)
    before = numerics_at(args.rev)
    print(f"{'source':<9} {'spec v2':<8} {'rel_l2':>10} {'kernel':>10} {'lse_bias':>9}   out bits changed")
    for source in args.sources.split(","):
        config = accuracy_main.StudyConfig(source=source, **SOURCES[source])
        q, k, v = accuracy_main.make_inputs(config)
        if config.queries:
            q = q[:, -config.queries:].contiguous()
        ref = zyfa.flash_attn_func(q, k, v, causal=True, backend="oracle")
        q8, k8, v8, dq, dk, dv = accuracy_main._quantised(q, k, v, accuracy_main.RECIPES["zyfa-v2"])
        deq = [accuracy_main._dequantised(a, b) for a, b in ((q8, dq), (k8, dk), (v8, dv))]
        own, own_lse, _ = zyfa.flash_attn_func(*deq, causal=True, backend="oracle", return_attn_probs=True)
        outs = {}
        for name, module in (("before", before), ("after", numerics)):
            out, lse = module.zyfa_fp8_attention(q8, k8, v8, dq, dk, dv, causal=True, variant="zyfa-v2")
            outs[name] = out
            finite = torch.isfinite(own_lse)
            bias = float((lse.double() - own_lse)[finite].mean())
            changed = "" if name == "before" else (
                f"{100 * float((out.view(torch.int16) != outs['before'].view(torch.int16)).double().mean()):.2f} %")
            print(f"{source:<9} {name:<8} {accuracy_main._rel_l2(out, ref):>10.4e} {accuracy_main._rel_l2(out, own):>10.4e} "
                  f"{bias:>+9.4f}   {changed}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
