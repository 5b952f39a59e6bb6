"""Iterative agentic retrieval (Fishing for Answers §3.2, "cast a small net many times") and the
combined strategy (§4.4): the agent loop, its working context and its decision steps."""

from netcast.programs.iterative.program import Combined, Iterative

__all__ = ["Combined", "Iterative"]
