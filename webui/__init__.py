"""Dash schedule explorer (``zyfa.webui``)."""
