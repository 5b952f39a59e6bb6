"""IRCoT (Trivedi et al., 2023, "Interleaving Retrieval with Chain-of-Thought Reasoning for
Knowledge-Intensive Multi-Step Questions"), a baseline: one chain-of-thought sentence at a time,
each the query of the next retrieval, then a reader over the paragraphs collected."""

from netcast.programs.ircot.program import IRCoT

__all__ = ["IRCoT"]
