"""``flash_attn.bert_padding`` of the zyfa shim: varlen padding helpers are not provided."""

from flash_attn import _unsupported

pad_input = _unsupported("bert_padding.pad_input (varlen)")
unpad_input = _unsupported("bert_padding.unpad_input (varlen)")
