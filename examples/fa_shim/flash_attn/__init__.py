"""A ``flash_attn`` package backed by zyfa: FlashAttention-2's Python API over :func:`zyfa.flash_attn_func`.

For running FlashAttention's own forward tests against zyfa (``run_upstream_tests.sh``) and for
code written against ``flash_attn``. What zyfa implements is real: ``flash_attn_func`` and the
packed variants, GQA/MQA, causal (bottom-right), window, softcap, ALiBi where the backend has them,
``return_attn_probs`` (``out, softmax_lse, None``). V wider than zyfa's 256 runs as column blocks
of 256 (``out = P V`` is linear in V's columns, so each block is exact; lse is the same for all).
Everything else (varlen, KV cache, dropout, backward) raises with the feature's name.
"""

import torch

import zyfa
from zyfa.interface import MAX_HEADDIM

__version__ = "2.8.3+zyfa"  # the FA2 API generation this mirrors (what tests check against)


def _unsupported(feature: str):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"flash_attn shim over zyfa: {feature} is not implemented")
    fn.__name__ = feature
    return fn


def attention(q, k, v, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
              dropout_p=0.0, q_descale=None, k_descale=None, v_descale=None):
    """(out, softmax_lse) from zyfa; V's head dim above zyfa's maximum runs in column blocks."""
    window = tuple(int(w) for w in window_size)  # FlashAttention's tests pass tensors
    kw = dict(dropout_p=dropout_p, softmax_scale=softmax_scale, causal=causal, window_size=window, softcap=softcap,
              alibi_slopes=alibi_slopes, return_attn_probs=True, q_descale=q_descale, k_descale=k_descale,
              v_descale=v_descale)
    blocks = [zyfa.flash_attn_func(q, k, v[..., i:i + MAX_HEADDIM], **kw)[:2] for i in range(0, v.shape[-1], MAX_HEADDIM)]
    if len(blocks) == 1:
        return blocks[0]
    return torch.cat([out for out, _ in blocks], dim=-1), blocks[0][1]


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    out, lse = attention(q, k, v, softmax_scale, causal, window_size, softcap, alibi_slopes, dropout_p)
    return (out, lse, None) if return_attn_probs else out


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                             softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    k, v = kv.unbind(dim=2)  # (b, s, 2, h, d)
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                           deterministic, return_attn_probs)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    q, k, v = qkv.unbind(dim=2)  # (b, s, 3, h, d)
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                           deterministic, return_attn_probs)


flash_attn_varlen_func = _unsupported("flash_attn_varlen_func")
flash_attn_varlen_kvpacked_func = _unsupported("flash_attn_varlen_kvpacked_func")
flash_attn_varlen_qkvpacked_func = _unsupported("flash_attn_varlen_qkvpacked_func")
flash_attn_with_kvcache = _unsupported("flash_attn_with_kvcache")
