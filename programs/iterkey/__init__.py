"""IterKey: keyword generation for BM25, answer, True/False validation (text or forced decoding),
keyword regeneration."""

from netcast.programs.iterkey.program import IterKey

__all__ = ["IterKey"]
