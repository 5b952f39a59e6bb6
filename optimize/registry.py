"""Every optimizer a compile can run, in one registry: each ``--optimizer`` name (DSPy's own
optimizers and the joint compile), the annotation teacher (``--teacher annotations``) and the
strategy race (``--program a,b`` or ``auto``), with its settings type, the teleprompter it
builds, its student, the checks made before any model call, and what it adds to the recipe.

A compile (``optimize.workflow.compile_recipe``) looks its optimizer up here and runs it the
same way whichever it is; a new optimizer is one ``Optimizer`` subclass, registered."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspy.teleprompt import Teleprompter

from netcast.errors import InputError
from netcast.formats import Recipe
from netcast.inputs import check_validation_fold
from netcast.optimize import annotation_finetune, finetune
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
from netcast.optimize.race import StrategyRace, candidates, check_race, is_race, race_programs
from netcast.optimize.settings import (
    AnnotationSettings,
    DSPySettings,
    JointSettings,
    RaceSettings,
    SearchSettings,
    Settings,
    TuneSettings,
)
from netcast.optimize.study import KnobTuning
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


class Optimizer(ABC):
    """One optimizer of the registry; a subclass says what its own optimizer does differently.

    ``read`` turns a recipe's ``optimizer.settings`` into the settings object (``to_dict``
    writes it back); ``build(settings, setup)`` makes the teleprompter; ``student(recipe,
    retriever, lm)`` the program (or candidates) it compiles; ``check(settings, recipe,
    trainset)`` refuses bad input before any model call; ``record(recipe, teleprompter)`` is
    what the recipe gains after the compile; ``workspace(out, key)``, where its unfinished
    work waits beside the artifact ``out`` until ``finished(teleprompter)`` (None: it leaves
    none). ``named``: a ``--optimizer`` choice (the others are chosen by ``--teacher`` or
    ``--program``); ``searches``: it searches knobs and demonstration sources (the joint
    compile, the race: ``--budget``, ``--grid`` and ``--ties`` configure it, and its sources
    default to the ones ``--teacher`` names). ``check_model(lm, settings)`` refuses a model
    it cannot run with (or this machine cannot run it with), before any model call;
    ``files(teleprompter)``, the files the artifact holds beside the program (by their name
    there). ``settings_type``: its settings object, which the command line and a spec build
    (``SearchSettings.of_search``, ``TrainingSettings.of_flat``) and the recipe stores."""

    name: str = ""
    named: bool = True
    searches: bool = False
    settings_type: type[Settings] = Settings

    def read(self, values: Mapping[str, Any]) -> Any:
        """A recipe's ``optimizer.settings`` as this optimizer's settings object."""
        return self.settings_type.read(values)

    @abstractmethod
    def build(self, settings: Any, setup: Setup) -> Teleprompter:
        """The teleprompter these settings configure."""

    def student(self, recipe: Recipe, retriever: Any, lm: Any) -> Any:
        return build_program(recipe.program, retriever, recipe.knobs, lm=lm)

    def check(self, settings: Any, recipe: Recipe, trainset: Sequence) -> None:
        return None

    def record(self, recipe: Recipe, tele: Any) -> dict[str, Any]:
        return {}

    def workspace(self, out: Path, key: str) -> Path | None:
        return None

    def finished(self, tele: Any) -> bool:
        return True

    def check_model(self, lm: Any, settings: Any) -> None:
        return None

    def files(self, tele: Any) -> dict[str, Path]:
        return {}


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
    ``finetune`` (``better-together``) with it the annotation finetune (better-together)."""
    return get_optimizer(entry_name(recipe.optimizer.name, recipe.teacher))


def compile_optimizer(program: str, optimizer: str, teacher: str) -> Optimizer:
    """The entry a compile of ``program`` with ``--optimizer`` and ``--teacher`` runs (and
    whose settings its recipe holds): the race for several programs or ``auto``, the
    annotation finetune (and better-together) for ``finetune`` (``better-together``) with
    ``--teacher annotations``; a bootstrap from annotations keeps the bootstrap's settings
    (``optimizer_for`` runs the teacher)."""
    if is_race(program):
        return get_optimizer("race")
    if teacher == "annotations" and optimizer in ("finetune", "better-together"):
        return get_optimizer(entry_name(optimizer, teacher))
    return get_optimizer(optimizer)


def options_settings(
    entry: Optimizer,
    budget: int | None = None,
    grid: Mapping[str, list[Any]] | None = None,
    ties: str | None = None,
    flat: Mapping[str, Any] | None = None,
) -> Settings | None:
    """The settings object a compile's options give ``entry`` (``netcast compile``'s and a
    spec's alike): a search's from its budget, grid and ties, a weight tuning's from its flat
    finetune settings; None (the defaults) for the others."""
    kind = entry.settings_type
    if issubclass(kind, SearchSettings):
        return kind.of_search(budget, grid, ties)
    if issubclass(kind, finetune.TrainingSettings):
        return kind.of_flat(flat or {})
    return None


def entry_name(optimizer: str, teacher: str) -> str:
    """The registry entry ``--optimizer`` and ``--teacher`` choose."""
    if teacher == "annotations":
        return {
            "bootstrap": "annotations",
            "finetune": "finetune-annotations",
            "better-together": "better-together-annotations",
        }.get(optimizer, optimizer)
    return optimizer


class DSPyOptimizerEntry(Optimizer):
    """DSPy's optimizer ``name`` (``optimize.compile.DSPY``): its keyword arguments, defaults
    filled in, and DSPy's own teleprompter (``DSPyCompile``)."""

    settings_type = DSPySettings

    def __init__(self, name: str):
        self.name = name

    def read(self, values: Mapping[str, Any]) -> DSPySettings:
        return dspy_settings(self.name, values)

    def build(self, settings: Any, setup: Setup) -> Teleprompter:
        return DSPyCompile(
            self.name,
            settings,
            metric=setup.metric,
            teacher_lm=setup.teacher_lm,
            seed=setup.seed,
            threads=setup.threads,
            select_on=setup.select_on,
            judge_lm=setup.judge_lm,
        )

    def check(self, settings: Any, recipe: Recipe, trainset: Sequence) -> None:
        selection_sets(self.name, trainset, None, recipe.dataset.select_on)


class Annotations(Optimizer):
    """The annotation teacher (``--teacher annotations``): demonstrations from the data's own
    annotations, no model call. The recipe's settings are the bootstrap's (its --optimizer);
    the teacher takes none."""

    name, named = "annotations", False
    settings_type = AnnotationSettings

    def read(self, values: Mapping[str, Any]) -> AnnotationSettings:
        return AnnotationSettings()

    def build(self, settings: AnnotationSettings, setup: Setup) -> AnnotationTeacher:
        return AnnotationTeacher(settings, seed=setup.seed)


def _check_fold(what: str, settings: SearchSettings, trainset: Sequence) -> None:
    """Warn when the held-out training questions that score the candidates (every training
    question when no demonstrations are drawn) are too few for the paired test."""
    if set(settings.demos) == {"none"}:
        fold = list(trainset)
    elif len(trainset) < 2:
        return  # refused by the compile itself (hold_out), naming the count
    else:
        fold = hold_out(trainset, settings.share)[1]
    check_validation_fold(what, fold, len(trainset), settings.alpha)


class Joint(Optimizer):
    """The joint compile: knobs and demonstration sources searched together. Its finished
    trials wait in a workspace (an Optuna SQLite file beside the artifact) until every grid
    point was tried: a killed compile, or one its budget stopped, rerun with the same recipe
    (any budget, any rule among ties) goes on where it stopped."""

    name, searches = "joint", True
    settings_type = JointSettings

    def build(self, settings: JointSettings, setup: Setup) -> JointCompile:
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

    def check(self, settings: JointSettings, recipe: Recipe, trainset: Sequence) -> None:
        settings.check()
        check_search(recipe.program, recipe.knobs, dict(settings.grid), settings.demos)
        _check_fold("joint compile", settings, trainset)

    def record(self, recipe: Recipe, tele: JointCompile) -> dict[str, Any]:
        joint = tele.result
        entry = {"fixed": recipe.knobs, "chosen_demos": joint.demos}
        entry |= {"versus_defaults": joint.versus_defaults, "untried": joint.untried}
        return {"joint": {**entry, "trials": joint.trials}}

    def workspace(self, out: Path, key: str) -> Path:
        return out.parent / f".{out.name}.joint-trials.db"

    def finished(self, tele: JointCompile) -> bool:
        return not tele.result.untried


class Race(Optimizer):
    """The strategy race (``--program a,b`` or ``auto``): its candidates are every strategy
    named; the recipe it leaves is the winner's (its program and the knobs it held), with the
    race. Its arms' rows wait in a workspace beside the artifact until the race is complete."""

    name, named, searches = "race", False, True
    settings_type = RaceSettings

    def build(self, settings: RaceSettings, setup: Setup) -> StrategyRace:
        return StrategyRace(
            settings,
            lm=setup.lm,
            metric=setup.metric,
            teacher_lm=setup.teacher_lm,
            seed=setup.seed,
            workdir=setup.workspace,
            report=setup.report,
        )

    def student(self, recipe: Recipe, retriever: Any, lm: Any) -> Any:
        return candidates(recipe.program, retriever, recipe.knobs, lm)

    def check(self, settings: RaceSettings, recipe: Recipe, trainset: Sequence) -> None:
        settings.check()
        programs = race_programs(recipe.program)
        check_race(
            programs, recipe.knobs, settings.demos, settings.budget, settings.first, settings.drop_p
        )
        _check_fold("strategy race", settings, trainset)

    def record(self, recipe: Recipe, tele: StrategyRace) -> dict[str, Any]:
        raced = tele.result
        race = {"programs": recipe.program, "fixed": recipe.knobs, "choice": raced.choice}
        race |= {"spent": raced.spent, "budget": raced.budget, "seconds": round(raced.seconds, 1)}
        return {
            "program": raced.program_name,
            "race": {**race, "table": raced.table},
            "knobs": raced.held,
        }

    def workspace(self, out: Path, key: str) -> Path:
        return out.parent / f".{out.name}.race-{key}"

    def finished(self, tele: StrategyRace) -> bool:
        return tele.result.complete


class Tune(Optimizer):
    """``netcast tune``: the program's knobs searched by an Optuna study (``KnobTuning``);
    its study waits in its own storage (the settings' URL), resumed by the same command. The
    recipe it leaves holds the knobs of the trial taken and the study (``tuning``; the
    storage's password is not written)."""

    name, named = "tune", False
    settings_type = TuneSettings

    def build(self, settings: TuneSettings, setup: Setup) -> KnobTuning:
        return KnobTuning(
            settings,
            lm=setup.lm,
            seed=setup.seed,
            select_on=setup.select_on,
            study=f"tune-{setup.key}",
            progress=setup.progress,
        )

    def check(self, settings: TuneSettings, recipe: Recipe, trainset: Sequence) -> None:
        objectives = KnobTuning(settings).check()
        if objectives[0] != recipe.metric:
            raise InputError(
                f"tune: the recipe's metric is {recipe.metric}, but the study's first "
                f"objective is {objectives[0]}: make them one"
            )
        if settings.compile_each:
            selection_sets(settings.optimizer, trainset, None, "train")

    def record(self, recipe: Recipe, tele: KnobTuning) -> dict[str, Any]:
        result = tele.result
        stored = {**tele.settings.to_dict(), "storage": result.storage, "study": result.name}
        tuning = {"study": result.name, "storage": result.storage, "trial": result.chosen.number}
        tuning |= {"pick": tele.settings.pick_rule, "objectives": result.objectives}
        return {
            "knobs": result.chosen.user_attrs["knobs"],
            "compiled": tele.settings.compile_each,
            "optimizer": {"name": self.name, "settings": stored},
            "tuning": tuning,
        }


class WeightTuning(Optimizer):
    """Tuning the model's weights (a LoRA adapter the artifact holds): refused before any
    model call for a model this machine cannot train; the recipe records what was trained."""

    def check(self, settings: Any, recipe: Recipe, trainset: Sequence) -> None:
        finetune.check(settings, recipe, trainset)

    def record(self, recipe: Recipe, tele: Any) -> dict[str, Any]:
        return finetune.record(recipe, tele)

    def check_model(self, lm: Any, settings: Any) -> None:
        finetune.check_model(lm, settings)

    def files(self, tele: Any) -> dict[str, Path]:
        return finetune.adapter_files(tele)


class Finetune(WeightTuning):
    """DSPy's BootstrapFinetune (``finetune``: the model tuned on its passing traces) or
    BetterTogether (``better-together``: prompts, then weights, then prompts)."""

    def __init__(self, better_together: bool):
        self.name = "better-together" if better_together else "finetune"
        self.settings_type = (
            finetune.BetterTogetherSettings if better_together else finetune.FinetuneSettings
        )

    def build(self, settings: finetune.FinetuneSettings, setup: Setup) -> Teleprompter:
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


class AnnotationFinetune(WeightTuning):
    """``--optimizer finetune --teacher annotations``: the model tuned on examples built from
    the data's annotations (no model call to make them)."""

    name, named = "finetune-annotations", False
    settings_type = annotation_finetune.AnnotationFinetuneSettings

    def build(self, settings: Any, setup: Setup) -> Teleprompter:
        return annotation_finetune.AnnotationFinetune(
            settings, seed=setup.seed, train_threads=setup.train_threads, progress=setup.progress
        )


class AnnotationBetterTogether(WeightTuning):
    """``--optimizer better-together --teacher annotations``: BetterTogether's prompts and
    weights both from the data's annotations (annotation demonstrations, the annotation
    finetune), the candidates scored by the compile's metric."""

    name, named = "better-together-annotations", False
    settings_type = annotation_finetune.AnnotationBetterTogetherSettings

    def build(self, settings: Any, setup: Setup) -> Teleprompter:
        return annotation_finetune.AnnotationBetterTogether(
            settings,
            metric=make_metric(setup.metric, setup.judge_lm),
            seed=setup.seed,
            threads=setup.threads,
            select_on=setup.select_on,
            train_threads=setup.train_threads,
            progress=setup.progress,
        )


for _name in DSPY:
    register(DSPyOptimizerEntry(_name))
for _optimizer in (Annotations(), Joint(), Race(), Tune(), Finetune(False), Finetune(True)):
    register(_optimizer)
register(AnnotationFinetune())
register(AnnotationBetterTogether())
