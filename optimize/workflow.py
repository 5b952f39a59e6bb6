"""The workflows behind the command line, as functions the Python API calls too: evaluate a
program on a dataset into a resumable run directory; compile a recipe (score on dev, compile on
train, score again, save an artifact, load it back); recompile an artifact with another model
(optionally re-tuning its knobs first); tune knobs with Optuna and export the picked trial.

Every function takes the LM it runs with; it runs under ``dspy.context(lm=...)`` and never
changes DSPy's global settings."""

from __future__ import annotations

import os
import socket
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy
import optuna
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState
from sqlalchemy.engine import make_url

from netcast.artifacts import read_artifact, save_artifact
from netcast.data import load_dataset
from netcast.errors import InputError, ModelCallError
from netcast.evaluation.evaluate import EvalResult, evaluate
from netcast.files import short_hash, slug
from netcast.inputs import check_compile_fold, check_split_overlap
from netcast.models import decoding_info, make_lm, model_name, token_counter
from netcast.models.factory import check_questions, preflight
from netcast.optimize import tune as tuning
from netcast.optimize.annotations import teach
from netcast.optimize.compile import (
    compile_program,
    default_settings,
    demo_report,
    hold_out,
    selection_sets,
)
from netcast.optimize.joint import (
    JOINT_DEMOS,
    check_search,
    joint_compile,
    joint_study,
    knob_grid,
)
from netcast.optimize.race import (
    DROP_P,
    FIRST,
    is_race,
    race,
    race_programs,
    shared_knobs,
)
from netcast.optimize.race import check_race as check_race_settings
from netcast.optimize.race import clear as clear_race
from netcast.programs import get_program
from netcast.session import (
    build_program,
    gold_by_title,
    load,
    open_retriever,
    retriever_recipe,
)

TEACHERS = ("model", "annotations")


def _index_entry(index: str | Path | None) -> dict[str, str]:
    """A recipe's saved index, recorded as an absolute path (recompiled from anywhere)."""
    return {"saved_index": str(Path(index).resolve())} if index else {}


def endpoint(lm: Any) -> str:
    """Where ``lm``'s calls go, for messages: its ``api_base`` (an ``openai/`` model's may come
    from ``OPENAI_API_BASE``), else its model string."""
    kwargs = getattr(lm, "kwargs", None) or {}
    model = str(getattr(lm, "model", lm))
    base = kwargs.get("api_base") or kwargs.get("base_url")
    bases = getattr(getattr(lm, "engine", None), "bases", None)
    if bases:  # replicas (netcast.models.replicas)
        base = " and ".join(bases)
    if not base and model.startswith("openai/"):
        base = os.environ.get("OPENAI_API_BASE") or os.environ.get("OPENAI_BASE_URL")
    return str(base or model)


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
    recipe: dict[str, Any], lm: Any, check: Callable[[Any, Any], None] | None = None
) -> Splits:
    """``prepare`` for the dataset, splits, limits and retriever a recipe names."""
    data = recipe["dataset"]
    return prepare(
        data["name"],
        lm,
        train_split=data["train_split"],
        dev_split=data["dev_split"],
        train_limit=data.get("train_limit"),
        dev_limit=data.get("dev_limit"),
        index=recipe["retriever"].get("saved_index"),
        retriever=recipe["retriever"]["kind"],
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
    rerunning the same evaluation resumes it."""
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
    optimizer_settings: dict[str, Any] | None = None,
    metric: str = "f1",
    model: str | None = None,
    teacher_model: str | None = None,
    retriever: str = "bm25",
    seed: int = 0,
    select_on: str = "dev",
    teacher: str = "model",
    index: str | Path | None = None,
) -> dict[str, Any]:
    """A compile's recipe. ``teacher`` is where demonstrations come from: ``model`` (the
    model's, or ``teacher_model``'s, successful traces) or ``annotations`` (the training data's
    own, ``optimize.annotations``). The ``joint`` optimizer searches the knobs not given in
    ``knobs`` together with the demonstration sources its settings name."""
    if teacher not in TEACHERS:
        raise InputError(f"unknown teacher {teacher!r}; choose one of {', '.join(TEACHERS)}")
    if is_race(program):  # several programs (or auto): raced, each with its joint search
        optimizer = "race"
    if teacher == "annotations" and optimizer not in ("bootstrap", "joint", "race"):
        raise InputError(
            "--teacher annotations works with --optimizer bootstrap (annotation demonstrations "
            "only) or joint (searched with the knobs)"
        )
    if optimizer in ("joint", "race"):
        demos = ("none", "annotations") if teacher == "annotations" else ("none", "bootstrap")
        optimizer_settings = {"demos": list(demos), **(optimizer_settings or {})}
    return {
        "program": program,
        "knobs": knobs,
        "retriever": {"kind": retriever, **_index_entry(index)},
        "dataset": {
            "name": dataset,
            "train_split": train_split,
            "dev_split": dev_split,
            "train_limit": train_limit,
            "dev_limit": dev_limit,
            "select_on": select_on,
        },
        "optimizer": {
            "name": optimizer,
            "settings": {**default_settings(optimizer), **(optimizer_settings or {})},
        },
        "metric": metric,
        "model": {"name": model_name(model), "lm_kwargs": {}},
        "teacher_model": teacher_model,
        "teacher": teacher,
        "seed": seed,
    }


def recorded_lm_kwargs(recipe: dict[str, Any], lm: Any) -> dict[str, Any]:
    """The recipe's LM settings plus the context window of an engine that states one (an
    embedded model's ``n_ctx``): demonstrations that fit the window they were compiled in may
    not fit a smaller one, so a loaded artifact runs with the window it was compiled with."""
    kwargs = dict(recipe["model"].get("lm_kwargs") or {})
    n_ctx = getattr(getattr(lm, "engine", None), "n_ctx", None)
    if isinstance(n_ctx, int):
        kwargs["n_ctx"] = n_ctx
    return kwargs


def recipe_lm(recipe: dict[str, Any]) -> dspy.BaseLM:
    """The LM a recipe names."""
    spec = recipe["model"]
    return make_lm(model_name(spec["name"]), **(spec.get("lm_kwargs") or {}))


def _trial_recipe(recipe: dict[str, Any]) -> dict[str, Any]:
    """What a search's trials mean: the recipe without its budget of calls or its rule among
    ties (as `netcast compile` writes it with no --budget), so a compile rerun with another
    budget or rule goes on from the finished trials."""
    settings = {k: v for k, v in recipe["optimizer"]["settings"].items() if k != "ties"}
    return {
        **recipe,
        "optimizer": {**recipe["optimizer"], "settings": {**settings, "budget": None}},
    }


def check_race(spec: str, knobs: dict[str, Any], settings: dict[str, Any]) -> None:
    """A race recipe's programs, knobs, demonstration sources and budget checked before any
    call (``optimize.race.check_race``)."""
    if settings.get("grid"):
        raise InputError("--grid names one program's values; a race searches each one's grid")
    demos = settings.get("demos", JOINT_DEMOS)
    check_race_settings(
        race_programs(spec), knobs, demos, settings.get("budget"), settings.get("first", FIRST)
    )


def compile_recipe(
    recipe: dict[str, Any],
    out: str | Path,
    *,
    parent: str | Path | None = None,
    threads: int = 1,
    progress: bool = True,
    lm: dspy.BaseLM | None = None,
    teacher_lm: dspy.BaseLM | None = None,
    reload: bool = False,
    report: Callable[[str, dict[str, Any]], None] | None = None,
) -> CompileResult:
    """Run a recipe (program, knobs, dataset and splits, optimizer, metric, model, seed) and
    save the artifact to ``out``. A recipe whose optimizer is ``race`` races the programs it
    names (``optimize.race``; ``report`` is told of its progress) and compiles the winner.
    ``lm`` and ``teacher_lm`` replace the models the recipe names (LM objects the caller
    built, e.g. with an endpoint). With ``reload``, the saved artifact is loaded back as a user
    would and scored on the same dev questions."""
    lm = lm or recipe_lm(recipe)
    teacher = recipe.get("teacher_model")
    if teacher_lm is None and teacher:
        teacher_lm = make_lm(teacher)
    data = recipe["dataset"]
    index = recipe["retriever"].get("saved_index")  # the user's (netcast index), else built
    optimizer = recipe["optimizer"]["name"]
    settings = recipe["optimizer"].get("settings") or {}
    racing = optimizer == "race"

    def check(train: Any, dev: Any) -> None:  # refused now, not after dev is scored
        if racing:
            check_race(recipe["program"], recipe["knobs"], settings)
        elif optimizer != "joint":
            selection_sets(optimizer, train.examples, None, data.get("select_on", "dev"))
        else:
            demos = settings.get("demos", JOINT_DEMOS)
            check_search(recipe["program"], recipe["knobs"], settings.get("grid"), demos)
        check_compile_fold(optimizer, settings, train.examples)

    splits = prepare_recipe(recipe, lm, check)
    train, dev, retriever = splits.train, splits.dev, splits.retriever
    if teacher_lm is not None:
        preflight(teacher_lm)
    raced, seconds_offset = None, 0.0
    if racing:  # the strategies raced on the training questions; the winner is compiled
        start = time.perf_counter()
        workdir = Path(out).parent / f".{Path(out).name}.race-{short_hash(_trial_recipe(recipe))}"
        with dspy.context(lm=lm):
            raced = race(
                race_programs(recipe["program"]),
                retriever,
                train.examples,
                lm=lm,
                fixed=recipe["knobs"],
                demos=settings.get("demos", JOINT_DEMOS),
                budget=settings.get("budget"),
                metric=recipe["metric"],
                first=settings.get("first", FIRST),
                drop_p=settings.get("drop_p", DROP_P),
                alpha=settings.get("alpha", 0.1),
                share=settings.get("share", 0.6),
                ties=settings.get("ties", "nearest"),
                teacher_lm=teacher_lm,
                seed=recipe["seed"],
                workdir=workdir,
                report=report,
            )
        race_seconds = time.perf_counter() - start
        held = shared_knobs(race_programs(recipe["program"]), recipe["knobs"])
        recipe = {
            **recipe,
            "program": raced.program_name,
            "race": {
                "programs": recipe["program"],
                "fixed": recipe["knobs"],
                "choice": raced.choice,
                "spent": raced.spent,
                "budget": raced.budget,
                "seconds": round(race_seconds, 1),
                "table": raced.table,
            },
            "knobs": held[raced.program_name],
        }
    program = build_program(recipe["program"], retriever, recipe["knobs"], lm=lm)

    # Every dev question must be scored: a model that fails midway (a server that died) stops
    # the compile before anything is written at ``out``.
    trials = None
    with dspy.context(lm=lm):
        before = evaluate(program, dev.examples, threads=threads, progress=progress)
        before = _complete(before, lm, "scoring before compiling")
        start = time.perf_counter()
        if raced is not None:
            compiled = program = raced.program
            seconds_offset = race_seconds
        elif optimizer == "joint":
            # finished trials are kept beside ``out`` until the artifact is written with every
            # grid point tried: a killed compile, or one its budget stopped, rerun with the
            # same recipe (any budget) goes on where it stopped
            trials_db = Path(out).parent / f".{Path(out).name}.joint-trials.db"
            trials_db.parent.mkdir(parents=True, exist_ok=True)
            # the study is named by what a trial means, the recipe without its budget of calls
            # (as `netcast compile` writes it with no --budget) or its rule among ties, so a
            # compile rerun with another budget or rule goes on from the finished trials
            joint = joint_compile(
                recipe["program"],
                retriever,
                train.examples,
                lm=lm,
                fixed=recipe["knobs"],
                values=settings.get("grid"),
                demos=settings.get("demos", JOINT_DEMOS),
                budget=settings.get("budget"),
                metric=recipe["metric"],
                share=settings.get("share", 0.6),
                alpha=settings.get("alpha", 0.1),
                ties=settings.get("ties", "nearest"),
                teacher_lm=teacher_lm,
                seed=recipe["seed"],
                study=joint_study(
                    f"sqlite:///{trials_db}", f"joint-{short_hash(_trial_recipe(recipe))}"
                ),
                progress=progress,
            )
            compiled, program, trials = joint.program, joint.program, joint.trials
            recipe = {
                **recipe,
                "joint": {
                    "fixed": recipe["knobs"],
                    "chosen_demos": joint.demos,
                    "versus_defaults": joint.versus_defaults,
                    "untried": joint.untried,
                    "trials": trials,
                },
            }
        elif recipe.get("teacher") == "annotations":
            compiled = teach(program, train.examples, seed=recipe["seed"])
        else:
            compiled = compile_program(
                program,
                train.examples,
                optimizer=optimizer,
                metric=recipe["metric"],
                teacher_lm=teacher_lm,
                valset=dev.examples,
                select_on=data.get("select_on", "dev"),
                seed=recipe["seed"],
                threads=threads,
                settings=recipe["optimizer"].get("settings"),
            )
        seconds = time.perf_counter() - start + seconds_offset
        after = evaluate(compiled, dev.examples, threads=threads, progress=progress)
        after = _complete(after, lm, "scoring the compiled program")

    full_recipe = {
        **recipe,
        "knobs": program.knobs.model_dump(),
        "retriever": {**retriever_recipe(retriever, train), **_index_entry(index)},
        "model": {
            **recipe["model"],
            "resolved": lm.model,
            "lm_kwargs": recorded_lm_kwargs(recipe, lm),
        },
    }
    demos = demo_report(compiled)
    scores = {"before": before, "after": after, "compile_seconds": seconds, "demos": demos}
    artifact = save_artifact(out, compiled, full_recipe, scores, parent=parent)
    # the trials are in the recipe now; while the budget left grid points untried, their
    # storage stays, so a rerun with a larger budget goes on from them
    if optimizer == "joint" and not full_recipe["joint"]["untried"]:
        trials_db.unlink(missing_ok=True)
    if raced is not None and raced.complete:  # else a rerun with a larger budget goes on
        clear_race(workdir)
    reloaded = None
    if reload:
        loaded = load(artifact, model=lm)
        scored = evaluate(loaded, dev.examples, threads=threads, progress=False)
        if scored.errors:
            first_id, first = next(iter(scored.errors.items()))
            raise ModelCallError(
                f"the artifact {artifact} is written, but scoring it loaded back failed: "
                f"{len(scored.errors)} question(s) failed calling {endpoint(lm)} "
                f"(first, {first_id}: {first})"
            )
        reloaded = scored.aggregate
    joint_entry = full_recipe.get("joint") or {}
    return CompileResult(
        artifact,
        before,
        after,
        seconds,
        reloaded,
        demos,
        trials,
        program.knobs.model_dump(),
        joint_entry.get("versus_defaults"),
        joint_entry.get("untried", 0),
        full_recipe.get("race"),
    )


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
) -> tuple[CompileResult, dict[str, Any]]:
    """Rerun ``source``'s recipe with ``model`` (and optionally re-tuned ``knobs``, or another
    ``select_on``); the new artifact's lineage names ``source``. ``report`` is told of each
    step of a race (``compile_recipe``). Returns the result and the old scores."""
    recipe, old_scores, _ = read_artifact(source)
    new_recipe = {**recipe, "model": {"name": model_name(model), "lm_kwargs": {}}}
    if "joint" in recipe:  # the knobs are searched again, from the ones the user fixed
        new_recipe["knobs"] = recipe["joint"]["fixed"]
        del new_recipe["joint"]
    if "race" in recipe:  # the race is run again: the winner may change with the model
        new_recipe["program"] = recipe["race"]["programs"]
        new_recipe["knobs"] = recipe["race"]["fixed"]
        del new_recipe["race"]
    if knobs is not None:
        new_recipe["knobs"] = knobs
    if select_on is not None:
        new_recipe["dataset"] = {**recipe["dataset"], "select_on": select_on}
    new_recipe["retriever"] = {
        k: v for k, v in recipe["retriever"].items() if k in ("kind", "saved_index")
    }
    result = compile_recipe(
        new_recipe, out, parent=source, threads=threads, progress=progress, lm=lm, report=report
    )
    return result, old_scores


def retune_knobs(
    source: str | Path, lm: dspy.BaseLM, trials: int, select_on: str | None = None
) -> dict[str, Any]:
    """Re-tune ``source``'s knobs for ``lm`` (in-memory study, by the recipe's metric), scored
    on the dev questions, or on held-out training questions when the recipe (or ``select_on``)
    selects on ``train``."""
    recipe, _, _ = read_artifact(source)
    data = recipe["dataset"]
    splits = prepare_recipe(recipe, lm)
    retriever = splits.retriever
    if (select_on or data.get("select_on", "dev")) == "train":
        trainset, devset = hold_out(splits.train.examples)
    else:
        trainset, devset = splits.train.examples, splits.dev.examples
    study = tuning.open_study(f"retune-{Path(source).name}", None, [recipe["metric"]])
    with dspy.context(lm=lm):
        tuning.tune(
            study,
            trials,
            program_name=recipe["program"],
            retriever=retriever,
            trainset=trainset,
            devset=devset,
            objectives=[recipe["metric"]],
            lm=lm,
        )
    return tuning.pick(study, "best-quality").user_attrs["knobs"]


_FAIL, _WAITING = (TrialState.FAIL,), (TrialState.WAITING,)


@dataclass
class TuneResult:
    study: Any
    name: str
    storage: str
    objectives: list[str]
    chosen: Any
    artifact: Path | None = None


def run_tuning(
    program: str,
    dataset: str,
    lm: dspy.BaseLM,
    *,
    trials: int = 6,
    objectives: str = "f1,cost",
    compile_each: bool = False,
    optimizer: str = "bootstrap",
    train_split: str = "train",
    dev_split: str = "dev",
    train_limit: int | None = 20,
    dev_limit: int | None = 20,
    retriever: str = "bm25",
    storage: str | None = None,
    study: str | None = None,
    pick_rule: str = "knee",
    out: str | Path | None = None,
    seed: int = 0,
    heartbeat: int = 30,
    index: str | Path | None = None,
) -> TuneResult:
    """Tune ``program``'s knobs (a resumable, distributable Optuna study) and, with ``out``,
    export the trial ``pick_rule`` chooses as an artifact."""
    names = tuning.parse_objectives(objectives)
    tuning.check_pick_rule(pick_rule)
    splits = prepare(
        dataset,
        lm,
        train_split=train_split,
        dev_split=dev_split,
        train_limit=train_limit,
        dev_limit=dev_limit,
        index=index,
        retriever=retriever,
    )
    train, dev, saved_index, index = splits.train, splits.dev, index, splits.retriever
    storage = storage or "sqlite:///runs/tune.db"
    if storage.startswith("sqlite:///") and not storage.endswith(":memory:"):
        Path(storage.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    name = study or f"{program}-{slug(dataset)}-{slug(lm.model)}-{objectives}"
    # every knob setting once (a grid over the declared ranges), never the same one twice
    grid = knob_grid(get_program(program), lm)
    the_study = tuning.open_study(name, storage, names, seed=seed, heartbeat=heartbeat, grid=grid)
    failed_before = {t.number for t in the_study.get_trials(deepcopy=False, states=_FAIL)}
    try:
        with dspy.context(lm=lm):
            tuning.tune(
                the_study,
                trials,
                program_name=program,
                retriever=index,
                trainset=train.examples,
                devset=dev.examples,
                objectives=names,
                compile_each=compile_each,
                optimizer=optimizer,
                metric=names[0],
                seed=seed,
                lm=lm,
            )
    except Exception as err:
        # A trial that raised (its questions failed: a server that died) is recorded FAIL by
        # Optuna; it is re-queued with the same knobs, as a killed worker's stale trial is.
        me = f"{socket.gethostname()}:{os.getpid()}"  # this worker's trials, not others'
        failed = [
            t
            for t in the_study.get_trials(deepcopy=False, states=_FAIL)
            if t.number not in failed_before and t.user_attrs.get("worker") == me
        ]
        if not failed:
            raise
        waiting = len(the_study.get_trials(deepcopy=False, states=_WAITING))
        with warnings.catch_warnings():  # "experimental" in Optuna since 2.8
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            for trial in failed:
                RetryHeartbeatStaleTrialCallback(max_retry=2)(the_study, trial)
        requeued = len(the_study.get_trials(deepcopy=False, states=_WAITING)) > waiting
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ModelCallError(
            f"study {name!r}: trial {failed[0].number} failed calling {endpoint(lm)} ({first}); "
            + (
                "it is recorded FAIL and re-queued with the same knobs: run the same command "
                "again to resume"
                if requeued
                else "it is recorded FAIL (retried twice already: not re-queued)"
            )
        ) from err
    chosen = tuning.pick(the_study, pick_rule)
    result = TuneResult(the_study, name, storage, names, chosen)
    if out is None:
        return result
    knobs = chosen.user_attrs["knobs"]
    prog = build_program(program, index, knobs, lm=lm)
    if compile_each:
        with dspy.context(lm=lm):
            prog = compile_program(
                prog,
                train.examples,
                optimizer=optimizer,
                metric=names[0],
                seed=seed,
                select_on="train",
            )
    recipe = make_recipe(
        program=program,
        knobs=knobs,
        dataset=dataset,
        train_split=train_split,
        dev_split=dev_split,
        train_limit=train_limit,
        dev_limit=dev_limit,
        optimizer=optimizer if compile_each else "bootstrap",
        select_on="train" if compile_each else "dev",
        metric=names[0],
        model=getattr(lm, "embedded_name", None) or lm.model,
        retriever=retriever,
        seed=seed,
    )
    recipe["retriever"] = {**retriever_recipe(index, train), **_index_entry(saved_index)}
    recipe["model"]["lm_kwargs"] = recorded_lm_kwargs(recipe, lm)
    recipe["compiled"] = compile_each
    recipe["tuning"] = {
        "study": name,
        # the URL as a rerun needs it, its password left out (the recipe is shared with the
        # artifact; give the password again with --storage)
        "storage": make_url(storage).render_as_string(hide_password=True),
        "trial": chosen.number,
        "pick": pick_rule,
        "objectives": names,
    }
    scores = {"before": None, "after": chosen.user_attrs.get("aggregate")}
    result.artifact = save_artifact(out, prog, recipe, scores)
    return result
