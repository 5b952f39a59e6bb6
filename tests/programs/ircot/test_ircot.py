"""IRCoT (``ircot``) with a scripted model over the tiny corpus: the question is searched first,
then each chain-of-thought sentence is the next query; the loop stops on "answer is", at the
step limit, or on an unreadable step; paragraphs are collected once each up to the cap; the
reader answers from them; the annotation teacher's demonstrations."""

import dspy
import optuna
import pytest

from helpers import DOCS
from netcast.artifacts import load_program_state
from netcast.corpus import format_passage
from netcast.errors import InputError
from netcast.optimize.annotations import teach
from netcast.programs import IRCoT, get_program, program_names
from netcast.programs.ircot.program import first_sentence, stated_answer

QUESTION = "Which river flows through the city of the Eiffel Tower?"
EIFFEL_SAYS = "The Eiffel Tower is a wrought-iron lattice tower in Paris."
SEINE_SAYS = "The Seine flows through Paris."


def reasoner(sentences, answer="Seine (reader)"):
    """Scripted model: the reason step replies ``sentences`` in turn (a string is the
    ``next_sentence``; a dict, the reply's fields), then "So the answer is: x."; the reader
    answers ``answer``."""
    sentences = list(sentences)

    def respond(prompt):
        if "[[ ## next_sentence ## ]]" in prompt:
            reply = sentences.pop(0) if sentences else "So the answer is: x."
            return {"next_sentence": reply} if isinstance(reply, str) else reply
        return {"reasoning": "r", "answer": answer}

    return respond


def reason_prompts(engine) -> list[str]:
    return [p for p in engine.prompts if "[[ ## next_sentence ## ]]" in p]


def reader_prompts(engine) -> list[str]:
    return [p for p in engine.prompts if "[[ ## next_sentence ## ]]" not in p]


def passage(bm25, chunk_id: str) -> str:
    chunk = bm25.corpus[chunk_id]
    return format_passage(chunk.title, chunk.text)


def test_the_question_then_each_sentence_is_searched_until_a_sentence_states_the_answer(
    scripted_lm, bm25
):
    cot = [EIFFEL_SAYS, SEINE_SAYS, "So the answer is: the Seine."]
    _, engine = scripted_lm(reasoner(cot))
    prediction = IRCoT(bm25, k=2)(question=QUESTION)

    searches = prediction.trace["searches"]
    # no search after the sentence that states the answer
    assert [s["query"] for s in searches] == [QUESTION, EIFFEL_SAYS, SEINE_SAYS]
    assert all(s["k"] == 2 for s in searches)
    assert [s["ids"] for s in searches] == [
        ["eiffel#0", "rhine#0"],
        ["eiffel#0", "paris#0"],
        ["seine#0", "rhine#0"],
    ]
    assert prediction.evidence == ["eiffel#0", "rhine#0", "paris#0", "seine#0"]  # each once
    turns = prediction.trace["turns"]
    assert [(t["turn"], t["action"]) for t in turns] == [
        (0, "search"),
        (1, "search"),
        (2, "search"),
        (3, "answer"),
    ]
    assert [t["added"] for t in turns[:3]] == [["eiffel#0", "rhine#0"], ["paris#0"], ["seine#0"]]
    assert prediction.cot == cot and prediction.stopped == "answer"
    assert prediction.cot_answer == "the Seine" and turns[-1]["cot_answer"] == "the Seine"
    # each step sees every paragraph collected so far and the sentences so far
    steps = reason_prompts(engine)
    assert len(steps) == 3
    assert passage(bm25, "rhine#0") in steps[0] and passage(bm25, "paris#0") not in steps[0]
    assert all(passage(bm25, c) in steps[2] for c in prediction.evidence)
    assert EIFFEL_SAYS in steps[2] and SEINE_SAYS in steps[2]
    # the answer is the reader's, from the collected paragraphs (not the chain of thought's)
    (reader,) = reader_prompts(engine)
    assert all(reader.count(passage(bm25, c)) == 1 for c in prediction.evidence)
    assert SEINE_SAYS not in reader
    assert prediction.answer == "Seine (reader)"
    assert prediction.trace["lm_calls"] == 4


def test_the_step_limit_stops_the_loop_without_a_search_after_the_last_sentence(scripted_lm, bm25):
    _, engine = scripted_lm(reasoner(["Paris", "Germany", "Louvre museum", "never searched"]))
    prediction = IRCoT(bm25, k=1, max_steps=3)(question=QUESTION)
    assert [s["query"] for s in prediction.trace["searches"]] == [QUESTION, "Paris", "Germany"]
    assert len(reason_prompts(engine)) == 3 and len(reader_prompts(engine)) == 1
    assert prediction.stopped == "limit" and prediction.cot_answer == ""
    last = prediction.trace["turns"][-1]
    assert (last["turn"], last["action"], last["sentence"]) == (3, "limit", "Louvre museum")


def test_only_the_first_sentence_of_a_reply_is_kept(scripted_lm, bm25):
    scripted_lm(reasoner([f"{EIFFEL_SAYS} So the answer is: Paris.", "The answer is Seine."]))
    prediction = IRCoT(bm25, k=1)(question=QUESTION)
    # the stated answer after the first sentence was dropped: the loop went on
    assert [s["query"] for s in prediction.trace["searches"]] == [QUESTION, EIFFEL_SAYS]
    first, second = prediction.trace["turns"][1:]
    assert first["sentence"] == EIFFEL_SAYS and first["trimmed"] is True
    assert second["action"] == "answer" and second["trimmed"] is False
    assert prediction.cot == [EIFFEL_SAYS, "The answer is Seine."]
    assert prediction.cot_answer == "Seine"


def test_paragraphs_are_collected_once_each_up_to_the_cap(scripted_lm, bm25):
    _, engine = scripted_lm(reasoner(["Seine river Paris", "Berlin capital Germany"]))
    prediction = IRCoT(bm25, k=3, max_paragraphs=4)(question=QUESTION)
    turns = prediction.trace["turns"]
    assert turns[0]["returned"] == ["eiffel#0", "rhine#0", "seine#0"]
    assert turns[1]["returned"] == ["seine#0", "rhine#0", "paris#0"]
    assert turns[1]["added"] == ["paris#0"]  # the two already collected are not added again
    assert turns[2]["returned"] == ["berlin#0", "paris#0", "rhine#0"]
    assert turns[2]["added"] == []  # the cap is reached: berlin is retrieved, not collected
    assert prediction.evidence == ["eiffel#0", "rhine#0", "seine#0", "paris#0"]
    assert len(prediction.context) == 4
    reader = reader_prompts(engine)[0]
    assert passage(bm25, "berlin#0") not in reader
    assert passage(bm25, "berlin#0") not in reason_prompts(engine)[-1]


def test_an_unreadable_step_ends_the_loop_and_the_reader_answers_from_what_it_has(
    scripted_lm, bm25
):
    scripted_lm(reasoner([{"reasoning": "no sentence"}]))
    prediction = IRCoT(bm25, k=2)(question=QUESTION)
    assert [s["query"] for s in prediction.trace["searches"]] == [QUESTION]
    assert prediction.stopped == "unparsed" and prediction.cot == []
    assert prediction.trace["turns"][-1]["action"] == "unparsed"
    assert prediction.trace["steps"]["reason"]["fallbacks"] == 1
    assert prediction.answer == "Seine (reader)" and prediction.evidence == ["eiffel#0", "rhine#0"]
    scripted_lm(reasoner(["  "]))  # an empty sentence ends it too (the code's rule)
    prediction = IRCoT(bm25, k=2)(question=QUESTION)
    assert prediction.stopped == "empty" and len(prediction.trace["searches"]) == 1


def test_the_cot_reader_reasons_before_it_answers(scripted_lm, bm25):
    _, engine = scripted_lm(reasoner(["So the answer is: Seine."]))
    prediction = IRCoT(bm25, k=1, reader="cot")(question=QUESTION)
    assert isinstance(IRCoT(bm25, reader="cot").answer, dspy.ChainOfThought)
    assert "[[ ## reasoning ## ]]" in reader_prompts(engine)[0]
    assert prediction.answer == "Seine (reader)"


def test_the_sentence_rules():
    assert first_sentence("  One fact.  Another one. ") == ("One fact.", True)
    assert first_sentence("Just one") == ("Just one", False)
    assert stated_answer("So the answer is: Walls and Bridges.") == "Walls and Bridges"
    assert stated_answer("Thus the Answer is the Seine") == "the Seine"
    assert stated_answer("The Seine flows through Paris.") is None


def test_knobs_are_the_papers_and_its_grid_is_in_the_range(bm25):
    assert IRCoT.knob_defaults() == {
        "k": 6,
        "max_steps": 8,
        "max_paragraphs": 15,
        "reader": "direct",
    }
    space = IRCoT.search_space(optuna.trial.FixedTrial({"k": 4, "max_steps": 5, "reader": "cot"}))
    assert space == {"k": 4, "max_steps": 5, "reader": "cot"}
    from netcast.optimize.joint import knob_grid

    assert knob_grid(IRCoT)["k"] == [2, 4, 6, 8]  # the paper's K grid
    assert get_program("ircot") is IRCoT and "ircot" in program_names()
    with pytest.raises(InputError, match="ircot: knob 'reader' = 'fancy'"):
        IRCoT(bm25, reader="fancy")


# --- the annotation teacher --------------------------------------------------------------------

PARIS = "Paris: Paris is the capital and largest city of France."
EIFFEL = "Eiffel Tower: The Eiffel Tower is a wrought-iron lattice tower in Paris."
BRIDGE_QUESTION = "What country is the city of the Eiffel Tower the capital of?"


def annotated(qid: str = "q1", facts=(0,)) -> dspy.Example:
    """A bridge question: the Eiffel Tower's passage names Paris, whose passage holds the answer
    (listed first in the record, so the chain order is the teacher's own)."""
    gold = [
        {"id": "paris", "title": "Paris", "text": PARIS.split(": ", 1)[1], "facts": list(facts)},
        {"id": "eiffel", "title": "Eiffel Tower", "text": EIFFEL.split(": ", 1)[1], "facts": [0]},
    ]
    return dspy.Example(
        id=qid,
        question=BRIDGE_QUESTION,
        answers=["France"],
        answer="France",
        gold_ids=["paris", "eiffel"],
        gold_passages=gold,
        hops=[],
    ).with_inputs("question")


def test_reason_is_taught_the_bridge_sentence_first_and_the_answer_sentence_last(bm25):
    demos = IRCoT(bm25, k=1).annotated_demos(annotated())
    bridge, last = demos["reason"]
    assert set(bridge.inputs().keys()) == {"context", "question", "reasoning_so_far"}
    # top-1 for the question is the Eiffel Tower: the sentence naming the bridge entity, Paris
    assert (bridge.context, bridge.reasoning_so_far) == ([EIFFEL], [])
    assert bridge.next_sentence == EIFFEL_SAYS
    # after searching that sentence: both gold paragraphs, every supporting sentence in order
    assert last.context == [EIFFEL, PARIS]
    assert last.reasoning_so_far == [
        EIFFEL_SAYS,
        "Paris is the capital and largest city of France.",
    ]
    assert last.next_sentence == "So the answer is: France."
    assert stated_answer(last.next_sentence) == "France"
    (answer,) = demos["answer"]
    assert answer.context == [EIFFEL, PARIS] and answer.answer == "France"


def test_the_last_reason_demo_holds_what_the_loop_holds_after_writing_its_sentences(
    scripted_lm, bm25
):
    """The last step's context is what the loop collects searching each sentence of the
    reasoning so far (the Paris sentence's top-2 brings Berlin), not the bridge's search only."""
    _, last = IRCoT(bm25, k=2).annotated_demos(annotated())["reason"]
    assert last.context == [EIFFEL, PARIS, format_passage("Berlin", DOCS[1].text)]
    _, engine = scripted_lm(reasoner([*last.reasoning_so_far, last.next_sentence]))
    run = IRCoT(bm25, k=2)(question=BRIDGE_QUESTION)
    assert run.cot == [*last.reasoning_so_far, last.next_sentence]
    assert run.context == last.context  # the loop's state when it wrote the last sentence
    assert last.context[-1] in reason_prompts(engine)[-1]


def test_the_bridge_sentence_leads_the_reasoning_so_far_and_the_step_limit_caps_it(bm25):
    """The bridge sentence (the one naming Paris) is the Eiffel Tower's second supporting
    sentence: the last demo's reasoning so far starts with it, as the first demo wrote it,
    and holds at most ``max_steps`` - 1 sentences (the loop answers at the limit)."""
    built = "It was built in 1889."
    record = annotated()
    eiffel = {**record.gold_passages[1], "text": f"{built} {EIFFEL_SAYS}", "facts": [0, 1]}
    record = record.copy(gold_passages=[record.gold_passages[0], eiffel])
    paris_says = "Paris is the capital and largest city of France."
    first, last = IRCoT(bm25, k=1).annotated_demos(record)["reason"]
    assert first.next_sentence == EIFFEL_SAYS
    assert last.reasoning_so_far == [EIFFEL_SAYS, built, paris_says]
    _, capped = IRCoT(bm25, k=1, max_steps=3).annotated_demos(record)["reason"]
    assert capped.reasoning_so_far == [EIFFEL_SAYS, built]
    (only,) = IRCoT(bm25, k=1, max_steps=1).annotated_demos(record)["reason"]
    assert only.next_sentence == EIFFEL_SAYS


def test_without_supporting_sentences_only_the_reader_is_taught(bm25):
    demos = IRCoT(bm25, k=1).annotated_demos(annotated(facts=()))
    assert set(demos) == {"answer"}
    assert demos["answer"][0].context == [EIFFEL, PARIS]  # the missed gold swapped in


def test_a_record_without_annotations_is_refused_in_one_line(bm25):
    bare = dspy.Example(id="q9", question=QUESTION, answer="x").with_inputs("question")
    with pytest.raises(InputError) as err:
        IRCoT(bm25).annotated_demos(bare)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("ircot: question q9 has no 'gold_passages' annotation")


def test_taught_demos_reach_the_prompts_and_survive_save_and_load(scripted_lm, bm25, tmp_path):
    taught = teach(IRCoT(bm25, k=1), [annotated("a"), annotated("b")], per_step=2)
    counts = {n.removesuffix(".predict"): len(p.demos) for n, p in taught.named_predictors()}
    assert counts == {"reason": 2, "answer": 2}
    taught.save(str(tmp_path / "program.json"))
    fresh = IRCoT(bm25, k=1)
    load_program_state(fresh, tmp_path, allow_pickle=False)
    assert fresh.reason.demos[1]["next_sentence"] == "So the answer is: France."
    _, engine = scripted_lm(reasoner(["So the answer is: Seine."]))
    prediction = fresh(question=QUESTION)
    assert prediction.answer == "Seine (reader)"
    assert "So the answer is: France." in reason_prompts(engine)[0]  # the demonstration


def test_a_musique_record_teaches_reason_from_its_hops_answers(bm25):
    """MuSiQue names no supporting sentences; the sentences of each hop's paragraph that hold
    the hop's answer stand in, so its records teach ``reason`` too (they taught ``answer``
    only)."""
    from netcast.data.records import to_example

    record = {
        "id": "2hop__1_2",
        "question": BRIDGE_QUESTION,
        "answers": ["France"],
        "paragraphs": [
            {"title": "Paris", "text": PARIS.split(": ", 1)[1], "is_supporting": True},
            {"title": "Eiffel Tower", "text": EIFFEL.split(": ", 1)[1], "is_supporting": True},
        ],
        "question_decomposition": [
            {
                "question": "Where is the Eiffel Tower?",
                "answer": "Paris",
                "paragraph_support_idx": 1,
            },
            {"question": "#1 is the capital of?", "answer": "France", "paragraph_support_idx": 0},
        ],
    }
    example = to_example(record)
    ids = {"Paris": "paris", "Eiffel Tower": "eiffel"}  # the fixture corpus's ids
    gold = [{**p, "id": ids[p["title"]]} for p in example.gold_passages]
    demos = IRCoT(bm25, k=1).annotated_demos(example.copy(gold_passages=gold))
    bridge, last = demos["reason"]
    assert bridge.next_sentence == EIFFEL_SAYS  # hop 1's sentence, naming the bridge, Paris
    assert last.reasoning_so_far == [EIFFEL_SAYS, PARIS.split(": ", 1)[1]]
    assert last.next_sentence == "So the answer is: France."
