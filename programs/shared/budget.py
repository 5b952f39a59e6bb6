"""Token-budgeted selection (One-SHOT's Top-K_max, also the first round of ``combined``):
choose chunks maximizing total relevance subject to total tokens <= budget. Flat, pure
functions over numpy arrays.

Relevance must be positive and comparable within one query; ``relevance`` maps each
retriever's scores into (0, 1]:

- BM25 and hybrid (RRF) scores are non-negative and unbounded: divided by the query's maximum.
- Dense scores are cosines in [-1, 1]: shifted to [0, 1] by ``(cos + 1) / 2``, then divided by
  the maximum.

A small floor (1e-6) keeps every candidate strictly positive.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

FLOOR = 1e-6


def relevance(scores: Sequence[float], kind: str) -> np.ndarray:
    values = np.asarray(scores, dtype=np.float64)
    if values.size == 0:
        return values
    if kind == "dense":
        values = (values + 1.0) / 2.0
    top = values.max()
    values = values / top if top > 0 else np.ones_like(values)
    return np.maximum(values, FLOOR)


def knapsack_exact(
    values: Sequence[float], weights: Sequence[int], budget: int, resolution: int = 1
) -> list[int]:
    """Indices of the 0/1 knapsack optimum (dynamic programming over capacity, vectorized per
    item). ``resolution`` > 1 measures weights in blocks of that many tokens, each weight
    rounded up, so the selection still fits the real budget; it trades optimality for speed
    and memory (a ``n x budget/resolution`` decision table)."""
    v = np.asarray(values, dtype=np.float64)
    w = np.ceil(np.asarray(weights, dtype=np.float64) / resolution).astype(np.int64)
    cap = int(budget // resolution)
    if v.size == 0 or cap <= 0:
        return []
    best = np.zeros(cap + 1)
    take = np.zeros((v.size, cap + 1), dtype=bool)
    for i in range(v.size):
        wi = w[i]
        if wi > cap:
            continue
        candidate = best[: cap + 1 - wi] + v[i]
        improved = candidate > best[wi:]
        take[i, wi:] = improved
        best[wi:] = np.where(improved, candidate, best[wi:])
    chosen, c = [], cap
    for i in range(v.size - 1, -1, -1):
        if take[i, c]:
            chosen.append(i)
            c -= w[i]
    return sorted(chosen)


def knapsack_greedy(values: Sequence[float], weights: Sequence[int], budget: int) -> list[int]:
    """Indices by relevance per token, best first, each added if it still fits."""
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    order = np.argsort(-(v / np.maximum(w, 1)), kind="stable")
    chosen, used = [], 0
    for i in order:
        if used + w[i] <= budget:
            chosen.append(int(i))
            used += int(w[i])
    return sorted(chosen)


SELECTORS = {"exact": knapsack_exact, "greedy": knapsack_greedy}


def select(
    values: Sequence[float],
    weights: Sequence[int],
    budget: int,
    selector: str = "exact",
    resolution: int = 1,
) -> list[int]:
    if selector == "exact":
        return knapsack_exact(values, weights, budget, resolution)
    if selector == "greedy":
        return knapsack_greedy(values, weights, budget)
    raise ValueError(f"unknown selector {selector!r}; use 'exact' or 'greedy'")


def budgeted_hits(hits, kind: str, budget: int, selector: str = "exact", resolution: int = 1):
    """Top-K_max over retrieved hits: the ``selector`` selection of ``hits`` within ``budget``
    tokens (each hit's ``chunk.n_tokens``), in their ranked order."""
    rel = relevance([h.score for h in hits], kind)
    picked = set(select(rel, [h.chunk.n_tokens for h in hits], budget, selector, resolution))
    return [h for i, h in enumerate(hits) if i in picked]


def default_token_budget(context_window: int) -> int:
    """One-SHOT's 32k-token budget scaled to the model: a quarter of its context window (the
    paper's 32k of a 128k window), at most 32k. 2,048 for the embedded model at n_ctx 8,192."""
    return min(32_000, context_window // 4)


def budget_range(context_window: int) -> tuple[int, int]:
    """The token budgets worth tuning for a model: 256 up to half its window (at most 32k)."""
    return 256, max(512, min(32_000, context_window // 2))
