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
    rows = {(r["program"], r["stage"]): r for r in result.table if r["stage"] == "rungs"}
    dropped = rows[("multihop", "rungs")]
    assert dropped["state"] == "dropped" and dropped["n"] == 10 and dropped["score"] == 0.0
    assert "trails basic" in dropped["reason"]
    # multihop spent its first rung only (3 calls a question), and ran no joint trial
    assert calls(engine)[1] == 10 * 3
    assert not [r for r in result.table if r["program"] == "multihop" and r["stage"] == "joint"]
    assert result.choice["winner"] == "basic" and result.choice["tied"] == ["basic"]


def test_between_strategies_the_test_cannot_tell_apart_the_cheaper_wins(
    scripted_lm, bm25, tmp_path
):
    # multihop right on every question, basic wrong on one: multihop scores best, but one
    # question apart is no difference (p = 1): basic, at a third of the calls and fewer
    # tokens, wins
    examples = train(tmp_path)
    lm, _ = scripted_lm(script(wrong_on=[int(examples[-1].id[1:])]))
    result = run(lm, bm25, examples)
    assert result.choice["top"] == "multihop"
    assert result.choice["tied"] == ["basic", "multihop"]
    assert result.choice["winner"] == "basic" and result.program_name == "basic"
    tokens = {r["program"]: r["tokens"] for r in result.table if r["stage"] == "rungs"}
    assert tokens["basic"] < tokens["multihop"]


@pytest.mark.parametrize("budget", [20, 45, 100])
def test_the_budget_of_model_calls_is_never_exceeded(scripted_lm, bm25, tmp_path, budget):
    lm, engine = scripted_lm(script())
    result = run(lm, bm25, train(tmp_path), budget=budget)
    assert len(engine.prompts) <= budget
    assert result.spent == len(engine.prompts)  # every call counted (no cache here)
    assert sum(r["calls"] for r in result.table) == result.spent  # the table counts them alike
    assert result.program_name in ("basic", "multihop")


def test_a_budget_too_small_for_the_first_rung_stops_before_any_call(scripted_lm, bm25, tmp_path):
    lm, engine = scripted_lm(script())
    with pytest.raises(InputError, match="too small for the race's first rung"):
        run(lm, bm25, train(tmp_path), budget=19)
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
    """``--set k=1`` in a race holds basic at 1 passage and multihop at 1 passage a hop (each
    strategy's rungs run with it); the race first says which strategies each knob reaches."""
    lm, engine = scripted_lm(script(multihop="Berlin"))
    told = []
    fixed = {"k": 1, "chain_of_thought": False, "max_hops": 2}
    result = run(
        lm, bm25, train(tmp_path), fixed=fixed, workdir=tmp_path / "race",
        report=lambda event, state: told.append((event, state)),
    )  # fmt: skip
    work = tmp_path / "race"
    ran = {n: json.loads((work / n / "run.json").read_text()) for n in ("basic", "multihop")}
    assert ran["basic"]["knobs"]["k"] == 1 and ran["multihop"]["knobs"]["k"] == 1
    assert ran["multihop"]["knobs"]["max_steps"] == 2
    assert result.program_name == "basic" and result.knobs["k"] == 1
    for n, hops in (("basic", 1), ("multihop", 2)):  # every search of the rungs asked for 1
        rows = [json.loads(line) for line in (work / n / "predictions.jsonl").open()]
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
        optimizer_settings={"budget": budget, "demos": NONE},
    )


def test_a_killed_race_resumes_without_rescoring_finished_questions(scripted_lm, tmp_path):
    data = capitals_file(tmp_path / "capitals.jsonl", 40)  # 20 training questions
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
    basic_calls, multihop_calls = calls(engine)
    # basic's 10 first-rung questions and multihop's first 4 were not asked again
    assert multihop_calls == 3 * (10 - 4)
    assert result.race["choice"]["winner"] == "basic"
    table = {r["program"]: r for r in result.race["table"] if r["stage"] == "rungs"}
    assert table["basic"]["n"] == 10 and table["multihop"]["n"] == 10
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


def test_a_rung_halves_the_field_but_keeps_the_cheapest():
    from netcast.optimize.race import Runner, _halve

    def runner(name, right, tokens):
        rows = [
            {"id": f"q{i}", "scores": {"f1": float(i < right), "tokens_in": tokens}}
            for i in range(10)
        ]
        return Runner(name, rows=rows)

    field = [runner("a", 9, 900), runner("b", 8, 800), runner("c", 7, 700), runner("d", 6, 100),
             runner("e", 5, 500)]  # fmt: skip
    _halve(field, "f1", 10)
    assert [r.name for r in field if r.state == "running"] == ["a", "b", "c", "d"]
    assert field[4].state == "dropped" and "halved" in field[4].reason
    two = [runner("x", 9, 900), runner("y", 1, 100)]
    _halve(two, "f1", 10)  # never below two: the depth stage decides between them
    assert all(r.state == "running" for r in two)


def test_a_resumed_race_takes_the_same_rungs_and_spends_nothing_again(scripted_lm, bm25, tmp_path):
    # 24 validation questions; budget 150: the rungs stop at half of it, after 20 questions
    # (basic 1 call and multihop 3 a question: 40 calls after 10, 80 after 20)
    examples, work = train(tmp_path), tmp_path / "race"
    lm, engine = scripted_lm(script())
    first = run(lm, bm25, examples, budget=150, workdir=work)
    rungs = [r for r in first.table if r["stage"] == "rungs"]
    assert {r["n"] for r in rungs} == {20}
    spent = len(engine.prompts)
    # the same race again: every row and trial is taken from the work directory, and the
    # rungs end where they ended, though the calls of its deep stage are already spent
    lm, engine = scripted_lm(script())
    again = run(lm, bm25, examples, budget=150, workdir=work)
    assert engine.prompts == []
    assert [r for r in again.table if r["stage"] == "rungs"] == rungs
    assert again.spent == first.spent == spent
    assert again.choice == first.choice


def test_a_trial_counts_the_calls_that_reached_the_model_as_the_rungs_do():
    from netcast.optimize.joint import model_calls

    # 10 questions, 3 calls each on average of which 1 answered by DSPy's cache
    assert model_calls({"n": 10, "lm_calls": 3.0, "cached_calls": 1.0}) == 20
    assert model_calls({}) == 0  # a trial killed before its first chunk stored nothing


def test_a_race_killed_in_its_deep_stage_resumes_to_the_same_end(scripted_lm, bm25, tmp_path):
    # the same race uninterrupted, and killed a few calls before its end (in the deep stage)
    # then run again: each survivor's share of the deep stage, hence every trial, is the same
    examples = train(tmp_path)
    lm, engine = scripted_lm(script())
    whole = run(lm, bm25, examples, budget=150, workdir=tmp_path / "whole")
    assert [r for r in whole.table if r["stage"] == "joint"]  # it reached the deep stage
    count, respond = {"n": 0}, script()

    def dies(prompt):
        count["n"] += 1
        if count["n"] > len(engine.prompts) - 5:
            raise KeyboardInterrupt
        return respond(prompt)

    lm, _ = scripted_lm(dies)
    with pytest.raises(KeyboardInterrupt):
        run(lm, bm25, examples, budget=150, workdir=tmp_path / "cut")
    lm, _ = scripted_lm(script())
    resumed = run(lm, bm25, examples, budget=150, workdir=tmp_path / "cut")

    def timeless(table):
        return [{k: v for k, v in row.items() if k != "seconds"} for row in table]

    # the trial the kill cut is listed as failed (its point tried again after it)
    killed = [r for r in resumed.table if r["state"] == "fail"]
    assert len(killed) == 1 and killed[0]["n"] == 0
    assert timeless(r for r in resumed.table if r not in killed) == timeless(whole.table)
    assert resumed.spent == whole.spent and resumed.choice == whole.choice


def test_after_the_last_rung_the_field_is_halved_before_the_deep_stage(scripted_lm, bm25, tmp_path):
    # three strategies, 10 validation questions: the first rung is the last. basic right on
    # all (and the cheapest), multihop wrong on one, iterkey wrong on two: no paired test
    # drops iterkey (p = 0.5), but it is not in the better two, so it leaves before the deep
    # stage and runs no joint trial
    examples = train(tmp_path, n=20)
    ids = [int(e.id[1:]) for e in examples]

    def respond(prompt):
        question = last_question(prompt)
        asked = [i for i in ids if question.startswith(f"Question {i}:")]
        if "[[ ## is_correct ## ]]" in prompt and "[[ ## answer ## ]]\n" in prompt:
            return {"is_correct": "True"}
        if "[[ ## keywords ## ]]" in prompt:
            return {"keywords": '["capital", "France"]'}
        if "Below are some documents" in prompt:  # iterkey's answer
            return {"answer": "Berlin" if set(asked) & set(ids[:2]) else "Paris"}
        if is_multihop(prompt):
            answer = "Berlin" if set(asked) & {ids[2]} else "Paris"
            return {"reasoning": "so", "query": "capital France", "answer": answer}
        return {"answer": "Paris"}

    lm, _ = scripted_lm(respond)
    with dspy.context(lm=lm):
        result = race(
            ["basic", "multihop", "iterkey"], bm25, examples, lm=lm, demos=NONE, first=10,
            fixed={**FIXED, "validation": "text"},
        )  # fmt: skip
    rungs = {r["program"]: r for r in result.table if r["stage"] == "rungs"}
    assert {r["n"] for r in rungs.values()} == {10}
    assert [rungs[p]["score"] for p in ("basic", "multihop", "iterkey")] == [1.0, 0.9, 0.8]
    assert rungs["iterkey"]["state"] == "dropped" and "halved" in rungs["iterkey"]["reason"]
    joint = {r["program"] for r in result.table if r["stage"] == "joint"}
    assert joint == {"basic", "multihop"}
    assert result.choice["winner"] == "basic"


def test_the_race_reports_its_winners_grid_point_against_its_defaults(scripted_lm, bm25, tmp_path):
    # basic's reader is right only when no other capital is in its context: at its defaults
    # (k 5) Berlin's passage is retrieved and it is wrong; k 1 is right. multihop is
    # wrong throughout. The race line names the point basic took and its test against the
    # defaults, as `netcast compile --optimizer joint` does, by knobs (no trial numbers)
    def respond(prompt):
        if is_multihop(prompt):
            return {"reasoning": "so", "query": "capital France", "answer": "Berlin"}
        return distracted(prompt)

    lm, _ = scripted_lm(respond)
    result = run(lm, bm25, train(tmp_path))
    assert result.program_name == "basic" and result.knobs["k"] == 1
    gate = result.choice["versus_defaults"]
    assert gate["knobs"]["k"] == 1 and gate["score"] == 1.0 and gate["default_score"] == 0.0
    assert not gate["kept_defaults"] and gate["p"] < 0.1
    line = race_line({"choice": result.choice}).splitlines()
    assert line[0].startswith("race winner: basic (")
    assert line[1].startswith("basic: k=1 (1.000) vs its defaults (0.000) on 24 validation")
    assert line[1].endswith(": took it")
    assert "trial" not in line[1]


def test_a_race_whose_winner_kept_its_defaults_says_so(scripted_lm, bm25, tmp_path):
    # basic right at every grid point: k 1 ties the defaults at fewer tokens, but does
    # not beat them, so the defaults are kept, and the second line says why
    lm, _ = scripted_lm(script(multihop="Berlin"))
    result = run(lm, bm25, train(tmp_path))
    assert result.knobs["k"] == 5
    first, second = race_line({"choice": result.choice}).splitlines()
    assert first == "race winner: basic (best validation score)"
    assert second == (
        "basic: k=1 (1.000) vs its defaults (1.000) on 24 validation questions: +0.000, "
        "sign-flip p = 1.000 (alpha 0.1): kept the defaults"
    )
