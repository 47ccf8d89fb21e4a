"""The sections of `benchmark.py` (run it, not these modules)."""
