"""``flash_attn.layers.rotary`` of the zyfa shim: rotary embedding kernels are not provided."""

from flash_attn import _unsupported

apply_rotary_emb = _unsupported("layers.rotary.apply_rotary_emb")
