"""The QA record schema shared by every loader, and its conversion to examples and documents.

A record is ``{"id", "question", "answers": [...], "paragraphs": [{"title", "text",
"is_supporting"}]}`` (the schema of the bundled samples). Gold evidence ids are the doc ids
(``netcast.corpus.doc_id_for(title, text)``) of the supporting paragraphs, so they match the
pooled corpus built from the same records.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import dspy

from netcast.corpus import Document, dedupe_documents, doc_id_for
from netcast.errors import InputError

# a sentence ends at . ! or ? followed by space and a capital, digit, quote or bracket
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


@dataclass
class QADataset:
    """Examples of one split plus the documents of the dataset's retrieval corpus. The corpus
    does not depend on the split or the limit: every split of a dataset searches the same
    documents, named ``corpus_name``."""

    name: str
    split: str
    examples: list[dspy.Example]
    documents: list[Document]
    corpus_name: str = ""

    def __post_init__(self) -> None:
        self.corpus_name = self.corpus_name or self.name

    def questions(self) -> list[tuple[str, str]]:
        """(where, question) pairs, ``where`` naming the dataset, split and question id (for
        ``netcast.models.factory.check_questions``)."""
        return [
            (f"{self.name} ({self.split}) question {ex.id}", ex.question) for ex in self.examples
        ]


def check_record(record: Any, where: str) -> dict[str, Any]:
    """Validate a record; errors name ``where`` (file:line or row) and the field."""
    if not isinstance(record, Mapping):
        raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
    for name in ("id", "question"):
        if record.get(name) in (None, ""):
            raise InputError(f"{where}: missing field '{name}'")
    if not isinstance(record["question"], str):
        raise InputError(f"{where}: field 'question' must be a string")
    check_blank(record["question"], f"{where}: field 'question'")
    answers = record.get("answers")
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise InputError(f"{where}: field 'answers' must be a list of strings")
    if not [a for a in answers if a.strip()]:
        raise InputError(f"{where}: field 'answers' is empty (a question needs a gold answer)")
    for i, answer in enumerate(answers):  # a blank gold answer would match a blank reply
        check_blank(answer, f"{where}: field 'answers[{i}]'")
    paragraphs = record.get("paragraphs", [])
    if not isinstance(paragraphs, list):
        raise InputError(f"{where}: field 'paragraphs' must be a list")
    for i, p in enumerate(paragraphs):
        if not isinstance(p, Mapping) or not isinstance(p.get("text"), str):
            raise InputError(f"{where}: paragraphs[{i}] needs a string field 'text'")
        # a blank paragraph is no passage (``pooled_documents`` leaves it out): as gold evidence
        # it would be a document no index holds, and retrieval recall could never reach 1
        if p.get("is_supporting") and not p["text"].strip():
            check_blank(p["text"], f"{where}: field 'paragraphs[{i}].text' (a supporting one)")
    return dict(record)


def check_blank(text: str, what: str) -> None:
    """Refuse ``text`` when it is empty or only whitespace: ``what`` names where it was
    (``FILE:LINE: field 'question'``, or ``the question`` of ``netcast ask``)."""
    if not text.strip():
        raise InputError(f"{what} is blank (empty or only whitespace)")


def sentences(text: str) -> list[str]:
    """``text`` split into sentences (HotpotQA's paragraphs are their sentences joined), as a
    supporting fact's sentence index counts them."""
    return [s for s in _SENTENCE_END.split(text.strip()) if s]


def holds(text: str, phrase: str) -> bool:
    """``phrase`` occurs in ``text`` as whole words, case aside."""
    return _phrase(phrase).search(text) is not None


def _phrase(phrase: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(phrase.strip())}(?!\w)", re.IGNORECASE)


def sentences_holding(text: str, phrase: str) -> list[int]:
    """The indices (``sentences``) of the sentences of ``text`` that ``phrase`` occurs in as
    whole words, case aside; an occurrence the split cuts (``G. Stanley Hall``) marks every
    sentence it spans."""
    text = text.strip()
    spans, at = [], 0
    for part in sentences(text):
        start = text.index(part, at)
        spans.append((start, start + len(part)))
        at = start + len(part)
    found = [m.span() for m in _phrase(phrase).finditer(text)]
    return [
        n for n, (a, b) in enumerate(spans) if any(a < end and start < b for start, end in found)
    ]


def gold_passages(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The record's supporting paragraphs as ``{"id", "title", "text", "facts"}``, ``facts``
    being the indices of their supporting sentences (``sentences``): where the record names
    them (HotpotQA's ``supporting_facts``: ``[title, sentence index]`` pairs), those; else
    ``hop_facts``' (MuSiQue's, derived from its hops); else ``[]``."""
    facts: dict[str, list[int]] = {}
    for fact in record.get("supporting_facts") or []:
        if isinstance(fact, (list, tuple)) and len(fact) == 2 and isinstance(fact[1], int):
            facts.setdefault(str(fact[0]), []).append(fact[1])
    derived = hop_facts(record)
    found = {}
    for i, p in enumerate(record.get("paragraphs", [])):
        if p.get("is_supporting"):
            title = p.get("title", "")
            doc_id = doc_id_for(title, p["text"])
            held = facts.get(title) or derived.get(i, [])
            found.setdefault(
                doc_id, {"id": doc_id, "title": title, "text": p["text"], "facts": held}
            )
    return list(found.values())


def hop_facts(record: Mapping[str, Any]) -> dict[int, list[int]]:
    """MuSiQue names no supporting sentences, but each hop of its ``question_decomposition``
    names the paragraph that answers it (``paragraph_support_idx``) and its answer: the
    sentences of that paragraph that hold the answer (``sentences_holding``) stand in for them, by
    paragraph index. A paragraph none of whose sentences holds its hop's answer (the answer
    only in its title, or worded otherwise) gets none."""
    paragraphs = record.get("paragraphs") or []
    found: dict[int, list[int]] = {}
    for hop in record.get("question_decomposition") or []:
        if not isinstance(hop, Mapping):
            continue
        i, answer = hop.get("paragraph_support_idx"), str(hop.get("answer") or "").strip()
        if not (isinstance(i, int) and 0 <= i < len(paragraphs) and answer):
            continue
        held = sentences_holding(str(paragraphs[i].get("text", "")), answer)
        if held:
            found[i] = sorted(set(found.get(i, []) + held))
    return found


def gold_titles(record: Mapping[str, Any], evidence: list[dict[str, Any]]) -> list[str]:
    """The titles of the supporting documents: the supporting paragraphs', else the record's
    ``supporting_titles`` (a QA file without paragraphs, asked of a saved index, names its gold
    evidence this way: ``netcast.session.gold_by_title``)."""
    if evidence:
        return list(dict.fromkeys(p["title"] for p in evidence))
    titles = record.get("supporting_titles") or []
    return [str(t) for t in titles if isinstance(t, str) and t]


def decomposition(record: Mapping[str, Any]) -> list[dict[str, str]]:
    """MuSiQue's ``question_decomposition`` as ``[{"question", "answer"}]`` (one per hop; a
    later hop may name an earlier one's answer as ``#1``), else ``[]``."""
    hops = record.get("question_decomposition") or []
    return [
        {"question": str(h["question"]), "answer": str(h.get("answer", ""))}
        for h in hops
        if isinstance(h, Mapping) and h.get("question")
    ]


def to_example(record: Mapping[str, Any]) -> dspy.Example:
    evidence = gold_passages(record)
    return dspy.Example(
        id=str(record["id"]),
        question=record["question"],
        answers=list(record["answers"]),
        answer=record["answers"][0] if record["answers"] else "",  # for labeled demos
        gold_ids=[p["id"] for p in evidence],
        gold_titles=gold_titles(record, evidence),
        gold_passages=evidence,
        hops=decomposition(record),
    ).with_inputs("question")


def pooled_documents(records: Iterable[Mapping[str, Any]]) -> list[Document]:
    """The open-retrieval corpus: every paragraph of every record, deduplicated by title+text."""
    docs = (
        Document(doc_id_for(p.get("title", ""), p["text"]), p.get("title", ""), p["text"])
        for r in records
        for p in r.get("paragraphs", [])
        if p["text"].strip()  # a blank paragraph is no passage
    )
    return dedupe_documents(docs)
