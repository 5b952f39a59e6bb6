"""Reading a QA record's own annotations into demonstrations (``netcast compile --teacher
annotations``): the parts every strategy's teacher shares. Each strategy turns them into
demonstrations for its own steps in its ``annotated_demos``; nothing here calls a model.

An example's annotations (``netcast.data.records``): ``gold_passages`` (the supporting
paragraphs, ``{"id", "title", "text", "facts"}``, ``facts`` = indices of their supporting
sentences), ``hops`` (MuSiQue's sub-questions) and ``answers``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import dspy

from netcast.corpus import doc_id_of_chunk, format_passage
from netcast.errors import InputError

# a sentence ends at . ! or ? followed by space and a capital, digit, quote or bracket
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


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


def sentences(text: str) -> list[str]:
    """``text`` split into sentences (HotpotQA's paragraphs are their sentences joined)."""
    return [s for s in _SENTENCE_END.split(text.strip()) if s]


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


def gold_passage_texts(gold: Sequence[dict[str, Any]]) -> list[str]:
    return [format_passage(p["title"], p["text"]) for p in gold]


def context_with_gold(
    found: Sequence[tuple[str, str]], gold: Sequence[dict[str, Any]], size: int
) -> list[str]:
    """A context of ``size`` passages (at least every gold passage) as a program would see it:
    the retrieved ``(chunk id, passage)`` pairs in their order, the last non-gold ones replaced
    by the gold passages retrieval missed (appended at the end)."""
    size = max(size, len(gold))
    have = {doc_id_of_chunk(cid) for cid, _ in found}
    missing = [p for p in gold if p["id"] not in have]
    kept = [(cid, text) for cid, text in found][:size]
    while len(kept) + len(missing) > size:
        drop = next(i for i in range(len(kept) - 1, -1, -1) if not is_gold(kept[i][0], gold))
        kept.pop(drop)
    return [text for _, text in kept] + gold_passage_texts(missing)
