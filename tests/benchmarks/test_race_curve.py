"""benchmarks/race_curve.py on tiny synthetic races: the order the questions were scored in,
rebuilt for the old allocation (rungs, then joint trials in Optuna storage) and the new one
(arms by wave and rung, or the chunk log), the calls each was charged, and the curve."""

import json

import dspy
import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from helpers import capitals_file
from netcast.data import load_dataset
from netcast.optimize.race import StrategyRace, candidates
from netcast.optimize.settings import RaceSettings


def rows(path, scored):
    """``scored``: (id, f1, lm_calls, cached_calls) a question, in the arm's order."""
    path.mkdir(parents=True, exist_ok=True)
    lines = [
        {"id": q, "scores": {"f1": f1, "lm_calls": calls, "cached_calls": cached}}
        for q, f1, calls, cached in scored
    ]
    (path / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


def arm(work, key, program, scored, knobs=None, demos="none"):
    rows(work / key, scored)
    info = {"program": program, "knobs": knobs or {}, "demos": demos, "model": "m"}
    (work / key / "run.json").write_text(json.dumps(info))


def artifact(root, name, table, first=2, fold=4, choice=None):
    (root / name).mkdir(parents=True)
    recipe = {
        "dataset": {"name": "toy"},
        "optimizer": {"name": "race", "settings": {"first": first}},
        "race": {
            "budget": 100,
            "table": table,
            "choice": {"validation_questions": fold, **(choice or {})},
        },
    }
    (root / name / "recipe.json").write_text(json.dumps(recipe))
    work = root / f".{name}.race-1234abcd"
    work.mkdir()
    return root / name, work


def order(race):
    return [(e.arm, e.qid) for e in race.events]


def test_the_old_allocation_rebuilds_rungs_by_strategy_then_trials_as_they_started(
    script, tmp_path
):
    curve = script("race_curve")
    table = [
        {"program": "multihop", "stage": "rungs", "knobs": "defaults", "n": 4},
        {"program": "basic", "stage": "rungs", "knobs": "defaults", "n": 2},
        {"program": "basic", "stage": "joint", "knobs": {"links": 1}, "demos": "none",
         "reason": "chosen"},
    ]  # fmt: skip
    path, work = artifact(tmp_path, "old", table, choice={"winner": "basic"})
    q = ["q0", "q1", "q2", "q3"]
    arm(work, "multihop", "multihop", [(x, 0.0, 3, 1 if x == "q0" else 0) for x in q])
    arm(work, "basic", "basic", [(x, 0.5, 1, 0) for x in q[:2]])
    study = optuna.create_study(
        study_name="joint-basic-0000", storage=f"sqlite:///{work}/trials.db"
    )
    demos = {"demos": CategoricalDistribution(["none", "annotations"])}
    attrs = {
        "knobs": {"links": 1},
        "scores": dict.fromkeys(q, 1.0),
        "calls": 8,  # all calls; 6 reached the model
        "aggregate": {"n": 4, "lm_calls": 2.0, "cached_calls": 0.5},
    }
    study.add_trial(
        create_trial(params={"demos": "none"}, distributions=demos, value=1.0, user_attrs=attrs)
    )
    killed = {0: 0.25}  # killed after its first question: its reports, no calls stored
    study.add_trial(
        create_trial(
            params={"demos": "annotations"},
            distributions=demos,
            state=TrialState.FAIL,
            user_attrs={"knobs": {}},
            intermediate_values=killed,
        )
    )  # fmt: skip
    race = curve.read_race(path)
    mh, b = "multihop at its defaults", "basic at its defaults"
    assert order(race) == [
        (mh, "q0"), (b, "q0"),  # each strategy's first question first
        (mh, "q1"), (b, "q1"),  # the first rung (2 questions), strategies in the race's order
        (mh, "q2"), (mh, "q3"),  # the second rung
        *(("basic links=1", x) for x in q),  # the trials, as they started
        ("basic demos annotations", "q0"),
    ]  # fmt: skip
    # rungs: the calls that reached the model charged; a trial's spread over its questions
    assert [e.charged for e in race.events[:6]] == [2, 1, 3, 1, 3, 3]
    assert [e.all for e in race.events[:6]] == [3, 1, 3, 1, 3, 3]
    assert {(e.charged, e.all) for e in race.events[6:10]} == {(1.5, 2.0)}
    assert (race.events[-1].charged, race.events[-1].all) == (0, None)
    assert race.choice == "basic links=1"  # the strategy the old race named, as its arm
    assert race.allocation == "rungs, then joint compiles"
    points = curve.curve(race.events, race.first, 5, race.fold)
    # by 5 charged calls only the first questions (1 each): no arm on the first rung yet
    assert (points[0].arm, points[0].whole_arm) == (None, None)
    end = points[-1]
    assert (end.at, end.all, end.all_exact) == (19, 22, False)  # a killed trial's calls unknown
    assert (end.arm, end.n, end.score) == ("basic links=1", 4, 1.0)
    assert (end.whole_arm, end.whole_score) == ("basic links=1", 1.0)
    assert curve.completed_at(race.events, "basic links=1", 4) == 19  # 13 + 4 x 1.5


def test_the_new_allocation_orders_arms_by_wave_rung_and_entry(script, tmp_path):
    curve = script("race_curve")
    table = [
        {"program": "basic", "stage": "wave 0", "knobs": {}, "demos": "none", "n": 4},
        {"program": "multihop", "stage": "wave 0", "knobs": {}, "demos": "none", "n": 2},
        {"program": "basic", "stage": "wave 1", "knobs": {"links": 1}, "demos": "none", "n": 4},
        {"program": "basic", "stage": "wave 1", "knobs": {"links": 2}, "demos": "none", "n": 0},
    ]
    path, work = artifact(tmp_path, "new", table)
    q = ["q0", "q1", "q2", "q3"]
    arm(work, "basic-0-aaaaaaaa", "basic", [(x, 0.25, 1, 1) for x in q])
    arm(work, "multihop-0-bbbbbbbb", "multihop", [(x, 0.0, 3, 0) for x in q[:2]])
    arm(work, "basic-1-cccccccc", "basic", [(x, 1.0, 2, 0) for x in q], knobs={"links": 1})
    race = curve.read_race(path)
    b, mh, b1 = "basic at its defaults", "multihop at its defaults", "basic links=1"
    assert order(race) == [
        (b, "q0"), (mh, "q0"), (b, "q1"), (mh, "q1"), (b, "q2"), (b, "q3"),
        (b1, "q0"), (b1, "q1"), (b1, "q2"), (b1, "q3"),
    ]  # fmt: skip
    assert race.allocation == "successive halving"  # no chunk log: as first built
    # the new race charges every call, cached or not
    assert [e.charged for e in race.events[:2]] == [1, 3]
    assert [e.model for e in race.events[:2]] == [0, 3]
    points = curve.curve(race.events, race.first, 4, race.fold)
    by_four = points[0]  # basic q0, multihop q0: none on the first rung's 2 questions yet
    assert by_four.at == 4 and by_four.arm is None
    by_eight = points[1]  # and basic q1: basic on 2 questions, the only one on the rung
    assert (by_eight.arm, by_eight.n, by_eight.score) == (b, 2, 0.25)
    end = points[-1]
    assert (end.whole_arm, end.whole_score, end.at) == (b1, 1.0, 18)


def test_the_chunk_log_gives_the_order_and_rows_it_lacks_come_last(script, tmp_path):
    curve = script("race_curve")
    work = tmp_path / ".new.race-1234abcd"
    arm(work, "basic-0-aaaaaaaa", "basic", [("q0", 1.0, 1, 0), ("q1", 1.0, 1, 0)])
    arm(work, "basic-1-cccccccc", "basic", [("q0", 0.0, 1, 0)], knobs={"links": 1})
    log = [
        {"arm": "basic-1-cccccccc", "wave": 1, "n": 1, "spent": 1},
        {"arm": "basic-0-aaaaaaaa", "wave": 0, "n": 1, "spent": 2},
        {"arm": "basic-0-aaaaaaaa", "wave": 0, "n": 1, "spent": 2},  # a resumed race's repeat
    ]
    (work / "chunks.jsonl").write_text("".join(json.dumps(x) + "\n" for x in log) + '{"arm": "ba')
    race = curve.read_race(work)
    assert order(race) == [
        ("basic links=1", "q0"),
        ("basic at its defaults", "q0"),
        ("basic at its defaults", "q1"),
    ]
    assert any("not in the chunk log" in note for note in race.notes)
    assert race.allocation == "halving, breadth-first"


def test_an_order_the_files_do_not_keep_is_refused_in_one_line(
    script, tmp_path, monkeypatch, capsys
):
    work = tmp_path / ".new.race-1234abcd"
    arm(work, "basic-0-aaaaaaaa", "basic", [("q0", 1.0, 1, 0)])
    arm(work, "basic-1-cccccccc", "basic", [("q0", 0.0, 1, 0)], knobs={"links": 1})
    monkeypatch.setattr("sys.argv", ["race_curve.py", str(work)])
    with pytest.raises(SystemExit) as stop:
        script("race_curve").main()
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "basic-1-cccccccc" in err and "not kept" in err
    (work / "basic-0-aaaaaaaa" / "predictions.jsonl").write_text('{"id": "q0"}\n{"id": "q1"}\n')
    (work / "basic-1-cccccccc" / "predictions.jsonl").unlink()
    with pytest.raises(SystemExit):
        script("race_curve").main()
    err = capsys.readouterr().err
    assert "basic-0-aaaaaaaa/predictions.jsonl:1: a row needs an id and scores" in err


def test_the_script_prints_a_table_a_race_and_the_calls_to_its_pick(
    script, tmp_path, monkeypatch, capsys
):
    table = [{"program": "basic", "stage": "wave 0", "knobs": {}, "demos": "none", "n": 4}]
    table.append({"program": "multihop", "stage": "wave 0", "knobs": {}, "demos": "none", "n": 4})
    path, work = artifact(
        tmp_path, "new", table, choice={"winner": "basic", "winner_arm": "basic at its defaults"}
    )
    arm(work, "basic-0-aaaaaaaa", "basic", [(f"q{i}", 0.5, 10, 0) for i in range(4)])
    arm(work, "multihop-0-bbbbbbbb", "multihop", [(f"q{i}", 0.25, 10, 0) for i in range(4)])
    monkeypatch.setattr("sys.argv", ["race_curve.py", str(path), "--step", "40"])
    script("race_curve").main()
    out = capsys.readouterr().out
    assert out.startswith("## Calls-to-winner curves") and "command: " in out
    lines = [line for line in out.splitlines() if line.startswith("| ")]
    # by 40 calls: both first questions, basic's second, multihop's second (2 each)
    assert lines[1] == ("| 40 | 40 | 40 | 2 | basic at its defaults | 2 | 0.5 | 0.5 | - | - |")
    assert lines[2].startswith("| 80 | 80 | 80 | 2 | basic at its defaults | 4 | 0.5 | 0.5 |")
    assert lines[-1] == (
        "| new | successive halving | 80 | 80 | basic at its defaults | 0.500 [0.500, 0.500] | "
        "60 | basic at its defaults | 0.500 [0.500, 0.500] | 60 |"
    )


def test_a_real_race_s_table_gives_the_order_its_chunk_log_records(
    script, scripted_lm, bm25, tmp_path
):
    # a race over basic and multihop (scripted model) that ends in a later wave: its chunk log
    # gives the order its questions were scored in, climbs interleaved with later waves; its
    # table alone (waves, rungs, entry: the order of races run before the chunk log, wave by
    # wave) gives the same questions charged the same calls
    examples = load_dataset(capitals_file(tmp_path / "capitals.jsonl", 48), "train").examples

    def respond(prompt):
        if "[[ ## reasoning ## ]]" in prompt:  # multihop's steps think first
            return {"reasoning": "the context says", "query": "capital France", "answer": "Paris"}
        return {"answer": "Paris"}

    lm, _ = scripted_lm(respond)
    work = tmp_path / ".race.race-0000abcd"
    tele = StrategyRace(RaceSettings(budget=150, demos=["none"], first=10), lm=lm, workdir=work)
    fixed = {"chain_of_thought": False, "links": 0, "max_steps": 2}
    with dspy.context(lm=lm):
        tele.compile(candidates(["basic", "multihop"], bm25, fixed, lm), trainset=examples)
    curve = script("race_curve")
    logged = curve.read_race(work)
    assert max(int(r["stage"].split()[1]) for r in tele.result.table if r["n"]) >= 1
    (work / "chunks.jsonl").rename(work / "chunks.jsonl.off")
    from_table = curve.read_race(work)
    assert sorted(order(from_table)) == sorted(order(logged))
    assert sum(e.charged for e in from_table.events) == tele.result.spent
    assert sum(e.charged for e in logged.events) == tele.result.spent
