import optuna
import pytest

from netcast.errors import InputError
from netcast.programs import BasicRAG, get_program, program_names


def test_basic_answers_from_the_top_k_passages_and_traces_the_call(scripted_lm, bm25):
    lm, engine = scripted_lm(lambda prompt: {"answer": "Paris"})
    program = BasicRAG(bm25, top_k=2)
    prediction = program(question="What is the capital of France?")

    expected = [h.chunk.id for h in bm25.search("What is the capital of France?", 2)]
    assert prediction.answer == "Paris"
    assert prediction.evidence == expected
    prompt = engine.prompts[0]
    # both passages, and only those, entered the answer step's context, in rank order
    positions = [prompt.index(bm25.corpus[cid].text) for cid in expected]
    assert positions == sorted(positions)
    others = set(bm25.corpus.by_id) - set(expected)
    assert not any(bm25.corpus[cid].text in prompt for cid in others)

    trace = prediction.trace
    assert [s["query"] for s in trace["searches"]] == ["What is the capital of France?"]
    assert trace["searches"][0]["ids"] == expected and trace["searches"][0]["k"] == 2
    assert trace["lm_calls"] == 1 and trace["tokens_in"] == len(prompt.split())
    assert trace["tokens_out"] > 0 and trace["seconds"] > 0


def test_chain_of_thought_knob_adds_reasoning(scripted_lm, bm25):
    lm, engine = scripted_lm(lambda prompt: {"reasoning": "Paris is named.", "answer": "Paris"})
    prediction = BasicRAG(bm25, chain_of_thought=True)(question="capital of France?")
    assert prediction.answer == "Paris" and "reasoning" in engine.prompts[0]


def test_knobs_defaults_search_space_and_registry(bm25):
    defaults = {
        "top_k": 5,
        "chain_of_thought": False,
        "rerank_pool": 0,
        "rerank_signal": "retriever",
        "link_seeds": 0,
    }
    assert BasicRAG(bm25).knobs == defaults and BasicRAG.knob_defaults() == defaults
    with pytest.raises(InputError, match="basic: unknown knob 'topk'"):
        BasicRAG(bm25, topk=3)
    fixed = {"top_k": 3, "chain_of_thought": True, "link_seeds": 2}
    assert BasicRAG.search_space(optuna.trial.FixedTrial(fixed)) == fixed
    assert get_program("basic") is BasicRAG and "basic" in program_names()
    with pytest.raises(InputError, match="unknown program 'fancy'.*basic"):
        get_program("fancy")


def test_program_without_retriever_says_so(scripted_lm):
    scripted_lm(lambda prompt: {"answer": "x"})
    with pytest.raises(RuntimeError, match="no retriever"):
        BasicRAG()(question="q")
