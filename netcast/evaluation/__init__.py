"""Evaluation: metrics, scoring a program on questions (resumable run logs), benches across
programs, reference rows, statistics, and reports built from saved rows (no model calls)."""

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
