"""H200 run 21: GPU check of the NaN rule (docs/numerics.md, non-finite inputs) for the Triton kernels: the
cases of tests/zyfa/test_nonfinite.py (8 poison places x causal/non-causal) through BACKEND on DEVICE, FP8 v1
and v2 and BF16; exact NaN rows/columns and untouched bits elsewhere. Prints one line per case.

    python3 -P benchmarks/results/scripts/h200_run21_nan.py triton cuda          # on the H200 (h200_setup.sh first)
    python3 benchmarks/results/scripts/h200_run21_nan.py emulator cpu reference  # CPU smoke test of the script
"""
import sys
import torch
import zyfa
sys.path.insert(0, "tests/zyfa")
import test_nonfinite as t  # noqa: E402

backend, device = sys.argv[1], sys.argv[2]
bf16_backend = sys.argv[3] if len(sys.argv) > 3 else backend
bad = total = 0
for kind in ("fp8-v1", "fp8-v2", "bf16"):
    for causal in (True, False):
        for which, index in t.POISON:
            tensors, descales = t._fp8_inputs()
            slot = "qkv".index(which)
            if kind == "bf16":
                clean = [x.float().to(torch.bfloat16) for x in tensors]
                tensors = [x.clone() for x in clean]
                tensors[slot][index] = float("nan")
                kw = {}
            else:
                clean = list(tensors)
                tensors[slot] = t._poison(tensors[slot], index)
                kw = dict(descales, recipe="zyfa-" + kind.split("-")[1])
            mv = lambda xs: [x.to(device) for x in xs]  # noqa: E731
            kwd = {k: (v.to(device) if torch.is_tensor(v) else v) for k, v in kw.items()}
            be = bf16_backend if kind == "bf16" else backend
            out, lse, _ = zyfa.flash_attn_func(*mv(tensors), causal=causal, backend=be, return_attn_probs=True, **kwd)
            ref, ref_lse, _ = zyfa.flash_attn_func(*mv(clean), causal=causal, backend=be, return_attn_probs=True, **kwd)
            out, lse, ref, ref_lse = (x.cpu() for x in (out, lse, ref, ref_lse))
            rows, cols = t._expected(which, index, causal)
            ok = (torch.equal(torch.isnan(out[0]), cols) and torch.equal(torch.isnan(lse[0]), rows)
                  and torch.equal(out[0][~cols], ref[0][~cols]) and torch.equal(lse[0][~rows], ref_lse[0][~rows]))
            total += 1
            bad += not ok
            print(f"{kind} causal={causal} {which}{index}: {'ok' if ok else 'MISMATCH'} "
                  f"nan out {int(torch.isnan(out[0]).sum())} expected {int(cols.sum())}", flush=True)
print(f"NAN-GPU {backend} {device}: {total - bad} of {total} cases exact")
