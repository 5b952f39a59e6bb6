from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netcast.programs.shared.budget import (
    budget_range,
    budgeted_hits,
    default_token_budget,
    knapsack_exact,
    knapsack_greedy,
    relevance,
    select,
)

items = st.lists(st.tuples(st.floats(0.01, 1.0), st.integers(1, 60)), min_size=0, max_size=9)


def total(indices, column):
    return sum(column[i] for i in indices)


def brute_force(values, weights, budget):
    best = 0.0
    for r in range(len(values) + 1):
        for combo in combinations(range(len(values)), r):
            if total(combo, weights) <= budget:
                best = max(best, total(combo, values))
    return best


@settings(max_examples=200, deadline=None)
@given(items, st.integers(0, 200))
def test_exact_equals_brute_force(pairs, budget):
    values = [v for v, _ in pairs]
    weights = [w for _, w in pairs]
    chosen = knapsack_exact(values, weights, budget)
    assert total(chosen, weights) <= budget
    assert total(chosen, values) == pytest.approx(brute_force(values, weights, budget))


@settings(max_examples=200, deadline=None)
@given(items, st.integers(0, 200), st.integers(1, 16))
def test_no_selection_exceeds_the_budget_and_greedy_never_beats_exact(pairs, budget, res):
    values = [v for v, _ in pairs]
    weights = [w for _, w in pairs]
    exact = knapsack_exact(values, weights, budget)
    coarse = knapsack_exact(values, weights, budget, resolution=res)
    greedy = knapsack_greedy(values, weights, budget)
    for chosen in (exact, coarse, greedy):
        assert total(chosen, weights) <= budget
        assert len(set(chosen)) == len(chosen)
    assert total(greedy, values) <= total(exact, values) + 1e-9
    assert total(coarse, values) <= total(exact, values) + 1e-9


def test_greedy_can_lose_to_exact():
    # one dense chunk of 60 tokens vs two of 50: greedy takes the densest first
    values, weights = [0.9, 0.6, 0.6], [60, 50, 50]
    assert knapsack_greedy(values, weights, 100) == [0]
    assert knapsack_exact(values, weights, 100) == [1, 2]


def test_relevance_normalization_is_positive_and_at_most_one():
    bm25 = relevance([12.0, 6.0, 0.0], "bm25")
    assert list(bm25[:2]) == [1.0, 0.5] and 0 < bm25[2] < 1e-5
    dense = relevance([0.8, -0.2, -1.0], "dense")
    assert dense[0] == 1.0 and dense[1] == pytest.approx(0.4 / 0.9)
    assert np.all(dense > 0)
    assert relevance([], "bm25").size == 0


def test_select_dispatch():
    assert select([1, 1], [5, 5], 5, "greedy") == [0]
    with pytest.raises(ValueError, match="unknown selector"):
        select([1], [1], 1, "random")


def test_default_budget_is_a_quarter_of_the_window_at_most_32k():
    assert default_token_budget(8192) == 2048  # the embedded model at its default n_ctx
    assert default_token_budget(128_000) == 32_000
    assert default_token_budget(1_000_000) == 32_000


def test_budget_range_goes_up_to_half_the_window():
    assert budget_range(8192) == (256, 4096)
    assert budget_range(1_000_000) == (256, 32_000)
    low, high = budget_range(512)
    assert low < high


def test_budgeted_hits_fit_the_budget_in_ranked_order(bm25):
    hits = bm25.search("Paris France river capital", 6)
    sizes = [h.chunk.n_tokens for h in hits]
    budget = sizes[0] + sizes[2]
    chosen = budgeted_hits(hits, bm25.kind, budget)
    assert chosen and sum(h.chunk.n_tokens for h in chosen) <= budget
    assert chosen == [h for h in hits if h in chosen]  # the retriever's order is kept
    assert budgeted_hits(hits, bm25.kind, sum(sizes)) == hits
    assert budgeted_hits(hits, bm25.kind, 0) == []
