"""The workflows on Optuna's knob tuning (``optimize.study.KnobTuning``, the registry's
``tune``): ``netcast tune`` (``tuning_recipe``, then ``run_tuning``: the study, and with an
output directory the picked trial as an artifact) and ``compile --from --retune``
(``retune_knobs``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy

from netcast.artifacts import read_artifact, save_artifact
from netcast.errors import InputError
from netcast.files import short_hash, slug
from netcast.formats import Recipe, recipe_of
from netcast.optimize.registry import Setup, get_optimizer, optimizer_for
from netcast.optimize.settings import TuneSettings
from netcast.optimize.study import KnobTuning, StudyResult, parse_objectives
from netcast.optimize.workflow import (
    index_entry,
    make_recipe,
    prepare_recipe,
    recorded_lm_kwargs,
)
from netcast.session import retriever_recipe


def tuning_recipe(
    program: str, dataset: str, lm: dspy.BaseLM, settings: TuneSettings, **recipe: Any
) -> Recipe:
    """``netcast tune``'s recipe: ``program`` on ``dataset`` tuned by ``settings`` (its study
    named after the program, dataset, model and objectives where it names none), the trials
    scored by the first objective; ``recipe``: ``make_recipe``'s other fields (splits, limits,
    retriever, index, seed)."""
    if settings.study is None:
        name = f"{program}-{slug(dataset)}-{slug(lm.model)}-{settings.objectives}"
        settings = TuneSettings.read({**settings.to_dict(), "study": name})
    metric = parse_objectives(settings.objectives)[0]  # refused here, before any model call
    model = getattr(lm, "embedded_name", None) or lm.model
    return make_recipe(
        program=program,
        knobs={},
        dataset=dataset,
        optimizer="tune",
        optimizer_settings=settings,
        metric=metric,
        model=model,
        **recipe,
    )


@dataclass
class TuneResult(StudyResult):
    artifact: Path | None = None


def run_tuning(
    recipe: Recipe | dict[str, Any], lm: dspy.BaseLM, out: str | Path | None = None
) -> TuneResult:
    """Run a tuning recipe's study (resumable, distributable) and, with ``out``, save the
    trial its pick rule takes as an artifact: its program at the trial's knobs (compiled as
    the trials were), the recipe with those knobs and the study (``tuning``)."""
    recipe = recipe_of(recipe)
    entry = optimizer_for(recipe)
    if entry.name != "tune":
        raise InputError(f"run_tuning runs a recipe of optimizer tune, not {entry.name}")
    settings = entry.read(recipe.optimizer.settings)
    splits = prepare_recipe(
        recipe, lm, lambda train, dev: entry.check(settings, recipe, train.examples)
    )
    setup = Setup(lm, metric=recipe.metric, seed=recipe.seed, key=short_hash(recipe.to_dict()))
    tele = entry.build(settings, setup)
    student = entry.student(recipe, splits.retriever, lm)
    with dspy.context(lm=lm):
        program = tele.compile(student, trainset=splits.train.examples, valset=splits.dev.examples)
    result = TuneResult(**vars(tele.result))
    if out is not None:
        index = recipe.retriever.saved_index
        recipe = recipe.updated(
            **entry.record(recipe, tele),
            retriever={**retriever_recipe(splits.retriever, splits.train), **index_entry(index)},
            model={**recipe.to_dict()["model"], "lm_kwargs": recorded_lm_kwargs(recipe, lm)},
        )
        scores = {"before": None, "after": result.chosen.user_attrs.get("aggregate")}
        result.artifact = save_artifact(out, program, recipe.to_dict(), scores)
    return result


def retune_knobs(
    source: str | Path, lm: dspy.BaseLM, trials: int, select_on: str | None = None
) -> dict[str, Any]:
    """Re-tune ``source``'s knobs for ``lm`` (in-memory study, by the recipe's metric), scored
    on the dev questions, or on held-out training questions when the recipe (or ``select_on``)
    selects on ``train``."""
    recipe = recipe_of(read_artifact(source)[0])
    if recipe.metric == "judge":  # refused before any model call
        raise InputError(
            f"{source}: the recipe's metric is judge; --retune scores questions without an "
            "LLM judge (every one would score 0): recompile without --retune"
        )
    splits = prepare_recipe(recipe, lm)
    settings = TuneSettings(
        trials=trials, objectives=recipe.metric, storage=None, pick_rule="best-quality"
    )
    tele = KnobTuning(
        settings,
        lm=lm,
        seed=0,
        select_on=select_on or recipe.dataset.select_on,
        study=f"retune-{Path(source).name}",
    )
    student = get_optimizer("tune").student(recipe, splits.retriever, lm)
    with dspy.context(lm=lm):
        tele.compile(student, trainset=splits.train.examples, valset=splits.dev.examples)
    return tele.result.chosen.user_attrs["knobs"]
