"""A link hop without a model: the passages whose document title a retrieved passage mentions.

Multi-hop questions name one entity and ask about another that the first one's passage names
("the corporation Dow AgroSciences is part of" -> the Dow Chemical Company's passage). Graph
retrievers over Wikipedia follow the hyperlinks of the passages they retrieved to reach it
(Asai et al., ICLR 2020, "Learning to Retrieve Reasoning Paths over Wikipedia Graph"). A corpus
of titled documents without hyperlinks has the same edges where a passage's text contains
another document's title, which is what ``follow`` reads:

- a title's key is its words, with a trailing disambiguation in parentheses dropped ("Tony
  Kaye (director)" is mentioned as "Tony Kaye"); titles of three characters or fewer are not
  followed (too many accidental matches);
- a passage mentions a title when the title's words occur in its text as consecutive words
  (case-sensitive), found by looking up the text's word n-grams in a dict of the titles' keys:
  the cost grows with the passage's length, not with the number of titles;
- the links of the first ``seeds`` hits are followed in order (the first hit's mentions in the
  order they occur in its text, then the second's), each linked document's first chunk once,
  never a document already among the hits or a seed's own document. A program adds what
  ``follow`` returns after its hits: nothing the retriever found is pushed out (measured: a
  fixed-length context whose last passages gave way to links lost a gold passage on 7 of 150
  questions, benchmarks/README.md).

Pure functions over a corpus; its ``Titles`` are computed once per corpus and cached beside it
(a read-only corpus gives the same keys every time)."""

from __future__ import annotations

import re
import time
import weakref
from collections.abc import Collection, Sequence
from typing import NamedTuple

from netcast import trace
from netcast.corpus import Corpus, doc_id_of_chunk
from netcast.retrievers.base import Hit

WORD = re.compile(r"\w+")
DISAMBIGUATION = re.compile(r"\s*\([^()]*\)\s*$")
MIN_TITLE_CHARS = 4


class Titles(NamedTuple):
    """A corpus's title keys -> the first chunk id of every document with that key, and the
    longest key's length in words (the n-grams ``mentions`` looks up)."""

    keys: dict[tuple[str, ...], list[str]]
    longest: int


_TITLES: weakref.WeakKeyDictionary[Corpus, Titles] = weakref.WeakKeyDictionary()


def title_key(title: str) -> tuple[str, ...]:
    """The words a mention of ``title`` must contain, in order ("Tony Kaye (director)" ->
    ("Tony", "Kaye")); empty for a title too short to follow."""
    name = DISAMBIGUATION.sub("", title).strip()
    if len(name) < MIN_TITLE_CHARS:
        return ()
    return tuple(WORD.findall(name))


def title_keys(corpus: Corpus) -> Titles:
    """The corpus's ``Titles`` (computed once per corpus)."""
    if corpus in _TITLES:
        return _TITLES[corpus]
    keys: dict[tuple[str, ...], list[str]] = {}
    seen_docs: set[str] = set()
    for chunk_id, title in corpus.titles():
        doc = doc_id_of_chunk(chunk_id)
        if doc in seen_docs:
            continue
        seen_docs.add(doc)
        key = title_key(title)
        if key:
            keys.setdefault(key, []).append(chunk_id)
    titles = Titles(keys, max((len(k) for k in keys), default=0))
    _TITLES[corpus] = titles
    return titles


def mentions(text: str, titles: Titles) -> list[str]:
    """Chunk ids of the documents whose title ``text`` mentions, in the order of the mentions
    (a longer title wins where two start at the same word)."""
    words = WORD.findall(text)
    found: list[str] = []
    for start in range(len(words)):
        for size in range(min(titles.longest, len(words) - start), 0, -1):
            ids = titles.keys.get(tuple(words[start : start + size]))
            if ids:
                found += [i for i in ids if i not in found]
                break
    return found


def follow(
    hits: Sequence[Hit], corpus: Corpus, seeds: int, limit: int, exclude: Collection[str] = ()
) -> list[Hit]:
    """Up to ``limit`` hits linked from the first ``seeds`` of ``hits`` (module docstring),
    none of the chunk ids in ``exclude``, each carrying its seed's score; recorded as a
    ``links`` stage of the active trace."""
    start = time.perf_counter()
    titles = title_keys(corpus)
    have = {doc_id_of_chunk(h.chunk.id) for h in hits} | {doc_id_of_chunk(i) for i in exclude}
    linked: list[Hit] = []
    for seed in hits[:seeds]:
        for chunk_id in mentions(seed.chunk.text, titles):
            if len(linked) >= limit:
                break
            doc = doc_id_of_chunk(chunk_id)
            if doc not in have:
                have.add(doc)
                linked.append(Hit(corpus[chunk_id], seed.score))
    active = trace.current()
    if active is not None:
        active.add_stage(
            "links",
            seeds=[h.chunk.id for h in hits[:seeds]],
            linked=[h.chunk.id for h in linked],
            seconds=round(time.perf_counter() - start, 6),
        )
    return linked
