"""Reading a QA record's own annotations into demonstrations (``netcast compile --teacher
annotations``): the parts every strategy's teacher shares. Each strategy turns them into
demonstrations for its own steps in its ``annotated_demos``; nothing here calls a model.

An example's annotations (``netcast.data.records``): ``gold_passages`` (the supporting
paragraphs, ``{"id", "title", "text", "facts"}``, ``facts`` = indices of their supporting
sentences: HotpotQA's annotated ones; for MuSiQue, which names none, those of each hop's
paragraph that hold the hop's answer), ``hops`` (MuSiQue's sub-questions) and ``answers``.
``sentences`` is the split those indices count in."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import dspy

from netcast.corpus import doc_id_of_chunk, format_passage
from netcast.data.records import holds, sentences
from netcast.errors import InputError

_HOP_REF = re.compile(r"#(\d+)")  # a sub-question naming an earlier hop's answer: "#1"


def require(example: dspy.Example, field: str, program: str) -> Any:
    """The example's annotation ``field``, or ``InputError`` (one line naming the question and
    the missing field) when the record has none."""
    value = example.get(field)
    if not value:
        where = {
            "gold_passages": "field 'paragraphs' with 'is_supporting': true",
            "hops": "field 'question_decomposition'",
        }.get(field, f"field {field!r}")
        raise InputError(
            f"{program}: question {example.get('id')} has no {field!r} annotation ({where}); "
            "the annotation teacher needs it"
        )
    return value


def supporting_sentences(passage: dict[str, Any]) -> str | None:
    """The passage's supporting sentences, verbatim and in order, or None where the record names
    none (or names a sentence the split does not find)."""
    parts = sentences(passage["text"])
    facts = sorted(set(passage.get("facts") or []))
    if not facts or facts[-1] >= len(parts):
        return None
    return " ".join(parts[i] for i in facts)


def is_gold(chunk_id: str, gold: Sequence[dict[str, Any]]) -> bool:
    return doc_id_of_chunk(chunk_id) in {p["id"] for p in gold}


def top_without_gold(
    search: Callable[[str, int], list[Any]], question: str, k: int, gold: Sequence[dict[str, Any]]
) -> list[Any]:
    """The top ``k`` hits ``search`` ranks for ``question`` that are not gold: the next ones
    ranked stand in for the gold ones (fewer where the pool holds no more). RAFT's context
    without the golden document."""
    wanted = k
    while True:
        found = search(question, wanted)
        hits = [h for h in found if not is_gold(h.chunk.id, gold)][:k]
        if len(hits) == k or len(found) < wanted:  # enough, or the pool holds no more
            return hits
        wanted *= 2


def gold_passage_texts(gold: Sequence[dict[str, Any]]) -> list[str]:
    return [format_passage(p["title"], p["text"]) for p in gold]


def context_with_gold(
    found: Sequence[tuple[str, str]], gold: Sequence[dict[str, Any]], size: int
) -> list[str]:
    """A context of ``size`` passages (at least every gold passage) as a program would see it:
    the retrieved ``(chunk id, passage)`` pairs in their order, the last non-gold ones replaced
    by the gold passages retrieval missed (appended at the end)."""
    return [text for text, _ in marked_context_with_gold(found, gold, size)]


def marked_context_with_gold(
    found: Sequence[tuple[str, str]], gold: Sequence[dict[str, Any]], size: int
) -> list[tuple[str, dict[str, Any] | None]]:
    """``context_with_gold``, each passage paired with the gold passage it is (a retrieved
    chunk of a gold document, or a gold passage swapped in), or None for the others."""
    size = max(size, len(gold))
    by_id = {p["id"]: p for p in gold}
    have = {doc_id_of_chunk(cid) for cid, _ in found}
    missing = [p for p in gold if p["id"] not in have]
    kept = [(cid, text) for cid, text in found][:size]
    while len(kept) + len(missing) > size:
        drop = next(i for i in range(len(kept) - 1, -1, -1) if not is_gold(kept[i][0], gold))
        kept.pop(drop)
    return [(text, by_id.get(doc_id_of_chunk(cid))) for cid, text in kept] + [
        (text, p) for text, p in zip(gold_passage_texts(missing), missing, strict=True)
    ]


def hop_queries(hops: Sequence[dict[str, str]]) -> list[str]:
    """MuSiQue's sub-questions in order, each ``#n`` filled with hop n's answer (what an agent
    knows once it has answered that hop)."""
    answers = [h.get("answer", "") for h in hops]

    def filled(match: re.Match) -> str:
        n = int(match.group(1))
        return answers[n - 1] if 1 <= n <= len(answers) and answers[n - 1] else match.group(0)

    return [
        re.sub(r"\s+([?.,!])", r"\1", " ".join(_HOP_REF.sub(filled, h["question"]).split()))
        for h in hops
    ]


def gold_queries(example: dspy.Example) -> list[tuple[dict[str, Any], str]]:
    """Each gold passage with a search query that reaches it, in the order an agent would
    search them. With MuSiQue's sub-questions (``hops``) a passage answers the last hop whose
    answer its title or text holds (a later hop's passage names the earlier hop's answer too)
    and is searched by that hop's sub-question (``hop_queries``), in hop order; a passage that
    answers no hop, and every passage of a record without hops (HotpotQA), is searched by its
    title, after them."""
    hops = example.get("hops") or []
    queries = hop_queries(hops)
    by_hop: dict[int, dict[str, Any]] = {}
    for passage in example.gold_passages:
        held = [
            i
            for i, hop in enumerate(hops)
            if hop.get("answer") and holds(f"{passage['title']} {passage['text']}", hop["answer"])
        ]
        if held and held[-1] not in by_hop:
            by_hop[held[-1]] = passage
    first = [(by_hop[i], queries[i]) for i in sorted(by_hop)]
    taken = {p["id"] for p, _ in first}
    return first + [(p, p["title"]) for p in example.gold_passages if p["id"] not in taken]
