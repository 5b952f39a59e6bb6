"""An Optuna study over a program's knobs, as a DSPy Teleprompter (``KnobTuning``, the
registry's ``tune``): quality against cost, a Pareto front, pruning on partial evaluations,
resumable storage (SQLite, or PostgreSQL or any RDB URL for several workers on one study), a
pick rule. The workflows on top (``netcast tune``, ``compile --from --retune``) are
``netcast.optimize.tune``."""

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
from dspy.teleprompt import Teleprompter
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.study import MaxTrialsCallback
from optuna.trial import TrialState
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from netcast.errors import InputError, ModelCallError
from netcast.evaluation.evaluate import aggregate, evaluate
from netcast.evaluation.metrics import QUALITY
from netcast.files import short_hash
from netcast.models.factory import endpoint
from netcast.optimize.compile import compile_program, hold_out
from netcast.optimize.joint import knob_grid
from netcast.optimize.settings import UNJUDGED, TuneSettings
from netcast.pareto import pareto_indices
from netcast.programs import get_program
from netcast.retrievers import Retriever

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


_FAIL, _WAITING = (TrialState.FAIL,), (TrialState.WAITING,)


@dataclass
class StudyResult:
    """A study and the trial its pick rule took (``storage``: its URL without the password)."""

    study: optuna.Study
    name: str
    storage: str | None
    objectives: list[str]
    chosen: optuna.trial.FrozenTrial


class KnobTuning(Teleprompter):
    """A program's knobs tuned by an Optuna study (``TuneSettings``; module docstring): every
    knob setting of the program's declared space once (a grid sized for ``lm``), each trial's
    program compiled first with ``compile_each``, scored in chunks (pruned on partial scores).

    ``compile(student, trainset=..., valset=...)`` runs trials until the study holds
    ``trials`` finished ones (a study that holds trials scored on other questions, another
    program or model is refused before any trial), and returns the program of the trial the
    pick rule takes (``self.result``). The trials score ``valset`` (the dev questions), or
    held-out training questions with ``select_on="train"``. ``study``: its name (the
    settings', else this). Run under ``dspy.context(lm=lm)``."""

    def __init__(
        self,
        settings: TuneSettings | None = None,
        *,
        lm: Any = None,
        seed: int = 0,
        select_on: str = "dev",
        study: str = "tune",
        progress: bool = True,
    ):
        super().__init__()
        self.settings = settings or TuneSettings()
        self.lm, self.seed, self.select_on, self.progress = lm, seed, select_on, progress
        self.name = self.settings.study or study
        self.result: StudyResult | None = None

    def check(self) -> list[str]:
        """The objectives, or ``InputError`` for settings no study can run with."""
        names = parse_objectives(self.settings.objectives)
        check_pick_rule(self.settings.pick_rule, names)
        return names

    def compile(self, student, *, trainset, teacher=None, valset=None, **kwargs) -> dspy.Module:
        s, names = self.settings, self.check()
        trainset, devset = (
            hold_out(trainset) if self.select_on == "train" else (list(trainset), list(valset))
        )
        cls = type(student)
        if s.storage and s.storage.startswith("sqlite:///") and not s.storage.endswith(":memory:"):
            Path(s.storage.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        study = open_study(
            self.name, s.storage, names, self.seed, s.heartbeat, grid=knob_grid(cls, self.lm)
        )
        check_resumed(study, self._scored_on(cls.name, names, student.retriever, trainset, devset))
        _tune(
            study,
            s.trials,
            progress=self.progress,
            program_name=cls.name,
            retriever=student.retriever,
            trainset=trainset,
            devset=devset,
            objectives=names,
            compile_each=s.compile_each,
            optimizer=s.optimizer,
            metric=names[0],
            seed=self.seed,
            lm=self.lm,
        )
        chosen = pick(study, s.pick_rule)
        shown = s.storage and make_url(s.storage).render_as_string(hide_password=True)
        self.result = StudyResult(study, self.name, shown, names, chosen)
        program = cls(student.retriever, lm=self.lm, **chosen.user_attrs["knobs"])
        if s.compile_each:  # as the trials were: selected on held-out training questions
            program = compile_program(
                program,
                trainset,
                optimizer=s.optimizer,
                metric=names[0],
                seed=self.seed,
                select_on="train",
            )
        return program

    def _scored_on(
        self,
        program: str,
        objectives: list[str],
        retriever: Retriever,
        trainset: Sequence,
        devset: Sequence,
    ) -> dict[str, Any]:
        """What the trials are scored on: a resumed study must match it."""
        s = self.settings

        def questions(examples: Sequence) -> str:
            # the questions themselves, not the dataset's path (workers name one file apart)
            return short_hash([[ex.id, ex.question] for ex in examples])

        return {
            "program": program,
            "model": self.lm.model,
            "objectives": objectives,
            "dev_questions": len(devset),
            "questions": questions(devset),
            "retriever": retriever.kind,
            "corpus_hash": retriever.corpus.content_hash(),  # an index's, wherever it is
            "compile_each": s.compile_each,
            **(
                {
                    "optimizer": s.optimizer,
                    "train_questions": len(trainset),
                    "train_hash": questions(trainset),
                }
                if s.compile_each
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
