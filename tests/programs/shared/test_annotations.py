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
