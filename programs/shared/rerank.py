"""One reranker over a candidate pool of hits: score every passage with a signal, keep the best.

Signals (``score(signal, question, hits, lm)``, one score per hit, higher is better):

- ``retriever``: the retriever's own order (the hit's score; ``rerank`` keeps the pool's order);
- ``dense``: cosine similarity of question and passage under the shipped MiniLM encoder;
- ``likelihood``: question likelihood (UPR, Sachan et al. 2022): the mean log-probability of
  the question's tokens given the passage, one forward pass per passage; needs a model that
  gives prompt log-probabilities (the embedded llama.cpp engine);
- ``verdict``: the model's P("True") that the passage helps answer the question (forced
  decoding of the next token, as IterKey's validation);
- ``rrf:a+b[+c]``: reciprocal-rank fusion (k = 60) of the rankings of any of the above.

Pure functions, no state: the pool, the question and the model go in, scores come out.
``relevance_scores`` gives a signal's positive values for a selection that weighs them
(One-SHOT's knapsack). Both record what they did (signal, pool ids, scores, kept ids,
seconds) as a ``rerank`` stage of the active trace."""

from __future__ import annotations

import math
import time
from typing import Any

import dspy

from netcast import trace
from netcast.corpus import format_passage
from netcast.errors import InputError
from netcast.retrievers.base import Hit

SIGNALS = ("retriever", "dense", "likelihood", "verdict")
RRF_K = 60
UPR_INSTRUCTION = "Please write a question based on this passage."


class PassageHelps(dspy.Signature):
    """Judge whether the passage helps answer the question. Reply True if it contains
    information needed to answer the question; otherwise False."""

    question: str = dspy.InputField()
    passage: str = dspy.InputField()
    helps: bool = dspy.OutputField(desc="True or False")


def parse_signal(signal: str) -> tuple[str, ...]:
    """The base signals a signal name combines: ``"dense"`` -> ``("dense",)``,
    ``"rrf:retriever+dense"`` -> ``("retriever", "dense")``; ``InputError`` if unknown."""
    parts = tuple(signal[4:].split("+")) if signal.startswith("rrf:") else (signal,)
    if not all(p in SIGNALS for p in parts) or (signal.startswith("rrf:") and len(parts) < 2):
        raise InputError(
            f"unknown rerank signal {signal!r}; signals are {', '.join(SIGNALS)} "
            "or rrf:a+b[+c] of them"
        )
    return parts


def valid_signal(value: str) -> str:
    """A pydantic field validator's body for a knob naming a signal (``ValueError``)."""
    try:
        parse_signal(value)
    except InputError as err:
        raise ValueError(str(err)) from None
    return value


def score(signal: str, question: str, hits: list[Hit], lm: Any = None) -> list[float]:
    """One score per hit under ``signal`` (higher is better), in the hits' order. ``lm``
    (default: DSPy's configured LM) is read by ``likelihood`` and ``verdict`` only."""
    parts = parse_signal(signal)
    if needs_model(signal):
        lm = lm if lm is not None else dspy.settings.lm
        if lm is None:
            raise InputError(f"the {signal} rerank signal needs a model; none is configured")
        if "likelihood" in parts:
            check_likelihood(lm)
    if not hits:
        return []
    if signal.startswith("rrf:"):
        return rrf([order(p, score(p, question, hits, lm)) for p in parts], len(hits))
    if signal == "retriever":
        return [h.score for h in hits]
    passages = [format_passage(h.chunk.title, h.chunk.text) for h in hits]
    if signal == "dense":
        from netcast.retrievers.dense import embed

        vectors = embed([question, *passages])
        return [float(v) for v in vectors[1:] @ vectors[0]]
    if signal == "likelihood":
        return [question_likelihood(lm, question, p) for p in passages]
    return [passage_verdict(lm, question, p) for p in passages]


def needs_model(signal: str) -> bool:
    """Whether ``signal`` calls a model (``likelihood``, ``verdict``, or a fusion with one)."""
    return bool({"likelihood", "verdict"} & set(parse_signal(signal)))


def order(signal: str, scores: list[float]) -> list[int]:
    """Positions best first: by score (ties in pool order), the pool's own order for
    ``retriever``."""
    if signal == "retriever":
        return list(range(len(scores)))
    return sorted(range(len(scores)), key=lambda i: -scores[i])


def rrf(orders: list[list[int]], n: int, k: int = RRF_K) -> list[float]:
    """Reciprocal-rank fusion of rankings of ``n`` items (positions, best first): item i
    scores the sum over rankings of 1 / (k + its rank), ranks from 1."""
    fused = [0.0] * n
    for ranking in orders:
        for rank, i in enumerate(ranking, start=1):
            fused[i] += 1.0 / (k + rank)
    return fused


def rerank(question: str, hits: list[Hit], signal: str, keep: int, lm: Any = None) -> list[Hit]:
    """The ``keep`` best hits of the pool under ``signal``, best first, each carrying its new
    score; recorded as a ``rerank`` stage of the active trace."""
    start = time.perf_counter()
    scores = score(signal, question, hits, lm)
    kept = [Hit(hits[i].chunk, scores[i]) for i in order(signal, scores)[:keep]]
    record(signal, hits, scores, kept, start)
    return kept


def relevance_scores(question: str, hits: list[Hit], signal: str, lm: Any = None) -> list[float]:
    """Positive relevance values of the pool under ``signal`` for a selection that weighs them
    (One-SHOT's knapsack): the signal's scores, with ``likelihood``'s mean log-probability
    turned into a per-token probability (its exponential); recorded as a ``rerank`` stage
    that keeps the whole pool."""
    start = time.perf_counter()
    scores = score(signal, question, hits, lm)
    if signal == "likelihood":
        scores = [math.exp(s) for s in scores]
    record(signal, hits, scores, hits, start)
    return scores


def record(signal: str, hits: list[Hit], scores: list[float], kept: list[Hit], start: float):
    """The ``rerank`` stage of the active trace: signal, pool ids, scores, kept ids, seconds."""
    active = trace.current()
    if active is not None:
        active.add_stage(
            "rerank",
            signal=signal,
            ids=[h.chunk.id for h in hits],
            scores=[round(s, 6) for s in scores],
            kept=[h.chunk.id for h in kept],
            seconds=round(time.perf_counter() - start, 6),
        )


def check_likelihood(lm: Any) -> None:
    """``InputError`` (one line) unless ``lm`` gives prompt log-probabilities."""
    if not hasattr(getattr(lm, "engine", None), "continuation_logprobs"):
        name = getattr(lm, "model", type(lm).__name__)
        raise InputError(
            f"{name} gives no prompt log-probabilities: the likelihood rerank signal needs "
            "the embedded model"
        )


def question_likelihood(lm: Any, question: str, passage: str) -> float:
    """Mean log-probability of the question's tokens after the passage and UPR's instruction."""
    check_likelihood(lm)
    context = f"Passage: {passage}\n{UPR_INSTRUCTION}\nQuestion:"
    logprobs, n_tokens = lm.engine.continuation_logprobs(context, " " + question.strip())
    active = trace.current()
    if active is not None:
        active.add_lm_call(n_tokens, 0, cached=False)
    return sum(logprobs) / len(logprobs)


def passage_verdict(lm: Any, question: str, passage: str) -> float:
    """P("True") that the passage helps answer the question; 0.0 when neither verdict is
    among the model's next tokens."""
    from netcast.programs.iterkey.forced import p_true

    inputs = {"question": question, "passage": passage}
    messages = dspy.ChatAdapter().format(PassageHelps, [], inputs)
    p = p_true(lm, messages, "[[ ## helps ## ]]\n")
    if p is None:
        trace.count("rerank_verdict", "fallbacks")
    return p or 0.0
