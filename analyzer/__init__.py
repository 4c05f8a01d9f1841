"""Pure metric functions over traces (``zyfa.analyzer``)."""
