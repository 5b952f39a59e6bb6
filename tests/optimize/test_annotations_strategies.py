"""The annotation teacher of the agentic strategies (iterative, combined, knowledge, iterkey,
search_r1): each step's demonstrations read from a crafted annotated record over the tiny corpus
(tests/helpers.py DOCS), and ``teach`` putting them into the prompts a scripted model sees."""

import json
import re

import dspy
import pytest

from netcast.corpus import format_passage
from netcast.optimize.annotations import annotation_demos, teach
from netcast.programs import get_program
from netcast.programs.iterative.program import with_gold
from netcast.programs.iterkey.program import keywords_of
from netcast.programs.knowledge import state
from netcast.programs.shared.search import EMPTY_MEMORY

QUESTION = "Which river flows through the city of the Eiffel Tower?"
SEINE = "Seine: The Seine is a river that flows through Paris in France."
EIFFEL = "Eiffel Tower: The Eiffel Tower is a wrought-iron lattice tower in Paris."
GOLD_TEXTS = {SEINE, EIFFEL}
PARIS = "Paris: Paris is the capital and largest city of France."
HOPS = [
    {"question": "In which city is the Eiffel Tower?", "answer": "Paris"},
    {"question": "Which river flows through #1 ?", "answer": "the Seine"},
]


def annotated(qid: str = "q1", hops=(), facts=(0,)) -> dspy.Example:
    gold = [
        {"id": "seine", "title": "Seine", "text": SEINE.split(": ", 1)[1], "facts": list(facts)},
        {"id": "eiffel", "title": "Eiffel Tower", "text": EIFFEL.split(": ", 1)[1], "facts": [0]},
    ]
    return dspy.Example(
        id=qid,
        question=QUESTION,
        answers=["the Seine"],
        answer="the Seine",
        gold_ids=["seine", "eiffel"],
        gold_passages=gold,
        hops=list(hops),
    ).with_inputs("question")


def demos_of(name: str, bm25, example=None, **knobs) -> dict[str, list[dspy.Example]]:
    program = get_program(name)(bm25, **knobs)
    return annotation_demos(program, [example or annotated()], per_step=4)


def unlabelled(item: str) -> str:
    """``"[N2] title: text"`` -> ``"title: text"``."""
    return item.split("] ", 1)[1]


# --- iterative and combined --------------------------------------------------------------------


RHINE = "Rhine: The Rhine river flows through Germany and the Netherlands."


def note(query: str, kept: int, dropped: int) -> str:
    return f"search {query!r}: kept {kept} new chunks, dropped {dropped}"


@pytest.mark.parametrize("name", ["iterative", "combined"])
def test_chunk_delete_deletes_exactly_the_retrieved_chunks_that_are_not_gold(name, bm25):
    (demo,) = demos_of(name, bm25, k=4)["delete_chunks"]  # the question's top-4 holds both
    assert set(demo.inputs().keys()) == {"question", "context", "retrieved"}
    assert demo.context == []  # the first round: nothing in the context yet
    shown = {item.split("] ", 1)[0].strip("["): unlabelled(item) for item in demo.retrieved}
    assert len(shown) >= 4 and set(shown.values()) >= GOLD_TEXTS
    assert demo.delete_ids == [label for label, text in shown.items() if text not in GOLD_TEXTS]


def test_the_trajectory_searches_the_question_deletes_searches_the_missing_title_answers(bm25):
    # the question's top-2: the Eiffel Tower and the Rhine; the Seine is missing
    demos = demos_of("iterative", bm25, k=2)
    again, answer, first = demos["decide"]  # the forced first decision listed last
    assert first.context == [] and first.history == []  # turn 1: the question itself
    assert first.action == "search" and first.query == QUESTION
    # the first round as retrieval ranks it (no gold swapped in): the Rhine deleted
    delete_first, delete_then = demos["delete_chunks"]
    assert [unlabelled(r) for r in delete_first.retrieved] == [EIFFEL, RHINE]
    assert delete_first.delete_ids == ["N2"] and delete_first.context == []
    assert [unlabelled(c) for c in again.context] == [EIFFEL]
    assert again.history == [note(QUESTION, 1, 1)]
    assert again.action == "search" and again.query == "Seine"
    # the Seine's search, judged beside the context the agent holds: nothing to delete
    assert delete_then.context == [f"[C1] {EIFFEL}"]
    assert [unlabelled(r) for r in delete_then.retrieved] == [SEINE] and not delete_then.delete_ids
    assert answer.action == "answer" and answer.query == ""
    assert [unlabelled(c) for c in answer.context] == [EIFFEL, SEINE]
    assert answer.history == [note(QUESTION, 1, 1), note("Seine", 1, 0)]
    (final,) = demos["answer"]
    assert final.answer == "the Seine" and final.context == [EIFFEL, SEINE] and final.notes == []


def test_decide_searches_a_hops_sub_question_and_answers_when_the_first_round_found_all(bm25):
    search, _, _ = demos_of("iterative", bm25, annotated(hops=HOPS), k=2)["decide"]
    assert search.query == "Which river flows through Paris?"
    delete = demos_of("iterative", bm25, annotated(hops=HOPS), k=2)["delete_chunks"][1]
    assert [unlabelled(r) for r in delete.retrieved] == [SEINE, RHINE]  # that query's top-2
    assert delete.delete_ids == ["N2"]
    # top-3 holds both gold passages: search the question, delete the Rhine, answer
    answer, first = demos_of("iterative", bm25, k=3)["decide"]
    assert first.query == QUESTION and answer.action == "answer"
    assert answer.history == [note(QUESTION, 2, 1)]


def test_a_gold_passage_the_search_misses_is_swapped_in_for_its_last_hit(bm25):
    # a third gold passage outside the index: its title's search finds only the Louvre
    museum = {"id": "museum", "title": "Museum", "text": "A museum in Paris.", "facts": [0]}
    example = annotated().copy(gold_passages=[*annotated().gold_passages, museum])
    demos = demos_of("iterative", bm25, example, k=3)
    *_, search, _, _ = demos["decide"]
    assert search.query == "Museum"
    delete = demos["delete_chunks"][-1]
    assert [unlabelled(r) for r in delete.retrieved] == ["Museum: A museum in Paris."]
    assert delete.delete_ids == []


def test_the_swap_in_replaces_the_last_hit_that_is_not_gold():
    gold = annotated().gold_passages  # the Seine, the Eiffel Tower
    seine, eiffel = gold
    found = [("rhine#0", RHINE), ("seine#0", SEINE), ("paris#0", "Paris: ...")]
    assert with_gold(found, eiffel, gold) == [*found[:2], ("eiffel#0", EIFFEL)]
    found = [("rhine#0", RHINE), ("seine#0", SEINE)]  # the last hit is another gold passage
    assert with_gold(found, eiffel, gold) == [("seine#0", SEINE), ("eiffel#0", EIFFEL)]
    assert with_gold([("seine#0", SEINE)], eiffel, gold) == [
        ("seine#0", SEINE),
        ("eiffel#0", EIFFEL),
    ]
    assert with_gold([("eiffel#0", EIFFEL)], eiffel, gold) == [("eiffel#0", EIFFEL)]


def test_a_later_search_counts_only_the_chunks_not_already_held(bm25):
    # without deleting, the Rhine stays from the first round; the hop's search finds it again
    demos = demos_of("iterative", bm25, annotated(hops=HOPS), k=2, delete=False)
    search, answer, _ = demos["decide"]
    assert search.query == "Which river flows through Paris?"
    assert answer.history[1] == note("Which river flows through Paris?", 1, 0)
    assert [unlabelled(c) for c in answer.context] == [EIFFEL, RHINE, SEINE]


def test_a_query_already_sent_is_not_sent_again(bm25):
    # two gold passages titled "Seine": its search brings the first; the agent answers then
    twin = {"id": "twin", "title": "Seine", "text": "A second page on the river.", "facts": [0]}
    example = annotated().copy(gold_passages=[annotated().gold_passages[0], twin])
    search, answer, _ = demos_of("iterative", bm25, example, k=1)["decide"]
    assert search.query == "Seine" and answer.action == "answer"


def test_a_prompts_first_decisions_are_the_ones_after_a_search(bm25):
    # the teacher's default two demonstrations a step, from one question: search again, answer
    program = get_program("iterative")(bm25, k=2)
    search, answer = annotation_demos(program, [annotated()])["decide"]
    assert (search.action, search.query, answer.action) == ("search", "Seine", "answer")


def test_the_agents_searches_follow_the_link_hop_as_the_run_does(bm25):
    """With ``links`` 1 each search's chunks come with the passage they name by title (the
    Eiffel Tower's and the Seine's name Paris), shown to chunk_delete beside the rest, as at
    run time; Paris is not gold, so it is deleted both times."""
    plain, _ = demos_of("iterative", bm25, k=2)["delete_chunks"]
    first, then = demos_of("iterative", bm25, k=2, links=1)["delete_chunks"]
    assert [unlabelled(r) for r in plain.retrieved] == [EIFFEL, RHINE]
    assert [unlabelled(r) for r in first.retrieved] == [EIFFEL, RHINE, PARIS]
    assert first.delete_ids == ["N2", "N3"]
    assert [unlabelled(r) for r in then.retrieved] == [SEINE, PARIS] and then.delete_ids == ["N2"]


def test_with_dedup_the_agents_later_search_brings_unseen_passages_only(bm25):
    """The hop's search ranks the Seine and the Rhine, which the first round brought: with
    de-duplication it returns the Seine and the next unseen passage (Paris) instead, as at run
    time."""
    record, knobs = annotated(hops=HOPS), {"k": 2, "fallback": False, "delete": False}
    hop = "Which river flows through Paris?"
    _, plain, _ = demos_of("iterative", bm25, record, **knobs)["decide"]
    _, unseen, _ = demos_of("iterative", bm25, record, dedup=True, **knobs)["decide"]
    assert plain.history[1] == note(hop, 1, 0)
    assert [unlabelled(c) for c in plain.context] == [EIFFEL, RHINE, SEINE]
    assert unseen.history[1] == note(hop, 2, 0)
    assert [unlabelled(c) for c in unseen.context] == [EIFFEL, RHINE, SEINE, PARIS]


@pytest.mark.parametrize("name", ["iterative"])
def test_where_the_first_search_finds_no_gold_the_decision_searches_over_what_stays(name, bm25):
    # only the Seine is gold, and the question's top-1 is the Eiffel Tower: deleting it would
    # delete every chunk just retrieved, which the agent refuses, so it stays
    only_seine = annotated()
    only_seine = only_seine.copy(gold_passages=only_seine.gold_passages[:1], gold_ids=["seine"])
    demos = demos_of(name, bm25, only_seine, k=1)
    search, answer, _ = demos["decide"]
    assert [unlabelled(c) for c in search.context] == [EIFFEL]
    assert search.history == [note(QUESTION, 1, 0)]
    assert search.action == "search" and search.query == "Seine"
    (delete,) = demos["delete_chunks"]  # the Seine's search only: the first was refused
    assert delete.context == [f"[C1] {EIFFEL}"] and delete.delete_ids == []
    assert [unlabelled(c) for c in answer.context] == [EIFFEL, SEINE]
    demos = demos_of(name, bm25, only_seine, k=1, allow_delete_all=True)
    search, _, _ = demos["decide"]
    assert search.context == [] and search.query == "Seine"
    assert search.history == [note(QUESTION, 0, 1)]
    assert demos["delete_chunks"][0].delete_ids == ["N1"]


def test_without_any_gold_retrieved_the_agent_keeps_what_it_found_and_searches_gold(bm25):
    demos = get_program("iterative")(bm25, k=2).retrieved_demos(annotated())
    # the next passages ranked stand in for the gold ones
    ranked = [h for h in bm25.search(QUESTION, 6) if h.chunk.id not in ("seine#0", "eiffel#0")]
    expected = [format_passage(h.chunk.title, h.chunk.text) for h in ranked[:2]]
    assert not set(expected) & GOLD_TEXTS
    seine, eiffel, answer, first = demos["decide"]
    assert first.query == QUESTION and first.context == []
    assert [unlabelled(c) for c in seine.context] == expected
    assert seine.history == [note(QUESTION, 2, 0)]
    assert seine.action == "search" and seine.query == "Seine"
    assert eiffel.action == "search" and eiffel.query == "Eiffel Tower"
    assert [unlabelled(c) for c in eiffel.context] == [*expected, SEINE]
    assert answer.action == "answer" and len(answer.history) == 3
    # deleting every chunk of the first round is refused: no demo for it, only the later two
    assert [d.delete_ids for d in demos["delete_chunks"]] == [[], []]
    assert all(d.context for d in demos["delete_chunks"])
    (final,) = demos["answer"]  # over what stayed and the gold the searches brought
    assert final.context == [*expected, SEINE, EIFFEL] and final.answer == "the Seine"

    allowed = get_program("iterative")(bm25, k=2, allow_delete_all=True)
    delete = allowed.retrieved_demos(annotated())["delete_chunks"][0]
    assert delete.delete_ids == ["N1", "N2"]
    assert [unlabelled(r) for r in delete.retrieved] == expected and delete.context == []
    decide, *_ = allowed.retrieved_demos(annotated())["decide"]
    assert decide.context == [] and decide.query == "Seine"
    assert decide.history == [note(QUESTION, 0, 2)]


def test_without_the_delete_step_no_chunk_is_deleted_in_any_demo(bm25):
    demos = demos_of("iterative", bm25, k=2, delete=False)
    assert "delete_chunks" not in demos
    search, answer, _ = demos["decide"]
    found = [format_passage(h.chunk.title, h.chunk.text) for h in bm25.search(QUESTION, 2)]
    assert [unlabelled(c) for c in search.context] == found  # the Rhine stays
    assert search.history == [note(QUESTION, 2, 0)]
    assert [unlabelled(c) for c in answer.context] == [*found, SEINE]
    assert all(line.endswith("dropped 0") for line in answer.history)
    program = get_program("iterative")(bm25, k=2, delete=False, allow_delete_all=True)
    assert "delete_chunks" not in program.retrieved_demos(annotated())


def test_the_trajectory_stops_searching_at_max_steps(bm25):
    demos = get_program("iterative")(bm25, k=2, max_steps=2).retrieved_demos(annotated())
    assert [d.action for d in demos["decide"]] == ["search", "search"]  # no third decision
    (final,) = demos["answer"]
    assert SEINE in final.context and EIFFEL not in final.context


def agent_script(prompts: list[str], delete_all: bool = True):
    """A scripted agent: its first decision answers at once (``search_first`` makes it search
    the question), chunk_delete names every chunk just retrieved (or none), its second
    decision searches, then it answers; every decision prompt is kept in ``prompts``."""

    def respond(prompt):
        if "[[ ## retrieved ## ]]" in prompt:
            labels = re.findall(r"\[(N\d+)\]", prompt.rsplit("[[ ## retrieved ## ]]", 1)[1])
            return {"delete_ids": sorted(set(labels)) if delete_all else []}
        if "[[ ## history ## ]]" in prompt:
            prompts.append(prompt)
            turn = len(prompts)  # the first answers at once: search_first searches the question
            return {"action": "search" if turn == 2 else "answer", "query": "Seine"}
        return {"answer": "the Seine"}

    return respond


def test_the_decision_demo_is_what_the_agent_is_shown_after_its_delete_all_was_refused(
    scripted_lm, bm25
):
    # the Seine and the Louvre are gold: the question's top-2 (the Eiffel Tower, the Rhine)
    # holds neither, so the retrieved share's first round is the one the agent really gets
    gold = [
        {"id": "seine", "title": "Seine", "text": SEINE.split(": ", 1)[1], "facts": [0]},
        {
            "id": "louvre",
            "title": "Louvre",
            "text": "The Louvre is the world's most-visited art museum, in Paris.",
            "facts": [0],
        },
    ]
    example = annotated().copy(gold_passages=gold, gold_ids=["seine", "louvre"])
    program = get_program("iterative")(bm25, k=2, reasoning=False)
    prompts: list[str] = []
    scripted_lm(agent_script(prompts))
    program(question=QUESTION)
    shown = prompts[1]  # the decision after the first round
    for demos in (program.retrieved_demos(example), program.annotated_demos(example)):
        decide, first = demos["decide"][0], demos["decide"][-1]
        assert first.context == [] and first.history == []  # as the first prompt shows
        assert decide.context and decide.action == "search"
        assert all(json.dumps(item) in shown for item in decide.context)
        assert json.dumps(decide.history[0]) in shown


def test_combineds_demos_start_from_its_budgeted_first_round(scripted_lm, bm25):
    program = get_program("combined")(bm25, k=1, reasoning=False)
    prompts: list[str] = []
    scripted_lm(agent_script(prompts, delete_all=False))
    prediction = program(question=QUESTION)
    first = prediction.trace["turns"][0]["returned"]  # the question's top-1, then the budget's
    assert len(first) > 1
    expected = [format_passage(bm25.corpus[c].title, bm25.corpus[c].text) for c in first]
    (delete,) = program.annotated_demos(annotated())["delete_chunks"]  # both gold among them
    assert [unlabelled(r) for r in delete.retrieved] == expected
    decide, *_ = program.retrieved_demos(annotated())["decide"]
    assert [unlabelled(c) for c in decide.context] == [t for t in expected if t not in GOLD_TEXTS]


# --- knowledge ---------------------------------------------------------------------------------


def test_knowledge_plans_gold_queries_extracts_cited_facts_and_filters_the_gold(bm25):
    demos = demos_of("knowledge", bm25, k=3)
    (plan,) = demos["plan"]
    assert plan.query == "Seine" and plan.required == [QUESTION] and plan.known == []
    (extract,) = demos["extract"]
    labels = {item.split("] ", 1)[0].strip("["): unlabelled(item) for item in extract.passages}
    # the passages the first step reads at run time: the planned query's hits, not the
    # question's (its top-3 starts with the Eiffel Tower), the missed gold passage appended
    assert [h.chunk.id for h in bm25.search("Seine", 3)] == ["seine#0"]
    assert bm25.search(QUESTION, 3)[0].chunk.id != "seine#0"
    assert labels == {"P1": SEINE, "P2": EIFFEL}
    by_text = {format_passage(c.title, c.text): c for c in bm25.corpus}
    chunks = {label: by_text[text] for label, text in labels.items()}
    # every fact cites the passage that holds it and passes the program's own check
    accepted, rejected = state.verified_facts(extract.known_facts, chunks, "explicit")
    assert len(accepted) == 2 and rejected == [] and extract.still_required == []
    assert "The Seine is a river that flows through Paris in France" in " ".join(accepted)
    (flt,) = demos["filter"]
    kept, not_verbatim = state.verified_segments(flt.segments, chunks, "exact")
    assert {c.id for c, _ in kept} == {"seine#0", "eiffel#0"} and not_verbatim == []
    assert flt.known == extract.known_facts and flt.required == []
    (generate,) = demos["generate"]
    assert generate.answer == "the Seine" and set(generate.context) == GOLD_TEXTS


def test_knowledge_examples_read_the_link_hop_as_the_run_does(bm25):
    """With ``links`` 1 the planned search's passages are followed by the one they name by
    title, as at run time: the Seine's names Paris (one gold passage, so none is swapped in)."""
    record = annotated()
    record = record.copy(gold_passages=record.gold_passages[:1], gold_ids=["seine"])
    (plain,) = demos_of("knowledge", bm25, record, k=3)["filter"]
    (linked,) = demos_of("knowledge", bm25, record, k=3, links=1)["filter"]
    assert [unlabelled(p) for p in plain.passages] == [SEINE]
    assert [unlabelled(p) for p in linked.passages] == [SEINE, PARIS]


def test_knowledge_plans_the_first_hop_and_skips_extract_without_supporting_sentences(bm25):
    demos = demos_of("knowledge", bm25, annotated(hops=HOPS, facts=()), k=3)
    assert demos["plan"][0].query == "In which city is the Eiffel Tower?"
    assert "extract" not in demos  # the Seine's supporting sentences are not in the record
    (flt,) = demos["filter"]
    assert any(s.endswith(SEINE.split(": ", 1)[1]) for s in flt.segments)  # kept whole
    assert flt.required == [QUESTION]


# --- iterkey -----------------------------------------------------------------------------------


def test_iterkey_keywords_name_the_gold_titles_and_validation_judges_both_ways(bm25):
    demos = demos_of("iterkey", bm25, k=3)
    (generate,) = demos["generate"]
    keywords = keywords_of(generate.keywords)
    assert json.loads(generate.keywords) == keywords
    assert keywords[:2] == ["Seine", "Eiffel Tower"] and {"river", "city"} <= set(keywords)
    (answer,) = demos["answer"]
    assert answer.answer == "the Seine" and set(answer.context) >= GOLD_TEXTS
    right, wrong = demos["validate"]
    assert (right.answer, right.is_correct) == ("the Seine", True)
    assert wrong.is_correct is False and wrong.answer not in {"Seine", "Eiffel Tower"}
    assert any(d.startswith(f"{wrong.answer}:") for d in wrong.documents)  # a shown document's
    assert demos["validate_next_token"] == demos["validate"]
    assert "regenerate" not in demos  # the question's own keywords find both in the top 3


def test_iterkey_regenerates_to_the_gold_titles_when_the_question_keywords_miss_one(bm25):
    demos = demos_of("iterkey", bm25, k=2)  # the question's keywords: the Eiffel Tower, the Rhine
    (regenerate,) = demos["regenerate"]
    assert regenerate.previous_keywords == ["river", "flows", "city", "Eiffel", "Tower"]
    assert regenerate.keywords == demos["generate"][0].keywords
    assert set(demos["answer"][0].context) == GOLD_TEXTS


# --- search_r1 ---------------------------------------------------------------------------------


def test_search_r1_searches_a_missing_gold_passage_then_answers(bm25):
    demos = demos_of("search_r1", bm25, k=1)
    search, answer = demos["step"]
    assert search.trace == [f"search: {QUESTION}", f"information: {EIFFEL}"]
    assert (search.action, search.query, search.answer) == ("search", "Seine", "")
    assert (answer.action, answer.query, answer.answer) == ("answer", "", "the Seine")
    # the trace after both searches, as the loop builds it
    assert answer.trace == [*search.trace, "search: Seine", f"information: {SEINE}"]
    assert search.memory == answer.memory == []
    (final,) = demos["answer"]
    assert final.answer == "the Seine" and final.context == [EIFFEL, SEINE]
    hopped, _ = demos_of("search_r1", bm25, annotated(hops=HOPS), k=1)["step"]
    assert hopped.query == "Which river flows through Paris?"


def test_search_r1_demos_replay_through_the_loop(scripted_lm, bm25):
    """The answer demo's trace is what the program's step sees after the demo's searches."""
    search, answer = demos_of("search_r1", bm25, k=1)["step"]
    replies = [{"reasoning": "", "action": "search", "query": search.query, "answer": ""}]

    def respond(prompt):
        if "[[ ## trace ## ]]" in prompt and replies:
            return replies.pop(0)
        if "[[ ## trace ## ]]" in prompt:
            return {"reasoning": "", "action": "answer", "query": "", "answer": "the Seine"}
        return {"answer": "x"}

    _, engine = scripted_lm(respond)
    # the loop's first search is the question (search_first: an answer becomes a search)
    replies.insert(0, {"reasoning": "", "action": "answer", "query": "", "answer": "?"})
    get_program("search_r1")(bm25, k=1)(question=QUESTION)
    last = [p for p in engine.prompts if "[[ ## trace ## ]]" in p][-1].rsplit("[[ ## trace", 1)[1]
    assert all(json.dumps(entry)[1:-1] in last for entry in answer.trace)


def test_search_r1_with_memory_shows_the_empty_memory_line_and_the_newest_block(bm25):
    search, answer = demos_of("search_r1", bm25, k=1, contextualize=True)["step"]
    assert search.memory == answer.memory == [EMPTY_MEMORY]
    # earlier information blocks are left out of the shown trace: every gold passage is in
    # the newest one
    assert answer.trace == [
        f"search: {QUESTION}",
        "search: Seine",
        f"information: {SEINE} | {EIFFEL}",
    ]
    # the reader reads the (empty) memory and the newest passages, not every block
    assert demos_of("search_r1", bm25, k=1, contextualize=True)["answer"][0].context == [
        SEINE,
        EIFFEL,
    ]


def test_search_r1_without_a_missing_passage_searches_a_gold_title_first(bm25):
    """The question's top-3 holds both gold passages: the first step searches the first gold
    passage's title instead, and answers over that search (the other gold swapped in)."""
    search, answer = demos_of("search_r1", bm25, k=3)["step"]
    assert (search.trace, search.action, search.query) == ([], "search", "Seine")
    assert answer.trace == ["search: Seine", f"information: {SEINE} | {EIFFEL}"]


def test_search_r1_with_one_search_allowed_answers_after_the_questions(bm25):
    (answer,) = demos_of("search_r1", bm25, k=1, max_steps=1)["step"]
    assert answer.action == "answer"
    assert answer.trace == [f"search: {QUESTION}", f"information: {EIFFEL} | {SEINE}"]


def test_search_r1_with_dedup_replays_unseen_passages_only(bm25):
    """The question's top-2 and the hop question's both hold the Rhine; with de-duplication
    the second search returns unseen passages only (the Seine, then Paris)."""
    rhine = "Rhine: The Rhine river flows through Germany and the Netherlands."
    record = annotated(hops=HOPS)
    _, plain = demos_of("search_r1", bm25, record, k=2)["step"]
    _, unseen = demos_of("search_r1", bm25, record, k=2, dedup=True)["step"]
    assert plain.trace[3] == f"information: {SEINE} | {rhine}"
    assert unseen.trace[3] == f"information: {SEINE} | {PARIS}"


# --- teach: into the predictors and the prompts ------------------------------------------------


def respond(prompt: str) -> dict:
    """A scripted reply for whichever step the prompt is (by its output fields)."""
    if "[[ ## delete_ids ## ]]" in prompt:
        return {"delete_ids": "[]"}
    if "[[ ## trace ## ]]" in prompt:
        return {"reasoning": "r", "action": "answer", "query": "", "answer": "Paris"}
    if "[[ ## history ## ]]" in prompt and "[[ ## action ## ]]" in prompt:
        return {"reasoning": "r", "action": "answer", "query": ""}
    if "[[ ## focus ## ]]" in prompt:
        return {"query": "capital of France"}
    if "[[ ## still_required ## ]]" in prompt:
        return {"known_facts": '["Paris is the capital of France (P1)"]', "still_required": "[]"}
    if "[[ ## segments ## ]]" in prompt:
        return {"segments": '["[P1] Paris is the capital and largest city of France."]'}
    if "[[ ## is_correct ## ]]" in prompt:
        return {"is_correct": "True"}
    if "[[ ## keywords ## ]]" in prompt:
        return {"keywords": '["Paris", "capital"]'}
    return {"answer": "Paris"}


# the steps taught (the others get none)
STEPS = {
    "iterative": {"decide", "delete_chunks", "answer"},
    "combined": {"decide", "delete_chunks", "answer"},
    "knowledge": {"plan", "extract", "filter", "generate"},
    "iterkey": {"generate", "answer", "validate", "validate_next_token"},
    "search_r1": {"step", "answer"},
}
KNOBS = {
    "iterative": {"k": 3},
    "combined": {"k": 3, "token_budget": 40},
    "knowledge": {"k": 3, "candidates": 1},
    "iterkey": {"k": 3, "validation": "text"},
    "search_r1": {"k": 2},
}


@pytest.mark.parametrize("name", sorted(STEPS))
def test_teach_puts_the_demos_into_the_prompts_and_the_program_still_runs(name, scripted_lm, bm25):
    _, engine = scripted_lm(respond)
    program = get_program(name)(bm25, **KNOBS[name])
    taught = teach(program, [annotated("a"), annotated("b")], per_step=2)
    counts = {n.removesuffix(".predict"): len(p.demos) for n, p in taught.named_predictors()}
    assert counts == {step: 2 if step in STEPS[name] else 0 for step in counts}
    assert STEPS[name] <= set(counts)
    assert all(len(p.demos) == 0 for _, p in program.named_predictors())  # the original
    prediction = taught(question="What is the capital of France?")
    assert prediction.answer == "Paris"
    assert engine.prompts and all(QUESTION in prompt for prompt in engine.prompts)
