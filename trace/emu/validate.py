"""Print the emulator's validation matrix (``python -m zyfa.trace.emu.validate``).

Every row is measured when this runs: Triton AOT gfx950 kernels against float64 torch results,
then the generated kernels against ``zyfa.numerics``. Metrics: ``exact`` = fraction of output
elements bit-identical to the reference; ``max_err`` = largest absolute difference; for GEMMs
``max_err/bound`` = largest ratio of the error to the fp32 chain bound
``n_mfma * 2^-24 * (|A| @ |B|)`` (<= 1 passes).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from zyfa.kernels import aiter, registry
from zyfa.shapes import AttnShape
from zyfa.trace.emu import formats as F
from zyfa.trace.emu import triton_refs as T
from zyfa.trace.emu.aiter_fwd import emulate_aiter
from zyfa.trace.emu.attention import emulate_kernel
from zyfa.trace.emu.launch import launch


def _gemm_rows():
    torch.manual_seed(1)
    for dtype, bk in (("bf16", 64), ("fp8e4nv", 128)):
        b = T.gemm_build(dtype, bk=bk)
        m = n = 64
        k = 2 * bk
        tdt = torch.bfloat16 if dtype == "bf16" else torch.float8_e4m3fn
        view = torch.uint16 if dtype == "bf16" else torch.uint8
        a, bb = torch.randn(m, k).to(tdt), torch.randn(k, n).to(tdt)
        c = launch(b.asm, (m // 32, n // 32, 1), (64 * b.num_warps, 1, 1),
                   [a.view(view).numpy(), bb.view(view).numpy(), np.zeros((m, n), np.float32),
                    m, n, k, k, n, n]).arrays[2]
        ref = (a.double() @ bb.double()).numpy()
        bound = (k // (16 if dtype == "bf16" else 64)) * 2.0**-24 * \
            (a.double().abs() @ bb.double().abs()).numpy()
        yield (f"triton gemm {dtype} {m}x{n}x{k}", float((c == ref.astype(np.float32)).mean()),
               float(np.abs(c - ref).max()), float((np.abs(c - ref) / bound).max()))


def run_scaled_gemm(build, fmt: str, m: int, n: int, k: int, rng: np.random.RandomState):
    """One Triton ``tl.dot_scaled`` GEMM (``build`` from :func:`triton_refs.gemm_scaled_build`) in
    the emulator on random ``fmt`` operands (e4m3 without NaN codes, or packed e2m1) with random
    E8M0 scales. Returns (emulated C, float64 reference, fp32 chain bound)."""
    if fmt == "e4m3":
        a = rng.randint(0, 256, (m, k)).astype(np.uint8)
        bb = rng.randint(0, 256, (k, n)).astype(np.uint8)
        a[(a & 0x7F) == 0x7F] = 0  # no NaN codes
        bb[(bb & 0x7F) == 0x7F] = 0
        av, bv = F.E4M3[a].astype(np.float64), F.E4M3[bb].astype(np.float64)
    else:
        a = rng.randint(0, 256, (m, k // 2)).astype(np.uint8)
        bb = rng.randint(0, 256, (k // 2, n)).astype(np.uint8)
        av = np.stack([F.E2M1[a & 15], F.E2M1[a >> 4]], 2).reshape(m, k).astype(np.float64)
        bv = np.stack([F.E2M1[bb & 15], F.E2M1[bb >> 4]], 1).reshape(k, n).astype(np.float64)
    sa = rng.randint(120, 135, (m, k // 32)).astype(np.uint8)
    sb = rng.randint(120, 135, (n, k // 32)).astype(np.uint8)
    a_s = av * np.repeat(2.0 ** (sa.astype(int) - 127), 32, 1)
    b_s = bv * np.repeat(2.0 ** (sb.astype(int) - 127), 32, 1).T
    c = launch(build.asm, (1, 1, 1), (64 * build.num_warps, 1, 1),
               [a, sa, bb, sb, np.zeros((m, n), np.float32), m, n, k]).arrays[4]
    return c, a_s @ b_s, (k // 64) * 2.0**-24 * (np.abs(a_s) @ np.abs(b_s))


def _scaled_rows():
    rng = np.random.RandomState(2)
    m = n = 32
    k = 256
    for fmt in ("e4m3", "e2m1"):
        c, ref, bound = run_scaled_gemm(T.gemm_scaled_build(fmt), fmt, m, n, k, rng)
        yield (f"triton dot_scaled {fmt} {m}x{n}x{k}", float((c == ref.astype(np.float32)).mean()),
               float(np.abs(c - ref).max()), float((np.abs(c - ref) / bound).max()))


def _attention_rows():
    for bh, s, d, causal, bm, bn in ((2, 128, 64, True, 64, 32), (1, 256, 128, False, 128, 64)):
        b = T.attn_build(s, d, bm, bn, causal)
        torch.manual_seed(3)
        q, k, v = (torch.randn(bh, s, d).to(torch.bfloat16) for _ in range(3))
        raw = [x.view(torch.uint16).numpy() for x in (q, k, v)]
        res = launch(b.asm, (s // bm, bh, 1), (64 * b.num_warps, 1, 1),
                     [*raw, d ** -0.5, np.zeros((bh, s), np.float32),
                      np.zeros((bh, s, d), np.uint16), *([s * d, d] * 4)])
        out = torch.from_numpy(res.arrays[4].view(np.int16)).view(torch.bfloat16).double()
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.double(), k.double(), v.double(), is_causal=causal, scale=d ** -0.5)
        same = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                scale=d ** -0.5).double()
        yield (f"triton attention bh{bh} s{s} d{d} {'causal' if causal else 'full'}", None,
               float((out - ref).abs().max()), float((same - ref).abs().max()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqlen", type=int, nargs="+", default=[256, 300])
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--skip-triton", action="store_true")
    parser.add_argument("--skip-aiter", action="store_true",
                        help="skip AITER's code objects (needs the amd-aiter wheel locally; the FP8 "
                             "ones a ROCm/aiter checkout in ZYFA_AITER_DIR)")
    args = parser.parse_args(argv)
    print(f"{'case':<48} {'exact':>8} {'max_err':>10} {'extra':>12}")
    if not args.skip_triton:
        for name, exact, err, extra in (*_gemm_rows(), *_scaled_rows()):
            print(f"{name:<48} {exact:>8.4f} {err:>10.3g} {extra:>12.3g}  (max_err/bound)")
        for name, _, err, torch_err in _attention_rows():
            print(f"{name:<48} {'':>8} {err:>10.3g} {torch_err:>12.3g}  (torch bf16 sdpa max_err)")
    for kernel in ("zyfa-fp8", "zyfa-fp8-v1", "zyfa-fp8-v2", "zyfa-fp8-valu-rowsum", "zyfa-fp8-exact", "aiter-like-fp8", "zyfa-bf16"):
        for s in args.seqlen:
            shape = AttnShape(batch=1, heads=args.heads, heads_k=args.heads, seqlen_q=s,
                              seqlen_k=s, dtype=registry.get_kernel(kernel).dtype)
            r = emulate_kernel(kernel, shape)
            print(f"{kernel + ' ' + str(shape):<48} {r.bitwise_fraction:>8.4f} "
                  f"{r.max_abs_err:>10.3g} {r.max_lse_err:>12.3g}  (lse max_err; "
                  f"{r.lds_conflict_cycles} LDS conflict cycles, {r.seconds:.1f} s)")
    if not args.skip_aiter:
        names = ["fwd_hd128_bf16_causal", "fwd_hd128_bf16"]
        try:  # the FP8 objects only from a ROCm/aiter checkout (ZYFA_AITER_DIR)
            aiter.resolve("fwd_hd128_fp8_causal")
            names += ["fwd_hd128_fp8_causal", "fwd_hd128_fp8"]
        except (aiter.AiterUnavailable, ValueError) as exc:
            print(f"(AITER FP8 objects skipped: {str(exc).splitlines()[0][:120]})")
        for name in names:
            spec = registry.spec_of(f"aiter:{name}")  # dtype and mask from AITER's selector table
            for s in args.seqlen:
                shape = spec.fit(AttnShape(batch=1, heads=1, heads_k=1, seqlen_q=s, seqlen_k=s))
                r = emulate_aiter(name, shape)
                print(f"{'aiter:' + name + ' s' + str(s):<48} {r.bitwise_fraction:>8.4f} "
                      f"{r.max_abs_err:>10.3g} {r.max_lse_err:>12.3g}  (lse max_err; "
                      f"{r.seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
