"""State and rules of knowledge-aware iterative retrieval (What is Known / What is Required):
pure functions the program calls, so each is tested on its own."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from netcast.corpus import Chunk

_WORD = re.compile(r"[a-z0-9]+")
_STOP = set(
    "a an the of in on at to for by and or is are was were who what which when where how did "
    "does do with from that this as be".split()
)
_SOURCE = re.compile(r"\(\s*(P\d+)\s*\)\s*\.?\s*$")
_SEGMENT = re.compile(r"^\s*\[\s*(P\d+)\s*\]\s*(.+)$", re.S)


@dataclass
class AgentState:
    """One agent's (or the shared) knowledge: verified facts, open gaps, queries issued, and
    the refined context (verbatim segments by chunk id, in the order they were kept)."""

    known: list[str] = field(default_factory=list)
    required: list[str] = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    segments: dict[str, list[str]] = field(default_factory=dict)

    def keep(self, chunk: Chunk, segment: str) -> bool:
        kept = self.segments.setdefault(chunk.id, [])
        if segment in kept:
            return False
        kept.append(segment)
        return True

    def context(self, corpus) -> list[str]:
        return [f"{corpus[cid].title}: {' … '.join(segs)}" for cid, segs in self.segments.items()]


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def query_similarity(query: str, previous: str) -> float:
    """Jaccard similarity of the two queries' content words (1.0 for the same words)."""
    a, b = content_words(query), content_words(previous)
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def is_redundant(query: str, history: list[str], threshold: float) -> bool:
    """Too close to an earlier query: similarity >= ``threshold`` with any of them."""
    return any(query_similarity(query, old) >= threshold for old in history)


def verified_facts(facts: list[str], labels: dict[str, Chunk]) -> tuple[list[str], list[str]]:
    """(accepted, rejected): a fact is accepted only if it cites a passage id that was shown."""
    accepted, rejected = [], []
    for fact in facts:
        text = " ".join(str(fact).split())
        match = _SOURCE.search(text)
        (accepted if match and match.group(1) in labels else rejected).append(text)
    return accepted, rejected


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def verified_segments(
    segments: list[str], labels: dict[str, Chunk]
) -> tuple[list[tuple[Chunk, str]], list[str]]:
    """(accepted (chunk, segment), rejected): a segment is kept only if it names a shown
    passage and occurs verbatim (whitespace and case aside) in that passage."""
    accepted, rejected = [], []
    for raw in segments:
        match = _SEGMENT.match(str(raw))
        chunk = labels.get(match.group(1)) if match else None
        segment = match.group(2).strip().strip('"') if match else str(raw)
        if chunk is not None and len(segment) >= 3 and _norm(segment) in _norm(chunk.text):
            accepted.append((chunk, segment))
        else:
            rejected.append(str(raw))
    return accepted, rejected
