"""Reference rows: the ceiling and the floor of a reader, as measurement aids beside the
strategies (never strategies themselves, and never registered as programs).

Both run ``basic``'s answer step as shipped (the same Signature, the same output cap) with the
same model: ``reference-gold`` given only the question's gold passages (the data's own
annotation), ``reference-closed`` given no passage. A strategy's share of the gap closed is
``(F1 - basic) / (gold - basic)`` (``netcast.specs.report``).

``gold:ARTIFACT`` (row ``reference-gold-<artifact folder>``) runs a compiled artifact's own
answer step instead (its prompt, and its model with any tuned adapter) over the gold
passages: the ceiling of a tuned reader, beside the untuned one's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
        self,
        name: str,
        passages: dict[str, tuple[list[str], list[str]]] | None,
        *,
        lm=None,
        answer: dspy.Module | None = None,
    ):
        super().__init__(None, lm=lm)
        self.name = name
        self.fixed = passages
        # a compiled program's answer step (its prompt and model), or basic's as shipped
        self.answer = answer or dspy.Predict(AnswerQuestion, max_tokens=ANSWER_TOKENS)

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


def parse_reference(name: str) -> tuple[str, str | None]:
    """``gold``/``closed`` (or the full name), or ``gold:ARTIFACT`` -> (the reference it runs,
    the artifact whose answer step reads, or None); others refused."""
    kind, _, artifact = name.partition(":")
    full = kind if kind.startswith("reference-") else f"reference-{kind}"
    if full not in REFERENCES:
        raise InputError(f"unknown reference {name!r}; choose gold, closed or gold:ARTIFACT")
    if artifact and full != GOLD:
        raise InputError(f"reference {name!r}: only gold takes an artifact (gold:ARTIFACT)")
    return full, artifact or None


def reference_name(name: str) -> str:
    """The row name of a reference (:func:`parse_reference`): ``reference-gold``,
    ``reference-closed``, or ``reference-gold-<artifact folder>``."""
    full, artifact = parse_reference(name)
    return f"{full}-{Path(artifact).name}" if artifact else full


def reference_readers(
    names: Sequence[str],
    examples: Sequence[dspy.Example],
    dataset: str,
    lm=None,
    load_artifact: Any = None,
) -> list[tuple[str, ReferenceReader, str | None]]:
    """The reference rows ``names`` for ``examples``: (row name, reader, artifact or None).
    A ``gold:ARTIFACT`` row's reader is that artifact's answer step, loaded with
    ``load_artifact(path)`` (``netcast.session.load`` bound to the bench's model)."""
    readers = []
    for name in names:
        full, artifact = parse_reference(name)
        passages = gold_context(examples, dataset) if full == GOLD else None
        if artifact is None:
            readers.append((full, ReferenceReader(full, passages, lm=lm), None))
            continue
        program = load_artifact(artifact)
        answer = getattr(program, "answer", None)
        steps = answer.predictors() if isinstance(answer, dspy.Module) else []
        if len(steps) != 1 or steps[0].signature.input_fields.keys() != {"context", "question"}:
            raise InputError(
                f"reference {name!r}: {artifact} has no answer step reading context and "
                f"question ({program.name}'s is not basic's); give a compiled basic"
            )
        reader = ReferenceReader(full, passages, lm=steps[0].lm, answer=answer)
        readers.append((reference_name(name), reader, artifact))
    return readers
