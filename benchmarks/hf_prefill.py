"""End-to-end prefill of a transformers causal LM with zyfa attention vs sdpa: accuracy and time.

    python3 benchmarks/hf_prefill.py [--seqlen 8192] [--preset llama3-8b-2l] [--impls sdpa zyfa zyfa-fp8]
                                     [--reps 5] [--csv out.csv]

The model is a randomly initialised Llama (transformers' model code, no weights downloaded: see
``zyfa.integrations.transformers.random_llama``); ``--preset`` picks its attention shape. Every
implementation runs the same model on the same token ids; the first in ``--impls`` is the
reference. Per implementation: logits relative L2, top-1 agreement and mean per-token KL vs the
reference, and the prefill time (one forward of the whole sequence, no KV cache kept): median of
``--reps`` after two warm-up calls (CUDA events on a GPU, ``perf_counter`` on the CPU). "fa3" and
"fa3-fp8" (FlashAttention-3 through the same adapter, FP8 with the same Hadamard + quantisation)
exist where the fa3-fwd wheel is installed; an implementation that is not available is reported
as skipped. Random
weights give near-uniform attention and near-tied logits: read top-1 as a weak signal.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

from zyfa.integrations.transformers import attention_function, compare_logits, random_llama
from zyfa.timing import elapsed_s

try:  # optional: FlashAttention-3 from the fa3-fwd wheel, for "fa3" / "fa3-fp8" (same adapter as zyfa's)
    from fa3_fwd_interface import flash_attn_func as fa3_flash_attn_func
except ImportError:
    fa3_flash_attn_func = None
if fa3_flash_attn_func is not None:
    for _name, _fp8 in (("fa3", False), ("fa3-fp8", True)):
        AttentionInterface.register(_name, attention_function(fa3_flash_attn_func, fp8=_fp8))
        AttentionMaskInterface.register(_name, flash_attention_mask)

PRESETS = {
    # the attention shape of Llama-3-8B (32 query heads, 8 KV heads, head dim 128), 2 layers, 32k vocab
    "llama3-8b-2l": dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                         head_dim=128, num_hidden_layers=2, vocab_size=32000),
    # random_llama's default: 4 layers, hidden 512, 8/2 heads of 64 (CPU-sized)
    "small": {},
}


def prefill_ms(model, ids, reps: int) -> float:
    """Median ms of ``reps`` timed prefills, after two untimed ones (compile, autotune, allocator)."""
    prefill = lambda: model(ids, use_cache=False)  # noqa: E731
    elapsed_s(prefill, 2, ids.is_cuda)
    return statistics.median(1e3 * elapsed_s(prefill, 1, ids.is_cuda) for _ in range(reps))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seqlen", type=int, default=8192, help="prompt tokens (default 8192)")
    p.add_argument("--preset", choices=sorted(PRESETS), default="llama3-8b-2l", help="model shape")
    p.add_argument("--impls", nargs="+", default=["sdpa", "zyfa", "zyfa-fp8"],
                   help="attn_implementation names; the first is the reference (default: sdpa zyfa zyfa-fp8)")
    p.add_argument("--dtype", choices=["bfloat16", "float32"], default=None,
                   help="model dtype (default: bfloat16 on a GPU, float32 on the CPU)")
    p.add_argument("--reps", type=int, default=5, help="timed calls per implementation (default 5)")
    p.add_argument("--csv", help="also write the table to this CSV file")
    args = p.parse_args(argv)
    if args.seqlen < 1 or args.reps < 1:
        p.error("--seqlen and --reps must be >= 1")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, args.dtype or ("bfloat16" if device == "cuda" else "float32"))
    model = random_llama(dtype=dtype, device=device, **PRESETS[args.preset])
    ids = torch.randint(0, model.config.vocab_size, (1, args.seqlen), device=device,
                        generator=torch.Generator(device=device).manual_seed(0))
    rows, reference = [], None
    with torch.no_grad():
        for impl in args.impls:
            if impl.startswith("fa3") and fa3_flash_attn_func is None:
                print(f"impl={impl}: skipped (fa3_fwd_interface not importable)", flush=True)
                continue
            model.set_attn_implementation(impl)
            logits = model(ids, use_cache=False).logits.float()
            ms = prefill_ms(model, ids, args.reps)
            if reference is None:
                reference, ref_ms = logits, ms
            row = dict(impl=impl, reference=args.impls[0], seqlen=args.seqlen, preset=args.preset,
                       dtype=str(dtype).removeprefix("torch."), device=torch.cuda.get_device_name() if device == "cuda"
                       else "cpu", prefill_ms=round(ms, 3), time_vs_reference=round(ms / ref_ms, 3),
                       **{k: float(f"{v:.4g}") for k, v in compare_logits(logits, reference).items()})
            rows.append(row)
            print(", ".join(f"{k}={v}" for k, v in row.items()), flush=True)
            del logits
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
