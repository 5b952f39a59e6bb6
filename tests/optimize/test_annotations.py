"""The annotation teacher: demonstrations for each step read from a crafted annotated record."""

import re

import dspy
import pytest

from netcast.errors import InputError
from netcast.optimize.annotations import annotation_demos, teach
from netcast.programs import BasicRAG, NetcastProgram, get_program


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


def test_one_shot_crop_keeps_supporting_sentences_and_drops_another_passage(bm25):
    program = get_program("one_shot")(bm25, token_budget=40, crop=True)
    demos = annotation_demos(program, [annotated()])
    kept, dropped = demos["crop_chunk"]
    # each passage is the chunk's text alone, as the crop step reads it at run time
    assert kept.passage == "The Seine is a river that flows through Paris in France."
    assert kept.relevant_sentences == kept.passage  # its one sentence is the supporting fact
    assert dropped.relevant_sentences == "NONE"
    assert dropped.passage in {c.text for c in bm25.corpus.chunks}
    assert "Seine is a river" not in dropped.passage and "Eiffel" not in dropped.passage
    (answer,) = demos["answer"]
    assert answer.answer == "the Seine" and any("Seine is a river" in p for p in answer.context)
    uncropped = get_program("one_shot")(bm25, token_budget=40)  # its crop step never runs
    assert set(annotation_demos(uncropped, [annotated()])) == {"answer"}


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
