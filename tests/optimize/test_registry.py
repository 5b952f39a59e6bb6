"""The optimizer registry: every optimizer a DSPy teleprompter built from typed settings whose
defaults are written once; recipes typed in memory and written back as they were read."""

import json
from pathlib import Path

import dspy
import optuna
import pytest
from dspy.teleprompt import Teleprompter

from helpers import capitals_file, distracted
from netcast.artifacts import read_artifact
from netcast.errors import InputError
from netcast.formats import Recipe, recipe_of
from netcast.optimize.budget import CallBudget
from netcast.optimize.compile import DSPY, DSPyOptimizer
from netcast.optimize.registry import (
    REGISTRY,
    DSPyOptimizerEntry,
    Setup,
    optimizer_for,
    optimizer_names,
)
from netcast.optimize.settings import JointSettings, RaceSettings, TuneSettings
from netcast.optimize.tune import run_tuning, tuning_recipe
from netcast.optimize.workflow import compile_recipe, make_recipe, recompile, rerun_recipe

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "benchmarks" / "results").rglob("recipe.json"))


def test_every_optimizer_is_a_teleprompter_built_from_its_default_settings():
    assert set(optimizer_names()) == {
        "bootstrap",
        "bootstrap-rs",
        "mipro",
        "simba",
        "gepa",
        "joint",
        "finetune",
        "better-together",
    }
    for name, entry in REGISTRY.items():
        tele = entry.build(entry.read({}), Setup(lm=None))
        assert isinstance(tele, Teleprompter), name
    assert not REGISTRY["race"].named and not REGISTRY["annotations"].named


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.parent.name)
def test_a_committed_recipe_reads_typed_and_writes_back_the_same_json(path):
    saved = json.loads(path.read_text())
    recipe = recipe_of(saved, str(path))
    assert isinstance(recipe, Recipe) and recipe.to_dict() == saved
    optimizer = optimizer_for(recipe)
    taught = {  # from the data
        "bootstrap": "annotations",
        "finetune": "finetune-annotations",
        "better-together": "better-together-annotations",
    }
    name = saved["optimizer"]["name"]
    assert optimizer.name == (
        taught.get(name, name) if saved.get("teacher") == "annotations" else name
    )
    settings = optimizer.read(recipe.optimizer.settings)
    unread = RaceSettings.RECORDED_BEFORE if optimizer.name == "race" else {}
    for key, value in saved["optimizer"]["settings"].items():  # as recorded, where it has it
        if optimizer.searches and key not in unread:
            assert settings.to_dict()[key] == value
    rerun = rerun_recipe(saved, "embedded-1.5b")  # what `compile --from` runs
    optimizer_for(rerun).read(rerun.optimizer.settings)


def test_a_searchs_defaults_are_the_settings_objects_and_the_race_shares_the_joints():
    joint = make_recipe(program="basic", knobs={}, dataset="x", optimizer="joint")
    assert joint.optimizer.settings == {**JointSettings().to_dict(), "demos": ["none", "bootstrap"]}
    race = make_recipe(program="basic,multihop", knobs={}, dataset="x", teacher="annotations")
    settings = RaceSettings.read(race.optimizer.settings)
    assert race.optimizer.name == "race" and settings.demos == ("none", "annotations")
    # its arms are the joint compile's grid points: drawn and tested alike
    for name in ("share", "alpha", "per_step"):
        assert getattr(settings, name) == getattr(JointSettings(), name)
    assert (settings.first, settings.drop_p, settings.eta) == (10, 0.05, 3)
    with pytest.raises(InputError, match="eta must be >= 2, got 1"):
        RaceSettings.read({"eta": 1})


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"chunk": 999}, "chunk=999 is the joint compile's"),
        ({"ties": "best"}, "ties='best' is the joint compile's"),
        ({"grid": {"k": [3, 5]}}, "grid=.* is the joint compile's"),
    ],
)
def test_a_race_refuses_the_joint_compiles_settings_it_would_not_read(given, message):
    with pytest.raises(InputError, match=message):
        RaceSettings.read(given)
    with pytest.raises(InputError, match="race: its settings are RaceSettings, not JointSettings"):
        make_recipe(
            program="basic,multihop", knobs={}, dataset="x", optimizer_settings=JointSettings()
        )
    # a recipe written before, with the values it recorded unread, still reads
    old = {**RaceSettings().to_dict(), **RaceSettings.RECORDED_BEFORE}
    assert RaceSettings.read(old) == RaceSettings()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"shares": 0.5}, "unknown setting 'shares'"),
        ({"budget": "lots"}, "field 'budget'"),
        ({"ties": "first"}, "unknown ties rule 'first'"),
    ],
)
def test_a_bad_setting_is_one_line_before_any_model_call(settings, message):
    with pytest.raises(InputError, match=message):
        JointSettings.read(settings)


def test_a_searchs_sources_default_to_its_teachers_and_the_recipe_names_them():
    """``demos`` unset: the teacher's sources, written into the recipe (written once, in
    TEACHER_DEMOS); set: kept, whichever the teacher."""

    def demos(teacher, settings=None):
        recipe = make_recipe(
            program="basic", knobs={}, dataset="x", optimizer="joint",
            teacher=teacher, optimizer_settings=settings,
        )  # fmt: skip
        return recipe.optimizer.settings["demos"]

    assert demos("model") == ["none", "bootstrap"]
    assert demos("annotations") == ["none", "annotations"]
    assert demos("model", JointSettings.of_search(grid={"demos": ["none"]})) == ["none"]
    assert JointSettings.of_search(5, {"k": [3, 5]}, "best") == JointSettings(
        budget=5, grid={"k": [3, 5]}, ties="best"
    )


def test_a_joint_budget_is_checked_between_trials_a_races_before_each_chunk():
    rows = [{"scores": {"lm_calls": 3, "cached_calls": 1}}] * 4  # 2 calls reached the model each
    trial, lane = CallBudget(10, checked="trial"), CallBudget(10)
    for budget in (trial, lane):
        budget.charge("basic", rows)
        assert budget.spent == 8
    assert trial.opens("basic", 10) and trial.covers("basic", 10)  # a trial runs to its end
    assert not lane.opens("basic", 1) and not lane.covers("basic", 1)  # 3 calls a question
    trial.charge("basic", rows[:1])
    assert not trial.opens("basic", 1)


def test_a_dspy_optimizer_is_one_entry(scripted_lm, tmp_path, monkeypatch):
    """DSPy's LabeledFewShot added as one entry: compiled, saved and recorded like the rest."""
    labeled = DSPyOptimizer(lambda metric, teacher, seed, threads, **kw: dspy.LabeledFewShot(**kw))
    monkeypatch.setitem(DSPY, "labeled", DSPyOptimizer(labeled.make, {"k": 2}))
    monkeypatch.setitem(REGISTRY, "labeled", DSPyOptimizerEntry("labeled"))
    lm, _ = scripted_lm(distracted)
    recipe = make_recipe(
        program="basic",
        knobs={"top_k": 1},
        dataset=capitals_file(tmp_path / "capitals.jsonl", 12),
        optimizer="labeled",
        model="scripted/fake",
        dev_limit=3,
    )
    result = compile_recipe(recipe, tmp_path / "art", lm=lm, progress=False)
    assert result.demos["answer"] == {"bootstrapped": 0, "labeled": 2}
    saved, _, _ = read_artifact(result.artifact)
    assert saved["optimizer"] == {"name": "labeled", "settings": {"k": 2}}


def test_tuning_is_one_entry_that_compile_from_runs_again_as_a_new_study(scripted_lm, tmp_path):
    """``netcast tune`` is the registry's ``tune``: its settings are the study's (the questions
    are the recipe's, refused there), the artifact records the trial taken, and ``compile
    --from`` with another model runs a new study through the compile every optimizer runs."""
    with pytest.raises(InputError, match="unknown setting 'train_limit'"):
        TuneSettings.read({"train_limit": 5})

    def reader(prompt):  # a trial may switch chain of thought on
        return {"reasoning": "It says so.", **distracted(prompt)}

    lm, engine = scripted_lm(reader)
    data = capitals_file(tmp_path / "capitals.jsonl", 12)
    storage = f"sqlite:///{tmp_path / 'runs' / 'tune.db'}"
    settings = TuneSettings(trials=2, objectives="f1", storage=storage)
    recipe = tuning_recipe("basic", data, lm, settings, train_limit=6, dev_limit=3)
    assert recipe.optimizer.name == "tune" and recipe.metric == "f1"
    mismatched = make_recipe(
        program="basic", knobs={}, dataset=data, optimizer="tune", metric="em",
        optimizer_settings=settings, dev_limit=3,
    )  # fmt: skip
    with pytest.raises(InputError, match="metric is em, but the study's first objective is f1"):
        run_tuning(mismatched, lm)
    assert not engine.prompts  # refused before any model call

    result = run_tuning(recipe, lm, tmp_path / "tuned")
    saved, scores, _ = read_artifact(result.artifact)
    assert saved["knobs"] == result.chosen.user_attrs["knobs"]
    assert scores["after"] == result.chosen.user_attrs["aggregate"]
    assert saved["tuning"]["study"] == recipe.optimizer.settings["study"] == result.name
    assert saved["tuning"]["trial"] == result.chosen.number and saved["compiled"] is False
    assert recipe_of(saved).to_dict() == saved

    other, _ = scripted_lm(reader)
    again, _ = recompile(
        result.artifact, "scripted/other", tmp_path / "v2", lm=other, progress=False
    )
    rerun = read_artifact(again.artifact)[0]
    assert rerun["optimizer"]["name"] == "tune" and rerun["tuning"]["study"] != result.name
    study = optuna.load_study(study_name=rerun["tuning"]["study"], storage=storage)
    taken = study.trials[rerun["tuning"]["trial"]].user_attrs["knobs"]
    assert taken.items() <= rerun["knobs"].items()  # the compile writes every knob
    studies = optuna.get_all_study_names(storage)
    assert sorted(studies) == sorted([result.name, rerun["tuning"]["study"]])
