"""Exact (0/1 knapsack DP) vs greedy token-budgeted selection time, at T = 32k tokens.

.venv/bin/python benchmarks/selection.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import header, table

from netcast.programs.shared.budget import knapsack_exact, knapsack_greedy


def best_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--candidates", default="100,1000,5000", help="pool sizes to time")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    budget = 32_000
    header(f"Token-budgeted selection, budget {budget:,} tokens (best of 3 runs)")
    rows = []
    for n in (int(x) for x in args.candidates.split(",")):
        values = rng.uniform(0.01, 1.0, n)
        weights = rng.integers(50, 400, n)  # chunk sizes of HotpotQA-like passages
        exact = best_ms(lambda v=values, w=weights: knapsack_exact(v, w, budget), 3)
        coarse = best_ms(lambda v=values, w=weights: knapsack_exact(v, w, budget, 8), 3)
        greedy = best_ms(lambda v=values, w=weights: knapsack_greedy(v, w, budget), 3)
        e = knapsack_exact(values, weights, budget)
        g = knapsack_greedy(values, weights, budget)
        rows.append([n, exact, coarse, greedy, f"{values[g].sum() / values[e].sum():.5f}"])
    table(
        [
            "candidates",
            "exact ms",
            "exact, resolution 8 ms",
            "greedy ms",
            "greedy relevance / exact",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
