import re

import pytest

from netcast.programs import KnowledgeAware


def field(prompt, name):
    found = re.findall(rf"\[\[ ## {name} ## \]\]\n(.*?)(?:\n\n|$)", prompt, re.S)
    return found[-1].strip() if found else ""


def scripted(plans, extracts, filters=None, prompts=None):
    """Planner queries, knowledge updates and filter replies, each keyed by a prompt substring
    (or served in order from a list). ``prompts`` collects (step kind, prompt)."""

    def pick(table, prompt):
        if isinstance(table, list):
            return table.pop(0)
        for key, value in table.items():
            if key in prompt:
                return value
        return table.get("*")

    def respond(prompt):
        if "[[ ## focus ## ]]" in prompt:
            kind, reply = "plan", {"query": pick(plans, field(prompt, "focus"))}
        elif "[[ ## still_required ## ]]" in prompt:
            facts, gaps = pick(extracts, prompt)
            kind, reply = "extract", {"known_facts": facts, "still_required": gaps}
        elif "[[ ## segments ## ]]" in prompt:
            kind, reply = "filter", {"segments": pick(filters or {"*": "[]"}, prompt) or "[]"}
        else:
            kind, reply = "answer", {"answer": "Paris"}
        if prompts is not None:
            prompts.append((kind, prompt))
        return reply

    return respond


def test_known_is_revised_required_updates_and_the_cycle_stops(scripted_lm, bm25):
    scripted_lm(
        scripted(
            plans=["capital of France", "river of Paris"],
            extracts=[
                (
                    ["Paris is the capital of France (P1)", "Lyon is big (P2)", "Made up fact"],
                    ["the river"],
                ),
                # the second update drops the Lyon fact and adds the river
                (["Paris is the capital of France (P1)", "The Seine flows through Paris (P3)"], []),
            ],
        )
    )
    prediction = KnowledgeAware(bm25, k=2, max_steps=5, candidates=1)(
        question="Which river is in the capital?"
    )
    turns = prediction.trace["turns"]
    assert len(turns) == 2 and prediction.steps == 2  # stopped when nothing was required
    assert turns[0]["known"] == ["Paris is the capital of France (P1)", "Lyon is big (P2)"]
    assert turns[0]["unsupported_facts"] == ["Made up fact"]
    assert turns[0]["required"] == ["the river"] and turns[1]["required"] == []
    assert turns[1]["dropped_facts"] == ["Lyon is big (P2)"]
    assert prediction.known == [
        "Paris is the capital of France (P1)",
        "The Seine flows through Paris (P3)",
    ]
    assert turns[0]["query"] == "capital of France" and turns[1]["gap"] == "the river"


def test_append_only_known_when_revision_is_off(scripted_lm, bm25):
    scripted_lm(
        scripted(
            plans=["capital of France", "river of Paris"],
            extracts=[(["Lyon is big (P1)"], ["the river"]), (["The Seine flows (P3)"], [])],
        )
    )
    prediction = KnowledgeAware(bm25, k=2, revise_known=False, candidates=1)(
        question="Which river?"
    )
    assert prediction.known == ["Lyon is big (P1)", "The Seine flows (P3)"]


def test_query_choice_weighs_difference_against_relevance(scripted_lm, bm25):
    scripted_lm(
        scripted(
            plans=["capital of France", "capital of France", "France capital"],
            extracts=[([], ["the Seine river"]), ([], [])],
        )
    )
    prediction = KnowledgeAware(bm25, k=2, candidates=1)(
        question="Which river is in the capital of France?"
    )
    second = prediction.trace["turns"][1]
    # the planner repeated itself twice; the open gap is searched instead
    assert [q for q, _ in second["candidates"]] == [
        "capital of France",
        "France capital",
        "the Seine river",
    ]
    assert second["query"] == "the Seine river"
    assert prediction.trace["steps"]["plan"]["fallbacks"] == 1


def test_segments_keep_the_passages_text_and_the_context_is_filtered_again(scripted_lm, bm25):
    prompts = []
    scripted_lm(
        scripted(
            plans=["Seine Paris", "Paris capital France"],
            extracts=[(["The Seine flows through Paris (P1)"], ["the capital"]), ([], [])],
            filters=[
                '["[P1] the seine is a river that flows through paris", "[P1] It is 800 km long."]',
                '["[P2] Paris is the capital"]',  # the Seine segment is not kept again
            ],
            prompts=prompts,
        )
    )
    prediction = KnowledgeAware(bm25, k=1, candidates=1)(
        question="Which river flows through Paris?"
    )
    first, second = prediction.trace["turns"]
    assert first["kept"] == [["seine#0", "The Seine is a river that flows through Paris"]]
    assert first["rejected_segments"] == ["[P1] It is 800 km long."]
    second_filter = [p for kind, p in prompts if kind == "filter"][1]
    assert "[P1] Seine: The Seine is a river that flows through Paris" in second_filter
    assert prediction.evidence == ["paris#0"]  # the refined context was filtered again
    assert prediction.context == ["Paris: Paris is the capital"]


def test_competitive_agents_share_the_winners_context_and_stop_early(scripted_lm, bm25):
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
            filters={"[P1] Louvre:": '["[P1] The Louvre is the world\'s most-visited art museum"]'},
        )
    )
    program = KnowledgeAware(
        bm25, k=1, n_agents=3, mode="competitive", max_steps=4, perspectives=True
    )
    prediction = program(question="Where is the most-visited museum?")
    turns = prediction.trace["turns"]
    assert sorted(t["agent"] for t in turns) == [0, 1, 2]  # one step each, then it stopped
    assert {t["query"] for t in turns} == {"Berlin Germany", "Louvre museum", "Rhine river"}
    winners = [s for s in prediction.trace["stages"] if s["stage"] == "winner"]
    assert winners == [{"stage": "winner", "step": 1, "agent": 1}]
    assert prediction.agent == 1 and prediction.required == []
    assert prediction.evidence == ["louvre#0"]


def test_collaborative_agents_act_in_turn_on_one_shared_store(scripted_lm, bm25):
    prompts = []
    scripted_lm(
        scripted(
            plans={
                "Paris river": "Seine",
                "France capital": "capital of France",
                "x": "Seine river Paris",
                "*": "river capital France",
            },
            extracts=[
                (["Paris is the capital of France (P1)"], ["Paris river", "France capital"]),
                (["Paris is the capital of France (P1)", "The Seine is in Paris (P2)"], ["x"]),
                (["Paris is the capital of France (P1)", "The Seine is in Paris (P2)"], []),
            ],
            prompts=prompts,
        )
    )
    program = KnowledgeAware(bm25, k=1, n_agents=2, mode="collaborative", candidates=1)
    prediction = program(question="Which river flows through the capital of France?")
    turns = prediction.trace["turns"]
    # agent 2 takes the next open gap in the same step, after agent 1 updated the store
    assert [(t["step"], t["agent"]) for t in turns] == [(1, 0), (1, 1), (2, 0)]
    assert [t["gap"] for t in turns[1:]] == ["Paris river", "x"]
    plans = [p for kind, p in prompts if kind == "plan"]
    assert "Paris is the capital of France (P1)" in plans[1]  # it plans from agent 1's facts
    assert "The Seine is in Paris (P2)" in plans[2]
    assert prediction.required == []


def test_bad_modes(bm25):
    with pytest.raises(ValueError):
        KnowledgeAware(bm25, mode="anarchic")
    with pytest.raises(ValueError):
        KnowledgeAware(bm25, n_agents=4)


class SeededEngine:
    """A scripted model whose plan replies depend on the sampling seed of the call (None for a
    greedy call); records (temperature, seed) of every plan call."""

    def __init__(self, plan_for_seed, extracts):
        from netcast.testing import ScriptedEngine

        self.plans: list[tuple] = []
        outer = self

        class Engine(ScriptedEngine):
            def complete(self, request):
                outer.config = request.config
                return super().complete(request)

        def respond(prompt):
            if "[[ ## focus ## ]]" in prompt:
                config = outer.config
                outer.plans.append((config.temperature, config.seed))
                return {"query": plan_for_seed(config.seed, field(prompt, "history"))}
            return scripted([], extracts)(prompt)

        self.engine = Engine(respond)


def seeded_lm(plan_for_seed, extracts):
    import dspy

    seeded = SeededEngine(plan_for_seed, extracts)
    dspy.configure(lm=dspy.LM("scripted/seeded", engine=seeded.engine, cache=False, num_retries=0))
    return seeded


@pytest.mark.parametrize(
    ("weight", "chosen"), [(0.0, "river Paris France capital"), (1.0, "Seine flows")]
)
def test_eq2_picks_among_the_planned_candidates_by_the_diversity_weight(
    scripted_lm, bm25, weight, chosen
):
    scripted_lm(lambda prompt: {})  # a fresh DSPy cache; the seeded model replaces its LM

    def plan(seed, history):
        if "Paris France capital" not in history:  # step 1
            return "Paris France capital"
        return "river Paris France capital" if seed is None else "Seine flows"

    seeded = seeded_lm(plan, [(["Paris is the capital of France (P1)"], ["river"]), ([], [])])
    program = KnowledgeAware(bm25, k=1, max_steps=2, diversity_weight=weight)
    turns = program(question="Which river is in the capital?").trace["turns"]
    second = turns[1]
    assert [q for q, _ in second["candidates"]] == ["river Paris France capital", "Seine flows"]
    assert second["query"] == chosen
    # per step: the model's own (greedy) candidate, then one sampled with its own seed
    greedy, sampled = seeded.plans[2], seeded.plans[3]
    assert greedy == (None, None) and sampled[0] == 0.7 and sampled[1] is not None


def test_competitive_agents_without_perspectives_sample_so_they_differ(scripted_lm, bm25):
    scripted_lm(lambda prompt: {})

    def plan(seed, history):
        return {None: "capital of France"}.get(seed, f"query {seed}")

    seeded = seeded_lm(plan, [([], ["open"])] * 3)
    program = KnowledgeAware(bm25, k=1, n_agents=3, max_steps=1, candidates=1, concurrent=False)
    turns = program(question="Which river flows through Paris?").trace["turns"]
    queries = [t["query"] for t in sorted(turns, key=lambda t: t["agent"])]
    assert queries[0] == "capital of France"  # the first agent plans greedily
    assert len(set(queries)) == 3  # the others sampled with their own seeds
    assert seeded.plans[0] == (None, None) and {t for t, _ in seeded.plans[1:]} == {0.7}
    assert len({seed for _, seed in seeded.plans}) == 3


def test_six_steps_by_default_and_the_answer_from_the_separate_generator(
    scripted_lm, bm25, monkeypatch
):
    import dspy

    from netcast.testing import ScriptedEngine

    assert KnowledgeAware.knob_defaults()["max_steps"] == 6  # the paper saw up to 6
    plans = ["capital", "river", "Seine", "Louvre", "Berlin", "Rhine", "extra"]
    _, main = scripted_lm(scripted(plans, {"*": ([], ["still open"])}))
    generator = ScriptedEngine(lambda prompt: {"answer": "the generator's answer"})
    made = []

    def make_lm(name, **kwargs):
        made.append(name)
        return dspy.LM("scripted/generator", engine=generator, cache=False, num_retries=0)

    monkeypatch.setattr("netcast.models.make_lm", make_lm)
    program = KnowledgeAware(bm25, k=1, candidates=1, generator_model="judge/generator")
    prediction = program(question="Which river flows through Paris?")
    assert prediction.steps == 6 and len(prediction.trace["turns"]) == 6  # never resolved
    assert made == ["judge/generator"] and prediction.answer == "the generator's answer"
    assert len(generator.prompts) == 1 and "[[ ## context ## ]]" in generator.prompts[0]
    assert not any(
        "[[ ## context ## ]]" in p and "[[ ## known ## ]]" not in p for p in main.prompts
    )


def test_under_a_json_schema_the_lists_are_bounded_and_the_replies_have_room(bm25):
    """A constrained engine decodes under the schema, so its lists close within their bound
    (the 0.5B model otherwise listed facts until the token limit cut the reply)."""
    import dspy

    from netcast.testing import SchemaEngine

    def respond(prompt):
        if "[[ ## focus ## ]]" in prompt:
            return {"query": "capital of France"}
        if '"still_required"' in prompt:
            return {"known_facts": ["Paris is the capital of France (P1)"], "still_required": []}
        if '"segments"' in prompt:
            return {"segments": ["[P1] Paris is the capital"]}
        return {"answer": "Paris"}

    engine = SchemaEngine(respond)
    lm = dspy.LM("scripted/schema", engine=engine, cache=False, num_retries=0)
    program = KnowledgeAware(bm25, k=1, candidates=1, lm=lm)
    program.set_lm(lm)
    prediction = program(question="What is the capital of France?")
    assert prediction.known == ["Paris is the capital of France (P1)"]

    def bound(name):
        (schema,) = [f["schema"] for f in engine.formats if name in f["schema"]["properties"]]
        field = schema["properties"][name]
        if "$ref" in field:
            field = schema["$defs"][field["$ref"].rsplit("/", 1)[-1]]
        return field["maxItems"]

    assert (bound("known_facts"), bound("still_required"), bound("segments")) == (8, 4, 6)
    limits = {
        step: [e["kwargs"].get("max_tokens") for e in lm.history if key in str(e["messages"])]
        for step, key in (("extract", '"still_required"'), ("filter", '"segments"'))
    }
    assert limits == {"extract": [768], "filter": [768]}


def test_an_unconstrained_model_may_list_more_facts_than_the_schema_bound(scripted_lm, bm25):
    facts = [f"Fact number {i} about Paris (P1)" for i in range(10)]
    scripted_lm(scripted(plans=["capital of France"], extracts=[(facts, [])]))
    prediction = KnowledgeAware(bm25, k=1, candidates=1)(question="What is the capital?")
    assert prediction.known == facts


def test_an_uncited_fact_enters_known_cited_for_its_passage_unless_citations_are_explicit(
    scripted_lm, bm25
):
    def run(**knobs):
        scripted_lm(
            scripted(
                plans=["capital of France"],
                extracts=[(["Paris is the capital of France", "Rome is in Italy"], [])],
            )
        )
        program = KnowledgeAware(bm25, k=1, candidates=1, **knobs)
        return program(question="What is the capital of France?").trace["turns"][0]

    inferred = run()
    assert inferred["known"] == ["Paris is the capital of France (P1)"]
    assert inferred["unsupported_facts"] == ["Rome is in Italy"]  # no passage holds it
    explicit = run(cite="explicit")
    assert explicit["known"] == [] and len(explicit["unsupported_facts"]) == 2


def test_a_rerank_pool_shows_the_filter_only_the_passages_the_signal_keeps(bm25):
    from helpers import scoring_lm

    def favour(passage):  # Seine best, Louvre next, the rest far below
        return -0.1 if "Seine" in passage else -0.5 if "Louvre" in passage else -3.0

    query = "Paris France capital river museum"
    pool = [h.chunk.id for h in bm25.search(query, 5)]
    prompts = []
    respond = scripted(plans=[query], extracts=[([], [])], prompts=prompts)
    program = KnowledgeAware(bm25, k=2, candidates=1, rerank_pool=5, rerank_signal="likelihood")
    program.set_lm(scoring_lm(respond, favour))
    prediction = program(question="Which river flows through Paris?")
    (turn,) = prediction.trace["turns"]
    assert prediction.trace["searches"][0]["ids"] == pool
    assert [bm25.corpus[c].doc_id for c in turn["returned"]] == ["seine", "louvre"]
    (filter_prompt,) = [p for kind, p in prompts if kind == "filter"]
    for cid in pool:
        assert (bm25.corpus[cid].text in filter_prompt) == (cid in turn["returned"])
