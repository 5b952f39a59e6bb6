"""The optimizer registry: every optimizer a DSPy teleprompter built from typed settings whose
defaults are written once; recipes typed in memory and written back as they were read."""

import json
from pathlib import Path

import dspy
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
from netcast.optimize.settings import JointSettings, RaceSettings
from netcast.optimize.workflow import compile_recipe, make_recipe, rerun_recipe

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
    taught = {"bootstrap": "annotations", "finetune": "finetune-annotations"}  # from the data
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
