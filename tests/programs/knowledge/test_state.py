from netcast.corpus import Chunk
from netcast.programs.knowledge.state import (
    AgentState,
    diversity_score,
    is_redundant,
    query_similarity,
    verified_facts,
    verified_segments,
)


def chunk(cid, text):
    return Chunk(f"{cid}#0", cid, cid.title(), text, len(text.split()))


LABELS = {
    "P1": chunk("paris", "Paris is the capital of France. It is on the Seine."),
    "P2": chunk("berlin", "Berlin is the capital of Germany."),
}


def test_query_similarity_and_redundancy():
    assert query_similarity("capital of France", "France capital") == 1.0
    assert query_similarity("capital of France", "river of Germany") == 0.0
    assert is_redundant("the capital of France?", ["capital France"], 0.8)
    assert not is_redundant("river through Paris", ["capital France"], 0.8)


def test_facts_must_cite_a_shown_passage():
    accepted, rejected = verified_facts(
        ["Paris is the capital of France (P1)", "Berlin is in Germany (P9)", "No source here"],
        LABELS,
    )
    assert accepted == ["Paris is the capital of France (P1)"]
    assert rejected == ["Berlin is in Germany (P9)", "No source here"]


def test_an_uncited_fact_is_inferred_from_the_passage_holding_its_words():
    facts = [
        "Paris is on the Seine.",  # every content word in P1: cited for it
        "Germany's capital is Berlin",  # P2 holds germany, capital, berlin
        "Paris is the capital of Germany",  # each passage holds 2 of 3 words: below 0.8
        "Is Paris the capital of France?",  # a question is no fact
        "Berlin is in Germany (P9)",  # a wrong citation is not repaired
    ]
    accepted, rejected = verified_facts(facts, LABELS, cite="inferred", support=0.8)
    assert accepted == ["Paris is on the Seine (P1)", "Germany's capital is Berlin (P2)"]
    assert rejected == facts[2:]
    assert verified_facts(facts, LABELS)[0] == []  # explicit: only cited facts
    assert verified_facts(facts[2:3], LABELS, "inferred", 0.6)[0] == [
        "Paris is the capital of Germany (P1)"  # the most words; a tie goes to the first
    ]


def test_facts_may_cite_several_passages_in_several_formats():
    accepted, rejected = verified_facts(
        [
            "Both are capitals (P1, P2).",
            "Both are capitals (P1 and P2)",
            "Paris is on the Seine [P1]",
            "Paris and Atlantis (P1, P9)",
        ],
        LABELS,
    )
    assert len(accepted) == 3 and rejected == ["Paris and Atlantis (P1, P9)"]


def test_segments_must_be_copies_of_their_passage_and_keep_the_passages_text():
    segments = [
        "[P1] It is on the Seine.",
        "[P2] Berlin is the largest city in Europe.",
        "[P1]  paris is the CAPITAL of france",
        "no id at all",
        "[P7] It is on the Seine.",
        "P1: Paris is the capital of France, it is on the Seine",  # almost verbatim
    ]
    accepted, rejected = verified_segments(segments, LABELS, mode="exact")
    assert [(c.id, s) for c, s in accepted] == [
        ("paris#0", "It is on the Seine."),
        ("paris#0", "Paris is the capital of France"),  # the passage's text, not the copy's
    ]
    assert len(rejected) == 4
    accepted, rejected = verified_segments(segments, LABELS, mode="fuzzy", threshold=0.9)
    assert [s for _, s in accepted][-1] == "Paris is the capital of France. It is on the Seine"
    assert len(rejected) == 3  # an invented sentence, no id, an id never shown


def test_stable_passage_labels():
    state = AgentState()
    assert [state.label(LABELS["P2"]), state.label(LABELS["P1"])] == ["P1", "P2"]
    assert state.label(LABELS["P2"]) == "P1"  # the same chunk keeps its label


def test_state_keeps_segments_once():
    state = AgentState()
    assert state.keep(LABELS["P1"], "It is on the Seine.")
    assert not state.keep(LABELS["P1"], "It is on the Seine.")
    assert list(state.segments) == ["paris#0"]


def test_diversity_score_weighs_difference_from_history_against_relevance_to_the_gaps():
    history, gaps = ["Paris France capital"], ["river"]
    # 3 of 4 content words shared with the earlier query; 1 of 4 with the gap
    near = "river Paris France capital"
    assert diversity_score(near, history, gaps, 1.0) == 0.25  # difference only
    assert diversity_score(near, history, gaps, 0.0) == 0.25  # relevance only
    far = "Seine flows"  # nothing in common with either
    assert diversity_score(far, history, gaps, 1.0) == 1.0
    assert diversity_score(far, history, gaps, 0.0) == 0.0
    assert diversity_score(far, history, gaps, 0.5) == 0.5
    assert diversity_score(near, [], gaps, 0.5) == 0.5 * 1.0 + 0.5 * 0.25  # no history yet
