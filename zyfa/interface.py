"""Public attention entry point, FlashAttention-2/3 compatible.

Three layers, as FlashAttention-3 has them:

1. ``zyfa::fwd``, a ``torch.library.custom_op`` (mutates nothing) that picks the backend and runs
   it; its fake implementation gives ``torch.compile`` the exact output and softmax_lse shapes,
   strides (contiguous) and dtypes of the backend the real call will pick, so a compiled model
   traces through zyfa without a graph break. Its backward, the op ``zyfa::bwd``, says "forward
   only" when it runs (not when ``torch.compile`` traces it).
2. ``_flash_attn_forward``: validated :class:`~zyfa.backends.AttentionArgs` -> the op; in eager
   mode, inputs that require grad with a differentiable backend (``reference``, ``oracle``) run
   that backend directly, so autograd sees its torch ops.
3. ``flash_attn_func``: today's signature, defaults, validation, FA2-style return values.

Checks that read tensor values (descales finite and positive) run inside the op, so that the
public function stays traceable; every other check runs before it.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import replace
from typing import Optional

import torch

from zyfa import reference as _reference  # noqa: F401  (registers "reference" and "oracle")
from zyfa.backends import AttentionArgs, Backend, select_backend
from zyfa.numerics import RECIPES

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float8_e4m3fn)
MAX_HEADDIM = 256


def _check_tensor(name: str, x) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 4:
        raise ValueError(
            f"{name} must have 4 dimensions (batch, seqlen, nheads, headdim), got shape {tuple(x.shape)}"
        )
    if x.dtype not in SUPPORTED_DTYPES:
        names = ", ".join(str(d).removeprefix("torch.") for d in SUPPORTED_DTYPES)
        raise TypeError(f"{name} has dtype {x.dtype}; supported: {names}")
    if x.numel() > 0 and x.stride(-1) != 1:
        raise ValueError(
            f"{name} must have a contiguous last dimension (stride(-1) == 1), got strides "
            f"{tuple(x.stride())}; call {name}.contiguous()"
        )


def _check_descale(name: str, descale, q: torch.Tensor, batch: int, nheads_k: int):
    if descale is None:
        return None
    if not isinstance(descale, torch.Tensor):
        raise TypeError(f"{name} must be a float32 torch.Tensor of shape (batch, nheads_k), got {type(descale).__name__}")
    if q.dtype != torch.float8_e4m3fn:
        raise ValueError(f"{name} is only meaningful for float8_e4m3fn inputs; q has dtype {q.dtype}")
    if descale.dtype != torch.float32:
        raise TypeError(f"{name} must be float32, got {descale.dtype}")
    if tuple(descale.shape) != (batch, nheads_k):
        raise ValueError(f"{name} must have shape (batch, nheads_k) = {(batch, nheads_k)}, got {tuple(descale.shape)}")
    if descale.device != q.device:
        raise ValueError(f"{name} is on {descale.device} but q is on {q.device}")
    return descale


def _check_descale_values(name: str, descale: Optional[torch.Tensor]) -> None:
    """Finite and positive: reads values, so it runs inside ``zyfa::fwd`` (not while tracing)."""
    if descale is None:
        return
    if not bool(torch.isfinite(descale).all()):
        raise ValueError(f"{name} contains non-finite values (NaN or inf)")
    if not bool((descale > 0).all()):
        raise ValueError(f"{name} must be positive, got min {descale.min().item()}")


def _is_int(x) -> bool:
    """Python/numpy integers and bools (not floats, strings or tensors)."""
    return isinstance(x, numbers.Integral)


def _check_flag(name: str, x) -> None:
    """A bool (or the ints 0 / 1): a string such as "False" is truthy and would silently mean True."""
    if not _is_int(x) or x not in (0, 1):
        raise TypeError(f"{name} must be a bool, got {x!r}")


def _real(name: str, x) -> float:
    """``x`` as a float; a string, tensor of several values or None is a TypeError naming ``name``."""
    if isinstance(x, (str, bytes)) or not isinstance(x, (numbers.Real, torch.Tensor)) or \
            (isinstance(x, torch.Tensor) and x.numel() != 1):
        raise TypeError(f"{name} must be a real number, got {x!r}")
    return float(x)


def _window(window_size, seqlen_q: int, seqlen_k: int) -> tuple[int, int]:
    """(left, right) as ints >= -1. Entries wider than the problem are clamped to seqlen_q + seqlen_k,
    which allows the same keys (so 10**20 means "unbounded" without overflowing int64)."""
    try:
        if isinstance(window_size, (str, bytes)):
            raise TypeError
        left, right = window_size
    except (TypeError, ValueError):
        raise ValueError(f"window_size must be a pair of ints (left, right), got {window_size!r}") from None
    if not all(_is_int(w) and not isinstance(w, bool) for w in (left, right)):
        raise TypeError(f"window_size entries must be ints, got {window_size!r}")
    if left < -1 or right < -1:
        raise ValueError(f"window_size entries must be >= -1 (-1 = unbounded), got {window_size!r}")
    widest = seqlen_q + seqlen_k
    return int(min(left, widest)), int(min(right, widest))


def _validate(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
              q_descale, k_descale, v_descale, recipe="zyfa-v2") -> AttentionArgs:
    for name, x in (("q", q), ("k", k), ("v", v)):
        _check_tensor(name, x)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share one dtype, got q={q.dtype}, k={k.dtype}, v={v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got q={q.device}, k={k.device}, v={v.device}")
    batch, seqlen_q, nheads, headdim = q.shape
    _, seqlen_k, nheads_k, headdim_k = k.shape
    if k.shape[0] != batch or v.shape[0] != batch:
        raise ValueError(f"batch sizes differ: q={batch}, k={k.shape[0]}, v={v.shape[0]}")
    if v.shape[1] != seqlen_k:
        raise ValueError(f"k and v must have the same seqlen, got k={seqlen_k}, v={v.shape[1]}")
    if v.shape[2] != nheads_k:
        raise ValueError(f"k and v must have the same number of heads, got k={nheads_k}, v={v.shape[2]}")
    if headdim_k != headdim:
        raise ValueError(f"q and k must have the same headdim, got q={headdim}, k={headdim_k}")
    if nheads_k == 0 or nheads % nheads_k != 0:
        raise ValueError(f"nheads of q ({nheads}) must be a multiple of nheads of k/v ({nheads_k}) (GQA/MQA)")
    for name, d in (("headdim", headdim), ("headdim of v", v.shape[3])):
        if d <= 0 or d > MAX_HEADDIM or d % 8 != 0:
            raise ValueError(f"unsupported {name} {d}: must be a multiple of 8 in [8, {MAX_HEADDIM}]")
    if dropout_p != 0.0:
        raise ValueError(
            f"dropout_p={dropout_p}: zyfa implements the inference (prefill) forward pass only; "
            "dropout is a training feature, pass dropout_p=0.0"
        )
    if softmax_scale is None:
        softmax_scale = headdim ** -0.5
    softmax_scale = _real("softmax_scale", softmax_scale)
    if not math.isfinite(softmax_scale) or softmax_scale <= 0:
        raise ValueError(f"softmax_scale must be a positive finite number, got {softmax_scale}")
    _check_flag("causal", causal)
    left, right = _window(window_size, seqlen_q, seqlen_k)
    softcap = _real("softcap", softcap)
    if not math.isfinite(softcap) or softcap < 0:
        raise ValueError(f"softcap must be >= 0 (0 disables it), got {softcap}")
    if alibi_slopes is not None:
        if not isinstance(alibi_slopes, torch.Tensor) or alibi_slopes.dtype != torch.float32:
            raise TypeError("alibi_slopes must be a float32 tensor of shape (nheads,) or (batch, nheads)")
        if tuple(alibi_slopes.shape) not in ((nheads,), (batch, nheads)):
            raise ValueError(f"alibi_slopes must have shape (nheads,) or (batch, nheads), got {tuple(alibi_slopes.shape)}")
        if alibi_slopes.device != q.device:
            raise ValueError(f"alibi_slopes is on {alibi_slopes.device} but q is on {q.device}")
    if recipe not in RECIPES:
        raise ValueError(f"recipe must be one of {RECIPES} (docs/numerics.md), got {recipe!r}")
    return AttentionArgs(
        q=q, k=k, v=v, softmax_scale=softmax_scale, causal=bool(causal), window_size=(left, right),
        softcap=softcap, alibi_slopes=alibi_slopes,
        q_descale=_check_descale("q_descale", q_descale, q, batch, nheads_k),
        k_descale=_check_descale("k_descale", k_descale, q, batch, nheads_k),
        v_descale=_check_descale("v_descale", v_descale, q, batch, nheads_k),
        recipe=recipe,
    )


def _check_auto(args: AttentionArgs, backend: str) -> None:
    """``auto`` never leaves the ZYFA FP8 numerics silently: FP8 inputs with a feature that no
    ZYFA-numerics backend implements are an error that names the explicit alternative."""
    if backend != "auto" or not args.is_fp8:
        return
    features = [name for name, on in (("window_size", args.is_local), ("softcap", args.softcap > 0),
                                      ("alibi_slopes", args.alibi_slopes is not None)) if on]
    if features:
        raise NotImplementedError(
            f"{', '.join(features)} with float8_e4m3fn inputs: no backend implements this in the ZYFA "
            "FP8 numerics (docs/numerics.md); pass backend='reference' to run it on the dequantised "
            "inputs in fp32 (not bit-exact to any FP8 kernel)")


# -- layer 1: the custom op ------------------------------------------------------------------------

def _op_args(q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
             q_descale, k_descale, v_descale, recipe) -> AttentionArgs:
    """The op's arguments through the public function's checks (metadata only: no value is read,
    so tracing and the fake implementation see the same errors): ``torch.ops.zyfa.fwd`` is
    callable directly, and a NaN scale, an e5m2 tensor or mixed dtypes must not reach a backend."""
    return _validate(q, k, v, 0.0, softmax_scale, causal, (window_left, window_right), softcap, alibi_slopes,
                     q_descale, k_descale, v_descale, recipe)


def _pick(args: AttentionArgs, backend: str) -> Backend:
    _check_auto(args, backend)
    return select_backend(backend, args)


def _check_values(args: AttentionArgs) -> None:
    """The descales' value checks at one host sync for all of them (each check alone syncs twice, six
    syncs per FP8 call on a GPU; a sync drains the launch queue); the per-descale checks, which name
    the offender, run only when something is wrong."""
    given = [(name, d) for name in ("q_descale", "k_descale", "v_descale") if (d := getattr(args, name)) is not None]
    if not given:
        return
    if all(d.device == given[0][1].device for _, d in given):
        if bool(torch.stack([(torch.isfinite(d) & (d > 0)).all() for _, d in given]).all()):
            return
    for name, descale in given:
        _check_descale_values(name, descale)


@torch.library.custom_op("zyfa::fwd", mutates_args=())
def fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float, causal: bool,
        window_left: int, window_right: int, softcap: float, alibi_slopes: Optional[torch.Tensor],
        q_descale: Optional[torch.Tensor], k_descale: Optional[torch.Tensor], v_descale: Optional[torch.Tensor],
        backend: str, recipe: str = "zyfa-v2") -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.ops.zyfa.fwd``: attention forward on arguments :func:`flash_attn_func` validated.

    Returns ``out`` (batch, seqlen_q, nheads, headdim_v) in the backend's ``out_dtype`` and
    ``softmax_lse`` float32 (batch, nheads, seqlen_q), both contiguous. Call it directly only with
    arguments that passed the public function's checks.
    """
    args = _op_args(q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
                    q_descale, k_descale, v_descale, recipe)
    _check_values(args)
    impl = _pick(args, backend)
    out, lse = impl.forward(args)
    want = impl.out_dtype(q.dtype)
    if out.dtype != want or lse.dtype != torch.float32:
        raise RuntimeError(f"backend {impl.name!r} returned out {out.dtype} / lse {lse.dtype}; it declares "
                           f"{want} / float32 (Backend.out_dtype), which torch.compile relies on")
    return out.contiguous(), lse.contiguous()


@fwd.register_fake
def _fwd_fake(q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
              q_descale, k_descale, v_descale, backend, recipe="zyfa-v2"):
    args = _op_args(q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
                    q_descale, k_descale, v_descale, recipe)
    impl = _pick(args, backend)  # the backend the real call picks: it decides the dtype
    batch, seqlen_q, nheads, _ = q.shape
    out = q.new_empty((batch, seqlen_q, nheads, v.shape[3]), dtype=impl.out_dtype(q.dtype))
    return out, q.new_empty((batch, nheads, seqlen_q), dtype=torch.float32)


@torch.library.custom_op("zyfa::bwd", mutates_args=())
def bwd(grad_out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
        backend: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The autograd formula of ``zyfa::fwd``: there is none, and running it says so.

    An op (not a Python error in the formula) so that tracing a graph whose inputs require grad
    (``torch.compile`` of a model outside ``no_grad``, which traces the backward ahead) succeeds,
    and the error comes only when a backward really runs. Gradients: ``flash_attn_func`` with a
    differentiable backend (``reference``, ``oracle``), in eager mode, runs it outside the op.
    """
    raise RuntimeError(
        f"zyfa backend {backend!r} is forward only (prefill inference): it has no backward pass; use "
        "backend='reference' (dense PyTorch) for gradients, in eager mode (torch.compile'd graphs run the "
        "forward-only op)")


@bwd.register_fake
def _bwd_fake(grad_out, q, k, v, backend):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _fwd_setup_context(ctx, inputs, output):
    q, k, v = inputs[:3]
    ctx.save_for_backward(q, k, v)
    args = _op_args(*inputs[:12], inputs[13])
    ctx.backend = inputs[12] if inputs[12] != "auto" else _pick(args, "auto").name  # named in the error


def _fwd_backward(ctx, grad_out, grad_lse):
    q, k, v = ctx.saved_tensors
    grads = bwd(grad_out, q, k, v, ctx.backend)
    return (*(g if need else None for g, need in zip(grads, ctx.needs_input_grad[:3])), *([None] * 11))


fwd.register_autograd(_fwd_backward, setup_context=_fwd_setup_context)


# -- layer 2: validated arguments -> the op ---------------------------------------------------------

def _flash_attn_forward(args: AttentionArgs, backend: str) -> tuple[torch.Tensor, torch.Tensor]:
    if (torch.is_grad_enabled() and any(x.requires_grad for x in (args.q, args.k, args.v))
            and not torch.compiler.is_compiling()):
        impl = _pick(args, backend)
        if impl.differentiable:  # eager autograd through the backend's dense torch ops
            _check_values(args)
            return impl.forward(args)
    left, right = args.window_size
    return fwd(args.q, args.k, args.v, args.softmax_scale, args.causal, left, right, args.softcap,
               args.alibi_slopes, args.q_descale, args.k_descale, args.v_descale, backend, args.recipe)


# -- layer 3: the public function ---------------------------------------------------------------------

def flash_attn_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dropout_p: float = 0.0,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Optional[torch.Tensor] = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
    *,
    q_descale: Optional[torch.Tensor] = None,
    k_descale: Optional[torch.Tensor] = None,
    v_descale: Optional[torch.Tensor] = None,
    backend: str = "auto",
    recipe: str = "zyfa-v2",
):
    """Scaled dot-product attention forward pass (prefill), FlashAttention-2/3 compatible.

    Supports multi-query and grouped-query attention (MQA/GQA) by passing K, V with fewer heads
    than Q; the number of heads in Q must be divisible by the number of heads in K, V. For
    example, Q with 6 heads and K, V with 2 heads: heads 0, 1, 2 of Q attend to head 0 of K, V,
    and heads 3, 4, 5 of Q attend to head 1 of K, V.

    If causal=True, the causal mask is aligned to the bottom right corner of the attention matrix
    (as in FlashAttention >= 2.1). Rows are queries, columns keys, 1 = attended. For
    seqlen_q = 2 and seqlen_k = 5 the mask is::

        1 1 1 1 0
        1 1 1 1 1

    and for seqlen_q = 5, seqlen_k = 2::

        0 0
        0 0
        0 0
        1 0
        1 1

    A row that is masked entirely yields output 0 (and softmax_lse = +inf). A NaN in the inputs
    reaches exactly the rows that read it (a NaN in v only the output column it sits in); a
    masked key contributes nothing, whatever its value.

    If window_size != (-1, -1), sliding-window (local) attention: query i attends to keys in
    [i + seqlen_k - seqlen_q - window_size[0], i + seqlen_k - seqlen_q + window_size[1]].

    FP8 inputs (``torch.float8_e4m3fn``) follow FlashAttention-3: the real value of q[b, :, h]
    is ``q_descale[b, h // (nheads // nheads_k)] * q[b, :, h]`` and likewise for k, v; a
    missing descale means 1.0. The output is bfloat16. :mod:`zyfa.numerics` quantises
    bf16/fp32 tensors (optionally after a Hadamard rotation of Q and K) into this form.

    Arguments:
        q: (batch_size, seqlen_q, nheads, headdim), float16 / bfloat16 / float32 / float8_e4m3fn.
        k: (batch_size, seqlen_k, nheads_k, headdim), same dtype as q.
        v: (batch_size, seqlen_k, nheads_k, headdim_v), same dtype as q; headdim_v may differ
            from headdim (e.g. the MLA shape 192 / 128).
        dropout_p: must be 0.0 (inference only).
        softmax_scale: scaling of QK^T before the softmax; default 1 / sqrt(headdim).
        causal: apply the bottom-right aligned causal mask.
        window_size: (left, right) sliding window; (-1, -1) disables it.
        softcap: if > 0, scores become ``softcap * tanh(scores / softcap)``.
        alibi_slopes: float32 (nheads,) or (batch_size, nheads); adds
            ``-slope * |i + seqlen_k - seqlen_q - j|`` to the score of query i and key j.
        deterministic: accepted for compatibility; every zyfa backend is deterministic.
        return_attn_probs: if True also return softmax_lse (and ``None`` in place of the
            probability matrix, which zyfa never materialises), as FlashAttention-2 does.
        q_descale, k_descale, v_descale: float32 (batch_size, nheads_k), positive and finite;
            FP8 inputs only.
        backend: "auto" (best available for the inputs' device and dtype; FP8 inputs always get
            the ZYFA numerics, so FP8 with window/softcap/alibi must name "reference"), "reference" (dense
            PyTorch, fp32), "oracle" (fp64), or a kernel backend listed by
            :func:`zyfa.available_backends` (e.g. "triton", "gfx950").
        recipe: FP8 numerics (docs/numerics.md): "zyfa-v2" (hybrid phi block offset, unbiased
            LSE), "zyfa-v1" (the ablation) or "zyfa-folded" (Lean P folded into the QK MFMA: the
            gfx950 kernel zyfa-fp8 that the cycle model's headline times; gfx950 and the emulator
            only). Backends that lack the recipe are skipped under "auto" and refused by name.
            Ignored for non-FP8 inputs.

    Returns:
        out: (batch_size, seqlen_q, nheads, headdim_v); input dtype, bfloat16 for FP8 inputs,
            float64 for the oracle.
        softmax_lse [only if return_attn_probs]: (batch_size, nheads, seqlen_q), float32, the
            natural-log sum of exp of the (scaled, masked) scores of each row.
        S_dmask [only if return_attn_probs]: always None.
    """
    _check_flag("deterministic", deterministic)
    _check_flag("return_attn_probs", return_attn_probs)
    args = _validate(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                     alibi_slopes, q_descale, k_descale, v_descale, recipe)
    del deterministic  # every backend is deterministic (no atomics, fixed reduction order)
    out, softmax_lse = _flash_attn_forward(args, backend)
    if return_attn_probs:
        return out, softmax_lse, None
    return out
