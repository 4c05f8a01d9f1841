"""Runs the Triton kernels in Triton's CPU interpreter on tiny shapes; prints one JSON line.

Started by test_triton_interpreter.py in a subprocess with ``TRITON_INTERPRET=1`` (the variable
must be set before triton is imported). Compares against ``spec_fp8_magic`` (a direct, per-block
transcription of docs/numerics.md, magic rounding) and the fp64 oracle backend.
"""

import importlib.util
import itertools
import json
import math
import os
from pathlib import Path

import torch

from zyfa import flash_attn_func, numerics
from zyfa.kernels.triton import attn_fp8 as attn_fp8_module
from zyfa.kernels.triton._common import FIXED_CONFIG_ENV, INTERPRET_CONFIG, TileConfig
from zyfa.kernels.triton.attn_bf16 import attention_bf16
from zyfa.kernels.triton.attn_fp8 import attention_fp8
from zyfa.kernels.triton.hadamard_fp8 import hadamard_quantize_fp8, rope_rows
from zyfa.reference import key_window

MAGIC = 12582912.0
LOG2E = 1.4426950408889634


def quantise(x, h_k):
    """(b, s, h, d) -> fp8 and (b, h_k) descale (amax over each KV head's group)."""
    b, s, h, d = x.shape
    amax = x.abs().reshape(b, s, h_k, h // h_k, d).amax(dim=(1, 3, 4)).clamp_min(1e-6)
    ds = (amax / 448).float()
    xs = x / ds.repeat_interleave(h // h_k, 1)[:, None, :, None]
    return xs.clamp(-448, 448).to(torch.float8_e4m3fn), ds


def fp8_inputs(b, sq, sk, h, hk, d, dv, seed=0, device="cuda"):
    """Gaussian q, k, v quantised per (batch, kv head): [q8, dq, k8, dk, v8, dv]."""
    g = torch.Generator(device=device).manual_seed(seed)
    q, k, v = (torch.randn(b, s, n, e, generator=g, device=device) for s, n, e in ((sq, h, d), (sk, hk, d), (sk, hk, dv)))
    return [*quantise(q, hk), *quantise(k, hk), *quantise(v, hk)]


def exact_fp8_inputs(b, sq, sk, h, hk, d, seed=0):
    """Small-integer Q, K (two outlier channels x8: a wide score range, so the running max grows and
    blocks sit below it) and V in {-1, 0, 1}, on the CPU: every fp32 partial sum of QK^T and PV is
    exact, so any accumulation order gives the emulator's bits. [q8, dq, k8, dk, v8, dv]."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(-8, 9, (b, sq, h, d), generator=g).float()
    k = torch.randint(-8, 9, (b, sk, hk, d), generator=g).float()
    k[..., :2] *= 8
    v = torch.randint(-1, 2, (b, sk, hk, d), generator=g).float()
    dq, dk, dv = (torch.rand(b, hk, generator=g) * 0.2 + 0.01 for _ in range(3))
    return [q.to(torch.float8_e4m3fn), dq, k.to(torch.float8_e4m3fn), dk, v.to(torch.float8_e4m3fn), dv]


def spec_fp8_magic(q8, k8, v8, dq, dk, dv, scale, causal):
    b, sq, h, d = q8.shape
    sk, hk, d_v = k8.shape[1], k8.shape[2], v8.shape[3]
    allowed = key_window(sq, sk, causal, (-1, -1), "cpu")
    out = torch.zeros(b, sq, h, d_v)
    lse = torch.zeros(b, h, sq)
    for bi in range(b):
        for hi in range(h):
            kv = hi // (h // hk)
            t = torch.tensor(scale * LOG2E, dtype=torch.float32) * (dq[bi, kv] * dk[bi, kv]).float()
            t8 = 8 * t
            s_all = (q8[bi, :, hi].double() @ k8[bi, :, kv].double().T).float()
            m = torch.full((sq,), -math.inf)
            l = torch.zeros(sq, dtype=torch.float64)
            acc = torch.zeros(sq, d_v, dtype=torch.float64)
            for j0 in range(0, sk, 64):
                s = torch.where(allowed[:, j0:j0 + 64], s_all[:, j0:j0 + 64], -math.inf)
                mx = s.max(1).values
                valid = mx > -math.inf
                bm = torch.where(valid, torch.ceil(t * mx), torch.zeros(()))
                c = (120 - 8 * bm) + MAGIC
                f = (s.double() * t8.double() + c.double()[:, None]).float()
                code = torch.maximum(f, torch.tensor(MAGIC)).view(torch.int32) & 0xFF
                p = code.to(torch.uint8).view(torch.float8_e4m3fn).double()
                m_new = torch.maximum(m, torch.where(valid, bm, -math.inf))
                e = bm - 8 - m_new
                sc = torch.where(valid & (e >= -127), torch.exp2(e.double()), torch.zeros((), dtype=torch.float64))
                alpha = torch.where(m_new > -math.inf, torch.exp2((m - m_new).double()), torch.ones((), dtype=torch.float64))
                acc = acc * alpha[:, None] + (p @ v8[bi, j0:j0 + 64, kv].double()) * sc[:, None]
                l = l * alpha + p.sum(1) * sc
                m = m_new
            has = l > 0
            o = torch.where(has[:, None], (acc / torch.where(has, l, 1.0)[:, None]).float() * dv[bi, kv], 0.0)
            out[:, :, hi][bi] = o
            lse[bi, hi] = torch.where(has, (m + torch.log2(torch.where(has, l, 1.0))) * math.log(2), math.inf).float()
    return out, lse


def rel_l2(a, ref):
    a, ref = a.double(), ref.double()
    return float((a - ref).norm() / ref.norm())


def main():
    torch.manual_seed(1234)
    results = {}
    fp8_cases = {  # name: (b, sq, sk, h, hk, d, dv, causal)
        "fp8_full_gqa": (1, 40, 40, 4, 2, 32, 32, False),
        "fp8_causal_sk_gt_sq": (2, 24, 90, 2, 1, 32, 32, True),
        "fp8_causal_sq_gt_sk": (1, 70, 40, 2, 2, 32, 32, True),
        "fp8_mla_like_padded": (1, 33, 33, 2, 1, 48, 32, True),
        "fp8_scaled_pv": (1, 70, 90, 2, 1, 32, 32, True),
        "fp8_rowsum_acc_in_dot": (1, 70, 90, 2, 1, 32, 32, True),
    }
    variants = {"fp8_scaled_pv": TileConfig(16, 1, 1, scaled_pv=True),
                "fp8_rowsum_acc_in_dot": TileConfig(16, 1, 1, rowsum_mma=True, acc_in_dot=True)}
    for name, (b, sq, sk, h, hk, d, d_v, causal) in fp8_cases.items():
        q, k, v = torch.randn(b, sq, h, d), torch.randn(b, sk, hk, d), torch.randn(b, sk, hk, d_v)
        q8, dq = quantise(q, hk)
        k8, dk = quantise(k, hk)
        v8, dv = quantise(v, hk)
        cfg = variants.get(name)
        out, lse = attention_fp8(q8, k8, v8, d ** -0.5, causal, dq, dk, dv, config=cfg)
        out32, _ = attention_fp8(q8, k8, v8, d ** -0.5, causal, dq, dk, dv, out_dtype=torch.float32, config=cfg)
        ref, ref_lse = spec_fp8_magic(q8, k8, v8, dq, dk, dv, d ** -0.5, causal)
        oracle, oracle_lse, _ = flash_attn_func(q8, k8, v8, causal=causal, q_descale=dq, k_descale=dk,
                                                v_descale=dv, backend="oracle", return_attn_probs=True)
        finite = torch.isfinite(ref_lse)
        results[name] = {
            "fp32_vs_spec_rel_l2": rel_l2(out32, ref),
            "bf16_vs_fp32_max_ulps": float(((out.float() - out32).abs() / out32.abs().clamp_min(1e-30)).max() * 256),
            "lse_vs_spec_max_abs": float((lse[finite] - ref_lse[finite]).abs().max()),
            "lse_inf_match": bool(torch.equal(torch.isinf(lse), torch.isinf(ref_lse))),
            "vs_fp64_rel_l2": rel_l2(out, oracle),
            "empty_rows_zero": bool((out[:, ~torch.isfinite(ref_lse[0, 0])] == 0).all()),
            "out_dtype": str(out.dtype),
        }
    # -- spec v2 vs the bit-exact emulator: "exact" inputs (small-integer Q, K; V in {-1, 0, 1}) make
    # every fp32 partial sum of QK^T and PV exact, so any accumulation order gives the emulator's bits
    for name, (b, sq, sk, h, hk, d, causal, exact) in {
        "v2_exact_causal_gqa": (1, 70, 150, 4, 2, 32, True, True),
        "v2_exact_sq_gt_sk": (1, 90, 40, 2, 1, 32, True, True),
        "v2_exact_full": (2, 33, 100, 2, 2, 32, False, True),
        "v2_gaussian_causal": (1, 70, 150, 2, 1, 32, True, False),
    }.items():
        g = torch.Generator().manual_seed(len(name))
        if exact:
            q = torch.randint(-8, 9, (b, sq, h, d), generator=g).float()
            k = torch.randint(-8, 9, (b, sk, hk, d), generator=g).float()
            k[..., :2] *= 8  # outlier channels: wide score range, so M grows and n < floor(M) occur
            v = torch.randint(-1, 2, (b, sk, hk, d), generator=g).float()
            q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
            dq = torch.rand(b, hk, generator=g) * 0.5 + 0.01
            dk = torch.rand(b, hk, generator=g) * 0.5 + 0.01
            dv = torch.rand(b, hk, generator=g) + 0.5
        else:
            q8, dq = quantise(torch.randn(b, sq, h, d, generator=g), hk)
            k8, dk = quantise(torch.randn(b, sk, hk, d, generator=g), hk)
            v8, dv = quantise(torch.randn(b, sk, hk, d, generator=g), hk)
        out32, lse = attention_fp8(q8, k8, v8, d ** -0.5, causal, dq, dk, dv, out_dtype=torch.float32,
                                   recipe="zyfa-v2")
        ref32, ref_lse = numerics.zyfa_fp8_attention(q8, k8, v8, dq, dk, dv, causal=causal, softmax_scale=d ** -0.5,
                                                     variant="zyfa-v2", out_dtype=torch.float32)
        v1_32, _ = attention_fp8(q8, k8, v8, d ** -0.5, causal, dq, dk, dv, out_dtype=torch.float32)
        finite = torch.isfinite(ref_lse)
        results[name] = {
            "fp32_bitwise_equal": bool(torch.equal(out32, ref32)),
            "fp32_vs_emulator_rel_l2": rel_l2(out32, ref32),
            "lse_vs_emulator_max_abs": float((lse[finite] - ref_lse[finite]).abs().max()),
            "lse_vs_emulator_max_ulps": float(((lse[finite] - ref_lse[finite]).abs()
                                               / (torch.nextafter(ref_lse[finite].abs(), torch.tensor(float("inf")))
                                                  - ref_lse[finite].abs())).max()),
            "lse_inf_match": bool(torch.equal(torch.isinf(lse), torch.isinf(ref_lse))),
            "v1_differs": not bool(torch.equal(v1_32, out32)),
        }
    # -- fused Hadamard + FP8 quantisation vs the torch path (quantize_fp8(hadamard(x))) ----
    for name, (b, s, h, hk, d, dtype) in {
        "hadamard_gqa_d64_fp32": (1, 37, 4, 2, 64, torch.float32),
        "hadamard_d128_bf16": (2, 20, 2, 1, 128, torch.bfloat16),
        "hadamard_d256_fp16": (1, 18, 1, 1, 256, torch.float16),
    }.items():
        g = torch.Generator().manual_seed(len(name))
        x = torch.randn(b, s, h, d, generator=g)
        x[..., :2] *= 8  # outlier channels
        x[:, 3] = 0.0    # an all-zero token: descale 1
        x[:, 7] = 0.0    # another (position 1007 below: its RoPE zeros must keep their signs, e.g. -0)
        x[:, 4, :, ::2] = -0.0  # negative zeros: their codes are 0x80 (the kernel's division keeps the sign)
        x = x.to(dtype)
        for gran in ("head", "token"):
            x8, ds = hadamard_quantize_fp8(x, gran, nheads_k=hk)
            ref8, ref_ds = numerics.quantize_fp8(numerics.hadamard(x), gran, nheads_k=hk)
            results[f"{name}_{gran}"] = {
                "codes_equal": bool(torch.equal(x8.view(torch.uint8), ref8.view(torch.uint8))),
                "descale_equal": bool(torch.equal(ds, ref_ds)),
                "dtype": str(x8.dtype),
            }
            # rotate=False: the same kernel as the FP8 quantisation alone == quantize_fp8(x)
            x8, ds = hadamard_quantize_fp8(x, gran, nheads_k=hk, rotate=False)
            ref8, ref_ds = numerics.quantize_fp8(x, gran, nheads_k=hk)
            results[f"quantise_only_{name}_{gran}"] = {
                "codes_equal": bool(torch.equal(x8.view(torch.uint8), ref8.view(torch.uint8))),
                "descale_equal": bool(torch.equal(ds, ref_ds)),
                "dtype": str(x8.dtype),
            }
            # RoPE in the same pass (tables of positions 1000.., as a later chunk of a sequence sees)
            cos, sin = numerics.rope_tables(s, d, offset=1000)
            # tables_x: the RoPE tables read in x's layout (the interpreter always clamps: CLAMP is GPU-only)
            # None: the default launch (with RoPE at d <= 128: "rows" per token, "lean" per head); run25 named
            for rot, variant in ((True, None), (False, None), (True, "tables_x"), (True, "lean"), (True, "run25")):
                x8, ds = hadamard_quantize_fp8(x, gran, nheads_k=hk, rotate=rot, cos=cos, sin=sin, variant=variant)
                r = numerics.rope(x, cos, sin)
                ref8, ref_ds = numerics.quantize_fp8(numerics.hadamard(r) if rot else r, gran, nheads_k=hk)
                results[f"rope_{'hadamard' if rot else 'quantise'}{'_' + variant if variant else ''}_{name}_{gran}"] = {
                    "codes_equal": bool(torch.equal(x8.view(torch.uint8), ref8.view(torch.uint8))),
                    "descale_equal": bool(torch.equal(ds, ref_ds)),
                    "dtype": str(x8.dtype),
                }
        # "rows", "pairs": their own kernels; without and with RoPE, rotated or not
        for variant, gran, rope, rot in itertools.product(("rows", "pairs"), ("head", "token"), (False, True),
                                                          (True, False)):
            tables = dict(cos=cos, sin=sin) if rope else {}
            x8, ds = hadamard_quantize_fp8(x, gran, nheads_k=hk, rotate=rot, variant=variant, **tables)
            r = numerics.rope(x, cos, sin) if rope else x
            ref8, ref_ds = numerics.quantize_fp8(numerics.hadamard(r) if rot else r, gran, nheads_k=hk)
            results[f"{variant}_{'rope_' * rope}{'hadamard' if rot else 'quantise'}_{name}_{gran}"] = {
                "codes_equal": bool(torch.equal(x8.view(torch.uint8), ref8.view(torch.uint8))),
                "descale_equal": bool(torch.equal(ds, ref_ds)),
                "dtype": str(x8.dtype),
            }
        for variant in (None, "tables_x", "rows"):
            y = rope_rows(x, cos, sin, variant=variant)
            results[f"rope_only{'_' + variant if variant else ''}_{name}"] = {
                "equal": bool(torch.equal(y, numerics.rope(x, cos, sin).to(dtype))), "dtype_kept": y.dtype == dtype}
    # tiny values: descales below 2^-100 take the kernel's div_rn branch, subnormal x the other one
    for gran in ("head", "token"):
        g = torch.Generator().manual_seed(7)
        x = torch.randn(1, 40, 2, 64, generator=g)
        x[:, :20] *= 2.0 ** -120   # token rows (and, per head, nothing: the group amax stays large)
        x[:, 20:, 1] *= 2.0 ** -125  # head 1: a whole tiny group for "head"
        ref8, ref_ds = numerics.quantize_fp8(numerics.hadamard(x), gran)
        for variant in (None, "rows", "pairs"):
            x8, ds = hadamard_quantize_fp8(x, gran, variant=variant)
            results[f"{variant + '_' if variant else ''}hadamard_tiny_{gran}"] = {
                "codes_equal": bool(torch.equal(x8.view(torch.uint8), ref8.view(torch.uint8))),
                "descale_equal": bool(torch.equal(ds, ref_ds)),
                "dtype": str(x8.dtype),
                "min_descale": float(ref_ds.min()),
            }
    # a NaN or inf anywhere in x: ValueError (found through the descales, no separate pass over x)
    for gran in ("head", "token"):
        for kind, value in (("nan", math.nan), ("inf", math.inf)):
            x = torch.randn(1, 33, 4, 64)
            x[0, 30, 3, 5] = value
            for variant in (None, "rows", "pairs"):
                try:
                    hadamard_quantize_fp8(x, gran, nheads_k=2, variant=variant)
                    raised = ""
                except ValueError as exc:
                    raised = str(exc)
                results[f"{variant + '_' if variant else ''}hadamard_nonfinite_{gran}_{kind}"] = {"raised": raised}
    bf16_cases = {"bf16_full_gqa": (1, 40, 40, 4, 2, 32, False), "bf16_causal_sk_gt_sq": (1, 24, 90, 2, 1, 32, True),
                  "bf16_causal_sq_gt_sk": (1, 70, 40, 2, 2, 32, True)}
    for name, (b, sq, sk, h, hk, d, causal) in bf16_cases.items():
        q, k, v = (torch.randn(b, s, n, d).bfloat16() for s, n in ((sq, h), (sk, hk), (sk, hk)))
        out, lse = attention_bf16(q, k, v, d ** -0.5, causal)
        oracle, oracle_lse, _ = flash_attn_func(q, k, v, causal=causal, backend="oracle", return_attn_probs=True)
        finite = torch.isfinite(oracle_lse)
        results[name] = {
            "vs_fp64_rel_l2": rel_l2(out, oracle),
            "bf16_rounding_rel_l2": rel_l2(oracle.bfloat16(), oracle),
            "lse_max_abs": float((lse[finite].double() - oracle_lse[finite]).abs().max()),
            "lse_inf_match": bool(torch.equal(torch.isinf(lse), torch.isinf(oracle_lse))),
            "out_dtype": str(out.dtype),
        }
    results.update(nan_cases())
    results.update(fixed_config_cases())
    results.update(nan_checks_switch())
    results.update(first_nan_keys_cases())
    results.update(sweep_cases())
    print(json.dumps(results))


def sweep_cases():
    """Every launch of benchmarks/fused_rope_quant.py's SWEEP (H200 run 33: rows per program, warps,
    maxnreg) through the wrapper against the torch path, bf16 with RoPE: 70 positions x 3 heads, so
    per token the blocks of 32-256 rows end inside the tensor or past it, per head 64 / 128 positions
    too. (The interpreter ignores warps and the register cap; the GPU run checks those bits.)"""
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "fused_rope_quant.py"
    spec = importlib.util.spec_from_file_location("fused_rope_quant", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    x = torch.randn(1, 70, 3, 64, generator=torch.Generator().manual_seed(11)).bfloat16()
    x[0, 5, 1] = 0.0  # a zero row: descale 1, RoPE makes -0
    cos, sin = numerics.rope_tables(70, 64, offset=1000)
    equal = {}
    for gran, variant, block_s, warps, cap in bench.SWEEP:
        ref8, ref_ds = numerics.quantize_fp8(numerics.hadamard(numerics.rope(x, cos, sin)), gran)
        x8, ds = hadamard_quantize_fp8(x, gran, block_s=block_s, num_warps=warps, cos=cos, sin=sin, variant=variant,
                                       maxnreg=cap)
        equal[bench.sweep_name(gran, variant, block_s, warps, cap)] = bool(
            torch.equal(x8.view(torch.uint8), ref8.view(torch.uint8)) and torch.equal(ds, ref_ds))
    return {"sweep_launches": equal}


def fixed_config_cases():
    """``ZYFA_TRITON_FIXED_CONFIG=1`` (test runs: no autotuner, the length-agnostic kernel twin) gives
    the same bits as the default launch (in the interpreter both use its one config)."""
    out = {}
    q, k, v = torch.randn(1, 70, 4, 32), torch.randn(1, 90, 2, 32), torch.randn(1, 90, 2, 32)
    (q8, dq), (k8, dk), (v8, dv) = quantise(q, 2), quantise(k, 2), quantise(v, 2)
    runs = {"fp8_v1": lambda: attention_fp8(q8, k8, v8, 32 ** -0.5, True, dq, dk, dv, out_dtype=torch.float32),
            "fp8_v2": lambda: attention_fp8(q8, k8, v8, 32 ** -0.5, True, dq, dk, dv, out_dtype=torch.float32,
                                            recipe="zyfa-v2"),
            "bf16": lambda: attention_bf16(q.bfloat16(), k.bfloat16(), v.bfloat16(), 32 ** -0.5, True)}
    for name, run in runs.items():
        default = run()
        os.environ[FIXED_CONFIG_ENV] = "1"
        try:
            fixed = run()
        finally:
            del os.environ[FIXED_CONFIG_ENV]
        out[f"fixed_config_{name}"] = {"out_equal": bool(torch.equal(fixed[0], default[0])),
                                       "lse_equal": bool(torch.equal(fixed[1], default[1]))}
    # the default launch tunes once per power-of-two bucket of the lengths: 100 x 120 falls in the bucket
    # 70 x 90 tuned above (128 x 128), so it reuses that winner untimed; same bits as an explicit config
    q2, k2, v2 = torch.randn(1, 100, 4, 32), torch.randn(1, 120, 2, 32), torch.randn(1, 120, 2, 32)
    (q8, dq), (k8, dk), (v8, dv) = quantise(q2, 2), quantise(k2, 2), quantise(v2, 2)
    before = len(attn_fp8_module._attn_fwd_fp8_bucketed.winners)
    got = attention_fp8(q8, k8, v8, 32 ** -0.5, True, dq, dk, dv, out_dtype=torch.float32)
    want = attention_fp8(q8, k8, v8, 32 ** -0.5, True, dq, dk, dv, out_dtype=torch.float32, config=INTERPRET_CONFIG)
    out["bucketed_reuse_fp8"] = {"new_buckets": len(attn_fp8_module._attn_fwd_fp8_bucketed.winners) - before,
                                 "out_equal": bool(torch.equal(got[0], want[0])),
                                 "lse_equal": bool(torch.equal(got[1], want[1]))}
    return out


def _poison(x, index, nan_code=0x7F):
    """Copy of ``x`` with NaN at ``index`` (e4m3 NaN for fp8)."""
    x = x.clone()
    if x.dtype == torch.float8_e4m3fn:
        x.view(torch.uint8)[index] = nan_code
    else:
        x[index] = math.nan
    return x


def nan_cases():
    """NaN in q, an allowed/masked key of k, and v: the kernels' NaN pattern must be the one of the
    reads rule (docs/numerics.md): the emulator's for FP8, the reference's for BF16."""
    b, sq, sk, h, hk, d = 1, 70, 90, 2, 1, 32
    out = {}
    # (tensor slot, index): q row 5; k key 50 (masked for rows < 30); v key 60 col 3 (rows < 40 masked);
    # v key 85 in the ragged last block; k key 3 read by every row
    poisons = {"q_row": (0, (0, 5, 1, 7)), "k_masked_early": (1, (0, 50, 0, 2)), "v_masked_early": (2, (0, 60, 0, 3)),
               "v_tail": (2, (0, 85, 0, 31)), "k_all": (1, (0, 3, 0, 0))}
    torch.manual_seed(7)
    q, k, v = torch.randn(b, sq, h, d), torch.randn(b, sk, hk, d), torch.randn(b, sk, hk, d)
    (q8, dq), (k8, dk), (v8, dv) = quantise(q, hk), quantise(k, hk), quantise(v, hk)
    for name, (slot, index) in poisons.items():
        for causal in (True, False):
            tensors = [q8, k8, v8]
            tensors[slot] = _poison(tensors[slot], index)
            kout, klse = attention_fp8(*tensors, d ** -0.5, causal, dq, dk, dv)
            vout, vlse = attention_fp8(*tensors, d ** -0.5, causal, dq, dk, dv, recipe="zyfa-v2")
            eout, else_, _ = flash_attn_func(*tensors, causal=causal, q_descale=dq, k_descale=dk, v_descale=dv,
                                             backend="emulator", return_attn_probs=True)
            bt = [x.bfloat16() for x in (q, k, v)]
            bt[slot] = _poison(bt[slot], index)
            bout, blse = attention_bf16(*bt, d ** -0.5, causal)
            rout, rlse, _ = flash_attn_func(*bt, causal=causal, backend="reference", return_attn_probs=True)
            out[f"nan_{name}_{'causal' if causal else 'full'}"] = {
                "fp8_out_nan_match": bool(torch.equal(torch.isnan(kout), torch.isnan(eout))),
                "fp8_lse_nan_match": bool(torch.equal(torch.isnan(klse), torch.isnan(else_))),
                "fp8_nan_count": int(torch.isnan(kout).sum()),
                "fp8_v2_nan_match": bool(torch.equal(torch.isnan(vout), torch.isnan(eout))
                                         and torch.equal(torch.isnan(vlse), torch.isnan(else_))),
                "bf16_out_nan_match": bool(torch.equal(torch.isnan(bout), torch.isnan(rout))),
                "bf16_lse_nan_match": bool(torch.equal(torch.isnan(blse), torch.isnan(rlse))),
                "bf16_nan_count": int(torch.isnan(bout).sum()),
            }
    return out


def nan_checks_switch():
    """``nan_checks=False`` (benchmarks/bench_nan_checks.py only): the same bits on finite input,
    and the rules really are gone. BF16: a NaN in V at key 60 reaches the rows < 60, which mask it.
    FP8: a NaN code in q row 5 leaves that row finite (the interpreter decodes e4m3 0x7f as 480,
    so only the kernel's bit test made it NaN)."""
    b, sq, sk, h, hk, d = 1, 70, 70, 2, 1, 32
    torch.manual_seed(11)
    q, k, v = torch.randn(b, sq, h, d), torch.randn(b, sk, hk, d), torch.randn(b, sk, hk, d)
    (q8, dq), (k8, dk), (v8, dv) = quantise(q, hk), quantise(k, hk), quantise(v, hk)
    bq, bk, bv = (x.bfloat16() for x in (q, k, v))
    runs = {"fp8": (lambda qq, vv, flag: attention_fp8(qq, k8, vv, d ** -0.5, True, dq, dk, dv, nan_checks=flag),
                    q8, v8, 0, (0, 5, 1, 7), slice(5, 6)),
            "bf16": (lambda qq, vv, flag: attention_bf16(qq, bk, vv, d ** -0.5, True, nan_checks=flag),
                     bq, bv, 1, (0, 60, 0, 3), slice(0, 60))}
    out = {}
    for name, (run, qq, vv, slot, index, rows) in runs.items():
        on, off = run(qq, vv, True), run(qq, vv, False)
        bad = [qq, vv]
        bad[slot] = _poison(bad[slot], index)
        with_checks, without = run(*bad, True)[0][0, rows], run(*bad, False)[0][0, rows]
        out[f"nan_checks_off_{name}"] = {
            "same_bits": all(torch.equal(a, b) for a, b in zip(on, off)),
            "nan_with": int(torch.isnan(with_checks).sum()),
            "nan_without": int(torch.isnan(without).sum()),
        }
    return out


def first_nan_keys_torch(k, v):
    """The torch form ``first_nan_keys`` had before its kernel (elementwise passes, argmax = the first
    of equal maxima): the reference the kernel is compared with."""
    none = attn_fp8_module.NO_NAN_KEY.value
    in_k = ((k.view(torch.uint8) & 0x7F) == 0x7F).any(-1)
    in_v = (v.view(torch.uint8) & 0x7F) == 0x7F
    return [torch.where(x.any(1), x.to(torch.uint8).argmax(1), none).to(torch.int32) for x in (in_k, in_v)]


def first_nan_keys_cases():
    """``first_nan_keys`` (one kernel, atomic min per word) against the torch form: several NaN codes
    (0x7f and 0xff) per column, ragged last key block, MLA widths, K and V not contiguous (V
    transposed in memory, K with heads outermost), no NaN at all, one key."""
    torch.manual_seed(5)
    out = {}
    for name, (b, s, hk, d, dv, density) in {"gqa": (2, 150, 3, 64, 64, 1 / 300), "mla": (1, 70, 2, 192, 128, 1 / 200),
                                             "one_key": (1, 1, 2, 32, 32, 1 / 20), "clean": (1, 90, 2, 32, 32, 0.0)}.items():
        k = torch.randn(b, hk, s, d).to(torch.float8_e4m3fn).transpose(1, 2)  # heads outermost
        v = torch.randn(b, dv, s, hk).to(torch.float8_e4m3fn).permute(0, 2, 3, 1)  # transposed: keys fastest
        for x in (k, v):
            u = x.view(torch.uint8)
            hit = torch.rand(u.shape) < density
            u[hit] = torch.where(torch.rand(u.shape) < 0.5, 0x7F, 0xFF).to(torch.uint8)[hit]
        got, want = attn_fp8_module.first_nan_keys(k, v), first_nan_keys_torch(k, v)
        out[f"first_nan_keys_{name}"] = {"equal": all(torch.equal(g, w) for g, w in zip(got, want)),
                                         "contiguous": k.is_contiguous() or v.is_contiguous(),
                                         "nan_columns": int((want[1] < attn_fp8_module.NO_NAN_KEY.value).sum())}
    return out


if __name__ == "__main__":
    main()
