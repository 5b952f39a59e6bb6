"""``lm=`` binds the model: a program built with ``lm=`` answers with it, no ``dspy.configure``
or ``set_lm`` needed, and keeps it through DSPy's copies; the saved program state holds no
model (``netcast.load`` binds the recipe's)."""

import re

import dspy
import pytest

from helpers import ScriptedEngine
from netcast.models.factory import use_netcast_cache
from netcast.programs import PROGRAMS


def fill_fields(prompt: str) -> dict[str, str]:
    """Every output field the prompt asks for: "Paris" for the answer, a short sentence for
    any other (programs whose typed fields cannot read it fall back, as they do in use)."""
    section = prompt.split("Your output fields are:", 1)[-1].split("All interactions", 1)[0]
    fields = re.findall(r"^\d+\. `(\w+)`", section, re.M) or ["answer"]
    return {f: "Paris" if f == "answer" else "The capital of France." for f in fields}


@pytest.fixture
def unconfigured():
    """A scripted model that is not DSPy's configured one (DSPy has none)."""
    use_netcast_cache()
    dspy.configure(lm=None, adapter=None)
    engine = ScriptedEngine(fill_fields)
    yield dspy.LM("scripted/fake", engine=engine, cache=False, num_retries=0), engine
    dspy.configure(lm=None, adapter=None)


# the scripted model writes text: no next-token probabilities for iterkey's forced validation
KNOBS = {"iterkey": {"validation": "text"}}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_program_built_with_lm_answers_with_it_and_no_other_setup(name, bm25, unconfigured):
    lm, engine = unconfigured
    program = PROGRAMS[name](bm25, lm=lm, **KNOBS.get(name, {}))
    assert dspy.settings.lm is None
    assert program.predictors() and all(p.lm is lm for p in program.predictors())
    prediction = program(question="What is the capital of France?")
    assert engine.prompts  # the calls went to the model it was built with
    assert prediction.trace["lm_calls"] == len(engine.prompts)
    assert isinstance(prediction.answer, str)


def test_copies_share_the_bound_model_and_the_saved_state_holds_none(bm25, unconfigured):
    lm, _ = unconfigured
    program = PROGRAMS["basic"](bm25, lm=lm)
    for copy in (program.deepcopy(), program.reset_copy()):
        bound = [p.lm for p in copy.predictors()]
        # the model itself, not a copy (an embedded model's copy would load its weights again)
        assert bound and all(b is lm or b is None for b in bound)
    assert all(p.lm is lm for p in program.deepcopy().predictors())
    # the state an artifact saves is the prompts and demonstrations, not the model
    assert all(state["lm"] is None for state in program.dump_state().values())


def test_the_replay_session_follows_links_and_dedup_and_calls_no_model(bm25, unconfigured):
    """What an annotation teacher searches through: the knobs' link hop and de-duplication,
    no precision step and no memory, so no model is needed (none is configured here)."""
    knobs = {"links": 1, "dedup": True, "contextualize": True, "rerank_pool": 6}
    program = PROGRAMS["search_r1"](bm25, rerank_signal="verdict", **knobs)
    session = program.replay_session("Which river flows through Paris?")
    assert [h.chunk.id for h in session.search("Seine", 3)] == ["seine#0", "paris#0"]  # linked
    again = [h.chunk.id for h in session.search("Seine Paris", 3)]
    assert "seine#0" not in again and "paris#0" not in again  # seen: left out
    assert session.memory == [] and session.contextualizer is None
    assert session.rerank_pool == 0  # the verdict signal calls a model: left out
    retriever_signal = PROGRAMS["search_r1"](bm25, rerank_signal="retriever", **knobs)
    assert retriever_signal.replay_session("q").rerank_pool == 6  # calls none: kept
