"""State and rules of knowledge-aware iterative retrieval (What is Known / What is Required):
pure functions the program calls, so each is tested on its own."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from netcast.corpus import Chunk, format_passage
from netcast.programs.shared.spans import Mode, find_span

Cite = Literal["explicit", "inferred"]

_WORD = re.compile(r"[a-z0-9]+")
_STOP = set(
    "a an the of in on at to for by and or is are was were who what which when where how did "
    "does do with from that this as be s".split()  # s: of a possessive ("Germany's")
)
# a citation: "(P2)", "[P2]", "(P1, P3)", "(P1 and P3)", "(passage 2)"
_CITATION = re.compile(
    r"[(\[]\s*((?:P|passage\s*)\d+(?:\s*(?:,|;|&|and)\s*(?:P|passage\s*)\d+)*)\s*[)\]]",
    re.IGNORECASE,
)
_LABEL = re.compile(r"(?:P|passage\s*)(\d+)", re.IGNORECASE)
# a segment: "[P2] text", "(P2) text", "P2: text"
_SEGMENT = re.compile(r"^\s*[\[(]?\s*P(\d+)\s*[\])]?\s*[:\-–]?\s*(.+)$", re.S | re.IGNORECASE)


@dataclass
class AgentState:
    """One agent's (or the shared) knowledge: verified facts, open gaps, queries issued, and
    the refined context (verbatim segments by chunk id, in the order they were kept)."""

    known: list[str] = field(default_factory=list)
    required: list[str] = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    segments: dict[str, list[str]] = field(default_factory=dict)
    # passage labels, stable across steps: a chunk keeps its P# for the whole question, so a
    # citation in Known still names the same passage later
    labels: dict[str, str] = field(default_factory=dict)  # chunk id -> "P#"

    def label(self, chunk: Chunk) -> str:
        """The chunk's stable passage label, given on first sight."""
        if chunk.id not in self.labels:
            self.labels[chunk.id] = f"P{len(self.labels) + 1}"
        return self.labels[chunk.id]

    def keep(self, chunk: Chunk, segment: str) -> bool:
        kept = self.segments.setdefault(chunk.id, [])
        if segment in kept:
            return False
        kept.append(segment)
        return True

    def context(self, corpus) -> list[str]:
        return [
            format_passage(corpus[cid].title, " … ".join(segs))
            for cid, segs in self.segments.items()
        ]


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


def diversity_score(query: str, history: list[str], gaps: list[str], weight: float) -> float:
    """Eq. 2, progressive diversity promotion: ``weight`` x how different the query is from
    the earlier queries (1 - the highest similarity) + (1 - ``weight``) x how relevant it is to
    the open gaps (the highest similarity to one), similarity being content-word Jaccard."""
    difference = 1.0 - max((query_similarity(query, old) for old in history), default=0.0)
    relevance = max((query_similarity(query, gap) for gap in gaps), default=0.0)
    return weight * difference + (1.0 - weight) * relevance


def cited_labels(fact: str) -> list[str]:
    """The passage labels a fact cites, in order (``"... (P1, P3)"`` -> ``["P1", "P3"]``)."""
    found = []
    for group in _CITATION.findall(fact):
        found += [f"P{n}" for n in _LABEL.findall(group) if f"P{n}" not in found]
    return found


def verified_facts(
    facts: list[str], labels: dict[str, Chunk], cite: Cite = "explicit", support: float = 0.8
) -> tuple[list[str], list[str]]:
    """(accepted, rejected): a fact is accepted if it cites at least one shown passage (one
    citation or several; every label it cites must have been shown). With ``cite="inferred"``
    a fact that cites nothing is also accepted when one shown passage holds at least
    ``support`` of its content words; it is kept with that passage's citation appended, so
    Known stays cited. A question is no fact: one ending in "?" is never inferred."""
    accepted, rejected = [], []
    for fact in facts:
        text = " ".join(str(fact).split())
        cited = cited_labels(text)
        if cited:
            ok = all(label in labels for label in cited)
        elif cite == "inferred" and not text.endswith("?"):
            label = supporting_passage(text, labels, support)
            ok = label is not None
            if ok:
                text = f"{text.rstrip('.')} ({label})"
        else:
            ok = False
        (accepted if ok else rejected).append(text)
    return accepted, rejected


def supporting_passage(fact: str, labels: dict[str, Chunk], support: float) -> str | None:
    """The label of the shown passage (title and text) holding the largest share of the
    fact's content words, if that share is at least ``support``; None otherwise."""
    words = content_words(fact)
    if not words:
        return None
    best, share = None, 0.0
    for label, chunk in labels.items():
        held = len(words & content_words(f"{chunk.title} {chunk.text}")) / len(words)
        if held > share:
            best, share = label, held
    return best if share >= support else None


def verified_segments(
    segments: list[str], labels: dict[str, Chunk], mode: Mode = "fuzzy", threshold: float = 0.9
) -> tuple[list[tuple[Chunk, str]], list[str]]:
    """(accepted (chunk, segment), rejected): a segment is kept only if it names a shown
    passage and is a copy of a span of it (``spans.find_span``); what is kept is the passage's
    own text for that span."""
    accepted, rejected = [], []
    for raw in segments:
        match = _SEGMENT.match(str(raw))
        chunk = labels.get(f"P{match.group(1)}") if match else None
        span = find_span(chunk.text, match.group(2), mode, threshold) if chunk else None
        if span:
            accepted.append((chunk, span))
        else:
            rejected.append(str(raw))
    return accepted, rejected
