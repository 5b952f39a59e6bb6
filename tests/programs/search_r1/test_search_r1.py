from helpers import scoring_lm
from netcast.programs import SearchR1


def agent(steps, notes=None):
    """Scripted Search-R1 agent: reasoning steps from ``steps``; memory notes from ``notes``."""
    steps = list(steps)
    notes = list(notes or [])

    def respond(prompt):
        if "[[ ## new_passages ## ]]" in prompt:
            return {"new_notes": notes.pop(0) if notes else "[]"}
        if "[[ ## trace ## ]]" in prompt:
            step = steps.pop(0) if steps else {"action": "answer", "answer": "Paris"}
            return {"reasoning": "r", "query": "", "answer": "", **step}
        return {"answer": "forced"}

    return respond


def test_baseline_accumulates_passages_and_counts_searches(scripted_lm, bm25):
    _, engine = scripted_lm(
        agent(
            [
                {"action": "search", "query": "capital of France"},
                {"action": "search", "query": "river in Paris"},
            ]
        )
    )
    prediction = SearchR1(bm25, k=2)(question="Which river flows through the capital of France?")
    assert prediction.answer == "Paris"
    assert [s["query"] for s in prediction.trace["searches"]] == [
        "capital of France",
        "river in Paris",
    ]
    third_step = engine.prompts[2]
    for chunk_id in prediction.evidence:  # every passage so far is in the reasoning context
        assert bm25.corpus[chunk_id].text in third_step
    assert [t["action"] for t in prediction.trace["turns"]] == ["search", "search", "answer"]


def test_dedup_raises_distinct_evidence(scripted_lm, bm25):
    steps = [{"action": "search", "query": "Paris"}] * 2
    scripted_lm(agent(steps))
    plain = SearchR1(bm25, k=2)(question="q")
    scripted_lm(agent(steps))
    dedup = SearchR1(bm25, k=2, dedup=True)(question="q")
    p_turns = plain.trace["turns"]
    assert p_turns[0]["returned"] == p_turns[1]["returned"]
    d_turns = dedup.trace["turns"]
    assert not set(d_turns[0]["returned"]) & set(d_turns[1]["returned"])
    assert len(dedup.evidence) == 4 and len(plain.evidence) == 2


def test_contextualize_shows_newest_passages_plus_memory(scripted_lm, bm25):
    _, engine = scripted_lm(
        agent(
            [
                {"action": "search", "query": "capital of France"},
                {"action": "search", "query": "Seine"},
            ],
            notes=['["Paris is the capital of France."]', "[]"],
        )
    )
    prediction = SearchR1(bm25, k=1, contextualize=True)(question="Which river is in the capital?")
    step_prompts = [p for p in engine.prompts if "[[ ## trace ## ]]" in p]
    last = step_prompts[-1]
    assert "Paris is the capital of France." in last  # the memory
    first_passage = bm25.corpus[prediction.trace["turns"][0]["returned"][0]].text
    assert first_passage not in last.split("[[ ## passages ## ]]")[-1]  # only the newest
    assert [t.get("memory_size") for t in prediction.trace["turns"][:2]] == [1, 1]
    assert prediction.memory == ["Paris is the capital of France."]


def test_hybrid_runs_dedup_then_contextualization(scripted_lm, bm25):
    steps = [{"action": "search", "query": "Paris"}] * 2
    _, engine = scripted_lm(agent(steps, notes=['["n1"]', '["n2"]']))
    prediction = SearchR1(bm25, k=2, dedup=True, contextualize=True)(question="q")
    notes_prompts = [p for p in engine.prompts if "[[ ## new_passages ## ]]" in p]
    second_ids = prediction.trace["turns"][1]["returned"]
    assert all(bm25.corpus[i].text in notes_prompts[1] for i in second_ids)  # deduped passages
    assert prediction.memory == ["n1", "n2"]


def test_turn_limit_forces_an_answer(scripted_lm, bm25):
    scripted_lm(agent([{"action": "search", "query": f"q{i}"} for i in range(10)]))
    prediction = SearchR1(bm25, max_turns=2)(question="capital?")
    assert len(prediction.trace["searches"]) == 2 and prediction.answer == "forced"


def test_every_step_sees_the_growing_reasoning_trace(scripted_lm, bm25):
    _, engine = scripted_lm(
        agent(
            [
                {
                    "action": "search",
                    "query": "capital of France",
                    "reasoning": "Find the capital.",
                },
                {"action": "search", "query": "river in Paris", "reasoning": "Now the river."},
            ]
        )
    )
    SearchR1(bm25, k=1)(question="Which river flows through the capital of France?")
    steps = [p for p in engine.prompts if "[[ ## trace ## ]]" in p]
    third = steps[2].split("[[ ## trace ## ]]")[-1]
    for entry in (
        "think: Find the capital.",
        "search: capital of France",
        "think: Now the river.",
        "search: river in Paris",
    ):
        assert entry in third  # earlier reasoning is kept, not thrown away
    assert third.count("information: ") == 2


def test_an_answer_before_any_search_becomes_a_search_for_the_question(scripted_lm, bm25):
    scripted_lm(agent([{"action": "answer", "answer": "Lyon"}]))
    question = "What is the capital of France?"
    prediction = SearchR1(bm25, k=2)(question=question)
    first = prediction.trace["turns"][0]
    assert first["action"] == "search" and first["forced"] and first["query"] == question
    assert prediction.answer == "Paris" and prediction.evidence
    assert prediction.trace["steps"]["step"]["fallbacks"] == 1


def test_a_rerank_pool_puts_the_signals_best_into_the_information_step(bm25):
    def favour(passage):  # Seine best, Louvre next, the rest far below
        return -0.1 if "Seine" in passage else -0.5 if "Louvre" in passage else -3.0

    query = "Paris France capital river museum"
    pool = [h.chunk.id for h in bm25.search(query, 5)]
    lm = scoring_lm(agent([{"action": "search", "query": query}]), favour)
    program = SearchR1(bm25, k=2, rerank_pool=5, rerank_signal="likelihood")
    program.set_lm(lm)
    prediction = program(question="Which river flows through Paris?")
    (search,) = prediction.trace["searches"]
    assert search["k"] == 5 and search["ids"] == pool
    (turn, _) = prediction.trace["turns"]
    assert [bm25.corpus[c].doc_id for c in turn["returned"]] == ["seine", "louvre"]
    assert prediction.evidence == turn["returned"]
    (stage,) = prediction.trace["stages"]
    assert stage["stage"] == "rerank" and stage["kept"] == turn["returned"]
    step_prompts = [p for p in lm.engine.prompts if "[[ ## trace ## ]]" in p]
    others = [c for c in pool if c not in turn["returned"]]
    assert all(bm25.corpus[c].text not in step_prompts[1] for c in others)
