"""Tune a program's knobs with Optuna over its declared search space: quality against cost,
a Pareto front, pruning on partial dev evaluations, resumable storage (SQLite by default,
PostgreSQL or any RDB URL for several workers on one study). The workflows on top: ``netcast
tune`` (``run_tuning``, then ``export_trial`` of the picked trial) and ``compile --from
--retune`` (``retune_knobs``)."""

from __future__ import annotations

import math
import os
import socket
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy
import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.study import MaxTrialsCallback
from optuna.trial import TrialState
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from netcast.artifacts import read_artifact, save_artifact
from netcast.errors import InputError, ModelCallError
from netcast.evaluation.evaluate import aggregate, evaluate
from netcast.evaluation.metrics import QUALITY
from netcast.files import short_hash, slug
from netcast.formats import Recipe, recipe_of
from netcast.optimize.compile import compile_program, hold_out
from netcast.optimize.joint import knob_grid
from netcast.optimize.settings import TuneSettings
from netcast.optimize.workflow import (
    UNJUDGED,
    Splits,
    endpoint,
    index_entry,
    make_recipe,
    prepare,
    prepare_recipe,
    recorded_lm_kwargs,
)
from netcast.pareto import pareto_indices
from netcast.programs import get_program
from netcast.retrievers import Retriever
from netcast.session import build_program, retriever_recipe

COSTS = {
    "cost": lambda a: a["tokens_in"] + a["tokens_out"],  # tokens per question
    "tokens": lambda a: a["tokens_in"] + a["tokens_out"],
    "calls": lambda a: a["lm_calls"],
    "seconds": lambda a: a["seconds"],
}
DONE = (TrialState.COMPLETE, TrialState.PRUNED)
CONNECT_TIMEOUT = 10  # seconds a storage server may take to accept a connection


def parse_objectives(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names or names[0] not in QUALITY:
        raise InputError(f"the first objective must be a quality metric ({', '.join(QUALITY)})")
    if names[0] == "judge":
        raise InputError(UNJUDGED.format(what="tuning"))
    if len(names) > 2 or (len(names) == 2 and names[1] not in COSTS):
        raise InputError(f"objectives: a quality metric, optionally one cost ({', '.join(COSTS)})")
    return names


def objective_values(names: Sequence[str], agg: dict[str, Any]) -> list[float]:
    values = [float(agg[names[0]] or 0.0)]
    if len(names) == 2:
        values.append(float(COSTS[names[1]](agg)))
    return values


def open_study(
    name: str,
    storage: str | None,
    objectives: Sequence[str],
    seed: int = 0,
    heartbeat: int = 30,
    grid: dict[str, list] | None = None,
) -> optuna.Study:
    """Create or resume a study. With ``grid`` (knob -> values, ``optimize.joint.knob_grid``)
    its points are tried once each in a seeded order (Optuna's ``GridSampler``: a small
    discrete space never repeats a setting); else NSGA-II (two objectives) or TPE. Trials of a
    killed worker are noticed by their stale heartbeat, marked failed and re-queued with the
    same knobs (Optuna's ``RetryHeartbeatStaleTrialCallback``). Workers started together race
    to create the database schema and the study; the loser retries and joins."""
    directions = ["maximize"] + (["minimize"] if len(objectives) == 2 else [])
    if grid:
        sampler = optuna.samplers.GridSampler(grid, seed=seed)
    elif len(directions) == 2:
        sampler = optuna.samplers.NSGAIISampler(seed=seed)
    else:
        sampler = optuna.samplers.TPESampler(seed=seed)
    for attempt in range(5):
        try:
            return optuna.create_study(
                study_name=name,
                storage=_storage(storage, heartbeat),
                directions=directions,
                sampler=sampler,
                pruner=optuna.pruners.MedianPruner(n_startup_trials=2),
                load_if_exists=True,
            )
        except (SQLAlchemyError, optuna.exceptions.DuplicatedStudyError):
            if attempt == 4:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def check_resumed(study: optuna.Study, meaning: dict[str, Any]) -> None:
    """Record what ``study``'s trials are scored on (``meaning``: program, questions,
    retriever, ...), or, for a study that holds trials already, refuse other settings with one
    line: resumed under other settings, its old trials would be mixed with the new ones and
    picked among them."""
    stored = study.user_attrs.get("meaning")
    if stored is None:
        study.set_user_attr("meaning", meaning)
        return
    changed = [k for k in sorted({*stored, *meaning}) if stored.get(k) != meaning.get(k)]
    if changed:
        key = changed[0]
        raise InputError(
            f"study {study.study_name!r} holds trials scored with {key} {stored.get(key)!r}, "
            f"not {meaning.get(key)!r}: give another --study name, or the same settings"
        )


def _storage(url: str | None, heartbeat: int):
    if url is None:  # in memory: nothing to resume, no heartbeats
        return optuna.storages.InMemoryStorage()
    check_storage(url)
    with warnings.catch_warnings():  # heartbeats are "experimental" in Optuna since 2.8
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return RDBStorage(
            url,
            heartbeat_interval=heartbeat,
            grace_period=2 * heartbeat,
            heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=2),
        )


def check_storage(url: str) -> None:
    """Refuse, before any trial, an Optuna storage URL that cannot be opened: not a URL, a
    database kind SQLAlchemy has no dialect (or no installed driver) for, a server that does not
    answer within ``CONNECT_TIMEOUT`` seconds, a file that is not a database. One ``InputError``
    naming the URL, its password hidden."""
    from sqlalchemy import create_engine, inspect
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise InputError(
            f"storage {url!r}: not a database URL (e.g. sqlite:///runs/tune.db, "
            "postgresql+psycopg://user:password@host/db)"
        ) from None
    shown = parsed.render_as_string(hide_password=True)
    server = parsed.get_backend_name() not in ("sqlite",)
    try:
        engine = create_engine(
            parsed, connect_args={"connect_timeout": CONNECT_TIMEOUT} if server else {}
        )
    except ArgumentError:  # sqlalchemy's NoSuchModuleError: no such dialect
        raise InputError(
            f"storage {shown}: unknown database {parsed.drivername!r} (SQLAlchemy has no dialect "
            "for it; e.g. sqlite:///runs/tune.db, postgresql+psycopg://user:password@host/db)"
        ) from None
    except ImportError as err:
        raise InputError(
            f"storage {shown}: the database driver is not installed ({err}); install it, or "
            "name an installed one (e.g. postgresql+psycopg://...)"
        ) from None
    try:
        inspect(engine).get_table_names()  # connects and reads the schema
    except SQLAlchemyError as err:
        reason = str(getattr(err, "orig", None) or err).strip().splitlines() or [""]
        raise InputError(f"storage {shown}: cannot connect or read it ({reason[0]})") from None
    finally:
        engine.dispose()


def run_trial(
    trial: optuna.Trial,
    program_name: str,
    retriever: Retriever,
    trainset: Sequence[dspy.Example],
    devset: Sequence[dspy.Example],
    objectives: Sequence[str],
    compile_each: bool = False,
    optimizer: str = "bootstrap",
    metric: str = "f1",
    chunk: int = 5,
    seed: int = 0,
    lm: Any = None,
) -> list[float]:
    """One trial: knobs from the program's search space (sized for ``lm``), optionally
    compiled, scored on the dev set in chunks (reported for pruning)."""
    cls = get_program(program_name)
    knobs = cls.search_space(trial, lm)
    trial.set_user_attr("knobs", knobs)
    trial.set_user_attr("worker", f"{socket.gethostname()}:{os.getpid()}")
    program = cls(retriever, lm=lm, **knobs)
    if compile_each:
        # candidates are selected on held-out training questions: the dev set scores the trial
        program = compile_program(
            program, trainset, optimizer=optimizer, metric=metric, seed=seed, select_on="train"
        )
    rows: list[dict[str, Any]] = []
    for step, start in enumerate(range(0, len(devset), chunk)):
        result = evaluate(program, devset[start : start + chunk], progress=False)
        if result.errors:
            first = next(iter(result.errors.values()))
            raise RuntimeError(f"{len(result.errors)} dev question(s) failed (first: {first})")
        rows += result.rows
        if len(objectives) == 1:  # Optuna prunes single-objective studies only
            trial.report(float(aggregate(rows)[objectives[0]] or 0.0), step)
            if trial.should_prune():
                raise optuna.TrialPruned()
    agg = aggregate(rows)
    trial.set_user_attr("aggregate", agg)
    return objective_values(objectives, agg)


def tune(
    study: optuna.Study,
    trials: int,
    progress: bool = True,
    **trial_args: Any,
) -> optuna.Study:
    """Run trials until the study holds ``trials`` finished ones (across all workers)."""
    remaining = trials - len(study.get_trials(deepcopy=False, states=DONE))
    if remaining > 0:
        study.optimize(
            lambda trial: run_trial(trial, **trial_args),
            n_trials=remaining,
            callbacks=[MaxTrialsCallback(trials, states=DONE)],
            show_progress_bar=progress,
            catch=(),
        )
    return study


def _quality_cost(trial: optuna.trial.FrozenTrial) -> tuple[float, float]:
    values = trial.values
    return values[0], (values[1] if len(values) > 1 else 0.0)


def pareto_front(trials: Sequence[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
    """Trials no other trial beats on both quality (higher) and cost (lower), by cost."""
    return [trials[i] for i in pareto_indices([_quality_cost(t) for t in trials])]


def knee(front: Sequence[optuna.trial.FrozenTrial]) -> optuna.trial.FrozenTrial:
    """The front point farthest from the line joining its two ends (both axes scaled 0-1)."""
    if len(front) <= 2:
        return max(front, key=lambda t: _quality_cost(t)[0])
    qs = [_quality_cost(t)[0] for t in front]
    cs = [_quality_cost(t)[1] for t in front]
    q_span, c_span = (max(qs) - min(qs)) or 1.0, (max(cs) - min(cs)) or 1.0
    pts = [((c - min(cs)) / c_span, (q - min(qs)) / q_span) for q, c in zip(qs, cs, strict=True)]
    (x1, y1), (x2, y2) = pts[0], pts[-1]
    norm = math.hypot(x2 - x1, y2 - y1) or 1.0
    dist = [abs((y2 - y1) * x - (x2 - x1) * y + x2 * y1 - y2 * x1) / norm for x, y in pts]
    return front[max(range(len(front)), key=dist.__getitem__)]


def check_pick_rule(rule: str, objectives: Sequence[str] = ("f1", "cost")) -> None:
    """Refuse an unknown ``--pick`` before any trial runs, and a cost limit where the study
    measures no cost (one objective: every trial would be within it). With one objective
    ``knee`` is ``best-quality``: the front is the best trials."""
    if rule in ("best-quality", "knee"):
        return
    if rule.startswith("max-quality-under-cost="):
        try:
            float(rule.split("=", 1)[1])
        except ValueError:
            pass
        else:
            if len(objectives) < 2:
                raise InputError(
                    f"--pick {rule} limits a cost, but --objectives {','.join(objectives)} "
                    "measures none: add one (f1,cost or f1,calls), or --pick best-quality"
                )
            return
    raise InputError(f"unknown --pick {rule!r}; use best-quality, knee or max-quality-under-cost=X")


def pick(study: optuna.Study, rule: str) -> optuna.trial.FrozenTrial:
    """``best-quality``, ``knee`` or ``max-quality-under-cost=X`` among completed trials."""
    check_pick_rule(rule)
    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not done:
        raise InputError(f"study {study.study_name!r} has no completed trial to pick")
    by_quality = sorted(done, key=lambda t: (-_quality_cost(t)[0], _quality_cost(t)[1]))
    if rule == "best-quality":
        return by_quality[0]
    if rule == "knee":
        return knee(pareto_front(done))
    limit = float(rule.split("=", 1)[1])  # max-quality-under-cost=X
    within = [t for t in by_quality if _quality_cost(t)[1] <= limit]
    if not within:
        raise InputError(f"no completed trial costs <= {limit}")
    return within[0]


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
    if (select_on or recipe.dataset.select_on) == "train":
        trainset, devset = hold_out(splits.train.examples)
    else:
        trainset, devset = splits.train.examples, splits.dev.examples
    study = open_study(f"retune-{Path(source).name}", None, [recipe.metric])
    with dspy.context(lm=lm):
        tune(
            study,
            trials,
            program_name=recipe.program,
            retriever=splits.retriever,
            trainset=trainset,
            devset=devset,
            objectives=[recipe.metric],
            lm=lm,
        )
    return pick(study, "best-quality").user_attrs["knobs"]


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
    settings: TuneSettings | None = None,
    out: str | Path | None = None,
) -> TuneResult:
    """Tune ``program``'s knobs (a resumable, distributable Optuna study, ``TuneSettings``)
    and, with ``out``, export the trial its pick rule chooses as an artifact
    (``export_trial``)."""
    t = settings or TuneSettings()
    names = parse_objectives(t.objectives)
    check_pick_rule(t.pick_rule, names)
    data = {
        "train_split": t.train_split,
        "dev_split": t.dev_split,
        "train_limit": t.train_limit,
        "dev_limit": t.dev_limit,
    }
    recipe = make_recipe(  # what an exported trial's artifact records (its knobs: the trial's)
        program=program,
        knobs={},
        dataset=dataset,
        **data,
        optimizer=t.optimizer if t.compile_each else "bootstrap",
        select_on="train" if t.compile_each else "dev",
        metric=names[0],
        model=getattr(lm, "embedded_name", None) or lm.model,
        retriever=t.retriever,
        seed=t.seed,
        index=t.index,
    )
    splits = prepare(dataset, lm, **data, index=t.index, retriever=t.retriever)
    storage = t.storage or "sqlite:///runs/tune.db"
    if storage.startswith("sqlite:///") and not storage.endswith(":memory:"):
        Path(storage.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    name = t.study or f"{program}-{slug(dataset)}-{slug(lm.model)}-{t.objectives}"
    # every knob setting once (a grid over the declared ranges), never the same one twice
    grid = knob_grid(get_program(program), lm)
    optuna_study = open_study(name, storage, names, seed=t.seed, heartbeat=t.heartbeat, grid=grid)
    check_resumed(optuna_study, _scored_on(recipe, splits, names, lm, t.compile_each))
    _tune(
        optuna_study,
        t.trials,
        program_name=program,
        retriever=splits.retriever,
        trainset=splits.train.examples,
        devset=splits.dev.examples,
        objectives=names,
        compile_each=t.compile_each,
        optimizer=t.optimizer,
        metric=names[0],
        seed=t.seed,
        lm=lm,
    )
    chosen = pick(optuna_study, t.pick_rule)
    result = TuneResult(optuna_study, name, storage, names, chosen)
    if out is not None:
        result.artifact = export_trial(result, recipe, splits, lm, t.pick_rule, out, t.compile_each)
    return result


def _scored_on(
    recipe: Recipe, splits: Splits, names: list[str], lm: Any, compile_each: bool
) -> dict[str, Any]:
    """What a study's trials were scored on: a resumed study must match it."""
    data = recipe.dataset
    return {
        "program": recipe.program,
        "model": lm.model,
        "objectives": names,
        "dev_split": data.dev_split,
        "dev_limit": data.dev_limit,
        # the questions themselves, not the dataset's path (workers name one file differently)
        "questions": short_hash([[ex.id, ex.question] for ex in splits.dev.examples]),
        "retriever": splits.retriever.kind,
        "corpus_hash": splits.retriever.corpus.content_hash(),  # an index's, wherever it is
        "compile_each": compile_each,
        **(
            {
                "optimizer": recipe.optimizer.name,
                "train_split": data.train_split,
                "train_limit": data.train_limit,
            }
            if compile_each
            else {}
        ),
    }


def _tune(study: optuna.Study, trials: int, **trial_args: Any) -> None:
    """``tune`` under ``dspy.context(lm=...)`` (the trials' ``lm``). A trial that
    raised (its questions failed: a server that died) is recorded FAIL by Optuna; it is
    re-queued with the same knobs, as a killed worker's stale trial is, and the error is one
    ``ModelCallError``."""
    lm = trial_args["lm"]
    failed_before = {t.number for t in study.get_trials(deepcopy=False, states=_FAIL)}
    try:
        with dspy.context(lm=lm):
            tune(study, trials, **trial_args)
    except Exception as err:
        me = f"{socket.gethostname()}:{os.getpid()}"  # this worker's trials, not others'
        failed = [
            t
            for t in study.get_trials(deepcopy=False, states=_FAIL)
            if t.number not in failed_before and t.user_attrs.get("worker") == me
        ]
        if not failed:
            raise
        waiting = len(study.get_trials(deepcopy=False, states=_WAITING))
        with warnings.catch_warnings():  # "experimental" in Optuna since 2.8
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            for trial in failed:
                RetryHeartbeatStaleTrialCallback(max_retry=2)(study, trial)
        requeued = len(study.get_trials(deepcopy=False, states=_WAITING)) > waiting
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ModelCallError(
            f"study {study.study_name!r}: trial {failed[0].number} failed calling "
            f"{endpoint(lm)} ({first}); "
            + (
                "it is recorded FAIL and re-queued with the same knobs: run the same command "
                "again to resume"
                if requeued
                else "it is recorded FAIL (retried twice already: not re-queued)"
            )
        ) from err


def export_trial(
    result: TuneResult,
    recipe: Recipe,
    splits: Splits,
    lm: Any,
    pick_rule: str,
    out: str | Path,
    compiled: bool = False,
) -> Path:
    """The chosen trial of a study as an artifact: its program at the trial's knobs (compiled
    as the trials were, with ``compiled``), and ``recipe`` with the knobs, the index, the model
    and the study (its URL without the password: the recipe is shared with the artifact; give
    the password again with --storage)."""
    knobs = result.chosen.user_attrs["knobs"]
    prog = build_program(recipe.program, splits.retriever, knobs, lm=lm)
    if compiled:
        with dspy.context(lm=lm):
            prog = compile_program(
                prog,
                splits.train.examples,
                optimizer=recipe.optimizer.name,
                metric=recipe.metric,
                seed=recipe.seed,
                select_on="train",
            )
    index = recipe.retriever.saved_index
    recipe = recipe.updated(
        knobs=knobs,
        retriever={**retriever_recipe(splits.retriever, splits.train), **index_entry(index)},
        model={**recipe.to_dict()["model"], "lm_kwargs": recorded_lm_kwargs(recipe, lm)},
        compiled=compiled,
        tuning={
            "study": result.name,
            "storage": make_url(result.storage).render_as_string(hide_password=True),
            "trial": result.chosen.number,
            "pick": pick_rule,
            "objectives": result.objectives,
        },
    )
    scores = {"before": None, "after": result.chosen.user_attrs.get("aggregate")}
    return save_artifact(out, prog, recipe.to_dict(), scores)
