"""The annotation teacher (``netcast compile --teacher annotations``): demonstrations for every
step of a program read from the training data's own annotations (gold passages, supporting
sentences, sub-questions, answers) instead of from the model's traces. No model is called.

Each strategy says what its steps' demonstrations are (``annotated_demos(example)`` in its own
folder); this module collects them over the training questions and sets them as DSPy demos on
the program's predictors, so the result saves, loads and recompiles like any compiled program.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import dspy

PER_STEP = 2  # demonstrations per step (each holds a whole context: the window is small)


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
