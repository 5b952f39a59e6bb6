"""Search-R1-style test-time modules as reusable wrappers around a program's search step
(Test-Time Strategies for More Efficient and Accurate Agentic RAG):

- de-duplication (§3.2): every retrieval returns only passages not seen before for this
  question, filled up to k with the next-highest-ranked unseen ones (the retriever's
  ``exclude``);
- contextualization (§3.1): after each retrieval an auxiliary model adds what in the new
  passages helps answer the question to a memory cache that only ever grows;
- hybrid (§3.3): de-duplication, then contextualization.

A precision step may sit in front of them (``rerank_pool``): each retrieval fetches that many
candidates and keeps the ``k`` a ``programs.shared.rerank`` signal scores best against the query;
only the kept ones count as seen. A link hop may follow it (``links``, ``programs.shared.links``):
up to that many passages the retrieval's passages name by title join it (never a seen one under
de-duplication), and count as seen.

A ``SearchSession`` holds one question's state (queries searched, seen ids, memory)
explicitly, so a program decides from it whether or not a trace is recording."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dspy

from netcast.corpus import Corpus, format_passage
from netcast.programs.shared.links import follow
from netcast.programs.shared.lists import parse_list
from netcast.programs.shared.rerank import rerank
from netcast.retrievers.base import Hit

EMPTY_MEMORY = "(memory is empty: nothing useful has been found yet)"


class SearchSession:
    """One question's search state. ``search(query, k)`` applies the switched-on modules."""

    def __init__(
        self,
        search: Callable[..., list[Hit]],
        question: str,
        dedup: bool = False,
        contextualizer: dspy.Module | None = None,
        aux_lm: Any = None,
        rerank_pool: int = 0,
        rerank_signal: str = "retriever",
        rerank_lm: Any = None,
        links: int = 0,
        corpus: Corpus | None = None,
    ):
        if links and corpus is None:
            raise ValueError("a link hop needs the corpus whose titles it follows")
        self._search = search
        self.rerank_pool, self.rerank_signal, self.rerank_lm = (
            rerank_pool,
            rerank_signal,
            rerank_lm,
        )
        self.links, self.corpus = links, corpus
        self.question = question
        self.dedup = dedup
        self.contextualizer = contextualizer
        self.aux_lm = aux_lm
        self.queries: list[str] = []  # every query searched, in order
        self.seen: list[str] = []
        self.memory: list[str] = []
        self.memory_updates: list[dict[str, Any]] = []

    def search(self, query: str, k: int) -> list[Hit]:
        self.queries.append(query)
        exclude = set(self.seen) if self.dedup else set()
        if self.rerank_pool > k:
            pool = self._search(query, self.rerank_pool, exclude)
            hits = rerank(query, pool, self.rerank_signal, k, lm=self.rerank_lm)
        else:
            hits = self._search(query, k, exclude)
        if self.links and hits:
            hits = hits + follow(hits, self.corpus, len(hits), self.links, exclude)
        self.seen += [h.chunk.id for h in hits if h.chunk.id not in self.seen]
        if self.contextualizer is not None and hits:
            self.remember(hits)
        return hits

    def remember(self, hits: list[Hit]) -> None:
        """Append the auxiliary model's new notes; the cache is never rewritten or shortened."""
        passages = [format_passage(h.chunk.title, h.chunk.text) for h in hits]
        # passed per call: it overrides the LM a loaded program's steps are bound to (set_lm)
        aux = {"lm": self.aux_lm} if self.aux_lm is not None else {}
        out = self.contextualizer(
            question=self.question, memory=self.memory_view(), new_passages=passages, **aux
        )
        known = {n.lower() for n in self.memory}
        added = [n for n in parse_list(out.new_notes) if n.lower() not in known]
        self.memory += added
        self.memory_updates.append({"added": added, "size": len(self.memory)})

    def memory_view(self) -> list[str]:
        """What a reasoning step sees: the notes, or an explicit empty-memory line."""
        return list(self.memory) or [EMPTY_MEMORY]
