"""FlashAttention-3's ``flash_attn_interface`` (hopper/) backed by zyfa: ``flash_attn_func`` with FP8 descales.

``num_splits``, ``pack_gqa`` and ``sm_margin`` are scheduling hints that zyfa decides itself
(ignored); ``qv`` and ``attention_chunk`` are features it lacks (they raise). Returns ``out``, or
``(out, softmax_lse)`` with ``return_attn_probs=True``, as FA3 does.
"""

from flash_attn import _unsupported, attention


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
                    v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1,
                    pack_gqa=None, deterministic=False, sm_margin=0, return_attn_probs=False):
    if qv is not None:
        raise NotImplementedError("flash_attn_interface shim over zyfa: qv is not implemented")
    if attention_chunk:
        raise NotImplementedError("flash_attn_interface shim over zyfa: attention_chunk is not implemented")
    out, lse = attention(q, k, v, softmax_scale, causal, window_size, softcap, None, 0.0,
                         q_descale, k_descale, v_descale)
    return (out, lse) if return_attn_probs else out


flash_attn_varlen_func = _unsupported("flash_attn_varlen_func")
flash_attn_combine = _unsupported("flash_attn_combine")
flash_attn_with_kvcache = _unsupported("flash_attn_with_kvcache")
get_scheduler_metadata = _unsupported("get_scheduler_metadata")
