import pytest

from netcast.programs.iterkey.program import keywords_of
from netcast.programs.shared.lists import parse_list

KEYWORDS = "\n,;"  # IterKey's separators (keywords_of)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            '["Dow Chemical", "Midland", "headquarters"]',
            ["Dow Chemical", "Midland", "headquarters"],
        ),
        ('```json\n["a b", "c"]\n```', ["a b", "c"]),
        ('Keywords: ["x", "y"] hope this helps', ["x", "y"]),
        ("Dow Chemical, Midland ,  , headquarters", ["Dow Chemical", "Midland", "headquarters"]),
        (
            "- Dow Chemical\n- Midland\n2. headquarters\n",
            ["Dow Chemical", "Midland", "headquarters"],
        ),
        ('["Dow", "dow", "", " Dow ", "Midland"]', ["Dow", "Midland"]),
        ("'quoted'; \"double\"", ["quoted", "double"]),
        ("", []),
        (None, []),
        (["a", "A", " b "], ["a", "b"]),
        ("[not json, but bracketed]", ["not json", "but bracketed"]),
    ],
)
def test_keywords_split_at_lines_commas_and_semicolons(raw, expected):
    assert parse_list(raw, separators=KEYWORDS) == expected
    assert keywords_of(raw) == expected


def test_notes_split_at_lines_only_and_keep_their_commas():
    assert parse_list('["a, with comma", "b"]') == ["a, with comma", "b"]
    assert parse_list("- first note\n- second, note\n") == ["first note", "second, note"]
    assert parse_list("one, two; three") == ["one, two; three"]


@pytest.mark.parametrize(
    "raw", ["None", "[]", "", "Nothing new helps.", "nothing", "n/a", "N/A", [" ", "none"]]
)
def test_placeholders_meaning_nothing_give_no_items(raw):
    assert parse_list(raw) == []
    assert parse_list(raw, separators=KEYWORDS) == []


def test_placeholders_among_items_are_dropped():
    gaps = ["None", " ", "the river of Paris", "n/a"]
    assert parse_list(gaps) == ["the river of Paris"]
    assert parse_list("- none\n- the river of Paris\n- n/a") == ["the river of Paris"]


def test_a_bounded_list_bounds_only_the_schema():
    from pydantic import TypeAdapter

    from netcast.programs.shared.lists import bounded_list

    facts = bounded_list("Facts", 3)
    schema = TypeAdapter(facts).json_schema()
    assert schema == {"type": "array", "items": {"type": "string"}, "maxItems": 3}
    # what an unconstrained model writes past the bound still parses
    assert TypeAdapter(facts).validate_python(["a", "b", "c", "d"]) == ["a", "b", "c", "d"]


def test_a_signature_with_a_bounded_list_survives_save_load_and_new_instructions():
    # DSPy rebuilds a signature from its field types when it loads a saved Predict and when an
    # optimizer sets instructions; it refused the earlier TypeAliasType (knowledge's compiled
    # artifact could not be loaded back)
    import dspy

    from netcast.programs.shared.lists import bounded_list

    class Note(dspy.Signature):
        """Write notes."""

        question: str = dspy.InputField()
        notes: bounded_list("Notes", 2) = dspy.OutputField()

    saved = dspy.Predict(Note)
    saved.demos = [dspy.Example(question="q", notes=["a"])]
    loaded = dspy.Predict(Note)
    loaded.load_state(saved.dump_state())
    assert loaded.demos[0]["notes"] == ["a"]
    assert Note.with_instructions("Write two notes.").instructions == "Write two notes."
    assert loaded.signature.output_fields["notes"].annotation.__name__ == "Notes"
