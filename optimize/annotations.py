"""The annotation teacher (``netcast compile --teacher annotations``): demonstrations for every
step of a program read from the training data's own annotations (gold passages, supporting
sentences, sub-questions, answers) instead of from the model's traces. No model is called.

Each strategy says what its steps' demonstrations are (``annotated_demos(example)`` in its own
folder); this module collects them over the training questions and sets them as DSPy demos on
the program's predictors, so the result saves, loads and recompiles like any compiled program.
``AnnotationTeacher`` is the teleprompter (``AnnotationSettings``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import dspy
from dspy.teleprompt import Teleprompter

from netcast.optimize.settings import PER_STEP, AnnotationSettings


def annotation_demos(
    program: dspy.Module, trainset: Sequence[dspy.Example], per_step: int = PER_STEP, seed: int = 0
) -> dict[str, list[dspy.Example]]:
    """Up to ``per_step`` demonstrations for each step of ``program`` (by its name in the
    program), from training questions taken in a seeded order until every step has enough."""
    order = list(trainset)
    random.Random(seed).shuffle(order)
    demos: dict[str, list[dspy.Example]] = {}
    steps = {name.removesuffix(".predict") for name, _ in program.named_predictors()}
    for example in order:
        for step, items in program.annotated_demos(example).items():
            demos.setdefault(step, []).extend(items)
        if steps and all(len(demos.get(s, [])) >= per_step for s in steps):
            break
    return {step: items[:per_step] for step, items in demos.items()}


def teach(
    program: dspy.Module, trainset: Sequence[dspy.Example], per_step: int = PER_STEP, seed: int = 0
) -> dspy.Module:
    """A copy of ``program`` whose predictors hold annotation demonstrations (the original is not
    changed). A step the strategy gives none keeps none."""
    demos = annotation_demos(program, trainset, per_step, seed)
    taught = program.deepcopy()
    for name, predictor in taught.named_predictors():
        predictor.demos = list(demos.get(name.removesuffix(".predict"), []))
    taught._compiled = True
    return taught


class AnnotationTeacher(Teleprompter):
    """``compile(student, trainset=...)``: a copy of ``student`` taught its demonstrations
    from ``trainset``'s annotations (``teach``; no model call)."""

    def __init__(self, settings: AnnotationSettings | None = None, *, seed: int = 0):
        super().__init__()
        self.settings = settings or AnnotationSettings()
        self.seed = seed

    def compile(self, student, *, trainset, teacher=None, valset=None, **kwargs) -> dspy.Module:
        return teach(student, trainset, self.settings.per_step, self.seed)
