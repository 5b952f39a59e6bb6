"""The joint compile: knobs and demonstrations searched together on held-out training
questions, with a scripted model whose scores favour one knob value."""

import json

import dspy
import optuna
import pytest

from helpers import capitals_file, distracted, last_question
from netcast.artifacts import read_artifact
from netcast.data import load_dataset
from netcast.errors import InputError
from netcast.optimize.joint import (
    Candidate,
    JointCompile,
    distance,
    grid_points,
    joint_study,
    knob_grid,
    nearest_tie,
    versus_defaults,
)
from netcast.optimize.settings import JointSettings
from netcast.optimize.workflow import compile_recipe, make_recipe
from netcast.programs import BasicRAG, get_program


def joint_compile(student, trainset, lm, study=None, progress=True, **settings):
    """``student``'s knobs not given searched by a ``JointCompile`` with these settings; the
    search's result."""
    tele = JointCompile(JointSettings(**settings), lm=lm, study=study, progress=progress)
    tele.compile(student, trainset=trainset)
    return tele.result


def france_questions(n: int) -> list[dspy.Example]:
    """``n`` training questions over the ``bm25`` fixture's corpus, all answered by Paris."""
    return [
        dspy.Example(
            id=f"t{i}",
            question="What is the capital of France?",
            answers=["Paris"],
            answer="Paris",
            gold_ids=["paris"],
            gold_passages=[],
        ).with_inputs("question")
        for i in range(n)
    ]


def basic_top_k_search(lm, bm25, **options):
    """``basic``'s top_k searched without demonstrations on ``france_questions(10)``, stopped
    by a budget of one model call (after its first trial)."""
    with dspy.context(lm=lm):
        return joint_compile(
            BasicRAG(bm25, lm=lm, chain_of_thought=False, links=0),
            france_questions(10),
            lm,
            demos=("none",),
            budget=1,
            progress=False,
            **options,
        )


@pytest.fixture
def capitals(tmp_path):
    return capitals_file(tmp_path / "capitals.jsonl", 32)


def joint_recipe(dataset, budget=None, **settings):
    return make_recipe(
        program="basic",
        knobs={"chain_of_thought": False, "links": 0},
        dataset=dataset,
        optimizer="joint",
        teacher="annotations",
        model="scripted/fake",
        train_limit=None,
        dev_limit=3,
        optimizer_settings=JointSettings.read({"budget": budget, **settings}),
    )


def test_grid_tries_each_point_once_defaults_first():
    assert knob_grid(BasicRAG)["links"] == [0, 1, 2, 3]
    grid = knob_grid(BasicRAG, fixed={"chain_of_thought": False, "links": 0})
    assert grid == {"k": [1, 3, 5, 7, 9]}
    points = grid_points(grid, ["none", "annotations"], BasicRAG.knob_defaults(), seed=3)
    assert points[0] == {"k": 5, "demos": "none"}
    assert len(points) == 10 and len({json.dumps(p, sort_keys=True) for p in points}) == 10
    budget = knob_grid(get_program("one_shot"))["token_budget"]
    assert budget[0] is None  # the default (a quarter of the window), not one of the points
    assert budget[1:] == sorted(budget[1:]) and len(budget) >= 5  # log-spaced over the range


def test_a_program_whose_default_is_off_the_grid_compiles_from_its_defaults(scripted_lm, bm25):
    lm, engine = scripted_lm(distracted)
    train = france_questions(10)
    fixed = {"filter": False, "crop": False, "selector": "exact", "pool_factor": 2.0}
    with dspy.context(lm=lm):
        student = get_program("one_shot")(bm25, lm=lm, **fixed)
        result = joint_compile(student, train, lm, demos=("none",), budget=1)
    assert result.trials[0]["knobs"]["token_budget"] is None  # the defaults' trial ran first
    assert result.trials[0]["state"] == "complete" and result.knobs["token_budget"] is None


def test_the_knob_the_scores_favour_is_chosen_and_recorded_in_the_recipe(
    scripted_lm, capitals, tmp_path
):
    lm, engine = scripted_lm(distracted)
    recipe = joint_recipe(capitals)
    assert recipe.optimizer.settings["demos"] == ["none", "annotations"]
    result = compile_recipe(recipe, tmp_path / "art", lm=lm, progress=False, reload=True)

    assert result.knobs["k"] == 1  # the only k whose context holds no other capital
    versus = result.versus_defaults  # right on every validation question, the defaults never
    assert versus["default_trial"] == 0 and versus["diff"] == 1.0 and versus["p"] < 0.1
    assert not versus["kept_defaults"]
    assert result.before["f1"] == 0.0 and result.after["f1"] == 1.0
    assert result.reloaded["f1"] == 1.0
    saved, _, _ = read_artifact(result.artifact)
    assert saved["knobs"] == {**BasicRAG.knob_defaults(), "k": 1, "chain_of_thought": False}
    trials = saved["joint"]["trials"]
    assert trials[0]["knobs"] == {"chain_of_thought": False, "links": 0, "k": 5}  # defaults
    assert trials[0]["demos"] == "none" and trials[0]["state"] in ("complete", "pruned")
    tried = [(t["knobs"]["k"], t["demos"]) for t in trials]
    assert len(tried) == len(set(tried)) == 10
    best = [t for t in trials if t["score"] == 1.0]
    assert {t["knobs"]["k"] for t in best} == {1}
    # trials score the validation fold of the training questions (the last 60%), not dev
    train = load_dataset(capitals, "train").examples
    complete = [t for t in trials if t["state"] == "complete"]
    assert complete and all(t["n"] == int(len(train) * 0.6) for t in complete)


def test_given_values_replace_a_knobs_range_with_the_default_kept_and_demos_chosen(
    scripted_lm, capitals, tmp_path
):
    lm, engine = scripted_lm(distracted)
    recipe = joint_recipe(capitals, grid={"top_k": [3, 1, 3]}, demos=["none"])  # --grid
    result = compile_recipe(recipe, tmp_path / "art", lm=lm, progress=False, reload=False)
    tried = [(t["knobs"]["k"], t["demos"]) for t in result.trials]
    # the default (5) first, then the given values, each once; no demonstrations tried
    assert tried[0] == (5, "none") and sorted(tried) == [(1, "none"), (3, "none"), (5, "none")]
    assert result.knobs["k"] == 1
    saved, _, _ = read_artifact(result.artifact)
    assert saved["optimizer"]["settings"]["grid"] == {"top_k": [3, 1, 3]}  # as given: an alias


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"grid": {"top_k": ["abc"]}}, "basic: knob 'top_k' = 'abc'"),
        ({"grid": {"links": [1]}}, "basic: knob 'links' is held by --set and in --grid"),
        ({"grid": {"topk": [1]}}, "basic: unknown knob 'topk'"),
        ({"demos": ["traces"]}, "unknown demos 'traces'"),
    ],
)
def test_bad_grid_values_and_demo_sources_are_refused_before_any_model_call(
    scripted_lm, capitals, tmp_path, settings, message
):
    lm, engine = scripted_lm(distracted)
    recipe = joint_recipe(capitals, **settings)
    with pytest.raises(InputError, match=message):
        compile_recipe(recipe, tmp_path / "a", lm=lm, progress=False)
    assert engine.prompts == [] and not (tmp_path / "a").exists()


def test_the_budget_of_model_calls_stops_the_search(scripted_lm, bm25):
    lm, engine = scripted_lm(distracted)
    result = basic_top_k_search(lm, bm25)
    assert len(result.trials) == 1  # the first trial spent the budget
    assert result.knobs == {"chain_of_thought": False, "links": 0, "k": 5}
    # no demonstrations searched, so nothing is drawn from the training questions: all 10
    # validate
    assert len(engine.prompts) == 10


def test_bad_demo_sources_and_knobs_are_refused(bm25):
    with pytest.raises(InputError, match="unknown demos 'traces'"):
        joint_compile(BasicRAG(bm25), [], None, demos=("traces",))
    with pytest.raises(InputError, match="basic: unknown knob 'topk'"):
        joint_compile(BasicRAG(bm25, topk=2), [], None)
    with pytest.raises(InputError, match="--teacher annotations works with"):
        make_recipe(
            program="basic", knobs={}, dataset="x", optimizer="mipro", teacher="annotations"
        )
    for optimizer, program in (("joint", "basic"), ("bootstrap", "auto")):  # auto: the race
        with pytest.raises(
            InputError,
            match="metric judge: "
            + ("--optimizer joint" if program == "basic" else "the strategy race")
            + " scores",
        ):
            make_recipe(program=program, knobs={}, dataset="x", optimizer=optimizer, metric="judge")
    assert make_recipe(program="basic", knobs={}, dataset="x", metric="judge").metric == "judge"


def test_a_killed_joint_compile_resumes_without_repeating_finished_trials(
    scripted_lm, capitals, tmp_path
):
    recipe = joint_recipe(capitals)
    calls = {"n": 0}

    def dies_mid_run(prompt):  # the model's server goes away during the third trial
        calls["n"] += 1
        if calls["n"] > 3 + 9 * 2 + 4:  # dev scoring, two trials or more, then some
            raise KeyboardInterrupt
        return distracted(prompt)

    lm, _ = scripted_lm(dies_mid_run)
    out = tmp_path / "art"
    with pytest.raises(KeyboardInterrupt):
        compile_recipe(recipe, out, lm=lm, progress=False, reload=False)
    db = tmp_path / ".art.joint-trials.db"
    assert db.exists() and not out.exists()

    lm, engine = scripted_lm(distracted)
    result = compile_recipe(recipe, out, lm=lm, progress=False, reload=False)
    assert result.knobs["k"] == 1
    tried = [(t["knobs"]["k"], t["demos"]) for t in result.trials]
    finished = [t for t in result.trials if t["state"] in ("complete", "pruned")]
    assert len({*tried}) == 10 and len(finished) == 10  # the two finished ones not rerun
    states = [t["state"] for t in result.trials]
    cut = states.index("fail")  # the interrupted trial, tried again later
    assert cut >= 2 and states.count("fail") == 1 and len(states) == 11
    # the second run asked the model only for dev (3 before, 3 after) and the trials after
    # the interrupted one: none of the finished ones ran again
    assert len(engine.prompts) == 3 + sum(t["n"] for t in result.trials[cut + 1 :]) + 3
    assert not db.exists()  # the trials went into the recipe


def test_a_compile_rerun_with_a_larger_budget_goes_on_from_the_finished_trials(
    scripted_lm, capitals, tmp_path
):
    out = tmp_path / "art"
    lm, _ = scripted_lm(distracted)
    first = compile_recipe(joint_recipe(capitals, budget=1), out, lm=lm, progress=False)
    assert [t["state"] for t in first.trials] == ["complete"]  # the budget stopped it
    assert first.untried == 9
    # the finished trials stay beside the artifact until the whole grid is tried, so a
    # larger budget spends its calls on the points not tried yet
    db = tmp_path / ".art.joint-trials.db"
    assert db.exists()
    lm, engine = scripted_lm(distracted)
    second = compile_recipe(joint_recipe(capitals, budget=None), out, lm=lm, progress=False)
    assert second.trials[0] == first.trials[0]  # the defaults' trial, not run again
    assert len(second.trials) == 10 and second.knobs["k"] == 1 and second.untried == 0
    assert len(engine.prompts) == 3 + sum(t["n"] for t in second.trials[1:]) + 3
    assert not db.exists()


def test_a_best_trial_that_beats_the_defaults_on_too_few_questions_is_not_taken(
    scripted_lm, tmp_path
):
    small = capitals_file(tmp_path / "small.jsonl", 16)  # a validation fold of 4 questions
    lm, _ = scripted_lm(distracted)
    result = compile_recipe(joint_recipe(small), tmp_path / "art", lm=lm, progress=False)
    versus = result.versus_defaults
    # k 1 is right on all 4 and the defaults on none, but 4 signs flip to +-1 with
    # probability 2/16: not below alpha 0.1, so the defaults stay
    assert versus["n"] == 4 and versus["diff"] == 1.0 and versus["p"] == pytest.approx(0.125, 0.1)
    assert versus["kept_defaults"] and result.knobs["k"] == 5
    saved, _, _ = read_artifact(result.artifact)
    assert saved["joint"]["versus_defaults"] == versus
    assert max(t["score"] for t in saved["joint"]["trials"]) == 1.0  # the trials stay on record


def trails_leader(study: optuna.Study, scores: dict[int, float]) -> bool:
    """Whether the study's pruner stops a running trial with these per-question scores."""
    trial = study.ask()
    for step, value in scores.items():
        trial.report(value, step)
    return trial.should_prune()


def test_a_trial_is_raced_against_the_best_complete_one_not_the_median():
    """A trial stops early only when the paired test says it trails the best complete trial on
    the questions both scored: behind on all 30, yes; one question behind (a tie the
    nearest-tie rule needs scored in full), no."""
    study = joint_study()
    assert not trails_leader(study, {0: 0.0})  # nothing complete yet: nothing to race
    top_k = optuna.distributions.CategoricalDistribution([1, 3])
    study.add_trial(
        optuna.trial.create_trial(
            params={"k": 1},
            distributions={"k": top_k},
            value=1.0,
            intermediate_values={i: 1.0 for i in range(60)},
        )
    )
    assert trails_leader(study, dict.fromkeys(range(30), 0.0))
    assert not trails_leader(study, {**dict.fromkeys(range(30), 1.0), 7: 0.0})
    assert not trails_leader(study, {0: 0.0, 1: 0.0})  # two questions: p = 0.25
    assert not trails_leader(study, {100: 0.0, 101: 0.0, 102: 0.0})  # none in common


def test_a_compile_stops_the_trials_that_trail_the_leader_at_their_third_chunk(scripted_lm, bm25):
    lm, engine = scripted_lm(distracted)
    with dspy.context(lm=lm):
        result = joint_compile(
            BasicRAG(bm25, lm=lm, chain_of_thought=False, links=0),
            france_questions(60),
            lm,
            demos=("none",),
            progress=False,
        )
    trials = result.trials
    assert result.knobs["k"] == 1  # the only k whose context holds no other capital
    won = next(i for i, t in enumerate(trials) if t["score"] == 1.0)
    # before the leader finished, every trial ran all 60 questions; after, each one wrong on
    # every question stopped after 30 (its third chunk)
    assert all(t["state"] == "complete" and t["n"] == 60 for t in trials[: won + 1])
    assert trials[won + 1 :] and all(
        t["state"] == "pruned" and t["n"] == 30 and t["score"] == 0.0 for t in trials[won + 1 :]
    )
    assert len(engine.prompts) == 60 * (won + 1) + 30 * (len(trials) - won - 1)


@pytest.mark.parametrize("n, fold", [(100, 30), (104, 31)])
def test_a_trial_is_not_pruned_near_the_end_of_its_questions(scripted_lm, tmp_path, n, fold):
    """Pruning saves model calls only while a whole chunk of questions is left: a trial below
    the median on its third chunk of three (or with one question left) has spent nearly all,
    and its score stays a candidate."""
    data = capitals_file(tmp_path / "capitals.jsonl", n)  # validation fold: 60% of n / 2

    def needs_all_four(prompt: str) -> dict:  # right only with every passage, so the first
        return {"answer": "Paris" if "Madrid is the capital" in prompt else "Madrid"}  # trials win

    lm, _ = scripted_lm(needs_all_four)
    result = compile_recipe(joint_recipe(data), tmp_path / "art", lm=lm, progress=False)
    scores = {(t["knobs"]["k"], t["demos"]): t["score"] for t in result.trials}
    assert 0.0 in scores.values() and 1.0 in scores.values()  # the median splits them
    assert all(t["state"] == "complete" and t["n"] == fold for t in result.trials)


def test_a_trial_left_running_by_a_killed_compile_is_failed_and_tried_again(
    scripted_lm, bm25, tmp_path
):
    study = joint_study(f"sqlite:///{tmp_path / 'trials.db'}")
    study.enqueue_trial({"k": 5, "demos": "none"})
    study.ask()  # the process died here: the trial stays RUNNING in the storage
    lm, engine = scripted_lm(distracted)
    result = basic_top_k_search(lm, bm25, study=study)
    states = [t["state"] for t in result.trials]
    assert states == ["fail", "complete"]  # the stale trial failed, its point run again
    assert result.trials[1]["knobs"]["k"] == 5 and engine.prompts


def test_among_trials_it_cannot_tell_apart_the_compile_takes_the_one_nearest_the_defaults(
    scripted_lm, tmp_path
):
    data = capitals_file(tmp_path / "capitals.jsonl", 40)
    train = load_dataset(data, "train").examples
    missed = train[2].question

    def fewer_is_better(prompt: str) -> dict:
        """Right with Paris alone; with three passages right on all but one question; with
        every passage (k 5 and up) never."""
        shown = sum(f"{c} is the capital" in prompt for c in ("Paris", "Berlin", "Rome", "Madrid"))
        right = shown == 1 or (shown == 3 and last_question(prompt) != missed)
        return {"answer": "Paris" if right else "Berlin"}

    chosen = {}
    for ties in ("best", "nearest"):
        lm, _ = scripted_lm(fewer_is_better)
        recipe = joint_recipe(data, demos=["none"], ties=ties)
        chosen[ties] = compile_recipe(recipe, tmp_path / ties, lm=lm, progress=False)
    best, nearest = chosen["best"], chosen["nearest"]
    assert best.knobs["k"] == 1 and nearest.knobs["k"] == 3
    trials = {t["knobs"]["k"]: t for t in nearest.trials}
    # no demonstrations searched: every training question validates, each score on record
    assert trials[3]["n"] == len(train) and len(trials[3]["question_scores"]) == len(train)
    assert sorted(trials[3]["question_scores"].values())[:2] == [0.0, 1.0]  # the one miss
    versus = nearest.versus_defaults
    # k 1 scored best; k 3, one question behind it (sign-flip p = 1), is one grid step
    # from the defaults' 5 where 1 is two: taken, and tested against the defaults itself
    assert versus["top_trial"] == trials[1]["trial"] and versus["ties"] == "nearest"
    assert versus["best_trial"] == trials[3]["trial"]
    assert sorted(versus["tied"]) == sorted([trials[1]["trial"], trials[3]["trial"]])
    assert not versus["kept_defaults"] and versus["p"] < 0.1
    assert versus["diff"] == pytest.approx(1 - 1 / len(train), abs=1e-4)  # rounded
    saved, _, _ = read_artifact(nearest.artifact)
    assert saved["knobs"]["k"] == 3 and saved["joint"]["versus_defaults"] == versus
    assert "top_trial" not in best.versus_defaults  # ties="best": the best score is taken


def test_nearest_tie_is_a_pure_rule_over_candidates():
    """Defaults wrong everywhere; k 1 right on all 20; k 3 right on 19 (a tie with 1);
    k 9 right on 12 (beats the defaults, but 1 beats it): 3 is nearest the defaults' 5."""
    ids = [f"q{i}" for i in range(20)]

    def cand(number, top_k, right, tokens=100.0):
        scores = {q: float(i < right) for i, q in enumerate(ids)}
        point = {"k": top_k, "demos": "none"}
        return Candidate(number, point, sum(scores.values()) / len(ids), tokens, scores)

    default, one, three, nine = cand(0, 5, 0), cand(1, 1, 20), cand(2, 3, 19), cand(3, 9, 12)
    grid = {"k": [1, 3, 5, 7, 9]}
    chosen, tied = nearest_tie(one, default, [default, one, three, nine], grid, ["none"], 0.1)
    assert chosen is three and tied == [1, 2]
    assert distance(three.point, default.point, grid, ["none"]) == (1, 1)
    assert distance(one.point, default.point, grid, ["none"]) == (1, 2)
    # the same distance: the higher score, then the fewer tokens
    seven = cand(4, 7, 19, tokens=50.0)
    chosen, _ = nearest_tie(one, default, [default, one, three, seven], grid, ["none"], 0.1)
    assert chosen is seven
    versus = versus_defaults(three, default, 0.1)
    assert versus["n"] == 20 and versus["diff"] == 0.95 and not versus["kept_defaults"]


def test_a_point_whose_replies_do_not_parse_fails_alone_and_is_not_tried_again(
    scripted_lm, bm25, tmp_path
):
    # chain of thought asks for a reasoning field the script never writes: those points fail
    # to parse; the search goes on to the other points and takes the best of those
    def search(lm):
        with dspy.context(lm=lm):
            return joint_compile(
                BasicRAG(bm25, lm=lm, links=0),
                france_questions(10),
                lm,
                grid={"k": [1, 2], "chain_of_thought": [False, True]},
                demos=("none",),
                study=joint_study(f"sqlite:///{tmp_path / 'trials.db'}"),
                progress=False,
            )

    lm, engine = scripted_lm(lambda prompt: {"answer": "Paris"})
    result = search(lm)
    states = {(t["knobs"]["k"], t["knobs"]["chain_of_thought"]): t for t in result.trials}
    assert len(states) == 6  # k 1, 2 and the default 5, with and without
    for top_k in (1, 2, 5):
        failed = states[(top_k, True)]
        assert failed["state"] == "failed" and "AdapterParseError" in failed["reason"]
        assert states[(top_k, False)]["state"] == "complete"
    assert result.knobs["chain_of_thought"] is False
    # run again over the same storage: no point is tried again, the failed ones included
    lm, engine = scripted_lm(lambda prompt: {"answer": "Paris"})
    again = search(lm)
    assert engine.prompts == [] and len(again.trials) == 6


def test_a_tables_state_cell_names_an_interrupted_trial_and_cuts_a_long_reason():
    from netcast.render import REASON_WIDTH, state_cell

    assert state_cell("fail") == "interrupted"  # left running by a killed compile
    assert state_cell("complete") == "complete"
    reply = "AdapterParseError: Adapter JSONAdapter failed to parse the LM response.\n\n" + (
        "LM Response: " + "x " * 200
    )
    cell = state_cell("failed", reply)
    assert cell.startswith("failed: AdapterParseError: Adapter JSONAdapter failed to parse")
    assert cell.endswith("...") and len(cell) <= len("failed: ") + REASON_WIDTH
    assert "\n" not in cell
    assert state_cell("dropped", "trails basic") == "dropped: trails basic"
