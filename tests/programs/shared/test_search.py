import dspy

from netcast.programs.shared.search import EMPTY_MEMORY, SearchSession
from netcast.signatures import Contextualize


def recorder(retriever):
    calls = []

    def search(query, k, exclude=()):
        calls.append((query, k, set(exclude)))
        return retriever.search(query, k, exclude)

    return search, calls


def test_dedup_never_returns_a_seen_id_and_backfills_to_k(bm25):
    search, calls = recorder(bm25)
    session = SearchSession(search, "q", dedup=True)
    first = [h.chunk.id for h in session.search("Paris France capital river museum", 2)]
    second = [h.chunk.id for h in session.search("Paris France capital river museum", 2)]
    full = [h.chunk.id for h in bm25.search("Paris France capital river museum", 4)]
    assert first == full[:2] and second == full[2:4]  # the next-highest-ranked unseen ones
    assert calls[1][2] == set(first)
    assert session.seen == full[:4]


def test_without_dedup_repeats_come_back_and_the_session_keeps_its_queries(bm25):
    search, _ = recorder(bm25)
    session = SearchSession(search, "q", dedup=False)
    a = [h.chunk.id for h in session.search("Paris", 2)]
    assert [h.chunk.id for h in session.search("Paris", 2)] == a
    session.search("Seine", 1)
    assert session.queries == ["Paris", "Paris", "Seine"]  # what a program decides from


def test_memory_only_grows_and_survives_a_nothing_new_step(scripted_lm, bm25):
    replies = iter(
        [
            '["Paris is the capital of France."]',
            "[]",
            '["Paris is the capital of France.", "The Seine flows through Paris."]',
        ]
    )
    _, engine = scripted_lm(lambda prompt: {"new_notes": next(replies)})
    session = SearchSession(bm25.search, "capital?", contextualizer=dspy.Predict(Contextualize))
    assert session.memory_view() == [EMPTY_MEMORY]
    session.search("capital of France", 1)
    assert EMPTY_MEMORY in engine.prompts[0]  # the aux model is told the memory is empty
    assert session.memory == ["Paris is the capital of France."]
    session.search("Berlin", 1)
    assert session.memory == ["Paris is the capital of France."]  # nothing new: unchanged
    session.search("Seine", 1)
    assert session.memory == ["Paris is the capital of France.", "The Seine flows through Paris."]
    assert [u["size"] for u in session.memory_updates] == [1, 1, 2]
    assert "Paris is the capital of France." in engine.prompts[2]  # it sees the current memory


def test_the_aux_model_writes_the_memory(scripted_lm, bm25):
    from helpers import ScriptedEngine

    _, main = scripted_lm(lambda prompt: {"new_notes": '["from main"]'})
    aux_engine = ScriptedEngine(lambda prompt: {"new_notes": '["from aux"]'})
    aux = dspy.LM("scripted/aux", engine=aux_engine, cache=False, num_retries=0)
    session = SearchSession(
        bm25.search, "q", contextualizer=dspy.Predict(Contextualize), aux_lm=aux
    )
    session.search("Paris", 1)
    assert session.memory == ["from aux"] and main.prompts == [] and len(aux_engine.prompts) == 1


def test_the_aux_model_wins_over_the_lm_a_loaded_program_is_bound_to(scripted_lm, bm25):
    from helpers import ScriptedEngine

    scripted_lm(lambda prompt: {"new_notes": '["from default"]'})
    main_engine = ScriptedEngine(lambda prompt: {"new_notes": '["from main"]'})
    aux_engine = ScriptedEngine(lambda prompt: {"new_notes": '["from aux"]'})
    contextualizer = dspy.Predict(Contextualize)
    contextualizer.lm = dspy.LM("scripted/main", engine=main_engine, cache=False)  # set_lm
    aux = dspy.LM("scripted/aux", engine=aux_engine, cache=False, num_retries=0)
    session = SearchSession(bm25.search, "q", contextualizer=contextualizer, aux_lm=aux)
    session.search("Paris", 1)
    assert session.memory == ["from aux"] and main_engine.prompts == []
    no_aux = SearchSession(bm25.search, "q", contextualizer=contextualizer)
    no_aux.search("Paris", 1)
    assert no_aux.memory == ["from main"]  # without an aux model: the bound LM


class Scorer:
    """Question likelihood by passage: Seine best, Louvre next, the rest far below."""

    def continuation_logprobs(self, context, continuation):
        return [-0.1 if "Seine" in context else -0.5 if "Louvre" in context else -3.0], 1


def test_a_rerank_pool_keeps_the_signals_best_and_only_they_count_as_seen(bm25):
    from types import SimpleNamespace

    search, calls = recorder(bm25)
    lm = SimpleNamespace(engine=Scorer(), model="scorer")
    session = SearchSession(
        search, "q", dedup=True, rerank_pool=5, rerank_signal="likelihood", rerank_lm=lm
    )
    query = "Paris France capital river museum"
    pool = [h.chunk.doc_id for h in bm25.search(query, 5)]
    assert pool[:2] != ["seine", "louvre"] and {"seine", "louvre"} <= set(pool)
    first = session.search(query, 2)
    assert [h.chunk.doc_id for h in first] == ["seine", "louvre"]
    assert calls[0][1] == 5  # the pool was fetched
    assert session.seen == [h.chunk.id for h in first]  # the discarded three stay unseen
    second = session.search(query, 2)
    assert calls[1][2] == {h.chunk.id for h in first}
    assert not {h.chunk.id for h in second} & set(session.seen[:2])
    # without a pool (the default), the top k as the retriever ranks them
    plain = SearchSession(search, "q", rerank_signal="likelihood", rerank_lm=lm)
    assert [h.chunk.doc_id for h in plain.search(query, 2)] == pool[:2]


def test_a_link_hop_adds_the_passages_a_retrieval_names_and_counts_them_seen(bm25):
    # the Eiffel Tower's passage names Paris; the Louvre's names Paris too
    session = SearchSession(bm25.search, "q", dedup=True, links=1, corpus=bm25.corpus)
    first = [h.chunk.id for h in session.search("wrought-iron lattice tower", 1)]
    assert first == ["eiffel#0", "paris#0"]
    assert session.seen == first
    # under de-duplication a seen passage is never linked again
    second = [h.chunk.id for h in session.search("most-visited art museum", 1)]
    assert second == ["louvre#0"]
    plain = SearchSession(bm25.search, "q", links=0, corpus=bm25.corpus)
    assert [h.chunk.id for h in plain.search("wrought-iron lattice tower", 1)] == ["eiffel#0"]
