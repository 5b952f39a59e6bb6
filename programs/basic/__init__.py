"""Basic RAG: the top-k baseline of every paper."""

from netcast.programs.basic.program import BasicRAG

__all__ = ["BasicRAG"]
