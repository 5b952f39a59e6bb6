import math

import dspy
import pytest

from helpers import ScriptedEngine
from netcast import trace
from netcast.errors import InputError
from netcast.models.factory import use_netcast_cache
from netcast.programs import BasicRAG
from netcast.programs.shared.rerank import order, parse_signal, rerank, rrf, score
from netcast.retrievers.base import Hit

QUESTION = "Which river flows through Paris?"
FAVOURED = ("seine", "rhine")  # what the scripted scorer prefers, best first


def favour(text: str) -> float:
    """The scripted scorer: Seine passages best, then Rhine, the rest alike."""
    return -0.1 if "Seine" in text else -0.5 if "Rhine" in text else -3.0


class ScoringEngine(ScriptedEngine):
    """A scripted answer model that also scores passages: question log-probabilities
    (likelihood) and True/False next-token log-probabilities (verdict) by ``favour``."""

    def __init__(self, script):
        super().__init__(script)
        self.contexts: list[str] = []

    def continuation_logprobs(self, context, continuation):
        self.contexts.append(context)
        n = len(continuation.split())
        return [favour(context)] * n, len(context.split()) + n

    def next_token_logprobs(self, messages, prefix, candidates):
        p = math.exp(favour(messages[-1]["content"]))
        return {"True": math.log(p), "False": math.log(1 - p)}, 10


def scoring_lm(script=lambda prompt: {"answer": "the Seine"}):
    use_netcast_cache()
    engine = ScoringEngine(script)
    lm = dspy.LM("scripted/scoring", engine=engine, cache=False, num_retries=0)
    return lm, engine


@pytest.fixture
def pool(bm25):
    return bm25.search("Paris river Germany France capital", 6)


def doc_ids(hits):
    return [h.chunk.doc_id for h in hits]


@pytest.mark.parametrize("signal", ["likelihood", "verdict"])
def test_rerank_keeps_the_passages_the_scorer_favours_with_their_new_scores(pool, signal):
    lm, engine = scoring_lm()
    assert set(FAVOURED) <= set(doc_ids(pool)) and doc_ids(pool)[:2] != list(FAVOURED)
    with trace.recording() as recorded:
        kept = rerank(QUESTION, pool, signal, 2, lm=lm)
    assert doc_ids(kept) == list(FAVOURED)
    scores = score(signal, QUESTION, pool, lm=lm)
    by_id = {h.chunk.id: s for h, s in zip(pool, scores, strict=True)}
    assert [h.score for h in kept] == [by_id[h.chunk.id] for h in kept]
    if signal == "likelihood":  # UPR's prompt: the passage, the instruction, then the question
        assert kept[0].score == pytest.approx(-0.1)  # the mean over the question's tokens
        assert engine.contexts[0].startswith("Passage: ")
        assert engine.contexts[0].endswith(
            "\nPlease write a question based on this passage.\nQuestion:"
        )
    else:
        assert kept[0].score == pytest.approx(math.exp(-0.1))  # P(True)
    (stage,) = recorded.stages
    assert stage["stage"] == "rerank" and stage["signal"] == signal
    assert stage["ids"] == [h.chunk.id for h in pool] and len(stage["scores"]) == len(pool)
    assert stage["kept"] == [h.chunk.id for h in kept] and stage["seconds"] >= 0
    assert recorded.lm_calls == len(pool)  # one forward pass per passage


def test_rrf_sums_reciprocal_ranks_with_k_60():
    assert rrf([[0, 1, 2], [2, 1, 0]], 3) == pytest.approx(
        [1 / 61 + 1 / 63, 2 / 62, 1 / 63 + 1 / 61]
    )
    assert rrf([[1, 0]], 2, k=1) == pytest.approx([1 / 3, 1 / 2])
    assert order("dense", [0.1, 0.9, 0.1]) == [1, 0, 2]  # ties stay in pool order


def test_rrf_signal_fuses_the_rankings_of_its_signals(pool):
    lm, _ = scoring_lm()
    fused = score("rrf:retriever+likelihood", QUESTION, pool, lm=lm)
    mine = order("likelihood", score("likelihood", QUESTION, pool, lm=lm))
    expected = rrf([list(range(len(pool))), mine], len(pool))
    assert fused == pytest.approx(expected)
    kept = rerank(QUESTION, pool, "rrf:retriever+likelihood", 3, lm=lm)
    assert [h.score for h in kept] == sorted(expected, reverse=True)[:3]


def test_retriever_signal_is_the_identity(pool):
    assert score("retriever", QUESTION, pool) == [h.score for h in pool]
    assert rerank(QUESTION, pool, "retriever", 3) == pool[:3]
    shuffled = [pool[2], pool[0], pool[1]]  # the pool's own order, whatever its scores
    assert rerank(QUESTION, shuffled, "retriever", 3) == shuffled


def test_dense_signal_is_cosine_similarity_with_the_question(pool):
    scores = score("dense", QUESTION, pool)
    assert all(-1.0 <= s <= 1.0 for s in scores)
    assert doc_ids(rerank(QUESTION, pool, "dense", 1)) == ["seine"]


def test_likelihood_refuses_a_model_without_prompt_logprobs_in_one_line(pool):
    lm = dspy.LM("openai/gpt-4o-mini")
    for signal in ("likelihood", "rrf:dense+likelihood"):
        with pytest.raises(InputError) as err:
            score(signal, QUESTION, pool, lm=lm)
        message = str(err.value)
        assert "\n" not in message
        assert message.startswith("openai/gpt-4o-mini gives no prompt log-probabilities")


def test_unknown_signals_and_a_missing_model_are_refused(pool):
    for bad in ("bm25", "rrf:dense", "rrf:dense+nope", ""):
        with pytest.raises(InputError, match="unknown rerank signal"):
            parse_signal(bad)
    assert parse_signal("rrf:retriever+dense+verdict") == ("retriever", "dense", "verdict")
    with dspy.context(lm=None), pytest.raises(InputError, match="needs a model"):
        score("verdict", QUESTION, pool)
    with pytest.raises(InputError, match="knob 'rerank_signal'.*unknown rerank signal"):
        BasicRAG(None, rerank_signal="bogus")


def test_basic_fetches_the_pool_and_answers_from_the_kept_passages_only(bm25):
    lm, engine = scoring_lm()
    question = "Which river is in the capital city of France or Germany?"
    top = [h.chunk.doc_id for h in bm25.search(question, 4)]
    assert top[:2] == ["paris", "berlin"] and set(FAVOURED) <= set(top)
    program = BasicRAG(bm25, top_k=2, rerank_pool=4, rerank_signal="likelihood")
    program.set_lm(lm)
    prediction = program(question=question)

    assert [bm25.corpus[c].doc_id for c in prediction.evidence] == list(FAVOURED)
    (search,) = prediction.trace["searches"]
    assert search["k"] == 4 and len(search["ids"]) == 4
    (answer_prompt,) = engine.prompts  # the scorer's passes are not answer calls
    for cid in search["ids"]:
        assert (bm25.corpus[cid].text in answer_prompt) == (cid in prediction.evidence)
    assert answer_prompt.index("The Seine") < answer_prompt.index("The Rhine")
    (stage,) = prediction.trace["stages"]
    assert stage["ids"] == search["ids"] and stage["kept"] == prediction.evidence
    assert prediction.trace["lm_calls"] == 4 + 1


def test_basic_defaults_search_top_k_and_do_not_rerank(scripted_lm, bm25):
    _, engine = scripted_lm(lambda prompt: {"answer": "Paris"})
    default = BasicRAG(bm25, top_k=2)(question=QUESTION)
    pooled = BasicRAG(bm25, top_k=2, rerank_pool=5)(question=QUESTION)  # retriever order
    assert default.trace["stages"] == [] and default.trace["searches"][0]["k"] == 2
    assert pooled.trace["searches"][0]["k"] == 5 and pooled.evidence == default.evidence
    assert engine.prompts[0] == engine.prompts[1]


@pytest.mark.slow
def test_likelihood_with_the_embedded_model_prefers_the_gold_passage():
    import numpy as np
    from llama_cpp import Llama

    from netcast.models import embedded
    from netcast.models.llama import LlamaCppEngine

    path = str(embedded.model_path())
    engine = LlamaCppEngine(path, n_ctx=1024)
    lm = dspy.LM("netcast/test-embedded", engine=engine, cache=False)
    gold = Hit(_chunk("Seine", "The Seine is a river that flows through Paris in France."), 0.0)
    other = Hit(_chunk("Berlin", "Berlin is the capital of Germany and its largest city."), 0.0)
    scores = score("likelihood", QUESTION, [other, gold], lm=lm)
    assert scores[1] > scores[0] and all(s < 0 for s in scores)

    # the logits read at the question's positions are llama.cpp's own (logits_all reference)
    context = "Passage: Seine: The Seine flows through Paris.\nQuestion:"
    logprobs, n_tokens = engine.continuation_logprobs(context, " " + QUESTION)
    engine.close()
    reference = Llama(model_path=path, n_ctx=256, logits_all=True, verbose=False)
    head = reference.tokenize(context.encode(), add_bos=True)
    tokens = head + reference.tokenize((" " + QUESTION).encode(), add_bos=False)
    reference.eval(tokens)
    rows = reference.scores[: len(tokens)].astype(np.float64)
    norm = rows.max(1) + np.log(np.exp(rows - rows.max(1, keepdims=True)).sum(1))
    want = [rows[i, tokens[i + 1]] - norm[i] for i in range(len(head) - 1, len(tokens) - 1)]
    reference.close()
    assert n_tokens == len(tokens) and logprobs == pytest.approx(want, abs=0.05)


def _chunk(title, text):
    from netcast.corpus import Chunk

    return Chunk(id=f"{title.lower()}#0", doc_id=title.lower(), title=title, text=text, n_tokens=0)


def test_one_shot_fills_its_budget_by_the_relevance_signal_with_it_in_the_trace(bm25):
    from netcast.programs import get_program

    lm, engine = scoring_lm()
    question = "Which river is in the capital city of France or Germany?"
    pool = bm25.search(question, 4)
    assert doc_ids(pool)[:2] == ["paris", "berlin"] and set(FAVOURED) <= set(doc_ids(pool))
    budget = sum(sorted(h.chunk.n_tokens for h in pool)[-2:])  # room for two chunks, not three
    assert budget < sum(sorted(h.chunk.n_tokens for h in pool)[:3])
    knobs = {"pool_size": 4, "token_budget": budget}
    shipped = get_program("one_shot")(bm25, **knobs)
    shipped.set_lm(lm)
    default = shipped(question=question)
    assert default.trace["stages"][0]["stage"] == "select"  # the paper's: BM25 scores, no rerank
    assert {bm25.corpus[c].doc_id for c in default.evidence} == {"paris", "berlin"}

    program = get_program("one_shot")(bm25, relevance_signal="likelihood", **knobs)
    program.set_lm(lm)
    prediction = program(question=question)
    assert [bm25.corpus[c].doc_id for c in prediction.evidence] == list(FAVOURED)
    rerank_stage, select_stage = prediction.trace["stages"]
    assert rerank_stage["stage"] == "rerank" and rerank_stage["signal"] == "likelihood"
    assert rerank_stage["ids"] == rerank_stage["kept"] == [h.chunk.id for h in pool]
    seine = rerank_stage["ids"].index(next(h.chunk.id for h in pool if h.chunk.doc_id == "seine"))
    assert rerank_stage["scores"][seine] == pytest.approx(math.exp(-0.1), abs=1e-6)
    assert select_stage["selected"] == 2
    assert prediction.trace["lm_calls"] == 4 + 1  # one pass a pooled chunk, one answer
    with pytest.raises(InputError, match="knob 'relevance_signal'.*unknown rerank signal"):
        get_program("one_shot")(None, relevance_signal="bogus")
