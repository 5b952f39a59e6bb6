"""The statistics netcast reports and decides by, from ``scipy.stats``.

- ``bootstrap_ci``: the mean of per-question scores with its percentile bootstrap interval
  (``scipy.stats.bootstrap``), reproducible for a seed.
- ``paired_p_value``: the two-sided paired sign-flip (permutation) test of a mean difference
  (``scipy.stats.permutation_test`` with ``permutation_type="samples"`` on the differences):
  exact (every sign pattern) when ``2**n`` is at most ``n_resamples``, otherwise Monte Carlo,
  whose p counts the observed pattern too and so is never 0.
- ``paired``: both of the above for two runs' per-question scores on the questions both
  scored, keyed by question id.

What they guard against: on a few dozen questions, settings a few F1 points apart are noise;
every comparison is paired (the same questions), and a difference is read as a finding only at
the stated p.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
PERMUTATION_RESAMPLES = 9999


def bootstrap_ci(
    values: Sequence[float],
    n: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
    alpha: float = 1 - CONFIDENCE,
) -> tuple[float | None, float | None, float | None]:
    """(mean, low, high): the mean of ``values`` and its ``1 - alpha`` percentile bootstrap
    interval from ``n`` resamples; (None, None, None) without values, the mean three times for
    one value (nothing to resample) or when every value is the same."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return None, None, None
    mean = float(data.mean())
    if data.size == 1 or np.all(data == data[0]):
        return mean, mean, mean
    result = stats.bootstrap(
        (data,),
        np.mean,
        n_resamples=n,
        confidence_level=1 - alpha,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    interval = result.confidence_interval
    return mean, float(interval.low), float(interval.high)


def _mean_difference(d: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(d, axis=axis)


def paired_p_value(
    a: Sequence[float], b: Sequence[float], n: int = PERMUTATION_RESAMPLES, seed: int = 0
) -> float:
    """Two-sided paired sign-flip test of mean(a - b) = 0: exact when ``2**len(a) <= n``,
    else from ``n`` random sign patterns; 1.0 when no pair differs or for one pair (its two
    sign patterns are equally extreme)."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if d.size < 2 or not np.any(d):
        return 1.0
    result = stats.permutation_test(
        (d,),
        _mean_difference,
        permutation_type="samples",
        vectorized=True,
        n_resamples=n,
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    return float(min(1.0, result.pvalue))


@dataclass(frozen=True)
class Paired:
    """``a`` - ``b`` on the questions both scored."""

    n: int
    diff: float  # mean difference
    low: float | None  # its bootstrap interval
    high: float | None
    p: float  # the sign-flip p

    @property
    def ci(self) -> tuple[float | None, float | None, float | None]:
        return self.diff if self.n else None, self.low, self.high

    def trails(self, p_value: float) -> bool:
        """Whether ``a`` is worse than ``b`` at ``p_value``."""
        return self.n > 0 and self.diff < 0 and self.p < p_value

    def beats(self, p_value: float) -> bool:
        """Whether ``a`` is better than ``b`` at ``p_value``."""
        return self.n > 0 and self.diff > 0 and self.p < p_value


def paired(
    a: Mapping[str, float | None],
    b: Mapping[str, float | None],
    seed: int = 0,
    interval: bool = True,
) -> Paired:
    """``a`` - ``b`` (per-question scores keyed by question id; a missing score counts 0) on the
    questions both scored, in ``a``'s order: n, the mean difference, its bootstrap interval
    (skipped with ``interval=False``) and the sign-flip p."""
    ids = [i for i in a if i in b]
    if not ids:
        return Paired(0, 0.0, None, None, 1.0)
    qa = [a[i] or 0.0 for i in ids]
    qb = [b[i] or 0.0 for i in ids]
    diffs = [x - y for x, y in zip(qa, qb, strict=True)]
    mean, low, high = bootstrap_ci(diffs, seed=seed) if interval else (None, None, None)
    mean = float(np.mean(diffs)) if mean is None else mean
    return Paired(len(ids), mean, low, high, paired_p_value(qa, qb, seed=seed))
