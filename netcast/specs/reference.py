"""Reference rows: the ceiling and the floor of a reader, as measurement aids beside the
strategies (never strategies themselves, and never registered as programs).

Both run ``basic``'s answer step as shipped (the same Signature, the same output cap) with the
same model: ``reference-gold`` given only the question's gold passages (the data's own
annotation), ``reference-closed`` given no passage. A strategy's share of the gap closed is
``(F1 - basic) / (gold - basic)`` (``netcast.specs.report``)."""

from __future__ import annotations

from collections.abc import Sequence

import dspy

from netcast.corpus import format_passage
from netcast.errors import InputError
from netcast.programs.base import NetcastProgram
from netcast.signatures import ANSWER_TOKENS, AnswerQuestion

GOLD, CLOSED = "reference-gold", "reference-closed"
REFERENCES = (GOLD, CLOSED)


class ReferenceReader(NetcastProgram):
    """``basic``'s answer step over fixed passages per question: each question's gold passages
    (``passages`` maps a question to them), or none (``passages=None``: closed book)."""

    def __init__(
        self, name: str, passages: dict[str, tuple[list[str], list[str]]] | None, *, lm=None
    ):
        super().__init__(None, lm=lm)
        self.name = name
        self.fixed = passages
        self.answer = dspy.Predict(AnswerQuestion, max_tokens=ANSWER_TOKENS)

    def forward(self, question: str) -> dspy.Prediction:
        ids, context = ([], []) if self.fixed is None else self.fixed[question]
        answer = self.answer(context=context, question=question).answer
        return dspy.Prediction(answer=answer, evidence=list(ids), context=list(context))


def gold_context(
    examples: Sequence[dspy.Example], dataset: str
) -> dict[str, tuple[list[str], list[str]]]:
    """Each question's gold passages (their document ids, and their texts formatted as a
    retrieved passage is); a question without annotated gold passages is refused (one line
    naming it)."""
    found = {}
    for ex in examples:
        gold = ex.get("gold_passages") or []
        if not gold:
            raise InputError(
                f"{dataset}: question {ex.id} has no gold passages (field 'paragraphs' with "
                "'is_supporting': true): the reference-gold row needs them"
            )
        found[ex.question] = (
            [p["id"] for p in gold],
            [format_passage(p["title"], p["text"]) for p in gold],
        )
    return found


def reference_name(name: str) -> str:
    """``gold``/``closed`` (or the full name) -> the reference row's name; others refused."""
    full = name if name.startswith("reference-") else f"reference-{name}"
    if full not in REFERENCES:
        raise InputError(f"unknown reference {name!r}; choose gold or closed")
    return full


def reference_readers(
    names: Sequence[str], examples: Sequence[dspy.Example], dataset: str, lm=None
) -> list[tuple[str, ReferenceReader]]:
    """The reference rows ``names`` (``gold``/``closed`` or their full names) for ``examples``."""
    readers = []
    for name in names:
        full = reference_name(name)
        passages = gold_context(examples, dataset) if full == GOLD else None
        readers.append((full, ReferenceReader(full, passages, lm=lm)))
    return readers
