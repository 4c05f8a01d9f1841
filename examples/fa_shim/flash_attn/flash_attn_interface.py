"""``flash_attn.flash_attn_interface`` of the zyfa shim: the same functions, plus the names FA2's tests import."""

from flash_attn import (  # noqa: F401
    _unsupported, flash_attn_func, flash_attn_kvpacked_func, flash_attn_qkvpacked_func, flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func, flash_attn_varlen_qkvpacked_func, flash_attn_with_kvcache,
)

USE_TRITON_ROCM = False
_get_block_size_n = _unsupported("_get_block_size_n (dropout-mask layout)")
