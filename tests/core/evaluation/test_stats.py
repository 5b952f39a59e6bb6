"""The statistics module against exact reference values."""

from itertools import product

import numpy as np
import pytest

from netcast.evaluation.stats import bootstrap_ci, paired, paired_p_value


def test_sign_flip_p_is_exact_on_small_n():
    # differences 1, 2, 3: of the 8 sign patterns, |sum| >= 6 twice -> p = 2/8
    assert paired_p_value([1, 2, 3], [0, 0, 0]) == 0.25
    # five equal differences: only all-plus and all-minus reach |mean| 1 -> 2/32
    assert paired_p_value([1] * 5, [0] * 5) == 0.0625
    # 1, 1, -1: |sum| >= 1 in every pattern (sums are odd) -> 1
    assert paired_p_value([1, 1, 0], [0, 0, 1]) == 1.0
    assert paired_p_value([1.0], [0.0]) == 1.0  # one pair: +d and -d equally extreme


def test_sign_flip_p_matches_enumeration_of_every_pattern():
    d = np.array([0.5, -0.2, 0.9, 0.0, 0.4, 0.7, -0.1, 0.3])
    observed = abs(d.mean())
    sums = [abs(np.dot(s, d)) / d.size for s in product((-1, 1), repeat=d.size)]
    exact = sum(m >= observed - 1e-12 for m in sums) / len(sums)
    assert paired_p_value(d, np.zeros_like(d)) == pytest.approx(exact, abs=1e-12)
    assert exact == 20 / 256  # the 0.0 difference doubles every pattern


def test_sign_flip_p_never_zero_by_monte_carlo():
    # 40 equal differences: exact p would be 2 / 2**40; by Monte Carlo it is counted with the
    # observed pattern, 1 / (n + 1), never 0
    p = paired_p_value([1.0] * 40, [0.0] * 40, n=999)
    assert p == pytest.approx(2 / 1000)
    assert paired_p_value([0.3] * 10, [0.3] * 10) == 1.0


def test_bootstrap_interval_of_two_values_is_their_range():
    # resampled means of [0, 1] are 0, 0.5, 1 with probability 1/4, 1/2, 1/4: the 2.5th and
    # 97.5th percentiles are exactly 0 and 1
    assert bootstrap_ci([0.0, 1.0]) == (0.5, 0.0, 1.0)


def test_bootstrap_interval_matches_normal_theory_on_large_n():
    rng = np.random.default_rng(3)
    values = rng.integers(0, 2, size=4000).astype(float)
    mean, low, high = bootstrap_ci(values, seed=1)
    half = 1.96 * values.std() / np.sqrt(values.size)
    assert mean == values.mean()
    assert low == pytest.approx(mean - half, abs=0.004)
    assert high == pytest.approx(mean + half, abs=0.004)


def test_bootstrap_edges_and_reproducibility():
    assert bootstrap_ci([]) == (None, None, None)
    assert bootstrap_ci([0.4]) == (0.4, 0.4, 0.4)
    assert bootstrap_ci([0.25] * 7) == (0.25, 0.25, 0.25)
    values = [0.0, 0.3, 1.0, 0.5, 0.9, 0.1]
    assert bootstrap_ci(values, seed=7) == bootstrap_ci(values, seed=7)


def test_paired_uses_the_shared_questions_only():
    a = {"q1": 1.0, "q2": 1.0, "q3": 1.0, "only_a": 0.0}
    b = {"q3": 0.0, "q2": 0.0, "q1": 0.0, "only_b": 1.0}
    test = paired(a, b)
    assert (test.n, test.diff, test.p) == (3, 1.0, 0.25)
    assert test.ci == (1.0, 1.0, 1.0)
    assert test.beats(0.3) and not test.beats(0.2) and not test.trails(0.3)
    assert paired(b, a).trails(0.3)
    assert paired({"x": 1.0}, {"y": 0.0}) == paired({}, {})
    assert paired({}, {}).n == 0 and paired({}, {}).p == 1.0
