"""DSPy's multi-hop question answering program (the intro tutorial's ``SimplifiedBaleen``), a
baseline: a query written per hop, k passages per hop, de-duplication, a chain-of-thought
answer."""

from netcast.programs.multihop.program import MultiHop

__all__ = ["MultiHop"]
