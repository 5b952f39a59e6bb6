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
        "k": 5,
        "chain_of_thought": False,
        "rerank_pool": 0,
        "rerank_signal": "retriever",
        "links": 0,
        "second_hop": 0,
    }
    assert BasicRAG(bm25).knobs.model_dump() == defaults and BasicRAG.knob_defaults() == defaults
    with pytest.raises(InputError, match="basic: unknown knob 'topk'"):
        BasicRAG(bm25, topk=3)
    fixed = {"k": 3, "chain_of_thought": True, "links": 2}
    assert BasicRAG.search_space(optuna.trial.FixedTrial(fixed)) == fixed
    assert get_program("basic") is BasicRAG and "basic" in program_names()
    with pytest.raises(InputError, match="unknown program 'fancy'.*basic"):
        get_program("fancy")


def test_program_without_retriever_says_so(scripted_lm):
    scripted_lm(lambda prompt: {"answer": "x"})
    with pytest.raises(RuntimeError, match="no retriever"):
        BasicRAG()(question="q")


def test_links_add_the_passages_the_top_k_name_after_them(scripted_lm):
    from helpers import WordCounter
    from netcast.corpus import Corpus, Document
    from netcast.retrievers.bm25 import BM25Retriever

    docs = [
        Document("agro", "Dow AgroSciences", "Dow AgroSciences is part of Dow Chemical Company."),
        Document("dow", "Dow Chemical Company", "Dow Chemical Company is based in Midland."),
        Document("agri", "Agriculture", "Agriculture: sciences of farming, the part it plays."),
        Document("other", "Other", "Another passage about sciences."),
    ]
    bm25 = BM25Retriever(Corpus.from_documents(docs, WordCounter()))
    lm, engine = scripted_lm(lambda prompt: {"answer": "Midland"})
    question = "Which sciences firm is AgroSciences part of?"
    plain = BasicRAG(bm25, top_k=2)(question=question)
    assert plain.evidence[0] == "agro#0" and "dow#0" not in plain.evidence

    prediction = BasicRAG(bm25, top_k=2, links=1)(question=question)
    assert prediction.evidence == [*plain.evidence, "dow#0"]  # nothing the retriever found goes
    prompt = engine.prompts[-1]
    positions = [prompt.index(bm25.corpus[cid].text) for cid in prediction.evidence]
    assert positions == sorted(positions)  # the linked passage after the retrieved ones
    stages = prediction.trace["stages"]
    assert stages == [{**stages[0], "stage": "links", "seeds": plain.evidence, "linked": ["dow#0"]}]
    assert BasicRAG(bm25, top_k=1, links=2)(question=question).evidence == ["agro#0", "dow#0"]
    assert len(prediction.trace["searches"]) == 1  # no second search: the hop reads titles


def test_a_retrieved_demo_holds_no_gold_passage_and_its_link_hop_passes_over_them(scripted_lm):
    """RAFT's examples without the golden document: where retrieval ranks the gold passages
    first, the next passages it ranks stand in for them, and the link hop skips a gold title."""
    import dspy

    from helpers import WordCounter
    from netcast.corpus import Corpus, Document
    from netcast.retrievers.bm25 import BM25Retriever

    docs = [
        Document("agro", "Dow AgroSciences", "Dow AgroSciences is part of Dow Chemical Company."),
        Document("dow", "Dow Chemical Company", "Dow Chemical Company is based in Midland."),
        Document("agri", "Agriculture", "Agriculture: sciences of farming, the part it plays."),
        Document("other", "Other", "Sciences at Dow Chemical Company and in Midland."),
        Document("midland", "Midland", "Midland is a city in Michigan."),
    ]
    bm25 = BM25Retriever(Corpus.from_documents(docs, WordCounter()))
    _, engine = scripted_lm(lambda prompt: {"answer": "x"})
    question = "Which sciences firm is AgroSciences part of?"
    gold = [{"id": d.id, "title": d.title, "text": d.text} for d in docs[:2]]
    example = dspy.Example(question=question, answer="Dow Chemical Company", gold_passages=gold)
    program = BasicRAG(bm25, k=2, links=1)
    assert bm25.search(question, 2)[0].chunk.id == "agro#0"  # retrieval finds gold

    (demo,) = program.retrieved_demos(example)["answer"]
    assert demo.answer == "Dow Chemical Company" and set(demo.inputs()) == {"context", "question"}
    ranked = [h.chunk.id for h in bm25.search(question, 5) if h.chunk.id not in ("agro#0", "dow#0")]
    expected = [*ranked[:2], "midland#0"]  # the next two ranked, then Midland, not the gold Dow
    assert ranked[:2] == ["agri#0", "other#0"]
    assert len(demo.context) == len(expected)
    assert all(bm25.corpus[c].text in p for c, p in zip(expected, demo.context, strict=True))
    assert not engine.prompts  # no model call
    (taught,) = program.annotated_demos(example)["answer"]
    assert any("Dow Chemical Company is based" in p for p in taught.context)  # gold kept there


def _bridge_corpus():
    from helpers import WordCounter
    from netcast.corpus import Corpus, Document
    from netcast.retrievers.bm25 import BM25Retriever

    docs = [
        Document("agro", "Dow AgroSciences", "Dow AgroSciences is part of Dow Chemical Company."),
        Document("dow", "Dow Chemical Company", "Dow Chemical Company is based in Midland."),
        Document("agri", "Agriculture", "Agriculture: sciences of farming, the part it plays."),
        Document("other", "Other", "Another passage about sciences of a firm."),
        Document("midland", "Midland", "Midland is a city in Michigan."),
        Document("jones", "Dow Jones", "The Dow Jones is a stock market index."),
    ]
    return docs, BM25Retriever(Corpus.from_documents(docs, WordCounter()))


QUESTION = "Which city is the sciences firm AgroSciences part of based in?"


def test_the_second_hop_writes_a_query_from_the_first_passages_and_adds_what_it_finds(
    scripted_lm,
):
    """second_hop: one query step reads the question and the first retrieval only, writes a
    search; its best passages not already in the context join it, then the answer step."""
    docs, bm25 = _bridge_corpus()

    def reply(prompt):
        if "[[ ## query ## ]]" in prompt:
            return {"query": "Dow Chemical Company"}
        return {"answer": "Midland"}

    _, engine = scripted_lm(reply)
    prediction = BasicRAG(bm25, k=1, second_hop=1)(question=QUESTION)
    assert bm25.search(QUESTION, 1)[0].chunk.id == "agro#0"
    assert prediction.evidence == ["agro#0", "dow#0"] and prediction.answer == "Midland"
    searches = prediction.trace["searches"]
    assert [s["query"] for s in searches] == [QUESTION, "Dow Chemical Company"]
    assert searches[1]["ids"] == ["dow#0"]  # agro, already there, is not found again
    query_prompt, answer_prompt = engine.prompts
    assert docs[0].text in query_prompt and docs[1].text not in query_prompt
    assert docs[0].text in answer_prompt and docs[1].text in answer_prompt
    assert prediction.trace["lm_calls"] == 2
    assert BasicRAG.most_calls(BasicRAG.Knobs(second_hop=1)) == 2
    assert BasicRAG.most_calls(BasicRAG.Knobs()) == 1


def _example(docs, gold_ids):
    import dspy

    gold = [{"id": d.id, "title": d.title, "text": d.text} for d in docs if d.id in gold_ids]
    return dspy.Example(question=QUESTION, answer="Midland", gold_passages=gold)


def test_the_second_hop_teacher_builds_the_bridge_query_from_annotations(scripted_lm):
    """The query step's target is the title of the gold passage the first retrieval missed,
    the one a found passage names first (the bridge entity); the answer step reads the first
    retrieval plus what that query finds. No model call."""
    docs, bm25 = _bridge_corpus()
    _, engine = scripted_lm(lambda prompt: {"answer": "x"})
    demos = BasicRAG(bm25, k=1, second_hop=1).annotated_demos(_example(docs, {"agro", "dow"}))
    (query,) = demos["write_query"]
    assert query.query == "Dow Chemical Company" and set(query.inputs()) == {"context", "question"}
    assert len(query.context) == 1 and docs[0].text in query.context[0]
    (answer,) = demos["answer"]
    assert [docs[0].text in answer.context[0], docs[1].text in answer.context[1]] == [True, True]
    assert answer.answer == "Midland" and not engine.prompts

    # a missing gold passage no found passage names: the first missing; none missing: the
    # gold passage retrieval ranked last
    demos = BasicRAG(bm25, k=1, second_hop=1).annotated_demos(_example(docs, {"agro", "midland"}))
    assert demos["write_query"][0].query == "Midland"
    demos = BasicRAG(bm25, k=5, second_hop=1).annotated_demos(_example(docs, {"agro", "dow"}))
    ranked = [h.chunk.id for h in bm25.search(QUESTION, 5)]
    last = (
        "Dow Chemical Company"
        if ranked.index("dow#0") > ranked.index("agro#0")
        else "Dow AgroSciences"
    )
    assert demos["write_query"][0].query == last
    assert "write_query" not in BasicRAG(bm25, k=1).annotated_demos(_example(docs, {"agro", "dow"}))


def test_the_second_hops_retrieved_demo_queries_a_gold_title_and_keeps_gold_out(scripted_lm):
    """RAFT's share without gold: the query step still learns the gold title to search for, and
    the answer's context (first retrieval and second hop) holds no gold passage."""
    docs, bm25 = _bridge_corpus()
    _, engine = scripted_lm(lambda prompt: {"answer": "x"})
    example = _example(docs, {"agro", "dow"})
    demos = BasicRAG(bm25, k=1, second_hop=1).retrieved_demos(example)
    (query,) = demos["write_query"]
    assert query.query in {"Dow AgroSciences", "Dow Chemical Company"}
    (answer,) = demos["answer"]
    assert len(answer.context) == 2 and docs[5].text in answer.context[1]  # the hop's, not gold
    assert not any(d.text in p for d in docs[:2] for p in answer.context)
    assert not engine.prompts
