"""Adapters that plug zyfa into other libraries. Each imports its library; this package imports none.

- :mod:`zyfa.integrations.transformers`: the ``"zyfa"`` and ``"zyfa-fp8"`` attention
  implementations for Hugging Face transformers (``pip install zyfa[hf]``).
"""
