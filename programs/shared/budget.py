"""Token-budgeted selection (One-SHOT's Top-K_max, Fishing for Answers §3.1.1, Eq. 1; also the
first round of ``combined``): from a candidate pool, choose the chunks maximizing the summed
relevance ``r_i`` subject to their summed tokens ``t_i`` <= the budget ``T_max``. Flat, pure
functions over numpy arrays.

Relevance (``relevance``). Eq. 1 sums the retriever's own relevance ``r_i`` ("e.g. embedding
similarity"), so the scores are used as they are, only divided by the query's best score (a
positive scale changes nothing in Eq. 1; it just makes relevance comparable within a query):

- Dense scores are raw cosines. They are *not* shifted to ``(cos + 1) / 2``: a shift adds the
  same constant to every chunk, which rewards many short chunks over one relevant long one
  (cosines [0.5, 0.1, 0.1], tokens [100, 50, 50], budget 100: raw cosines pick chunk 0, the
  shifted ones pick chunks 1 and 2).
- BM25 and hybrid (RRF) scores are already non-negative.

Every relevance is then floored at ``FLOOR`` (1e-6): a chunk with a cosine <= 0 is never chosen
for its own sake (any positive chunk that fits outweighs it), it only fills room that no
positive chunk can use.

Pool (``pool_depth``, ``budget_pool``, ``candidate_hits``). The knapsack can only fill the budget
if the pool holds more tokens than the budget: a fixed top-50 pool (~6k tokens) never binds a
32k budget, and Top-K_max degenerates to top-50. By default the pool is therefore sized by the
budget: retrieve enough chunks (estimated from the corpus's mean chunk length, with a margin)
for ``POOL_FACTOR`` (2) times the budget, at most ``MAX_POOL`` (1,000: the exact knapsack's
decision table is pool x budget booleans, 32 MB at 1,000 x 32k), then keep the ranked prefix
whose tokens first reach ``POOL_FACTOR`` x budget. An explicit ``pool_size`` overrides this
with the plain top-``pool_size``.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from netcast.corpus import Corpus

FLOOR = 1e-6
POOL_FACTOR = 2.0  # the pool holds this many budgets' worth of tokens
MAX_POOL = 1_000  # at most this many candidates (bounds retrieval and the knapsack table)
DEPTH_MARGIN = 1.5  # retrieve this much more than the mean chunk length predicts, then trim

_MEAN_TOKENS: weakref.WeakKeyDictionary[Corpus, float] = weakref.WeakKeyDictionary()


def relevance(scores: Sequence[float], kind: str) -> np.ndarray:
    """Eq. 1's ``r_i`` for one query's hits: the scores divided by their maximum, floored at
    ``FLOOR`` (cosines <= 0 get the floor). ``kind`` names the retriever; every kind is
    treated alike (raw scores, never shifted), see the module docstring."""
    values = np.asarray(scores, dtype=np.float64)
    if values.size == 0:
        return values
    top = values.max()
    values = values / top if top > 0 else np.zeros_like(values)
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
    """Indices chosen by the named selector (``exact`` knapsack or ``greedy``)."""
    if selector == "exact":
        return knapsack_exact(values, weights, budget, resolution)
    if selector == "greedy":
        return knapsack_greedy(values, weights, budget)
    raise ValueError(f"unknown selector {selector!r}; use 'exact' or 'greedy'")


def budgeted_hits(hits, kind: str, budget: int, selector: str = "exact", resolution: int = 1):
    """Top-K_max over retrieved hits: the ``selector`` selection of ``hits`` within ``budget``
    tokens (each hit's ``chunk.n_tokens``), in their ranked order. ``hits`` is the candidate
    pool; ``candidate_hits`` retrieves one sized to the budget."""
    rel = relevance([h.score for h in hits], kind)
    picked = set(select(rel, [h.chunk.n_tokens for h in hits], budget, selector, resolution))
    return [h for i, h in enumerate(hits) if i in picked]


# --- the candidate pool ---------------------------------------------------------------------


def mean_chunk_tokens(corpus: Corpus) -> float:
    """The corpus's mean chunk length in tokens (computed once per corpus object)."""
    if corpus not in _MEAN_TOKENS:
        _MEAN_TOKENS[corpus] = float(corpus.mean_tokens())
    return _MEAN_TOKENS[corpus]


def pool_depth(
    budget: int, chunk_tokens: float, factor: float = POOL_FACTOR, cap: int = MAX_POOL
) -> int:
    """How many hits to retrieve for a pool of ``factor`` x ``budget`` tokens when chunks
    average ``chunk_tokens``: ``DEPTH_MARGIN`` more than that predicts (ranked chunks may be
    shorter than average), between 1 and ``cap``."""
    wanted = DEPTH_MARGIN * factor * budget / max(chunk_tokens, 1.0)
    return int(min(cap, max(1, math.ceil(wanted))))


def budget_pool(hits: Sequence, budget: int, factor: float = POOL_FACTOR) -> list:
    """The ranked prefix of ``hits`` (anything with ``chunk.n_tokens``) whose tokens first
    reach ``factor`` x ``budget`` (all of them if they never do)."""
    target, used = factor * budget, 0
    for i, hit in enumerate(hits):
        used += hit.chunk.n_tokens
        if used >= target:
            return list(hits[: i + 1])
    return list(hits)


def candidate_hits(
    search: Callable[[str, int], list],
    query: str,
    corpus: Corpus,
    budget: int,
    pool_size: int | None = None,
    factor: float = POOL_FACTOR,
) -> list:
    """The candidate pool Top-K_max selects from, in one ``search(query, k)`` call: the top
    ``pool_size`` if given, else the budget-sized pool (``pool_depth`` deep, trimmed by
    ``budget_pool``)."""
    if pool_size:
        return search(query, pool_size)
    hits = search(query, pool_depth(budget, mean_chunk_tokens(corpus), factor))
    return budget_pool(hits, budget, factor)


def default_token_budget(context_window: int) -> int:
    """One-SHOT's 32k-token budget scaled to the model: a quarter of its context window (the
    paper's 32k of a 128k window), at most 32k. 2,048 for the embedded model at n_ctx 8,192."""
    return min(32_000, context_window // 4)


def budget_range(context_window: int) -> tuple[int, int]:
    """The token budgets worth tuning for a model: 256 up to half its window (at most 32k)."""
    return 256, max(512, min(32_000, context_window // 2))
