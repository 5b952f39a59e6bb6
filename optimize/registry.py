"""Every optimizer a compile can run, in one registry: each ``--optimizer`` name (DSPy's own
optimizers and the joint compile), the annotation teacher (``--teacher annotations``) and the
strategy race (``--program a,b`` or ``auto``), with its settings type, the teleprompter it
builds, its student, the checks made before any model call, and what it adds to the recipe.

A compile (``optimize.workflow.compile_recipe``) looks its optimizer up here and runs it the
same way whichever it is; a new optimizer is one ``register(Optimizer(...))``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspy.teleprompt import Teleprompter

from netcast.errors import InputError
from netcast.formats import Recipe
from netcast.inputs import check_validation_fold
from netcast.optimize import finetune
from netcast.optimize.annotations import AnnotationTeacher
from netcast.optimize.compile import (
    DSPY,
    DSPyCompile,
    dspy_settings,
    hold_out,
    make_metric,
    selection_sets,
)
from netcast.optimize.joint import JointCompile, check_search, joint_study
from netcast.optimize.race import StrategyRace, candidates, check_race, race_programs
from netcast.optimize.settings import AnnotationSettings, JointSettings, RaceSettings
from netcast.session import build_program


@dataclass(frozen=True)
class Setup:
    """What a compile gives the optimizer it builds: the model and the teacher model, the
    metric (and ``judge_lm``, the judge of ``judge``), the seed, the threads (``threads``:
    questions at once; ``train_threads``: a finetune's CPU threads, None: the training
    settings' or every core), where candidates are selected (``select_on``), the
    ``workspace`` where unfinished work waits beside the artifact (``Optimizer.workspace``) and
    ``key`` (what its trials mean, for naming them), and who hears of its progress."""

    lm: Any
    teacher_lm: Any = None
    metric: str = "f1"
    seed: int = 0
    threads: int = 1
    select_on: str = "dev"
    workspace: Path | None = None
    key: str = ""
    progress: bool = True
    report: Callable[[str, dict[str, Any]], None] | None = None
    train_threads: int | None = None
    judge_lm: Any = None  # --metric judge's judge (None: the compiled model)


def _one_program(recipe: Recipe, retriever: Any, lm: Any) -> Any:
    return build_program(recipe.program, retriever, recipe.knobs, lm=lm)


def _no_check(settings: Any, recipe: Recipe, trainset: Sequence) -> None:
    return None


@dataclass(frozen=True)
class Optimizer:
    """One optimizer of the registry.

    ``read`` turns a recipe's ``optimizer.settings`` into the settings object (``to_dict``
    writes it back); ``build(settings, setup)`` makes the teleprompter; ``student(recipe,
    retriever, lm)`` the program (or candidates) it compiles; ``check(settings, recipe,
    trainset)`` refuses bad input before any model call; ``record(recipe, teleprompter)`` is
    what the recipe gains after the compile; ``workspace(out, key)``, where its unfinished
    work waits beside the artifact ``out`` until ``finished(teleprompter)``. ``named``: a
    ``--optimizer`` choice (the others are chosen by ``--teacher`` or ``--program``);
    ``searches``: it searches knobs and demonstration sources (the joint compile, the race:
    ``--budget``, ``--grid`` and ``--ties`` configure it, and its sources default to the ones
    ``--teacher`` names). ``check_model(lm, settings)`` refuses a model it cannot run with
    (or this machine cannot run it with), before any model call; ``files(teleprompter)``, the
    files the artifact holds beside the program (by their name there)."""

    name: str
    read: Callable[[Mapping[str, Any]], Any]
    build: Callable[[Any, Setup], Teleprompter]
    named: bool = True
    searches: bool = False
    student: Callable[[Recipe, Any, Any], Any] = _one_program
    check: Callable[[Any, Recipe, Sequence], None] = _no_check
    record: Callable[[Recipe, Any], dict[str, Any]] = lambda recipe, tele: {}
    workspace: Callable[[Path, str], Path] | None = None
    finished: Callable[[Any], bool] = lambda tele: True
    check_model: Callable[[Any, Any], None] = lambda lm, settings: None
    files: Callable[[Any], dict[str, Path]] = lambda tele: {}


REGISTRY: dict[str, Optimizer] = {}


def register(optimizer: Optimizer) -> Optimizer:
    REGISTRY[optimizer.name] = optimizer
    return optimizer


def optimizer_names() -> tuple[str, ...]:
    """The ``--optimizer`` choices."""
    return tuple(name for name, o in REGISTRY.items() if o.named)


def get_optimizer(name: str) -> Optimizer:
    if name not in REGISTRY:
        choices = ", ".join(optimizer_names())
        raise InputError(f"unknown optimizer {name!r}; choose one of {choices}")
    return REGISTRY[name]


def optimizer_for(recipe: Recipe) -> Optimizer:
    """The optimizer a recipe runs. Recipes name the annotation teacher as the optimizer
    ``bootstrap`` with ``teacher = "annotations"`` (``--teacher annotations``), and
    ``finetune`` with it the annotation finetune."""
    return get_optimizer(entry_name(recipe.optimizer.name, recipe.teacher))


def entry_name(optimizer: str, teacher: str) -> str:
    """The registry entry ``--optimizer`` and ``--teacher`` choose."""
    if teacher == "annotations":
        return {"bootstrap": "annotations", "finetune": "finetune-annotations"}.get(
            optimizer, optimizer
        )
    return optimizer


# --- DSPy's optimizers --------------------------------------------------------------------------


def dspy_optimizer(name: str) -> Optimizer:
    """DSPy's optimizer ``name`` (``optimize.compile.DSPY``) as a registry entry."""

    def build(settings: Any, setup: Setup) -> Teleprompter:
        return DSPyCompile(
            name,
            settings,
            metric=setup.metric,
            teacher_lm=setup.teacher_lm,
            seed=setup.seed,
            threads=setup.threads,
            select_on=setup.select_on,
            judge_lm=setup.judge_lm,
        )

    def check(settings: Any, recipe: Recipe, trainset: Sequence) -> None:
        selection_sets(name, trainset, None, recipe.dataset.select_on)

    return Optimizer(name, lambda values: dspy_settings(name, values), build, check=check)


for _name in DSPY:
    register(dspy_optimizer(_name))


# --- the annotation teacher ---------------------------------------------------------------------

register(
    Optimizer(
        "annotations",
        # the recipe's settings are the bootstrap's (its --optimizer); the teacher takes none
        read=lambda values: AnnotationSettings(),
        build=lambda settings, setup: AnnotationTeacher(settings, seed=setup.seed),
        named=False,
    )
)


# --- the joint compile --------------------------------------------------------------------------


def _joint(settings: JointSettings, setup: Setup) -> JointCompile:
    # finished trials are kept in ``setup.workspace`` until the artifact is written with
    # every grid point tried: a killed compile, or one its budget stopped, rerun with the
    # same recipe (any budget, any rule among ties) goes on where it stopped
    study = None
    if setup.workspace is not None:
        setup.workspace.parent.mkdir(parents=True, exist_ok=True)
        study = joint_study(f"sqlite:///{setup.workspace}", f"joint-{setup.key}")
    return JointCompile(
        settings,
        lm=setup.lm,
        metric=setup.metric,
        teacher_lm=setup.teacher_lm,
        seed=setup.seed,
        study=study,
        progress=setup.progress,
    )


def _check_fold(what: str, settings: JointSettings, trainset: Sequence) -> None:
    """Warn when the held-out training questions that score the candidates (every training
    question when no demonstrations are drawn) are too few for the paired test."""
    if set(settings.demos) == {"none"}:
        fold = list(trainset)
    elif len(trainset) < 2:
        return  # refused by the compile itself (hold_out), naming the count
    else:
        fold = hold_out(trainset, settings.share)[1]
    check_validation_fold(what, fold, len(trainset), settings.alpha)


def _check_joint(settings: JointSettings, recipe: Recipe, trainset: Sequence) -> None:
    settings.check()
    check_search(recipe.program, recipe.knobs, dict(settings.grid), settings.demos)
    _check_fold("joint compile", settings, trainset)


def _record_joint(recipe: Recipe, tele: JointCompile) -> dict[str, Any]:
    joint = tele.result
    entry = {"fixed": recipe.knobs, "chosen_demos": joint.demos}
    entry |= {"versus_defaults": joint.versus_defaults, "untried": joint.untried}
    return {"joint": {**entry, "trials": joint.trials}}


register(
    Optimizer(
        "joint",
        read=JointSettings.read,
        build=_joint,
        check=_check_joint,
        record=_record_joint,
        searches=True,
        workspace=lambda out, key: out.parent / f".{out.name}.joint-trials.db",
        finished=lambda tele: not tele.result.untried,
    )
)


# --- the strategy race --------------------------------------------------------------------------


def _race(settings: RaceSettings, setup: Setup) -> StrategyRace:
    return StrategyRace(
        settings,
        lm=setup.lm,
        metric=setup.metric,
        teacher_lm=setup.teacher_lm,
        seed=setup.seed,
        workdir=setup.workspace,
        report=setup.report,
    )


def _check_race(settings: RaceSettings, recipe: Recipe, trainset: Sequence) -> None:
    if settings.grid:
        raise InputError("--grid names one program's values; a race searches each one's grid")
    settings.check()
    programs = race_programs(recipe.program)
    check_race(
        programs,
        recipe.knobs,
        settings.demos,
        settings.budget,
        settings.first,
        settings.drop_p,
    )
    _check_fold("strategy race", settings, trainset)


def _record_race(recipe: Recipe, tele: StrategyRace) -> dict[str, Any]:
    """The recipe of the winner (its program and the knobs it held), with the race."""
    raced = tele.result
    race = {"programs": recipe.program, "fixed": recipe.knobs, "choice": raced.choice}
    race |= {"spent": raced.spent, "budget": raced.budget, "seconds": round(raced.seconds, 1)}
    return {
        "program": raced.program_name,
        "race": {**race, "table": raced.table},
        "knobs": raced.held,
    }


register(
    Optimizer(
        "race",
        read=RaceSettings.read,
        build=_race,
        named=False,
        student=lambda recipe, retriever, lm: candidates(
            recipe.program, retriever, recipe.knobs, lm
        ),
        check=_check_race,
        record=_record_race,
        searches=True,
        workspace=lambda out, key: out.parent / f".{out.name}.race-{key}",
        finished=lambda tele: tele.result.complete,
    )
)


# --- tuning the model's weights: DSPy's BootstrapFinetune and BetterTogether --------------------


def _tuner(better_together: bool) -> Optimizer:
    def build(settings: finetune.FinetuneSettings, setup: Setup) -> finetune.FinetuneCompile:
        return finetune.FinetuneCompile(
            settings,
            metric=make_metric(setup.metric, setup.judge_lm),
            teacher_lm=setup.teacher_lm,
            seed=setup.seed,
            threads=setup.threads,
            select_on=setup.select_on,
            train_threads=setup.train_threads,
            progress=setup.progress,
        )

    return Optimizer(
        "better-together" if better_together else "finetune",
        read=lambda values: finetune.read_entry(values, better_together),
        build=build,
        check=finetune.check,
        record=finetune.record,
        check_model=finetune.check_model,
        files=finetune.adapter_files,
    )


register(_tuner(better_together=False))
register(_tuner(better_together=True))

register(
    Optimizer(
        "finetune-annotations",
        read=finetune.AnnotationFinetuneSettings.read,
        build=lambda settings, setup: finetune.AnnotationFinetune(
            settings, seed=setup.seed, train_threads=setup.train_threads, progress=setup.progress
        ),
        named=False,
        check=finetune.check,
        record=finetune.record,
        check_model=finetune.check_model,
        files=finetune.adapter_files,
    )
)
