"""The annotation teacher: demonstrations for each step read from a crafted annotated record."""

import re

import dspy
import pytest

from netcast.corpus import format_passage
from netcast.errors import InputError
from netcast.optimize.annotations import annotation_demos, teach
from netcast.programs import BasicRAG, NetcastProgram, get_program
from netcast.programs.shared.annotations import is_gold


def annotated(qid: str = "q1") -> dspy.Example:
    gold = [
        {
            "id": "seine",
            "title": "Seine",
            "text": "The Seine is a river that flows through Paris in France.",
            "facts": [0],
        },
        {
            "id": "eiffel",
            "title": "Eiffel Tower",
            "text": "The Eiffel Tower is a wrought-iron lattice tower in Paris.",
            "facts": [0],
        },
    ]
    return dspy.Example(
        id=qid,
        question="Which river flows through the city of the Eiffel Tower?",
        answers=["the Seine"],
        answer="the Seine",
        gold_ids=["seine", "eiffel"],
        gold_passages=gold,
        hops=[],
    ).with_inputs("question")


def test_basic_learns_the_gold_answer_from_a_context_holding_the_gold_passages(bm25):
    program = BasicRAG(bm25, top_k=2)
    demos = annotation_demos(program, [annotated()])
    (demo,) = demos["answer"]
    assert demo.answer == "the Seine"
    assert len(demo.context) == 2
    assert any("Seine is a river" in p for p in demo.context)
    assert any("Eiffel Tower is a wrought-iron" in p for p in demo.context)


def test_teach_sets_demos_on_a_copy_and_they_reach_the_prompt(scripted_lm, bm25):
    lm, engine = scripted_lm(lambda prompt: {"answer": "Paris"})
    program = BasicRAG(bm25, top_k=1)
    taught = teach(program, [annotated("a"), annotated("b"), annotated("c")], per_step=2)
    assert len(taught.answer.demos) == 2 and program.answer.demos == []
    taught(question="What is the capital of France?")
    assert engine.prompts[0].count("the Seine") == 2  # both demonstrations' answers


def test_one_shot_crop_keeps_every_gold_passage_and_drops_the_worst_ranked_other(bm25):
    program = get_program("one_shot")(bm25, token_budget=200, pool_size=6, crop=True)
    record = annotated()
    pool, _ = program.candidates(record.question, 200)
    ranked = program.selection(pool, 200)
    others = [c.text for c in ranked if not is_gold(c.chunk.id, record.gold_passages)]
    assert len(ranked) == 5 and len(others) == 3  # every passage sharing a word is selected

    demos = program.annotated_demos(record)
    kept = [d for d in demos["crop_chunk"] if d.relevant_sentences != "NONE"]
    dropped = [d.passage for d in demos["crop_chunk"] if d.relevant_sentences == "NONE"]
    # each passage is the chunk's text alone, as the crop step reads it at run time; both gold
    # passages (the bridge one too) are shown kept, each with its one supporting sentence
    assert {d.passage for d in kept} == {p["text"] for p in record.gold_passages}
    assert all(d.relevant_sentences == d.passage for d in kept)
    # one NONE example: the selection's worst-ranked passage, second (a prompt's first two
    # demonstrations show one of each)
    assert dropped == [others[-1]]
    assert [d.relevant_sentences == "NONE" for d in demos["crop_chunk"]] == [0, 1, 0]
    uncropped = get_program("one_shot")(bm25, token_budget=200, pool_size=6)  # no crop step
    assert set(annotation_demos(uncropped, [record])) == {"answer"}


def test_one_shot_crop_answer_context_is_the_cropped_gold_among_the_best_ranked_others(
    bm25, monkeypatch
):
    from netcast.programs.one_shot import program as one_shot

    monkeypatch.setattr(one_shot, "CROP_MISSES", 2)  # fewer than the 3 others selected
    record = annotated()
    seine, eiffel = record.gold_passages
    longer = {**seine, "text": "It is 777 km long. " + seine["text"], "facts": [1]}
    record = record.copy(gold_passages=[longer, eiffel])
    cropped = get_program("one_shot")(bm25, token_budget=200, pool_size=6, crop=True)
    pool, _ = cropped.candidates(record.question, 200)
    others = [
        format_passage(c.chunk.title, c.text)
        for c in cropped.selection(pool, 200)
        if not is_gold(c.chunk.id, record.gold_passages)
    ]

    (answer,) = annotation_demos(cropped, [record])["answer"]
    assert answer.answer == "the Seine"
    assert "Seine: The Seine is a river that flows through Paris in France." in answer.context
    assert not any("777 km" in p for p in answer.context)  # cropped to its supporting sentence
    assert [p for p in answer.context if p in others] == others[:2]
    assert len(answer.context) == 2 + 2

    (blind,) = cropped.retrieved_demos(record)["answer"]  # RAFT's: no gold, the same misses
    assert blind.context == others[:2]

    whole = get_program("one_shot")(bm25, token_budget=200, pool_size=6)  # crop off: as selected
    (plain,) = annotation_demos(whole, [record])["answer"]
    assert len(plain.context) == 5 and set(others) <= set(plain.context)


def test_one_shot_crop_keeps_only_the_supporting_sentences_of_a_longer_passage(bm25):
    record = annotated()
    seine, eiffel = record.gold_passages
    longer = {**seine, "text": "It is 777 km long. " + seine["text"], "facts": [1]}
    demos = annotation_demos(
        get_program("one_shot")(bm25, token_budget=40, crop=True),
        [record.copy(gold_passages=[longer, eiffel])],
    )
    kept = demos["crop_chunk"][0]
    assert kept.passage == longer["text"]
    assert kept.relevant_sentences == "The Seine is a river that flows through Paris in France."


def test_one_shot_crop_demos_read_passages_as_the_running_crop_step_does(scripted_lm, bm25):
    crop_inputs = []

    def respond(prompt):
        if "[[ ## passage ## ]]" in prompt:
            passage = re.findall(r"\[\[ ## passage ## \]\]\n(.*?)\n\n", prompt, re.S)[-1]
            crop_inputs.append(passage.strip())
            return {"relevant_sentences": passage}
        return {"answer": "the Seine"}

    scripted_lm(respond)
    program = get_program("one_shot")(bm25, token_budget=40, crop=True)
    example = annotated()
    program(question=example.question)
    demos = annotation_demos(program, [example])
    assert crop_inputs and {d.passage for d in demos["crop_chunk"]} <= set(crop_inputs)


def test_a_record_without_gold_passages_is_refused_naming_the_field(bm25):
    bare = annotated("q9").copy(gold_passages=[])
    with pytest.raises(InputError, match="question q9 has no 'gold_passages'"):
        annotation_demos(BasicRAG(bm25), [bare])


def test_a_strategy_without_a_teacher_says_so(bm25):
    class Untaught(NetcastProgram):  # every registered strategy has a teacher
        name = "untaught"

    with pytest.raises(InputError, match="untaught: no annotation teacher"):
        annotation_demos(Untaught(bm25), [annotated()])
