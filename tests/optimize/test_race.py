"""The strategy race with a scripted model: ``basic`` (one answer call a question) against
``multihop`` (two query calls and a chain-of-thought answer), whose replies the script sets."""

import json

import dspy
import pytest

from helpers import capitals_file, distracted, last_question
from netcast.artifacts import read_artifact
from netcast.data import load_dataset
from netcast.errors import InputError
from netcast.optimize.race import (
    StrategyRace,
    candidates,
    check_race,
    race_programs,
    shared_knobs,
)
from netcast.optimize.settings import RaceSettings
from netcast.optimize.workflow import compile_recipe, make_recipe, recompile
from netcast.programs import program_names
from netcast.render import race_line

# the deep stage searches a small grid: basic's k and multihop's k (passages a hop)
FIXED = {"chain_of_thought": False, "links": 0, "max_steps": 2}
NONE = ["none"]


def is_multihop(prompt: str) -> bool:
    return "[[ ## reasoning ## ]]" in prompt  # multihop's steps think first; basic's does not


def script(basic: str = "Paris", multihop: str = "Paris", wrong_on=(), fail=False):
    """Replies: each strategy's answer (``wrong_on``: questions basic gets wrong), multihop's
    queries; ``fail``: multihop's calls raise (a model error)."""

    def respond(prompt: str) -> dict:
        if is_multihop(prompt):
            if fail:
                raise RuntimeError("the model server went away")
            return {"reasoning": "the context says", "query": "capital France", "answer": multihop}
        wrong = any(last_question(prompt).startswith(f"Question {i}:") for i in wrong_on)
        return {"answer": "Berlin" if wrong else basic}

    return respond


def train(tmp_path, n=48):  # 24 training questions
    return load_dataset(capitals_file(tmp_path / "capitals.jsonl", n), "train").examples


def race(programs, retriever, examples, lm, fixed=None, workdir=None, report=None, **settings):
    """``programs`` raced by a ``StrategyRace`` with these settings; the race's result."""
    tele = StrategyRace(RaceSettings(**settings), lm=lm, workdir=workdir, report=report)
    tele.compile(candidates(programs, retriever, fixed, lm), trainset=examples)
    return tele.result


def run(lm, bm25, examples, **options):
    settings = {"fixed": FIXED, "demos": NONE, "first": 10, **options}
    with dspy.context(lm=lm):
        return race(["basic", "multihop"], bm25, examples, lm=lm, **settings)


def calls(engine):
    multihop = sum(is_multihop(p) for p in engine.prompts)
    return len(engine.prompts) - multihop, multihop


def test_the_race_picks_the_best_and_drops_a_trailing_strategy_at_its_first_rung(
    scripted_lm, bm25, tmp_path
):
    lm, engine = scripted_lm(script(multihop="Berlin"))
    examples = train(tmp_path)
    result = run(lm, bm25, examples)
    assert result.program_name == "basic"
    rows = {r["program"]: r for r in result.table if r["stage"] == "wave 0"}
    dropped = rows["multihop"]
    assert dropped["state"] == "dropped" and dropped["n"] == 10 and dropped["score"] == 0.0
    assert "trails basic" in dropped["reason"]
    # each multihop arm (its grid points enter after 1, 2, 4, ... waves out of contention)
    # spent its first rung only (3 calls a question)
    multihop = [r for r in result.table if r["program"] == "multihop"]
    assert all(r["state"] == "dropped" and r["n"] == 10 for r in multihop)
    assert calls(engine)[1] == 10 * 3 * len(multihop)
    assert result.choice["winner"] == "basic" and result.choice["tied"] == [
        result.choice["winner_arm"]
    ]


def test_between_strategies_the_test_cannot_tell_apart_the_cheaper_wins(
    scripted_lm, bm25, tmp_path
):
    # multihop right on every question, basic wrong on the first: multihop scores best, but
    # one question apart is no difference (p = 1): basic, at a third of the calls and fewer
    # tokens, wins (on the first rung it is kept as the cheapest not told apart from the
    # leader)
    examples = train(tmp_path)
    lm, _ = scripted_lm(script(wrong_on=[int(examples[0].id[1:])]))
    result = run(lm, bm25, examples)
    assert result.choice["top"] == "multihop"
    # the cheapest of each among those the test cannot tell apart (a multihop arm as dear as
    # its k 1 may finish beside it: a last rung of four arms keeps two)
    assert {"basic k=1", "multihop k=1"} <= set(result.choice["tied"])
    assert result.choice["winner_arm"] == "basic k=1"
    assert result.choice["winner"] == "basic" and result.program_name == "basic"
    tokens = {r["program"]: r["tokens"] for r in result.table if r["stage"] == "wave 0"}
    assert tokens["basic"] < tokens["multihop"]


@pytest.mark.parametrize("budget", [12, 20, 45, 100])
def test_the_budget_of_model_calls_is_never_exceeded(scripted_lm, bm25, tmp_path, budget):
    lm, engine = scripted_lm(script())
    result = run(lm, bm25, train(tmp_path), budget=budget)
    assert len(engine.prompts) <= budget
    assert result.spent == len(engine.prompts)  # every call counted (no cache here)
    assert sum(r["calls"] for r in result.table) == result.spent  # the table counts them alike
    assert result.program_name in ("basic", "multihop")
    # the race line says on how few of the fold's questions a budget-ended choice rests
    finalists = max(r["n"] for r in result.table)
    line = race_line({"choice": result.choice})
    assert (finalists < 24) == (budget < 100)  # 100 calls cover the whole fold of 24
    if finalists < 24:
        assert line.splitlines()[-1] == (
            "the budget ended before any arm was scored on all 24 validation questions: the "
            f"choice rests on {finalists} (a larger --budget scores the leaders on more)"
        )
    else:
        assert "budget ended" not in line


def test_a_budget_too_small_for_the_first_rung_stops_before_any_call(scripted_lm, bm25, tmp_path):
    lm, engine = scripted_lm(script())
    # two strategies x 6 questions, the fewest a capped first rung holds (drop_p 0.05)
    with pytest.raises(InputError, match="2 programs x 6 questions need at least 12 model"):
        run(lm, bm25, train(tmp_path), budget=11)
    with pytest.raises(InputError, match="unknown program 'basik'"):
        compile_recipe(
            make_recipe(
                program="basic,basik", knobs={}, dataset=capitals_file(tmp_path / "c.jsonl", 8)
            ),
            tmp_path / "a",
            lm=lm,
        )
    assert engine.prompts == []


def test_a_failing_strategy_is_recorded_and_dropped(scripted_lm, bm25, tmp_path):
    lm, _ = scripted_lm(script(fail=True))
    result = run(lm, bm25, train(tmp_path))
    assert result.program_name == "basic"
    failed = next(r for r in result.table if r["program"] == "multihop")
    assert failed["state"] == "failed" and "the model server went away" in failed["reason"]


def test_set_k_reaches_every_raced_strategy_with_a_retrieval_depth_and_says_so(
    scripted_lm, bm25, tmp_path
):
    """``--set k=1`` in a race holds basic at 1 passage and multihop at 1 passage a hop (every
    arm of each runs with it); the race first says which strategies each knob reaches."""
    lm, engine = scripted_lm(script(multihop="Berlin"))
    told = []
    fixed = {"k": 1, "chain_of_thought": False, "max_hops": 2}
    result = run(
        lm, bm25, train(tmp_path), fixed=fixed, workdir=tmp_path / "race",
        report=lambda event, state: told.append((event, state)),
    )  # fmt: skip
    work = tmp_path / "race"
    arms = {n: list(work.glob(f"{n}-*")) for n in ("basic", "multihop")}
    assert arms["basic"] and arms["multihop"]
    ran = {n: [json.loads((d / "run.json").read_text()) for d in dirs] for n, dirs in arms.items()}
    assert all(r["knobs"]["k"] == 1 for runs in ran.values() for r in runs)
    assert all(r["knobs"]["max_steps"] == 2 for r in ran["multihop"])
    assert result.program_name == "basic" and result.knobs["k"] == 1
    for n, hops in (("basic", 1), ("multihop", 2)):  # every search of every arm asked for 1
        rows = [json.loads(line) for d in arms[n] for line in (d / "predictions.jsonl").open()]
        searches = [s for r in rows for s in r["trace"]["searches"]]
        assert rows and len(searches) == hops * len(rows) and {s["k"] for s in searches} == {1}
    assert told[0][0] == "knobs"
    assert told[0][1]["scope"] == [
        "--set k=1 applies to basic, multihop",
        "--set chain_of_thought=false applies to basic; not to multihop (no such knob)",
        "--set max_hops=2 applies to multihop (as max_steps); not to basic (no such knob)",
    ]


def test_shared_knobs_holds_a_knob_where_a_strategy_has_it_by_name_or_alias():
    everyone = program_names()
    held = shared_knobs(everyone, {"k": 3})
    assert {n for n, knobs in held.items() if knobs == {"k": 3}} == set(everyone) - {"one_shot"}
    assert held["one_shot"] == {}
    # a paper's own name reaches its strategy alone, under the knob's name
    held = shared_knobs(everyone, {"top_k": 3, "max_iters": 2})
    assert held["basic"] == {"k": 3} and held["iterkey"] == {"max_steps": 2}
    assert all(not held[n] for n in everyone if n not in ("basic", "iterkey"))
    loops = shared_knobs(everyone, {"max_steps": 2})
    assert {n for n, knobs in loops.items() if knobs} == set(everyone) - {"basic", "one_shot"}


@pytest.mark.parametrize("spec", ["auto", "basic,multihop"])
def test_a_knob_no_raced_strategy_has_is_refused_in_one_line(spec):
    with pytest.raises(InputError) as err:
        check_race(race_programs(spec), {"k": 3, "nothing": 1}, NONE, None)
    assert str(err.value).startswith("--set nothing: no strategy in the race has a knob")
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="--set token_budget: no strategy in the race"):
        check_race(["basic", "multihop"], {"token_budget": 500}, NONE, None)
    with pytest.raises(InputError, match="basic: knob 'k' is given twice"):
        check_race(["basic", "multihop"], {"k": 3, "top_k": 4}, NONE, None)


def race_recipe(data, budget=None):
    return make_recipe(
        program="basic,multihop",
        knobs=FIXED,
        dataset=data,
        optimizer="joint",
        model="scripted/fake",
        dev_limit=3,
        optimizer_settings=RaceSettings.read({"budget": budget, "demos": NONE}),
    )


def test_a_killed_race_resumes_without_rescoring_finished_questions(scripted_lm, tmp_path):
    data = capitals_file(tmp_path / "capitals.jsonl", 40)  # 20 training questions
    lm, engine = scripted_lm(script(multihop="Berlin"))
    compile_recipe(race_recipe(data), tmp_path / "whole", lm=lm, progress=False)
    whole = len(engine.prompts)  # the race and the winner's 3 dev questions, twice
    count = {"n": 0}
    respond = script(multihop="Berlin")

    def dies(prompt):  # the process is killed during the first rung's multihop questions
        count["n"] += 1
        if count["n"] > 10 + 3 * 4:
            raise KeyboardInterrupt
        return respond(prompt)

    lm, _ = scripted_lm(dies)
    out = tmp_path / "art"
    with pytest.raises(KeyboardInterrupt):
        compile_recipe(race_recipe(data), out, lm=lm, progress=False)
    assert not out.exists()

    lm, engine = scripted_lm(respond)
    result = compile_recipe(race_recipe(data), out, lm=lm, progress=False)
    # basic's 10 first-rung questions and multihop's first 4 were not asked again
    assert len(engine.prompts) == whole - (10 + 3 * 4)
    assert result.race["choice"]["winner"] == "basic"
    table = {r["program"]: r for r in result.race["table"] if r["stage"] == "wave 0"}
    assert table["multihop"]["n"] == 10 and table["multihop"]["state"] == "dropped"
    # the recipe records the race; the artifact is an ordinary one, of the winner
    recipe, scores, _ = read_artifact(result.artifact)
    assert recipe["program"] == "basic" and recipe["race"]["programs"] == "basic,multihop"
    assert scores["after"]["n"] == 3


def test_a_race_artifact_reruns_its_race_for_another_model(scripted_lm, tmp_path):
    data = capitals_file(tmp_path / "capitals.jsonl", 40)
    lm, _ = scripted_lm(script(multihop="Berlin"))
    first = compile_recipe(race_recipe(data), tmp_path / "a", lm=lm, progress=False)
    assert first.race["choice"]["winner"] == "basic"
    # the new model is better with multihop: the rerun race finds it
    lm, engine = scripted_lm(script(basic="Berlin"))
    second, _ = recompile(tmp_path / "a", "scripted/fake", tmp_path / "b", lm=lm)
    assert second.race["choice"]["winner"] == "multihop"
    recipe, _, meta = read_artifact(second.artifact)
    assert recipe["program"] == "multihop" and recipe["race"]["programs"] == "basic,multihop"
    assert meta["lineage"]["parent"] == str((tmp_path / "a").resolve())


def test_a_resumed_race_takes_the_same_arms_and_spends_nothing_again(scripted_lm, bm25, tmp_path):
    # budget 150: the race stops in a later wave; the same race again takes every row from
    # the work directory and makes the same choices, calling the model not at all
    examples, work = train(tmp_path), tmp_path / "race"
    lm, engine = scripted_lm(script())
    first = run(lm, bm25, examples, budget=150, workdir=work)
    assert any(r["state"] == "out of budget" for r in first.table)
    spent = len(engine.prompts)
    lm, engine = scripted_lm(script())
    again = run(lm, bm25, examples, budget=150, workdir=work)
    assert engine.prompts == []

    def timeless(table):
        return [{k: v for k, v in row.items() if k != "seconds"} for row in table]

    assert timeless(again.table) == timeless(first.table)
    assert again.spent == first.spent == spent
    assert again.choice == first.choice


def test_the_race_logs_the_order_it_scored_its_chunks_in_and_a_resumed_race_adds_nothing(
    scripted_lm, bm25, tmp_path
):
    # the arms' run directories keep each arm's rows, not the order across arms: the chunk
    # log does, with the calls spent after each chunk
    examples, work = train(tmp_path), tmp_path / "race"
    lm, _ = scripted_lm(script())
    first = run(lm, bm25, examples, budget=150, workdir=work)
    log = (work / "chunks.jsonl").read_text()
    lines = [json.loads(line) for line in log.splitlines()]
    assert [(line["wave"], line["n"]) for line in lines[:2]] == [(0, 1), (0, 1)]  # probes
    # breadth before depth: the first wave's arms are scored on their first rung before any
    # later arm, and the arms it kept climb past it only after the next wave's arms entered
    first_of_wave_1 = next(i for i, line in enumerate(lines) if line["wave"] == 1)
    assert all(line["wave"] == 0 and line["n"] <= 10 for line in lines[:first_of_wave_1])
    climbs = [i for i, line in enumerate(lines) if line["wave"] == 0 and line["n"] > 10]
    assert climbs and min(climbs) > first_of_wave_1
    spent, scored = 0, {}
    for line in lines:  # the calls of the rows each chunk added, in the log's order
        path = work / line["arm"] / "predictions.jsonl"
        rows = [json.loads(r) for r in path.read_text().splitlines()]
        spent += sum(r["scores"]["lm_calls"] for r in rows[scored.get(line["arm"], 0) : line["n"]])
        assert line["spent"] == spent
        scored[line["arm"]] = line["n"]
    assert spent == first.spent
    assert sorted(scored.values()) == sorted(r["n"] for r in first.table if r["n"])
    lm, _ = scripted_lm(script())
    run(lm, bm25, examples, budget=150, workdir=work)  # takes every row: logs nothing again
    assert (work / "chunks.jsonl").read_text() == log


def test_a_trial_counts_the_calls_that_reached_the_model_as_the_rungs_do():
    from netcast.optimize.joint import model_calls

    # 10 questions, 3 calls each on average of which 1 answered by DSPy's cache
    assert model_calls({"n": 10, "lm_calls": 3.0, "cached_calls": 1.0}) == 20
    assert model_calls({}) == 0  # a trial killed before its first chunk stored nothing


def test_the_race_reports_its_winners_grid_point_against_its_defaults(scripted_lm, bm25, tmp_path):
    # basic's reader is right only when no other capital is in its context: at its defaults
    # (k 5) Berlin's passage is retrieved and it is wrong; k 1 is right. multihop is
    # wrong throughout. The race line names the arm that won and its test against its
    # strategy's defaults, by knobs
    def respond(prompt):
        if is_multihop(prompt):
            return {"reasoning": "so", "query": "capital France", "answer": "Berlin"}
        return distracted(prompt)

    lm, _ = scripted_lm(respond)
    result = run(lm, bm25, train(tmp_path))
    assert result.program_name == "basic" and result.knobs["k"] == 1
    gate = result.choice["versus_defaults"]
    assert gate["knobs"]["k"] == 1 and gate["score"] == 1.0 and gate["default_score"] == 0.0
    assert gate["p"] < 0.1 and gate["verdict"] == "beats them"
    line = race_line({"choice": result.choice}).splitlines()
    assert line[0] == "race winner: basic k=1 (best validation score)"
    assert line[1].startswith("basic: k=1 (1.000) vs its defaults (0.000) on 24 validation")
    assert line[1].endswith(": beats them")


def test_a_winner_tied_with_its_defaults_at_fewer_tokens_says_so(scripted_lm, bm25, tmp_path):
    # basic right at every grid point: k 1 ties the defaults at fewer tokens and the test
    # cannot tell them apart, so the cheaper arm wins, and the second line says they tie
    lm, _ = scripted_lm(script(multihop="Berlin"))
    result = run(lm, bm25, train(tmp_path))
    assert result.knobs["k"] == 1
    first, second = race_line({"choice": result.choice}).splitlines()
    assert first == "race winner: basic k=1 (best validation score)"
    assert second == (
        "basic: k=1 (1.000) vs its defaults (1.000) on 24 validation questions: +0.000, "
        "sign-flip p = 1.000 (alpha 0.1): not told apart"
    )


def test_a_race_rerun_with_another_margin_or_budget_takes_the_same_stored_rows(tmp_path):
    # the margin and the budget change the choice and the length, not what a row means: the
    # work directory's key is the same, so the rerun reads the rows it finds there
    from netcast.files import short_hash
    from netcast.optimize.workflow import _trial_recipe

    def key(**settings):
        recipe = make_recipe(
            program="basic,multihop",
            knobs={},
            dataset=capitals_file(tmp_path / "c.jsonl", 8),
            optimizer_settings=RaceSettings.read(settings),
        )
        return short_hash(_trial_recipe(recipe))

    assert key(budget=100) == key(budget=300, margin=0.2) == key(margin=0.0)
    assert key(budget=100) != key(budget=100, drop_p=0.01)  # drop_p changes what is scored
