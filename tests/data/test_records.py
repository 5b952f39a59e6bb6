"""The record schema's supporting sentences: HotpotQA's annotated ones, and MuSiQue's derived
from its hops (the paragraph each hop names, the sentences that hold its answer)."""

from netcast.data.records import hop_facts, sentences, sentences_holding, to_example

PARIS = "Paris is the capital and largest city of France. It lies on the Seine."
EIFFEL = "The Eiffel Tower is a lattice tower. It stands in Paris on the Champ de Mars."
HALL = 'Its study began with G. Stanley Hall\'s "Adolescence" in 1904. Hall taught at Clark.'


def musique(hops, paragraphs=None) -> dict:
    return {
        "id": "2hop__1_2",
        "question": "What country is the city of the Eiffel Tower the capital of?",
        "answers": ["France"],
        "paragraphs": paragraphs
        or [
            {"title": "Berlin", "text": "Berlin is in Germany.", "is_supporting": False},
            {"title": "Paris", "text": PARIS, "is_supporting": True},
            {"title": "Eiffel Tower", "text": EIFFEL, "is_supporting": True},
        ],
        "question_decomposition": hops,
    }


HOPS = [
    {
        "question": "In what city is the Eiffel Tower?",
        "answer": "Paris",
        "paragraph_support_idx": 2,
    },
    {"question": "#1 is the capital of?", "answer": "France", "paragraph_support_idx": 1},
]


def test_a_musique_hop_s_paragraph_gets_the_sentences_holding_its_answer():
    assert hop_facts(musique(HOPS)) == {2: [1], 1: [0]}
    facts = {p["title"]: p["facts"] for p in to_example(musique(HOPS)).gold_passages}
    assert facts == {"Paris": [0], "Eiffel Tower": [1]}
    assert sentences(EIFFEL)[1] == "It stands in Paris on the Champ de Mars."


def test_an_answer_the_sentence_split_cuts_marks_every_sentence_it_spans():
    assert sentences(HALL)[:2] == [
        "Its study began with G.",
        'Stanley Hall\'s "Adolescence" in 1904.',
    ]
    assert sentences_holding(HALL, "G. Stanley Hall") == [0, 1]
    assert sentences_holding(HALL, "hall") == [1, 2]  # whole words, case aside
    assert sentences_holding(HALL, "Clar") == []


def test_a_hop_whose_answer_no_sentence_holds_or_that_names_no_paragraph_gives_none():
    hops = [
        {"question": "q1", "answer": "Lyon", "paragraph_support_idx": 2},  # not in its text
        {"question": "q2", "answer": "France"},  # no paragraph named
        {"question": "q3", "answer": "France", "paragraph_support_idx": 9},  # out of range
        "not a hop",
    ]
    assert hop_facts(musique(hops)) == {}
    assert all(p["facts"] == [] for p in to_example(musique(hops)).gold_passages)


def test_annotated_supporting_facts_come_before_derived_ones():
    record = musique(HOPS)
    record["supporting_facts"] = [["Paris", 1]]
    facts = {p["title"]: p["facts"] for p in to_example(record).gold_passages}
    assert facts == {"Paris": [1], "Eiffel Tower": [1]}
