"""A model of the H200's FP8 wgmma accumulator, to ask how many 128-key tiles zyfa-grouped may keep in it.

The Hopper kernel's PV GEMM accumulates in the tensor core (``wgmma`` fp8, k = 32 keys per step) with
fewer bits than fp32. Two published observations, neither with the rounding rule: DeepSeek-V3's report
(arXiv:2412.19437, section 3.3.2: FP8 GEMM accumulation on H800 "limited to retaining around 14 bits")
and SageAttention2 (arXiv:2411.10958: the FP8 ``mma`` accumulator is FP22, 1 sign, 8 exponent and 13
mantissa bits). This script is a MODEL, not a measurement: every k-step adds 32 exact products to the
accumulator with ``--bits`` mantissa bits kept (guess: 13, SageAttention2's figure), by one of two
guessed rules:

  sum   the exact sum of the accumulator and the 32 products, truncated (toward zero) to ``bits``
        bits below its own leading bit;
  align every term (the accumulator and each product) truncated to ``bits`` bits below the leading bit
        of the largest term, then summed exactly (the alignment Fasi et al. found in earlier tensor
        cores, "Numerical behavior of NVIDIA tensor cores", PeerJ CS 2021; for Hopper FP8 a guess).

S = QK^T is taken exact (as the emulator does), so this isolates the PV accumulation; with
``--model-s`` S goes through the same modelled accumulator too (d = 128: four k-steps of 32 channels),
as in the kernel. The row sum is a column of ones,
as in the kernel. Recipes: ``t128`` = zyfa-grouped G=1 (= v1 with 128-key blocks), ``runmax`` = one
group over all keys, ``gG``. Inputs as ``benchmarks/results/scripts/hopper_tile_accuracy.py`` (run 28:
b1 h2 s16384 d128 causal, seed 0, Gaussian and LLM-like with a 10-nat sink, last 512 query rows), so
each row sits beside run 28's measured "kernel vs its emulator" (t128 4.09e-3 / 8.75e-3, runmax 3.43e-1
/ 5.05e-2). The exact-accumulation path of this script is checked against ``zyfa.numerics``
(``--check``).

Usage: python3 benchmarks/wgmma_accumulator_model.py [--bits 13] [--rule sum|align] [--recipes t128,g4,g8,runmax]
       [--last 512] [--sources gaussian,llm] [--model-s] [--check]
"""

from __future__ import annotations

import argparse
import math

import torch

from zyfa import numerics
from zyfa.activations import llm_like_qkv

B, S, H, D = 1, 16384, 2, 128
TILE, KSTEP = 128, 32
RUN28 = {("gaussian", "t128"): 4.09e-3, ("llm", "t128"): 8.75e-3,
         ("gaussian", "runmax"): 3.43e-1, ("llm", "runmax"): 5.05e-2}  # H200 run 28, accuracy.log


def inputs(source: str):
    if source == "llm":
        return llm_like_qkv(B, S, H, H, D, seed=0)
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(B, S, H, D, generator=g) for _ in range(3))


def truncate(x: torch.Tensor, lead: torch.Tensor, bits: int) -> torch.Tensor:
    """``x`` truncated toward zero to a multiple of 2^(lead - bits) (``lead``: exponent of a leading bit)."""
    q = torch.ldexp(torch.ones_like(x), (lead - bits).to(torch.int32))
    return torch.trunc(x / q) * q


def lead_exp(x: torch.Tensor) -> torch.Tensor:
    """Exponent of the leading bit of ``x`` (x = m 2^e, m in [0.5, 1): e - 1); -1000 for 0 (below every
    value here, and 2^(-1000 - bits) is still a float64 normal: truncating 0 gives 0, not 0/0)."""
    _, e = torch.frexp(x)
    return torch.where(x == 0, torch.full_like(e, -1000), e - 1)


def kstep(acc: torch.Tensor, prods: torch.Tensor, bits: int | None, rule: str) -> torch.Tensor:
    """acc (R, C) + the 32 products prods (R, 32, C), float64; ``bits`` None: exact."""
    if bits is None:
        return acc + prods.sum(1)
    if rule == "sum":
        s = acc + prods.sum(1)
        return truncate(s, lead_exp(s), bits)
    lead = torch.maximum(lead_exp(acc), lead_exp(prods).amax(1))
    return truncate(acc, lead, bits) + truncate(prods, lead[:, None], bits).sum(1)


def scores(q, k, bits: int | None, rule: str, model_s: bool) -> torch.Tensor:
    """S = q k^T in fp32 (rows, keys): exactly rounded, or (``model_s``) through the modelled accumulator
    in k-steps of 32 channels."""
    if not model_s or bits is None:
        return (q @ k.T).float()
    acc = torch.zeros(q.shape[0], k.shape[0], dtype=torch.float64)
    for c0 in range(0, q.shape[1], KSTEP):
        prods = q[:, None, c0:c0 + KSTEP] * k[None, :, c0:c0 + KSTEP]  # (rows, keys, 32)
        acc = kstep(acc, prods.transpose(1, 2), bits, rule)
    return acc.float()


def run(q8, k8, v8, dq, dk, dv, last: int, group: int, bits: int | None, rule: str, model_s: bool = False):
    """zyfa-grouped (block 128, ``group`` tiles per group, magic rounding) over the last ``last`` query
    rows of every head; the group accumulator (and with ``model_s`` S) by the model, everything else in
    fp32 as the kernel."""
    outs = []
    for h in range(H):
        t = torch.tensor(D ** -0.5, dtype=torch.float32) * torch.tensor(numerics.LOG2E_F32, dtype=torch.float32)
        t = t * (dq[0, h] * dk[0, h])
        q = q8[0, S - last:, h].double()
        k = k8[0, :, h].double()
        v = torch.cat([v8[0, :, h].double(), torch.ones(S, 1, dtype=torch.float64)], 1)  # ones column: l
        rows = torch.arange(S - last, S)
        o = torch.zeros(last, D + 1, dtype=torch.float32)   # fp32 O, units 2^(m - 8)
        m = torch.full((last,), -math.inf, dtype=torch.float32)
        acc = torch.zeros(last, D + 1, dtype=torch.float64)  # the group accumulator, units 2^(gm - 8)
        gm = torch.full((last,), -math.inf, dtype=torch.float32)
        for j in range(S // TILE):
            if j % group == 0 and j:
                o, m = merge(o, m, acc, gm)
                acc.zero_(), gm.fill_(-math.inf)
            keys = torch.arange(j * TILE, (j + 1) * TILE)
            allowed = keys[None, :] <= rows[:, None]
            s = scores(q, k[keys], bits, rule, model_s).masked_fill(~allowed, -math.inf)
            bm = torch.ceil(t * s.amax(1))
            gm_new = torch.maximum(gm, bm)
            grew = gm_new > gm
            f = torch.where(gm - gm_new >= numerics.PV_SCALE_MIN_EXP, torch.exp2((gm - gm_new).double()), 0.0)
            acc = torch.where(grew[:, None], (acc.float() * f.float()[:, None]).double(), acc)  # fp32 rescale
            gm = gm_new
            code = numerics.lean_p_code(s, 8.0 * t, gm[:, None], "magic").masked_fill(~allowed, 0)
            p = code.to(torch.uint8).view(torch.float8_e4m3fn).double()
            for k0 in range(0, TILE, KSTEP):
                prods = p[:, k0:k0 + KSTEP, None] * v[keys[k0:k0 + KSTEP]][None]
                acc = kstep(acc, prods, bits, rule)
            acc = acc.float().double()  # the accumulator is an fp32 register
        o, m = merge(o, m, acc, gm)
        outs.append((o[:, :D] / o[:, D:]) * dv[0, h])
    return torch.stack(outs, 1)  # (last, H, D)


def merge(o, m, acc, gm):
    """O = O 2^(m - m_new) + acc 2^(gm - m_new), m_new = max(m, gm), one fp32 rounding (pow2 scales)."""
    m_new = torch.maximum(m, gm)
    a = torch.where(m > -math.inf, torch.exp2((m - m_new).double()), 0.0)
    b = torch.where(gm > -math.inf, torch.exp2((gm - m_new).double()), 0.0)
    return (o.double() * a[:, None] + acc * b[:, None]).float(), m_new


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bits", type=int, default=13, help="mantissa bits kept by the modelled accumulator (13)")
    ap.add_argument("--rule", choices=("sum", "align"), default="align")
    ap.add_argument("--recipes", default="t128,g4,g8,runmax", help="t128, runmax or gG (G tiles per group)")
    ap.add_argument("--last", type=int, default=512, help="query rows (the last ones; default 512)")
    ap.add_argument("--sources", default="gaussian,llm")
    ap.add_argument("--model-s", action="store_true", help="S = QK^T through the modelled accumulator too")
    ap.add_argument("--check", action="store_true", help="also check the exact path against zyfa.numerics")
    a = ap.parse_args()
    groups = {}
    for r in a.recipes.split(","):
        if r == "t128":
            groups[r] = 1
        elif r == "runmax":
            groups[r] = S // TILE
        elif r.startswith("g") and r[1:].isdigit() and int(r[1:]) > 0:
            groups[r] = int(r[1:])
        else:
            ap.error(f"--recipes: unknown recipe {r!r} (t128, runmax or gG)")
    if not 0 < a.last <= S:
        ap.error(f"--last must be in [1, {S}], got {a.last}")
    print(f"MODEL (not a measurement): {a.bits} mantissa bits, rule {a.rule}, k-step {KSTEP}; "
          f"S {'modelled' if a.model_s else 'exact'}; "
          f"b{B} h{H} s{S} d{D} causal, last {a.last} rows")
    for source in a.sources.split(","):
        q, k, v = inputs(source)
        (q8, dq), (k8, dk), (v8, dv) = (numerics.quantize_fp8(x, nheads_k=H) for x in (q, k, v))
        for name, g in groups.items():
            exact = run(q8, k8, v8, dq, dk, dv, a.last, g, None, a.rule)
            if a.check:
                emu, _ = numerics.zyfa_fp8_attention(q8[:, -a.last:], k8, v8, dq, dk, dv, causal=True,
                                                     softmax_scale=D ** -0.5, variant="zyfa-grouped",
                                                     rounding="magic", block=TILE, group=g, out_dtype=torch.float32)
                print(f"  check {source} {name}: exact path vs zyfa.numerics rel. L2 {rel(exact, emu[0]):.2e}")
            model = run(q8, k8, v8, dq, dk, dv, a.last, g, a.bits, a.rule, a.model_s)
            seen = RUN28.get((source, name))
            print(f"{source:8s} {name:7s} G={g:3d}: modelled accumulation vs exact {rel(model, exact):.3e}"
                  + (f"  (run 28, H200, kernel vs its emulator: {seen:.2e})" if seen else ""), flush=True)


if __name__ == "__main__":
    main()
