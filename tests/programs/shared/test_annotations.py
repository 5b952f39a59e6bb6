import dspy
import pytest

from netcast.errors import InputError
from netcast.programs.shared import annotations

GOLD = [
    {"id": "paris", "title": "Paris", "text": "Paris is big. It is in France.", "facts": [1]},
    {"id": "seine", "title": "Seine", "text": "The Seine flows.", "facts": []},
]


def test_supporting_sentences_are_the_named_ones_verbatim():
    assert annotations.sentences("A b. C d! e? f. 2 g.") == ["A b.", "C d! e? f.", "2 g."]
    assert annotations.supporting_sentences(GOLD[0]) == "It is in France."
    assert annotations.supporting_sentences(GOLD[1]) is None  # the record names none
    out_of_range = {**GOLD[0], "facts": [5]}
    assert annotations.supporting_sentences(out_of_range) is None


def test_context_with_gold_swaps_missed_gold_in_for_the_last_others():
    found = [("berlin#0", "B"), ("paris#0", "P"), ("rhine#0", "R"), ("louvre#0", "L")]
    context = annotations.context_with_gold(found, GOLD, 3)
    # paris was retrieved and stays in place; seine was missed and replaces the last others
    assert context == ["B", "P", "Seine: The Seine flows."]
    # a context smaller than the gold passages still holds every gold passage
    assert annotations.context_with_gold(found[:1], GOLD, 1) == [
        "Paris: Paris is big. It is in France.",
        "Seine: The Seine flows.",
    ]


def test_a_record_without_annotations_is_refused_in_one_line():
    example = dspy.Example(id="q7", question="q", gold_passages=[])
    with pytest.raises(
        InputError, match=r"basic: question q7 has no 'gold_passages'.*is_supporting"
    ):
        annotations.require(example, "gold_passages", "basic")


# MuSiQue-style hops and a two-passage record (the Eiffel Tower's city, its river)
SEINE_TEXT = "The Seine is a river that flows through Paris in France."
EIFFEL = "Eiffel Tower: The Eiffel Tower is a wrought-iron lattice tower in Paris."
HOPS = [
    {"question": "In which city is the Eiffel Tower?", "answer": "Paris"},
    {"question": "Which river flows through #1 ?", "answer": "the Seine"},
]


def annotated(hops=()) -> dspy.Example:
    gold = [
        {"id": "seine", "title": "Seine", "text": SEINE_TEXT, "facts": [0]},
        {"id": "eiffel", "title": "Eiffel Tower", "text": EIFFEL.split(": ", 1)[1], "facts": [0]},
    ]
    return dspy.Example(question="q", gold_passages=gold, hops=list(hops))


def test_gold_queries_are_titles_or_the_hops_sub_questions_in_hop_order():
    assert annotations.hop_queries(HOPS) == [
        "In which city is the Eiffel Tower?",
        "Which river flows through Paris?",  # '#1' filled with the first hop's answer
    ]
    plain = [(p["id"], q) for p, q in annotations.gold_queries(annotated())]
    assert plain == [("seine", "Seine"), ("eiffel", "Eiffel Tower")]
    # the Seine passage also names Paris (hop 1's answer): it answers the last hop it holds
    hopped = [(p["id"], q) for p, q in annotations.gold_queries(annotated(hops=HOPS))]
    assert hopped == [
        ("eiffel", "In which city is the Eiffel Tower?"),
        ("seine", "Which river flows through Paris?"),
    ]


def test_marked_context_is_context_with_gold_with_each_passage_marked():
    gold = annotated().gold_passages
    found = [("eiffel#0", EIFFEL), ("rhine#0", "R"), ("paris#0", "P")]
    marked = annotations.marked_context_with_gold(found, gold, 3)
    assert [text for text, _ in marked] == annotations.context_with_gold(found, gold, 3)
    assert [source and source["id"] for _, source in marked] == ["eiffel", None, "seine"]
