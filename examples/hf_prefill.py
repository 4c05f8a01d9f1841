"""A transformers model with zyfa attention: prefill with "zyfa"/"zyfa-fp8" vs "sdpa" (random weights)."""
import torch

import zyfa.integrations.transformers as zt  # registers attn_implementation "zyfa" and "zyfa-fp8"

device = "cuda" if torch.cuda.is_available() else "cpu"
model = zt.random_llama(dtype=torch.bfloat16 if device == "cuda" else torch.float32, device=device)
ids = torch.randint(0, model.config.vocab_size, (1, 4096 if device == "cuda" else 256), device=device)
logits = {}
for impl in ("sdpa", "zyfa", "zyfa-fp8"):
    model.set_attn_implementation(impl)
    with torch.no_grad():
        logits[impl] = model(ids).logits
for impl in ("zyfa", "zyfa-fp8"):
    print(impl, "vs sdpa:", zt.compare_logits(logits[impl], logits["sdpa"]))
