"""The workflows behind the command line, as functions the Python API calls too: evaluate a
program on a dataset into a resumable run directory; compile a recipe (score on dev, compile on
train, score again, save an artifact, load it back); recompile an artifact with another model
(its knobs re-tuned first by ``netcast.optimize.tune.retune_knobs`` when asked). Tuning knobs
with Optuna is ``netcast.optimize.tune``.

Every function takes the LM it runs with; it runs under ``dspy.context(lm=...)`` and never
changes DSPy's global settings."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy

from netcast.artifacts import read_artifact, save_artifact
from netcast.data import load_dataset
from netcast.errors import InputError, ModelCallError
from netcast.evaluation.evaluate import EvalResult, evaluate
from netcast.files import short_hash, slug
from netcast.formats import Recipe, recipe_of
from netcast.inputs import check_split_overlap
from netcast.models import decoding_info, make_lm, model_name, token_counter
from netcast.models.factory import check_questions, endpoint, preflight
from netcast.optimize.compile import demo_report
from netcast.optimize.race import is_race
from netcast.optimize.registry import Setup, compile_optimizer, optimizer_for
from netcast.optimize.settings import UNJUDGED, Settings
from netcast.session import (
    build_program,
    gold_by_title,
    load,
    open_retriever,
    retriever_recipe,
)

TEACHERS = ("model", "annotations")


def index_entry(index: str | Path | None) -> dict[str, str]:
    """A recipe's saved index, recorded as an absolute path (recompiled from anywhere)."""
    return {"saved_index": str(Path(index).resolve())} if index else {}


def _complete(result: EvalResult, lm: Any, what: str) -> dict[str, Any]:
    """``result``'s aggregate if every question ran, else ``ModelCallError`` (one line)."""
    if result.errors:
        first_id, first = next(iter(result.errors.items()))
        raise ModelCallError(
            f"{what}: {len(result.errors)} question(s) failed calling {endpoint(lm)} "
            f"(first, {first_id}: {first}); no artifact was written"
        )
    return result.aggregate


@dataclass
class Splits:
    """What every workflow starts from: the training and dev questions and the retriever."""

    train: Any
    dev: Any
    retriever: Any


def prepare(
    dataset: str,
    lm: Any,
    *,
    train_split: str = "train",
    dev_split: str = "dev",
    train_limit: int | None = None,
    dev_limit: int | None = None,
    index: str | Path | None = None,
    retriever: str = "bm25",
    check: Callable[[Any, Any], None] | None = None,
) -> Splits:
    """The preamble every workflow shares: both splits loaded (a saved ``index`` answers a
    dataset without passages), ``check(train, dev)`` run (the workflow's own argument checks, before
    an index is built), the retriever opened, the dev questions' gold passages mapped to the
    index's titles, every question checked against ``lm``'s window and ``lm`` preflighted:
    bad input and an unreachable model stop here, before any question."""
    needs = {"corpus_required": not index}
    train = load_dataset(dataset, train_split, train_limit, **needs)
    dev = load_dataset(dataset, dev_split, dev_limit, **needs)
    check_split_overlap(train, dev)
    if check is not None:
        check(train, dev)
    opened = open_retriever(train, index, kind=retriever, counter=token_counter(lm))
    if index:
        gold_by_title(dev.examples, opened.corpus)
    check_questions([*train.questions(), *dev.questions()], lm)
    preflight(lm)
    return Splits(train, dev, opened)


def prepare_recipe(
    recipe: Recipe, lm: Any, check: Callable[[Any, Any], None] | None = None
) -> Splits:
    """``prepare`` for the dataset, splits, limits and retriever a recipe names."""
    data = recipe.dataset
    return prepare(
        data.name,
        lm,
        train_split=data.train_split,
        dev_split=data.dev_split,
        train_limit=data.train_limit,
        dev_limit=data.dev_limit,
        index=recipe.retriever.saved_index,
        retriever=recipe.retriever.kind,
        check=check,
    )


@dataclass
class CompileResult:
    artifact: Path
    before: dict[str, Any]
    after: dict[str, Any]
    seconds: float
    reloaded: dict[str, Any] | None = None
    demos: dict[str, dict[str, int]] | None = None  # per predictor: bootstrapped, labeled
    trials: list[dict[str, Any]] | None = None  # the joint compile's trials
    knobs: dict[str, Any] | None = None  # the compiled program's knobs
    versus_defaults: dict[str, Any] | None = None  # the joint compile's best vs its defaults
    untried: int = 0  # the joint compile's grid points its budget of calls left untried
    race: dict[str, Any] | None = None  # the strategy race: its table, choice and calls
    # per dev question (by id): F1 before and after, for the paired difference
    dev_f1: tuple[dict[str, float], dict[str, float]] | None = None

    @classmethod
    def of(cls, artifact: Path, run: Any, recipe: Recipe, reloaded: dict[str, Any] | None):
        """A finished compile's result: its run (``_Run``) and the recipe it saved."""
        joint = recipe.joint or {}
        return cls(
            artifact,
            run.before,
            run.after,
            run.seconds,
            reloaded,
            demo_report(run.program),
            joint.get("trials"),
            run.program.knobs.model_dump(),
            joint.get("versus_defaults"),
            joint.get("untried", 0),
            recipe.race,
            run.dev_f1,
        )


def check_passages(index: str | Path | None, corpus: str | Path | None) -> None:
    """One source of the passages searched: a saved ``index`` or a ``corpus`` file, not both."""
    if index is not None and corpus is not None:
        raise InputError(
            f"--corpus {corpus} and --index {index} both give the passages searched: drop one "
            "(an index is built from its documents with netcast index --corpus)"
        )


def run_evaluation(
    program: str,
    dataset: str,
    lm: dspy.BaseLM,
    *,
    split: str = "dev",
    limit: int | None = None,
    retriever: str = "bm25",
    index: str | Path | None = None,
    corpus: str | Path | None = None,
    knobs: dict[str, Any] | None = None,
    threads: int = 1,
    judge_lm: dspy.BaseLM | None = None,
    run_dir: str | Path | None = None,
    max_errors: int = 3,
    progress: bool = True,
) -> EvalResult:
    """Evaluate ``program`` on ``dataset``/``split`` with ``lm`` into ``run_dir`` (default:
    ``runs/<program>-<dataset>-<split>-<retriever>-<model>-<hash of the settings>``);
    rerunning the same evaluation resumes it. ``index`` and ``corpus`` both give the passages
    searched: one of them, not both."""
    check_passages(index, corpus)
    data = load_dataset(dataset, split, limit, corpus, corpus_required=index is None)
    check_questions(data.questions(), lm)
    index_obj = open_retriever(data, index, retriever, token_counter(lm))
    prog = build_program(program, index_obj, knobs, lm=lm)
    preflight(lm)  # a missing key or an unknown model stops here, before any question
    if judge_lm is not None and judge_lm is not lm:
        preflight(judge_lm)
    info = {
        "program": program,
        "knobs": prog.knobs.model_dump(),
        "dataset": dataset,
        "split": split,
        "model": lm.model,
        **decoding_info(lm),
        "retriever": index_obj.kind,
        "corpus_hash": index_obj.corpus.content_hash(),
        "judge_model": getattr(judge_lm, "model", None),
    }
    name = "-".join(
        [program, slug(dataset), split, index_obj.kind, slug(lm.model), short_hash(info)]
    )
    with dspy.context(lm=lm):
        return evaluate(
            prog,
            data.examples,
            run_dir=Path(run_dir) if run_dir else Path("runs") / name,
            run_info=info,
            threads=threads,
            judge_lm=judge_lm,
            max_errors=max_errors,
            progress=progress,
        )


def make_recipe(
    *,
    program: str,
    knobs: dict[str, Any],
    dataset: str,
    train_split: str = "train",
    dev_split: str = "dev",
    train_limit: int | None = None,
    dev_limit: int | None = None,
    optimizer: str = "bootstrap",
    optimizer_settings: Settings | None = None,
    metric: str = "f1",
    model: str | None = None,
    teacher_model: str | None = None,
    retriever: str = "bm25",
    seed: int = 0,
    select_on: str = "dev",
    teacher: str = "model",
    index: str | Path | None = None,
    judge_model: str | None = None,
) -> Recipe:
    """A compile's recipe. ``optimizer_settings``: the settings object of the optimizer the
    compile runs (``registry.compile_optimizer``'s ``settings_type``; None: its defaults; a
    search's demonstration sources, unset, are the teacher's), written into the recipe.
    ``teacher`` is where demonstrations come from: ``model`` (the model's, or
    ``teacher_model``'s, successful traces) or ``annotations`` (the training data's own,
    ``optimize.annotations``). The ``joint`` optimizer searches the knobs not given
    in ``knobs`` together with the demonstration sources its settings name; several programs
    (or ``auto``) are raced, each with its joint search. ``judge_model`` judges ``metric``
    ``judge`` (None: the compiled model)."""
    if teacher not in TEACHERS:
        raise InputError(f"unknown teacher {teacher!r}; choose one of {', '.join(TEACHERS)}")
    entry = compile_optimizer(program, optimizer, teacher)
    optimizer = "race" if is_race(program) else optimizer
    annotated = ("bootstrap", "finetune", "better-together")
    if teacher == "annotations" and not (optimizer in annotated or entry.searches):
        raise InputError(
            "--teacher annotations works with --optimizer bootstrap (annotation demonstrations "
            "only), joint (searched with the knobs), finetune (the model tuned on them) or "
            "better-together (both, in turn)"
        )
    _check_judge(metric, judge_model, entry.searches, optimizer, teacher)
    if teacher_model and teacher == "annotations" and not entry.searches:
        raise InputError(  # a search may still bootstrap (--grid demos=...,bootstrap)
            "--teacher-model: --teacher annotations takes its demonstrations from the training "
            "data, no model's traces; drop one of them"
        )
    settings = entry.read({}) if optimizer_settings is None else optimizer_settings
    if type(settings) is not entry.settings_type:
        raise InputError(
            f"optimizer {entry.name}: its settings are {entry.settings_type.__name__}, not "
            f"{type(settings).__name__}"
        )
    if entry.searches:
        settings = settings.for_teacher(teacher)
    recipe = {
        "program": program,
        "knobs": knobs,
        "retriever": {"kind": retriever, **index_entry(index)},
        "dataset": {
            "name": dataset,
            "train_split": train_split,
            "dev_split": dev_split,
            "train_limit": train_limit,
            "dev_limit": dev_limit,
            "select_on": select_on,
        },
        "optimizer": {"name": optimizer, "settings": settings.to_dict()},
        "metric": metric,
        "model": {"name": model_name(model), "lm_kwargs": {}},
        "teacher_model": teacher_model,
        "teacher": teacher,
        "seed": seed,
        # only when given: a recipe without it reads, writes and hashes as before
        **({"judge_model": judge_model} if judge_model is not None else {}),
    }
    return recipe_of(recipe)


def _check_judge(
    metric: str, judge_model: str | None, searches: bool, optimizer: str, teacher: str
) -> None:
    """Refuse a judge where none runs: ``judge`` for a search (its rows carry no judge score:
    every question would score 0), ``judge_model`` beside another metric or beside the
    annotation teacher (which scores nothing)."""
    if metric == "judge" and searches:
        what = "the strategy race" if optimizer == "race" else f"--optimizer {optimizer}"
        raise InputError(UNJUDGED.format(what=what))
    if judge_model is not None and metric != "judge":
        raise InputError(f"--judge-model judges --metric judge only (the metric is {metric})")
    if judge_model is not None and teacher == "annotations":
        raise InputError(
            "--judge-model: --teacher annotations takes its demonstrations as the training data "
            "gives them, judging none"
        )


def recorded_lm_kwargs(recipe: Recipe, lm: Any) -> dict[str, Any]:
    """The recipe's LM settings plus the context window of an engine that states one (an
    embedded model's ``n_ctx``): demonstrations that fit the window they were compiled in may
    not fit a smaller one, so a loaded artifact runs with the window it was compiled with."""
    kwargs = dict(recipe.model.lm_kwargs or {})
    n_ctx = getattr(getattr(lm, "engine", None), "n_ctx", None)
    if isinstance(n_ctx, int):
        kwargs["n_ctx"] = n_ctx
    return kwargs


def recipe_lm(recipe: Recipe) -> dspy.BaseLM:
    """The LM a recipe names."""
    return make_lm(model_name(recipe.model.name), **(recipe.model.lm_kwargs or {}))


def _trial_recipe(recipe: Recipe) -> dict[str, Any]:
    """What a search's trials mean: the recipe without its budget of calls or its rules among
    ties (``ties``; the race's ``margin``) (as `netcast compile` writes it with no --budget), so
    a compile rerun with another budget or rule goes on from the finished trials."""
    data = recipe.to_dict()
    rules = ("ties", "margin")
    settings = {k: v for k, v in data["optimizer"]["settings"].items() if k not in rules}
    return {**data, "optimizer": {**data["optimizer"], "settings": {**settings, "budget": None}}}


@dataclass
class _Run:
    """A compile's teleprompter, the program it returned, and the dev scores before and
    after."""

    tele: Any
    program: dspy.Module
    before: dict[str, Any]
    after: dict[str, Any]
    seconds: float
    dev_f1: tuple[dict[str, float], dict[str, float]]


def _compile_and_score(
    build: Callable[[], Any], student: Any, splits: Splits, lm: Any, threads: int, progress: bool
) -> _Run:
    """The program the compile starts from scored on dev, the teleprompter ``build`` makes
    compiling ``student`` on train, the result scored on dev. A student of several candidates
    (the race) is compiled first: the program the compile starts from is the one it picks, at
    the knobs it held. Every dev question must be scored: a model that fails midway (a server
    that died) stops the compile before anything is written."""
    dev, train = splits.dev.examples, splits.train.examples

    def score(program: dspy.Module, what: str) -> tuple[dict[str, Any], dict[str, float]]:
        """The aggregate, and each question's F1 by id (for the paired difference)."""
        result = evaluate(program, dev, threads=threads, progress=progress)
        return _complete(result, lm, what), {r["id"]: r["scores"]["f1"] for r in result.rows}

    with dspy.context(lm=lm):
        one = isinstance(student, dspy.Module)
        before = score(student, "scoring before compiling") if one else None
        tele = build()
        start = time.perf_counter()
        compiled = tele.compile(student, trainset=train, valset=dev)
        seconds = time.perf_counter() - start
        if before is None:
            before = score(student[compiled.name], "scoring before compiling")
        after = score(compiled, "scoring the compiled program")
    return _Run(tele, compiled, before[0], after[0], seconds, (before[1], after[1]))


def compile_recipe(
    recipe: Recipe | dict[str, Any],
    out: str | Path,
    *,
    parent: str | Path | None = None,
    threads: int = 1,
    progress: bool = True,
    lm: dspy.BaseLM | None = None,
    teacher_lm: dspy.BaseLM | None = None,
    reload: bool = False,
    report: Callable[[str, dict[str, Any]], None] | None = None,
    train_threads: int | None = None,
    judge_lm: dspy.BaseLM | None = None,
) -> CompileResult:
    """Run a recipe (program, knobs, dataset and splits, optimizer, metric, model, seed) and
    save the artifact to ``out``: its optimizer (``optimize.registry``) is checked before any
    model call, the program scored on dev, compiled on train, scored again. A recipe whose
    optimizer is ``race`` races the programs it names (``optimize.race``; ``report`` is told
    of its progress) and compiles the winner. ``lm``, ``teacher_lm`` and ``judge_lm`` replace
    the models the recipe names (LM objects the caller built, e.g. with an endpoint). With
    ``reload``, the saved artifact is loaded back as a user would and scored on the same dev
    questions.
    ``threads``: questions run at once; ``train_threads``: the CPU threads a finetune trains
    on where its settings name none (None: every core)."""
    recipe, out = recipe_of(recipe), Path(out)
    optimizer = optimizer_for(recipe)
    lm, teacher_lm, judge_lm = _recipe_models(recipe, optimizer, lm, teacher_lm, judge_lm)
    settings = optimizer.read(recipe.optimizer.settings)
    if optimizer.searches:  # a hand-written recipe may leave the sources to its teacher
        settings = settings.for_teacher(recipe.teacher)
    optimizer.check_model(lm, settings)  # e.g. no weights here to tune: before any model call

    def check(train: Any, dev: Any) -> None:  # refused now, not after dev is scored
        optimizer.check(settings, recipe, train.examples)

    splits = prepare_recipe(recipe, lm, check)
    for other in (teacher_lm, judge_lm):
        if other is not None:
            preflight(other)
    if recipe.metric == "judge" and judge_lm is None:
        judge_lm = lm  # the compiled model, not a teacher in DSPy's context while bootstrapping
    key = short_hash(_trial_recipe(recipe))
    setup = Setup(
        lm,
        teacher_lm,
        recipe.metric,
        recipe.seed,
        threads,
        recipe.dataset.select_on,
        optimizer.workspace(out, key),
        key,
        progress,
        report,
        train_threads,
        judge_lm,
    )
    student = optimizer.student(recipe, splits.retriever, lm)
    run = _compile_and_score(
        lambda: optimizer.build(settings, setup), student, splits, lm, threads, progress
    )
    recipe = recipe.updated(**optimizer.record(recipe, run.tele))
    artifact = _save(recipe, run, splits, lm, out, parent, optimizer.files(run.tele))
    # while the optimizer left work unfinished (grid points its budget left untried), its
    # workspace stays, so a rerun with a larger budget goes on from it
    if setup.workspace is not None and optimizer.finished(run.tele):
        _remove(setup.workspace)
    reloaded = _reload(artifact, splits, lm, threads) if reload else None
    return CompileResult.of(artifact, run, recipe, reloaded)


def _recipe_models(recipe: Recipe, optimizer: Any, lm: Any, teacher_lm: Any, judge_lm: Any):
    """The compile's model, teacher and judge: those given, else the ones the recipe names
    (the judge's setting checked again first: a recipe read back, ``--from``, did not pass
    through ``make_recipe``)."""
    lm = lm or recipe_lm(recipe)
    if teacher_lm is None and recipe.teacher_model:
        teacher_lm = make_lm(recipe.teacher_model)
    _check_judge(
        recipe.metric, recipe.judge_model, optimizer.searches, recipe.optimizer.name, recipe.teacher
    )
    if judge_lm is None and recipe.judge_model:
        judge_lm = make_lm(recipe.judge_model)
    return lm, teacher_lm, judge_lm


def _save(
    recipe: Recipe,
    run: _Run,
    splits: Splits,
    lm: Any,
    out: Path,
    parent: str | Path | None,
    files: dict[str, Path] | None = None,
) -> Path:
    """The artifact written: the compiled program and the recipe as it ran (the program's
    knobs, its index, the model resolved and its settings), with the scores and the ``files``
    the optimizer made (a tuned model's adapter)."""
    data = recipe.to_dict()
    index = recipe.retriever.saved_index  # the user's (netcast index), else built
    full = {
        **data,
        "knobs": run.program.knobs.model_dump(),
        "retriever": {**retriever_recipe(splits.retriever, splits.train), **index_entry(index)},
        "model": {
            **data["model"],
            "resolved": lm.model,
            "lm_kwargs": recorded_lm_kwargs(recipe, lm),
        },
    }
    scores = {"before": run.before, "after": run.after, "compile_seconds": run.seconds}
    scores["demos"] = demo_report(run.program)
    return save_artifact(out, run.program, full, scores, parent=parent, files=files)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _reload(artifact: Path, splits: Splits, lm: Any, threads: int) -> dict[str, Any]:
    """The artifact loaded back as a user would, scored on the same dev questions."""
    loaded = load(artifact, model=lm)
    scored = evaluate(loaded, splits.dev.examples, threads=threads, progress=False)
    if scored.errors:
        first_id, first = next(iter(scored.errors.items()))
        raise ModelCallError(
            f"the artifact {artifact} is written, but scoring it loaded back failed: "
            f"{len(scored.errors)} question(s) failed calling {endpoint(lm)} "
            f"(first, {first_id}: {first})"
        )
    return scored.aggregate


def rerun_recipe(
    recipe: dict[str, Any],
    model: str | None,
    knobs: dict[str, Any] | None = None,
    select_on: str | None = None,
) -> Recipe:
    """An artifact's ``recipe`` to compile again with ``model``: a joint compile searches
    again from the knobs the user fixed, a race is run again (the winner may change with the
    model), a tuning study is run again as a new study; ``knobs`` and ``select_on`` replace
    the recipe's."""
    new = {**recipe, "model": {"name": model_name(model), "lm_kwargs": {}}}
    for trained in ("finetune", "better_together"):  # weights are tuned again for the model
        new.pop(trained, None)
    if "joint" in recipe:  # the knobs are searched again, from the ones the user fixed
        new["knobs"] = recipe["joint"]["fixed"]
        del new["joint"]
    if "race" in recipe:  # the race is run again: the winner may change with the model
        new["program"] = recipe["race"]["programs"]
        new["knobs"] = recipe["race"]["fixed"]
        del new["race"]
    if "tuning" in recipe:  # the study is run again, a new one: the model is another
        del new["tuning"]
        settings = {**recipe["optimizer"]["settings"], "study": None}
        new["optimizer"] = {**recipe["optimizer"], "settings": settings}
    if knobs is not None:
        new["knobs"] = knobs
    if select_on is not None:
        new["dataset"] = {**recipe["dataset"], "select_on": select_on}
    new["retriever"] = {
        k: v for k, v in recipe["retriever"].items() if k in ("kind", "saved_index")
    }
    return recipe_of(new)


def recompile(
    source: str | Path,
    model: str | None,
    out: str | Path,
    *,
    knobs: dict[str, Any] | None = None,
    threads: int = 1,
    progress: bool = True,
    lm: dspy.BaseLM | None = None,
    select_on: str | None = None,
    report: Callable[[str, dict[str, Any]], None] | None = None,
    train_threads: int | None = None,
    make: Callable[[str], dspy.BaseLM] | None = None,
) -> tuple[CompileResult, dict[str, Any]]:
    """Rerun ``source``'s recipe with ``model`` (``rerun_recipe``: optionally re-tuned
    ``knobs``, or another ``select_on``); the new artifact's lineage names ``source``.
    ``report`` is told of each step of a race (``compile_recipe``). ``make`` builds the
    recipe's teacher and judge models by name (None: ``make_lm``; the command line builds them
    as it builds ``lm``, with its endpoints and timeouts). Returns the result and the old
    scores."""
    recipe, old_scores, _ = read_artifact(source)
    new_recipe = rerun_recipe(recipe, model, knobs, select_on)
    teacher, judge = new_recipe.teacher_model, new_recipe.judge_model
    result = compile_recipe(
        new_recipe,
        out,
        parent=source,
        threads=threads,
        progress=progress,
        lm=lm,
        teacher_lm=make(teacher) if make and teacher else None,
        judge_lm=make(judge) if make and judge else None,
        report=report,
        train_threads=train_threads,
    )
    return result, old_scores
