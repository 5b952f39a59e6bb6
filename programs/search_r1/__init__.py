"""A Search-R1-style agent with the test-time modules of "Test-Time Strategies for Agentic RAG"
(de-duplication and contextualization live in ``netcast.programs.shared.search``, since the
iterative agent can switch them on too)."""

from netcast.programs.search_r1.program import SearchR1

__all__ = ["SearchR1"]
