"""DSPy's multi-hop program (``multihop``) with a scripted model over the tiny corpus: the query
each hop writes is what the retriever is sent, in order; every hop's passages join the context
de-duplicated; the loop runs exactly ``max_hops``; the annotation teacher's demonstrations."""

import dspy
import optuna
import pytest

from netcast.artifacts import load_program_state
from netcast.errors import InputError
from netcast.optimize.annotations import annotation_demos, teach
from netcast.programs import MultiHop, get_program, program_names

QUESTION = "Which river flows through the city of the Eiffel Tower?"
SEINE = "Seine: The Seine is a river that flows through Paris in France."
EIFFEL = "Eiffel Tower: The Eiffel Tower is a wrought-iron lattice tower in Paris."
HOPS = [
    {"question": "In which city is the Eiffel Tower?", "answer": "Paris"},
    {"question": "Which river flows through #1 ?", "answer": "the Seine"},
]


def writer(queries, answer="the Seine"):
    """Scripted model: hop h's query writer replies ``queries[h]`` (a field dict, or a string
    taken as the query); the answer step answers ``answer``."""
    queries = list(queries)

    def respond(prompt):
        if "[[ ## query ## ]]" in prompt:
            reply = queries.pop(0)
            return {"reasoning": "r", "query": reply} if isinstance(reply, str) else reply
        return {"reasoning": "r", "answer": answer}

    return respond


def query_prompts(engine) -> list[str]:
    return [p for p in engine.prompts if "[[ ## query ## ]]" in p]


def answer_prompts(engine) -> list[str]:
    return [p for p in engine.prompts if "[[ ## query ## ]]" not in p]


def test_each_hops_query_is_searched_and_its_passages_join_the_context_deduplicated(
    scripted_lm, bm25
):
    _, engine = scripted_lm(writer(["Eiffel Tower Paris", "Seine river Paris"]))
    prediction = MultiHop(bm25, passages_per_hop=2)(question=QUESTION)

    first = [h.chunk.id for h in bm25.search("Eiffel Tower Paris", 2)]
    second = [h.chunk.id for h in bm25.search("Seine river Paris", 2)]
    assert first == ["eiffel#0", "paris#0"] and second == ["seine#0", "rhine#0"]
    searches = prediction.trace["searches"]
    assert [(s["query"], s["k"], s["ids"]) for s in searches] == [
        ("Eiffel Tower Paris", 2, first),
        ("Seine river Paris", 2, second),
    ]
    assert prediction.evidence == first + second
    assert prediction.context == [
        f"{bm25.corpus[c].title}: {bm25.corpus[c].text}" for c in first + second
    ]
    turns = prediction.trace["turns"]
    assert [(t["turn"], t["query"], t["added"]) for t in turns] == [
        (1, "Eiffel Tower Paris", first),
        (2, "Seine river Paris", second),
    ]
    # hop 1 writes its query from an empty context, hop 2 from hop 1's passages
    one, two = query_prompts(engine)
    assert not any(doc.text in one for doc in bm25.corpus)
    assert all(bm25.corpus[c].text in two for c in first)
    assert not any(bm25.corpus[c].text in two for c in second)
    (answer,) = answer_prompts(engine)
    assert all(answer.count(bm25.corpus[c].text) == 1 for c in first + second)
    assert prediction.answer == "the Seine"
    assert set(prediction.trace["steps"]) == {
        "generate_query[0]",
        "generate_query[1]",
        "generate_answer",
    }


def test_a_passage_found_again_by_a_later_hop_enters_the_context_once(scripted_lm, bm25):
    _, engine = scripted_lm(writer(["Eiffel Tower Paris", "Paris", "Eiffel Tower Paris"]))
    prediction = MultiHop(bm25, max_hops=3, passages_per_hop=3)(question=QUESTION)
    turns = prediction.trace["turns"]
    assert [t["returned"] for t in turns] == [
        ["eiffel#0", "paris#0", "seine#0"],
        ["paris#0", "seine#0", "louvre#0"],
        ["eiffel#0", "paris#0", "seine#0"],
    ]
    assert [t["added"] for t in turns] == [["eiffel#0", "paris#0", "seine#0"], ["louvre#0"], []]
    assert prediction.evidence == ["eiffel#0", "paris#0", "seine#0", "louvre#0"]
    assert len(prediction.context) == 4
    (answer,) = answer_prompts(engine)
    assert all(answer.count(bm25.corpus[c].text) == 1 for c in prediction.evidence)


@pytest.mark.parametrize("hops", [1, 2, 4])
def test_the_program_runs_exactly_max_hops_then_answers(scripted_lm, bm25, hops):
    _, engine = scripted_lm(writer(["Seine"] * hops))
    prediction = MultiHop(bm25, max_hops=hops, passages_per_hop=1)(question=QUESTION)
    assert len(prediction.trace["searches"]) == hops  # even when a hop finds nothing new
    assert len(query_prompts(engine)) == hops and len(answer_prompts(engine)) == 1
    assert prediction.trace["lm_calls"] == hops + 1
    assert prediction.evidence == ["seine#0"]


def test_an_unreadable_or_empty_query_searches_the_question_and_is_counted(scripted_lm, bm25):
    # hop 1's reply has no query field (unreadable); hop 2 writes an empty query
    scripted_lm(writer([{"reasoning": "r"}, "   "]))
    prediction = MultiHop(bm25, passages_per_hop=2)(question=QUESTION)
    assert [s["query"] for s in prediction.trace["searches"]] == [QUESTION, QUESTION]
    assert [t["fallback"] for t in prediction.trace["turns"]] == [True, True]
    steps = prediction.trace["steps"]
    assert steps["generate_query[0]"]["fallbacks"] == 1
    assert steps["generate_query[0]"]["parse_failures"] == 1
    assert steps["generate_query[1]"]["fallbacks"] == 1
    assert prediction.answer == "the Seine"


def test_knobs_are_the_tutorials_with_a_query_writer_per_hop(bm25):
    # the tutorial's max_hops=2, passages_per_hop=3, under netcast's names (the tutorial's
    # are aliases: tests/programs/test_knobs.py)
    assert MultiHop.knob_defaults() == {"max_steps": 2, "k": 3, "reasoning": True}
    names = [n for n, _ in MultiHop(bm25).named_predictors()]
    assert names == [
        "generate_query[0].predict",
        "generate_query[1].predict",
        "generate_answer.predict",
    ]
    assert len(MultiHop(bm25, max_steps=4).generate_query) == 4
    space = MultiHop.search_space(optuna.trial.FixedTrial({"max_steps": 3, "k": 5}))
    assert space == {"max_steps": 3, "k": 5}  # reasoning is not searched
    assert get_program("multihop") is MultiHop and "multihop" in program_names()
    with pytest.raises(InputError, match="multihop: knob 'max_hops' = 0"):
        MultiHop(bm25, max_hops=0)


# --- the annotation teacher --------------------------------------------------------------------


def annotated(qid: str = "q1", hops=()) -> dspy.Example:
    gold = [
        {"id": "seine", "title": "Seine", "text": SEINE.split(": ", 1)[1], "facts": [0]},
        {"id": "eiffel", "title": "Eiffel Tower", "text": EIFFEL.split(": ", 1)[1], "facts": [0]},
    ]
    return dspy.Example(
        id=qid,
        question=QUESTION,
        answers=["the Seine"],
        answer="the Seine",
        gold_ids=["seine", "eiffel"],
        gold_passages=gold,
        hops=list(hops),
    ).with_inputs("question")


def test_each_hop_is_taught_to_search_the_next_missing_gold_passage(bm25):
    program = MultiHop(bm25, max_hops=3, passages_per_hop=1)
    demos = program.annotated_demos(annotated())
    # two gold passages: hops 1 and 2 are taught, hop 3 (nothing left to find) is not
    assert set(demos) == {"generate_query[0]", "generate_query[1]", "generate_answer"}
    (one,) = demos["generate_query[0]"]
    assert (one.context, one.query) == ([], "Seine")
    assert set(one.inputs().keys()) == {"context", "question"}
    (two,) = demos["generate_query[1]"]
    assert (two.context, two.query) == ([SEINE], "Eiffel Tower")
    (final,) = demos["generate_answer"]
    assert final.context == [SEINE, EIFFEL] and final.answer == "the Seine"


def test_musique_hops_are_taught_their_sub_questions_and_missed_gold_is_swapped_in(bm25):
    demos = MultiHop(bm25, passages_per_hop=1).annotated_demos(annotated(hops=HOPS))
    assert demos["generate_query[0]"][0].query == "In which city is the Eiffel Tower?"
    assert demos["generate_query[0]"][0].context == []
    assert demos["generate_query[1]"][0].query == "Which river flows through Paris?"
    assert demos["generate_query[1]"][0].context == [EIFFEL]
    # one hop: only the first gold passage is searched; the other is swapped into the context
    demos = MultiHop(bm25, max_hops=1, passages_per_hop=1).annotated_demos(annotated())
    assert set(demos) == {"generate_query[0]", "generate_answer"}
    assert demos["generate_answer"][0].context == [SEINE, EIFFEL]


def test_a_record_without_annotations_is_refused_in_one_line(bm25):
    bare = dspy.Example(id="q9", question=QUESTION, answer="x", gold_passages=[])
    with pytest.raises(InputError) as err:
        MultiHop(bm25).annotated_demos(bare.with_inputs("question"))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("multihop: question q9 has no 'gold_passages' annotation")


def test_taught_demos_reach_the_prompts_and_survive_save_and_load(scripted_lm, bm25, tmp_path):
    program = MultiHop(bm25, passages_per_hop=1)
    assert set(annotation_demos(program, [annotated()], per_step=1)) == {
        "generate_query[0]",
        "generate_query[1]",
        "generate_answer",
    }
    taught = teach(program, [annotated("a"), annotated("b")], per_step=2)
    counts = {n: len(p.demos) for n, p in taught.named_predictors()}
    assert set(counts.values()) == {2}
    taught.save(str(tmp_path / "program.json"))
    fresh = MultiHop(bm25, passages_per_hop=1)
    load_program_state(fresh, tmp_path, allow_pickle=False)
    assert {n: len(p.demos) for n, p in fresh.named_predictors()} == counts
    assert fresh.generate_query[1].predict.demos[0]["query"] == "Eiffel Tower"
    _, engine = scripted_lm(writer(["Seine", "Eiffel Tower"]))
    prediction = fresh(question="What is the capital of France?")
    assert prediction.answer == "the Seine"
    second = query_prompts(engine)[1]
    assert "Eiffel Tower" in second and QUESTION in second  # the demonstration is in the prompt


def test_without_reasoning_every_step_writes_its_output_alone_and_every_taught_demo_fits(
    scripted_lm, bm25
):
    # reasoning=False: no step asks for a reasoning field, the hops still search their
    # queries, and each annotation demonstration holds every output its step writes (what a
    # fine-tune on the annotations needs); with the tutorial's chain of thought none does
    _, engine = scripted_lm(writer(["Eiffel Tower", "Seine"]))
    program = MultiHop(bm25, passages_per_hop=1, reasoning=False)
    prediction = program(question=QUESTION)
    assert prediction.answer == "the Seine"
    assert len(engine.prompts) == 3
    assert not any("[[ ## reasoning ## ]]" in p for p in engine.prompts)
    assert [t["query"] for t in prediction.trace["turns"]] == ["Eiffel Tower", "Seine"]

    def fitting(program):
        steps = {n.removesuffix(".predict"): p for n, p in program.named_predictors()}
        demos = program.annotated_demos(annotated())
        return {
            step
            for step, items in demos.items()
            if all(name in d for d in items for name in steps[step].signature.output_fields)
        }

    assert fitting(program) == {"generate_query[0]", "generate_query[1]", "generate_answer"}
    assert fitting(MultiHop(bm25, passages_per_hop=1)) == set()
