import re

import pytest

from netcast.programs import KnowledgeAware


def field(prompt, name):
    found = re.findall(rf"\[\[ ## {name} ## \]\]\n(.*?)(?:\n\n|$)", prompt, re.S)
    return found[-1].strip() if found else ""


def scripted(plans, extracts, filters=None):
    """Planner queries, extraction replies and filter replies, each keyed by a prompt substring
    (or served in order from a list)."""

    def pick(table, prompt):
        if isinstance(table, list):
            return table.pop(0)
        for key, value in table.items():
            if key in prompt:
                return value
        return table.get("*")

    def respond(prompt):
        if "[[ ## focus ## ]]" in prompt:
            return {"query": pick(plans, field(prompt, "focus"))}
        if "[[ ## still_required ## ]]" in prompt:
            facts, gaps = pick(extracts, prompt)
            return {"new_facts": facts, "still_required": gaps}
        if "[[ ## segments ## ]]" in prompt:
            return {"segments": pick(filters or {"*": "[]"}, prompt) or "[]"}
        return {"answer": "Paris"}

    return respond


def test_known_and_required_update_and_termination_on_empty_required(scripted_lm, bm25):
    scripted_lm(
        scripted(
            plans=["capital of France", "river of Paris"],
            extracts=[
                (["Paris is the capital of France (P1)", "Made up fact"], ["the river"]),
                (["The Seine flows through Paris (P1)"], []),
            ],
            filters=[
                '["[P1] The Seine flows through Paris."]',
                '["[P1] The Seine flows through Paris."]',
            ],
        )
    )
    prediction = KnowledgeAware(bm25, k=2, max_steps=5)(question="Which river is in the capital?")
    turns = prediction.trace["turns"]
    assert len(turns) == 2 and prediction.steps == 2  # stopped when nothing was required
    assert turns[0]["known"] == ["Paris is the capital of France (P1)"]
    assert turns[0]["unsupported_facts"] == ["Made up fact"]
    assert turns[0]["required"] == ["the river"] and turns[1]["required"] == []
    assert prediction.known == [
        "Paris is the capital of France (P1)",
        "The Seine flows through Paris (P1)",
    ]
    assert turns[0]["query"] == "capital of France" and turns[1]["gap"] == "the river"


def test_a_repeated_query_is_rejected(scripted_lm, bm25):
    scripted_lm(
        scripted(
            plans=["capital of France", "capital of France", "France capital"],
            extracts=[([], ["Seine"]), ([], [])],
        )
    )
    prediction = KnowledgeAware(bm25, k=2)(question="Which river is in the capital of France?")
    second = prediction.trace["turns"][1]
    assert second["rejected_queries"] == ["capital of France", "France capital"]
    assert second["query"] == "Seine"  # fell back to searching the open gap itself


def test_a_filtered_segment_not_in_the_source_is_rejected(scripted_lm, bm25):
    scripted_lm(
        scripted(
            plans=["Seine Paris"],
            extracts=[(["The Seine flows through Paris (P1)"], [])],
            filters=['["[P1] a river that flows through Paris", "[P1] The Seine is 800 km long."]'],
        )
    )
    prediction = KnowledgeAware(bm25, k=1)(question="Which river flows through Paris?")
    turn = prediction.trace["turns"][0]
    assert turn["kept"] == [["seine#0", "a river that flows through Paris"]], str(turn)
    assert turn["rejected_segments"] == ["[P1] The Seine is 800 km long."]
    assert prediction.evidence == ["seine#0"]
    assert prediction.context == ["Seine: a river that flows through Paris"]


def test_competitive_agents_pick_the_fewest_open_gaps_and_stop_early(scripted_lm, bm25):
    scripted_lm(
        scripted(
            plans={
                "specific named entity": "Berlin Germany",
                "relation or event": "Louvre museum",
                "broader background": "Rhine river",
            },
            extracts={
                "[P1] Louvre:": (["The Louvre is in Paris (P1)"], []),
                "*": ([], ["where", "what"]),
            },
        )
    )
    program = KnowledgeAware(bm25, k=1, n_agents=3, mode="competitive", max_steps=4)
    prediction = program(question="Where is the most-visited museum?")
    turns = prediction.trace["turns"]
    assert sorted(t["agent"] for t in turns) == [0, 1, 2]  # one step each, then it stopped
    assert {t["query"] for t in turns} == {"Berlin Germany", "Louvre museum", "Rhine river"}
    assert prediction.agent == 1 and prediction.required == []


def test_collaborative_agents_share_one_store(scripted_lm, bm25):
    scripted_lm(
        scripted(
            plans={
                "Paris river": "Seine",
                "France capital": "capital of France",
                "*": "river capital France",
            },
            extracts=[
                (["Paris is the capital of France (P2)"], ["Paris river", "France capital"]),
                (["The Seine flows through Paris (P1)", "Paris is the capital of France (P2)"], []),
            ],
        )
    )
    program = KnowledgeAware(bm25, k=1, n_agents=2, mode="collaborative", concurrent=False)
    prediction = program(question="Which river flows through the capital of France?")
    turns = prediction.trace["turns"]
    step2 = [t for t in turns if t["step"] == 2]
    assert [t["gap"] for t in step2] == ["Paris river", "France capital"]  # gaps dealt out
    assert {t["query"] for t in step2} == {"Seine", "capital of France"}
    assert step2[0]["known"] == step2[1]["known"]  # one shared knowledge base
    assert len(prediction.known) == 2 and prediction.required == []


def test_bad_modes(bm25):
    with pytest.raises(ValueError):
        KnowledgeAware(bm25, mode="anarchic")
    with pytest.raises(ValueError):
        KnowledgeAware(bm25, n_agents=4)
