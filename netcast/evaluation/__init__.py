"""Evaluation primitives, below the programs and the optimizers: metrics, scoring a program on
questions (resumable run logs), statistics. They import no strategy: a program is scored
through its call and what it declares of itself (``knob_defaults``, ``stored_knobs``).
Benchmarks, specs and their reports, which compile with the optimizers, are the floor above
(``netcast.specs``)."""

from netcast.evaluation.evaluate import EvalResult, aggregate, evaluate, score
from netcast.evaluation.metrics import em_metric, exact_match, f1_metric, f1_score

__all__ = [
    "EvalResult",
    "aggregate",
    "em_metric",
    "evaluate",
    "exact_match",
    "f1_metric",
    "f1_score",
    "score",
]
