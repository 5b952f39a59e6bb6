"""Knowledge-aware iterative retrieval: the program, its knowledge state and rules, its steps and
the concurrency of its agents."""

from netcast.programs.knowledge.program import KnowledgeAware

__all__ = ["KnowledgeAware"]
