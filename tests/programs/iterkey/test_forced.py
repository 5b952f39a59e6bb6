import math
from types import SimpleNamespace

import pytest

from netcast.programs.iterkey.forced import p_true


class Engine:
    """An engine's forced-decoding answer: one spelling per distinct first token."""

    def __init__(self, probabilities):
        self.probabilities = probabilities

    def next_token_logprobs(self, messages, prefix, candidates):
        logprobs = {c: math.log(p) for c, p in self.probabilities.items() if c in candidates}
        return logprobs, 10


def test_every_distinct_spelling_of_a_verdict_adds_its_probability():
    # case and leading-space variants are different tokens with different probabilities;
    # two of them happen to have the same probability and are still two events
    lm = SimpleNamespace(
        engine=Engine({"True": 0.3, "true": 0.1, " True": 0.05, " true": 0.05, "False": 0.2})
    )
    assert p_true(lm, [], "") == pytest.approx(0.5 / 0.7)


def test_no_verdict_among_the_next_tokens_is_no_probability():
    lm = SimpleNamespace(engine=Engine({"Maybe": 0.9}))
    assert p_true(lm, [], "") is None
