"""Smoke tests: every strategy runs end to end with the real embedded model on one bundled
HotpotQA question (small knobs to keep CI short). They check that the parts fit together,
not answer quality."""

import dspy
import pytest

import netcast
from netcast.data import load_dataset
from netcast.programs import Combined, Iterative, IterKey, KnowledgeAware, OneShot, SearchR1
from netcast.session import open_retriever

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def embedded_lm():
    return netcast.make_lm()  # constrained JSON decoding, as users get it


@pytest.fixture(scope="module")
def setup(embedded_lm):
    data = load_dataset("hotpotqa-sample", "dev", limit=1)
    return data.examples[0], open_retriever(data, counter=netcast.token_counter(embedded_lm))


@pytest.mark.parametrize(
    ("program", "knobs"),
    [
        (OneShot, {"token_budget": 600, "pool_size": 10, "filter": True, "crop": True}),
        (Iterative, {"max_turns": 2, "k": 3}),
        (Combined, {"max_turns": 1, "token_budget": 400}),
        (IterKey, {"max_iters": 2, "k": 2, "validation": "logprobs"}),
        (SearchR1, {"max_turns": 2, "k": 2, "dedup": True, "contextualize": True}),
        (KnowledgeAware, {"max_steps": 1, "k": 3}),
    ],
)
def test_strategy_runs_on_the_embedded_model(setup, embedded_lm, program, knobs):
    example, retriever = setup
    with dspy.context(lm=embedded_lm):
        prediction = program(retriever, lm=embedded_lm, **knobs)(question=example.question)
    assert isinstance(prediction.answer, str)
    trace = prediction.trace
    assert trace["lm_calls"] >= 1 and trace["tokens_in"] > 0
    assert trace["searches"] or trace["turns"]  # it retrieved, or decided (maybe not to)
    assert all(cid in retriever.corpus.by_id for cid in prediction.evidence)


@pytest.mark.parametrize(
    ("program", "knobs"),
    [(Iterative, {"max_turns": 3, "k": 3}), (KnowledgeAware, {"max_steps": 2, "k": 3})],
)
def test_agent_replies_always_parse_on_the_embedded_model(embedded_lm, program, knobs):
    """Constrained decoding: over 3 questions, no step of the agent has an unreadable reply."""
    data = load_dataset("hotpotqa-sample", "dev", limit=3)
    retriever = open_retriever(data, counter=netcast.token_counter(embedded_lm))
    agent = program(retriever, lm=embedded_lm, **knobs)
    assert type(agent.adapter).__name__ == "JSONAdapter"
    calls = 0
    with dspy.context(lm=embedded_lm, adapter=None):  # the program's own (JSON) adapter
        for example in data.examples:
            steps = agent(question=example.question).trace["steps"]
            calls += sum(s["calls"] for s in steps.values())
            assert all(s["parse_failures"] == 0 and s["unreadable"] == 0 for s in steps.values())
    assert calls >= 6
