"""Which rerank signal keeps the gold documents: recall@keep after reranking a retrieval pool,
measured on questions with gold evidence (``netcast rerank-check`` prints it).

One pool per question from the retriever; every signal (``netcast.programs.shared.rerank``:
``retriever``, ``dense``, ``likelihood``, ``verdict``, or a fusion ``rrf:a+b``) reranks the same
pool; each keep's recall of the question's gold documents, and seconds per question. Each base
signal scores a question's pool once; a fusion reuses those scores and is charged their seconds.
The first question's pool is scored once untimed first, so loading the encoder or the model is
not charged to a signal (and a model that cannot score a signal stops there, before the run).

    from netcast.specs.rerank import rerank_check
    check = rerank_check(examples, retriever, ["retriever", "dense"], pool=15, keeps=[3], lm=lm)
    check.mean_recall("dense", 3), check.interval("dense", 3), check.seconds_per_question("dense")
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from netcast.errors import InputError
from netcast.evaluation.metrics import retrieval_prf
from netcast.evaluation.stats import bootstrap_ci


@dataclass
class RerankCheck:
    """Per-question recall@keep of each signal (``recall[signal][keep]``), the seconds each
    signal spent reranking, and the pool's own recall and retrieval seconds."""

    signals: list[str]
    keeps: list[int]
    pool: int
    recall: dict[str, dict[int, list[float]]]
    seconds: dict[str, float]
    pool_recall: list[float]
    pool_seconds: float

    @property
    def n(self) -> int:
        return len(self.pool_recall)

    def mean_recall(self, signal: str, keep: int) -> float:
        values = self.recall[signal][keep]
        return sum(values) / len(values)

    def interval(self, signal: str, keep: int, seed: int = 0) -> tuple[float, float]:
        """The 95% percentile bootstrap interval of the mean recall (``evaluation.stats``)."""
        _, low, high = bootstrap_ci(self.recall[signal][keep], seed=seed)
        return float(low), float(high)

    def seconds_per_question(self, signal: str) -> float:
        return self.seconds[signal] / self.n

    def pool_mean_recall(self) -> float:
        return sum(self.pool_recall) / self.n


def check_signals(signals: Sequence[str]) -> list[str]:
    """The signal names, each parsed (an unknown one is one ``InputError``)."""
    from netcast.programs.shared.rerank import parse_signal

    names = [s.strip() for s in signals if s.strip()]
    if not names:
        raise InputError("--signals: give at least one signal")
    for name in names:
        parse_signal(name)
    return names


def check_keeps(keeps: Sequence[int], pool: int) -> list[int]:
    """The keeps, each between 1 and ``pool``."""
    keeps = list(keeps)
    if not keeps:
        raise InputError("--keep: give at least one number")
    for k in keeps:
        if not 1 <= k <= pool:
            raise InputError(f"--keep {k} must be between 1 and --pool {pool}")
    return keeps


def rerank_check(
    examples: Sequence[Any],
    retriever: Any,
    signals: Sequence[str],
    pool: int,
    keeps: Sequence[int],
    lm: Any = None,
) -> RerankCheck:
    """Rerank a ``pool``-deep retrieval for each of ``examples`` (those with ``gold_ids``)
    with every signal and measure recall@keep of the gold documents (module docstring)."""
    from netcast.programs.shared.rerank import order, parse_signal, rrf, score

    names = check_signals(signals)
    keeps = check_keeps(keeps, pool)
    examples = [e for e in examples if e.get("gold_ids")]
    if not examples:
        raise InputError("no question has gold evidence (gold_ids)")
    warm = retriever.search(examples[0].question, 1)
    bases = list(dict.fromkeys(p for name in names for p in parse_signal(name)))
    for base in bases:  # loads the encoder or model untimed; a model that cannot score a
        score(base, examples[0].question, warm, lm)  # signal stops here, with one line
    recall: dict[str, dict[int, list[float]]] = {name: {k: [] for k in keeps} for name in names}
    seconds = dict.fromkeys(names, 0.0)
    pool_recall, pool_seconds = [], 0.0
    for example in examples:
        start = time.perf_counter()
        hits = retriever.search(example.question, pool)
        pool_seconds += time.perf_counter() - start
        pool_recall.append(retrieval_prf([h.chunk.id for h in hits], example.gold_ids)["recall"])
        scores, spent = {}, {}
        for base in bases:  # each base signal once per question, whatever fuses it
            start = time.perf_counter()
            scores[base] = score(base, example.question, hits, lm)
            spent[base] = time.perf_counter() - start
        for name in names:
            parts = parse_signal(name)
            if name.startswith("rrf:"):
                values = rrf([order(p, scores[p]) for p in parts], len(hits))
            else:
                values = scores[name]
            seconds[name] += sum(spent[p] for p in parts)
            ranked = [hits[i].chunk.id for i in order(name, values)]
            for k in keeps:
                recall[name][k].append(retrieval_prf(ranked[:k], example.gold_ids)["recall"])
    return RerankCheck(names, keeps, pool, recall, seconds, pool_recall, pool_seconds)
