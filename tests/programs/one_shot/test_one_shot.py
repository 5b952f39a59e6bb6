import re

import pytest

from helpers import WordCounter
from netcast.corpus import Corpus, Document
from netcast.programs import OneShot
from netcast.retrievers.bm25 import BM25Retriever


def field(prompt, name):
    found = re.findall(rf"\[\[ ## {name} ## \]\]\n(.*?)(?:\n\n|$)", prompt, re.S)
    return found[-1].strip() if found else ""


DEEP = "Lake Tahoe is deep and cold and clear and blue and very big indeed."
DOCS = [
    Document(
        "a",
        "Lake Tahoe",
        "Lake Tahoe is a lake. It lies in the Sierra Nevada. "
        "Lake Tahoe is deep and cold and clear and blue and very big indeed.",
    ),
    Document(
        "b", "Lake Tahoe facts", "Lake Tahoe froze in 1952. Lake Tahoe is popular.", {"year": 1952}
    ),
    Document("c", "Lake Tahoe tourism", "Lake Tahoe hosted a festival in 2019.", {"year": 2019}),
    Document("d", "Emerald Bay", "Emerald Bay is a bay. Emerald Bay is near Lake Tahoe."),
    Document("e", "Reno", "Reno is a city near the lake called Tahoe in Nevada."),
]


@pytest.fixture
def lake():
    return BM25Retriever(Corpus.from_documents(DOCS, WordCounter()))


def script(crop_answers=None):
    def respond(prompt):
        if "[[ ## passage ## ]]" in prompt:
            passage = field(prompt, "passage")
            for key, reply in (crop_answers or {}).items():
                if passage.startswith(key):
                    return {"relevant_sentences": reply}
            return {"relevant_sentences": passage}
        return {"answer": "cold"}

    return respond


def test_budgeted_selection_fills_the_budget_by_relevance(scripted_lm, lake):
    _, engine = scripted_lm(script())
    program = OneShot(lake, token_budget=40, pool_size=5)
    prediction = program(question="How cold is Lake Tahoe?")
    chunks = [lake.corpus[c] for c in prediction.evidence]
    assert sum(c.n_tokens for c in chunks) <= 40
    hits = lake.search("How cold is Lake Tahoe?", 5)
    assert prediction.evidence[0] == hits[0].chunk.id  # most relevant first
    stage = prediction.trace["stages"][-1]
    assert stage["stage"] == "select" and stage["tokens"] <= 40 and stage["budget"] == 40
    assert stage["tokens"] == sum(c.n_tokens for c in chunks)
    answer_prompt = engine.prompts[-1]
    for chunk_id in prediction.evidence:
        assert lake.corpus[chunk_id].text in answer_prompt
    assert prediction.trace["lm_calls"] == 1


def test_both_selectors_fit_the_budget_and_exact_gets_at_least_greedys_relevance(scripted_lm, lake):
    scripted_lm(script())
    q = "Lake Tahoe Emerald Bay"
    score = {h.chunk.id: h.score for h in lake.search(q, 5)}
    exact = OneShot(lake, token_budget=30, pool_size=5, selector="exact")(question=q)
    greedy = OneShot(lake, token_budget=30, pool_size=5, selector="greedy")(question=q)
    for p in (exact, greedy):
        assert sum(lake.corpus[c].n_tokens for c in p.evidence) <= 30
    assert sum(score[c] for c in exact.evidence) >= sum(score[c] for c in greedy.evidence)


def test_filter_drops_chunks_whose_declared_year_conflicts(scripted_lm, lake):
    scripted_lm(script())
    question = "What happened at Lake Tahoe in 2019?"
    pool = [h.chunk.id for h in lake.search(question, 4)]
    assert "b#0" in pool  # declares 1952
    prediction = OneShot(lake, token_budget=100, pool_size=4, filter=True)(question=question)
    stage = next(s for s in prediction.trace["stages"] if s["stage"] == "filter")
    assert stage["dropped"] == {"declared_year": 1} and stage["kept"] == 3
    assert "b#0" not in prediction.evidence and "c#0" in prediction.evidence
    unfiltered = OneShot(lake, token_budget=100, pool_size=4)(question=question)
    assert "b#0" in unfiltered.evidence


def test_filter_adds_a_chunk_covering_a_missing_query_entity(scripted_lm, lake):
    scripted_lm(script())
    question = "Which festival did Lake Tahoe host in 2019, in Nevada?"
    assert [h.chunk.id for h in lake.search(question, 1)] == ["c#0"]
    program = OneShot(lake, token_budget=40, pool_size=1, wide_pool=5, filter=True)
    prediction = program(question=question)
    stage = next(s for s in prediction.trace["stages"] if s["stage"] == "filter")
    assert stage["missing_entities"] == ["nevada"]
    assert stage["added"] == ["e#0"]  # the best-ranked chunk in the wider pool naming Nevada
    assert prediction.evidence == ["c#0", "e#0"]
    assert OneShot(lake, token_budget=40, pool_size=1)(question=question).evidence == ["c#0"]


def test_crop_keeps_verbatim_sentences_rejects_invented_text_and_refills(scripted_lm, lake):
    _, engine = scripted_lm(
        script(
            {
                "Lake Tahoe is a lake.": DEEP,
                "Emerald Bay": "Emerald Bay is the coldest bay on Earth.",  # invented
            }
        )
    )
    question = "How deep and cold is Lake Tahoe in the Sierra Nevada, seen from Emerald Bay?"
    program = OneShot(lake, token_budget=40, pool_size=5, crop=True)
    uncropped = OneShot(lake, token_budget=40, pool_size=5)(question=question)
    assert sorted(uncropped.evidence) == ["a#0", "d#0"]  # 27 + 13 tokens fill the budget
    prediction = program(question=question)
    crop = next(s for s in prediction.trace["stages"] if s["stage"] == "crop")
    assert crop["rejected"] == 1 and crop["cropped"] == 1
    assert crop["tokens_after"] < crop["tokens_before"]
    context = " ".join(prediction.context)
    assert "coldest bay" not in context  # the invented text never reaches the answer step
    assert "It lies in the Sierra Nevada" not in context  # cropped away
    crop_calls = [p for p in engine.prompts if "[[ ## passage ## ]]" in p]
    assert len(crop_calls) == prediction.trace["lm_calls"] - 1
    # the 11 tokens freed by cropping a#0 were refilled from the pool (and that chunk cropped)
    assert {"a#0", "d#0"} < set(prediction.evidence)
    assert prediction.trace["stages"][-1]["tokens"] <= 40


def test_default_budget_scales_to_the_model_and_knobs(scripted_lm, lake, monkeypatch):
    lm, _ = scripted_lm(script())
    monkeypatch.delenv("NETCAST_N_CTX", raising=False)
    assert OneShot(lake, lm=lm).budget() == 32_000  # a litellm-style model with 128k context
    assert OneShot(lake).budget() == 2048  # no lm: the embedded model's 8,192 / 4
    program = OneShot(lake, lm=lm)
    assert program.knobs.selector == "exact"
    assert program.knobs.pool_size is None and program.knobs.pool_factor == 2.0
    assert program.knobs.wide_pool == 50


def test_a_crop_saying_nothing_helps_drops_the_chunk_and_the_budget_refills(scripted_lm, lake):
    scripted_lm(script({"Emerald Bay": "NONE"}))
    question = "How deep and cold is Lake Tahoe in the Sierra Nevada, seen from Emerald Bay?"
    prediction = OneShot(lake, token_budget=40, pool_size=5, crop=True)(question=question)
    crop = next(s for s in prediction.trace["stages"] if s["stage"] == "crop")
    assert crop["dropped"] == 1 and "d#0" not in prediction.evidence
    kept = OneShot(lake, token_budget=40, pool_size=5, crop=True, crop_drops=False)
    scripted_lm(script({"Emerald Bay": "NONE"}))
    assert "d#0" in kept(question=question).evidence


def many_notes(n=300):
    """``n`` chunks that all match "apple", 11 to 30 words long."""
    return [
        Document(
            f"n{i}",
            f"Apple note {i}",
            " ".join(["apple"] + [f"w{i}x{j}" for j in range(8 + i % 20)]),
        )
        for i in range(n)
    ]


def test_the_pool_is_sized_by_the_budget_so_the_budget_binds(scripted_lm):
    scripted_lm(script())
    notes = BM25Retriever(Corpus.from_documents(many_notes(), WordCounter()))
    prediction = OneShot(notes, token_budget=2000)(question="apple")
    stage = prediction.trace["stages"][-1]
    assert stage["candidates"] > 50  # more than the old fixed top-50 pool
    assert stage["pool_tokens"] >= 2 * 2000  # two budgets' worth of candidates
    assert 2000 - 30 < stage["tokens"] <= 2000  # so the budget is filled (30: longest chunk)
    assert prediction.trace["searches"][0]["k"] < 300  # one search, not the whole corpus
    # an explicit pool_size is a plain top-k pool: 50 chunks cannot fill 2,000 tokens, and
    # Top-K_max degenerates to "take all 50"
    top50 = OneShot(notes, token_budget=2000, pool_size=50)(question="apple")
    stage = top50.trace["stages"][-1]
    assert stage["candidates"] == stage["selected"] == 50 and stage["tokens"] < 2000


ADD_DOCS = [
    Document(
        "a",
        "Lake Tahoe festival",
        "Lake Tahoe hosts a festival. The Lake Tahoe festival is famous.",
    ),
    Document(
        "x",
        "Lake Tahoe music festival",
        "The Lake Tahoe music festival is held each summer at the lake.",
    ),
    Document(
        "b",
        "Visitors guide",
        "Crowds from Nevada and California visit Lake Tahoe every summer for the music.",
    ),
    Document("c", "Reno", "Reno is a city in Nevada with casinos."),
]


def test_the_add_step_prefers_unselected_pool_chunks_to_the_wider_pool(scripted_lm):
    scripted_lm(script())
    retriever = BM25Retriever(Corpus.from_documents(ADD_DOCS, WordCounter()))
    question = "Which festival did Lake Tahoe host in Nevada?"
    ranked = [h.chunk.id for h in retriever.search(question, 4)]
    assert ranked == ["a#0", "x#0", "b#0", "c#0"]  # b is in the pool of 3, c past it
    program = OneShot(retriever, token_budget=40, pool_size=3, wide_pool=5, filter=True)
    prediction = program(question=question)
    stage = next(s for s in prediction.trace["stages"] if s["stage"] == "filter")
    # a + x fill the budget and leave Nevada uncovered; b (rank 3, kept but not selected)
    # names Nevada and is added before c (rank 4, past the pool)
    assert stage["missing_entities"] == ["nevada"]
    assert stage["added"] == ["b#0"]
    assert "b#0" in prediction.evidence and "c#0" not in prediction.evidence


def test_its_training_contexts_are_the_knapsacks_with_gold_swapped_in_or_left_out(
    scripted_lm, lake
):
    """RAFT-style examples for One-SHOT's reader: the context the budget fills for the
    question, every gold passage in it (swapped in where retrieval missed one), or the same
    knapsack over the pool without the gold passages; no model call makes them."""
    import dspy

    from netcast.corpus import format_passage

    _, engine = scripted_lm(script())
    program = OneShot(lake, token_budget=40, pool_size=5)
    question = "How cold is Lake Tahoe?"
    gold = [{"id": d.id, "title": d.title, "text": d.text} for d in (DOCS[0], DOCS[3])]
    example = dspy.Example(question=question, answer="cold", gold_passages=gold)
    pool, _ = program.candidates(question, 40)
    knapsack = [c.chunk.id for c in program.selection(pool, 40)]
    assert "a#0" in knapsack and "d#0" not in knapsack  # retrieval misses the Emerald Bay gold

    (taught,) = program.annotated_demos(example)["answer"]
    emerald = format_passage(DOCS[3].title, DOCS[3].text)
    assert emerald in taught.context and taught.answer == "cold"
    assert len(taught.context) == len(knapsack)  # the knapsack's size, a gold one swapped in

    (blind,) = program.retrieved_demos(example)["answer"]
    others = [c for c in pool if c.chunk.id not in ("a#0", "d#0")]
    expected = [format_passage(c.chunk.title, c.text) for c in program.selection(others, 40)]
    assert blind.context == expected and blind.answer == "cold"
    assert not any(DOCS[0].text in p or DOCS[3].text in p for p in blind.context)
    assert set(blind.inputs()) == {"context", "question"}
    assert not engine.prompts
