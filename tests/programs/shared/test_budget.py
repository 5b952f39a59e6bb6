from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netcast.corpus import Chunk
from netcast.programs.shared.budget import (
    FLOOR,
    MAX_POOL,
    budget_pool,
    budget_range,
    budgeted_hits,
    candidate_hits,
    default_token_budget,
    knapsack_exact,
    knapsack_greedy,
    mean_chunk_tokens,
    pool_depth,
    relevance,
    select,
)
from netcast.retrievers.base import Hit

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


def hits_of(scores, tokens):
    return [
        Hit(Chunk(f"c{i}#0", f"c{i}", "", "text", n, {}), score)
        for i, (score, n) in enumerate(zip(scores, tokens, strict=True))
    ]


def test_relevance_normalization_is_positive_and_at_most_one():
    bm25 = relevance([12.0, 6.0, 0.0], "bm25")
    assert list(bm25[:2]) == [1.0, 0.5] and 0 < bm25[2] < 1e-5
    dense = relevance([0.8, -0.2, -1.0], "dense")
    assert list(dense) == [1.0, FLOOR, FLOOR]  # raw cosines, never shifted; <= 0 floored
    assert list(relevance([0.5, 0.1], "dense")) == [1.0, pytest.approx(0.2)]
    assert np.all(relevance([-0.1, -0.3], "dense") == FLOOR)
    assert relevance([], "bm25").size == 0


def test_dense_relevance_is_the_raw_cosine_of_eq_1():
    # the example: one relevant chunk beats two weak ones of the same total size
    cosines, tokens = [0.5, 0.1, 0.1], [100, 50, 50]
    assert budgeted_hits(hits_of(cosines, tokens), "dense", 100) == hits_of(cosines, tokens)[:1]
    shifted = [(c + 1) / 2 for c in cosines]  # the old (cos + 1) / 2 picked the two short ones
    assert knapsack_exact(shifted, tokens, 100) == [1, 2]


def test_negative_cosines_only_fill_room_no_positive_chunk_can_use():
    cosines, tokens = [0.05, -0.1, -0.1, -0.1], [100, 34, 33, 33]
    chosen = budgeted_hits(hits_of(cosines, tokens), "dense", 100)
    assert [h.chunk.id for h in chosen] == ["c0#0"]  # not three negative ones for their number
    chosen = budgeted_hits(hits_of([0.5, -0.2], [50, 50]), "dense", 100)
    assert len(chosen) == 2  # spare room is still filled


def test_pool_depth_retrieves_enough_chunks_for_twice_the_budget():
    assert pool_depth(32_000, 130) == 739  # 1.5 x 2 x 32,000 / 130, rounded up
    assert pool_depth(32_000, 20) == MAX_POOL  # capped
    assert pool_depth(100, 130) == 3 and pool_depth(1, 1000) == 1
    assert pool_depth(1000, 100, factor=4.0) == 60


def test_budget_pool_is_the_ranked_prefix_reaching_the_factor_times_the_budget():
    hits = hits_of([5, 4, 3, 2, 1], [40, 30, 50, 20, 10])
    assert budget_pool(hits, 50) == hits[:3]  # 40 + 30 + 50 = 120 >= 2 x 50
    assert budget_pool(hits, 35) == hits[:2]  # exactly 70
    assert budget_pool(hits, 50, factor=1.0) == hits[:2]
    assert budget_pool(hits, 1000) == hits  # never reached: everything


def test_candidate_hits_is_one_search_sized_by_the_budget_or_pool_size(tiny_corpus):
    asked = []

    def search(query, k):
        asked.append((query, k))
        return hits_of(range(k, 0, -1), [10] * k)

    mean = mean_chunk_tokens(tiny_corpus)
    pool = candidate_hits(search, "q", tiny_corpus, 100)
    assert asked == [("q", pool_depth(100, mean))]
    assert len(pool) == 20  # 20 chunks of 10 tokens = 2 x 100
    asked.clear()
    assert len(candidate_hits(search, "q", tiny_corpus, 100, pool_size=7)) == 7
    assert asked == [("q", 7)]  # an explicit pool_size is a plain top-k


def test_mean_chunk_tokens(tiny_corpus):
    sizes = [c.n_tokens for c in tiny_corpus]
    assert mean_chunk_tokens(tiny_corpus) == pytest.approx(sum(sizes) / len(sizes))


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
