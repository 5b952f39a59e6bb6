"""The strategy race (``netcast compile --program auto``): which strategy, with which knobs and
demonstrations, is best for this data and this model, found on held-out training questions
(never dev) within a budget of model calls, and handed back compiled. ``StrategyRace`` is the
teleprompter (its student: the candidate programs), configured by ``RaceSettings``.

1. Rungs, cheap and wide: every strategy at its defaults on the first ``first`` validation
   questions. A strategy that trails the leader (the best mean) by the paired sign-flip test at
   ``drop_p`` is dropped and spends no more calls; a strategy whose questions fail (a model
   error, replies it cannot parse) is recorded with its reason and dropped. Of the rest, the
   better half by mean score (at least two) goes on (successive halving), and the cheapest
   in tokens a question with them (it can only win among ties, which more questions decide),
   to twice the questions, until the validation fold is scored, one is left, or the rungs
   have spent half the budget (the rest is the depth stage's).
2. Depth: each survivor's joint compile (its knob grid x demonstration sources,
   ``optimize.joint``) on the whole fold, the leader first, each given an equal share of the
   calls left (what one leaves goes to the next).
3. Choice: the survivor with the best validation score, except that among the survivors the
   same test at ``alpha`` cannot tell apart from it, the cheapest in prompt tokens per question
   wins: a strategy at ten times the tokens wins only by beating the leader.

The budget counts calls that reached the model (answers from DSPy's cache are free). Every
strategy's first question is scored before any other question (what a question of it costs is
unknown until then; a budget below one call a question of the first rung is refused before any
call); after that no chunk of questions starts unless the calls left cover it at the most calls
one question of that strategy has taken so far.
Every question scored is kept (the rungs' rows as run directories, the joint trials in Optuna
storage): a killed race rerun with the same settings goes on without scoring them again.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy
import optuna
from dspy.teleprompt import Teleprompter

from netcast.errors import InputError, one_line
from netcast.evaluation.evaluate import aggregate, evaluate
from netcast.evaluation.runlog import RunLog
from netcast.evaluation.stats import paired
from netcast.files import short_hash
from netcast.optimize.budget import CallBudget
from netcast.optimize.compile import hold_out
from netcast.optimize.joint import (
    JointCompile,
    check_search,
    held_knobs,
    joint_study,
    model_calls,
    trial_rows,
)
from netcast.optimize.settings import RaceSettings
from netcast.programs import get_program, program_names
from netcast.programs import knobs as knobs_mod
from netcast.programs.base import NetcastProgram

AUTO = "auto"
CHUNK = 5  # questions scored between budget checks on a rung
ETA = 2  # successive halving: the better 1/ETA of a rung (and the cheapest) go on
RUNG_SHARE = 0.5  # the rungs stop doubling once they have spent this share of the budget


def race_programs(spec: str | Sequence[str]) -> list[str]:
    """The strategies ``spec`` names: ``auto`` (every registered one), or a comma-separated
    list; an unknown name stops here, before any model call."""
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    names = [n.strip() for n in names if n.strip()]
    if names == [AUTO]:
        return program_names()
    for name in names:
        get_program(name)  # InputError naming the choices
    if len(set(names)) < 2:
        raise InputError("a race needs at least two different programs (or --program auto)")
    return list(dict.fromkeys(names))


def is_race(spec: str) -> bool:
    return spec == AUTO or "," in spec


def teachable(name: str) -> bool:
    """Whether the annotation teacher has demonstrations for ``name``'s steps."""
    return get_program(name).annotated_demos is not NetcastProgram.annotated_demos


def demo_sources(name: str, demos: Sequence[str]) -> list[str]:
    """The demonstration sources searched for ``name``: ``annotations`` only where the program
    can be taught from them."""
    return [s for s in demos if s != "annotations" or teachable(name)] or ["none"]


def shared_knobs(names: Sequence[str], fixed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``fixed`` (``--set``) split by program, under each program's own knob names: a knob
    reaches every raced program that has it, by its name or an alias (``k``, the retrieval
    depth, reaches every strategy that retrieves a number of passages; ``top_k``, basic's
    alias, basic alone); a knob no raced program has stops here, as does a bad value (named
    with its program)."""
    by_program: dict[str, dict[str, Any]] = {n: {} for n in names}
    for knob, value in fixed.items():
        holders = knob_holders(names, knob)
        if not holders:
            raise InputError(
                f"--set {knob}: no strategy in the race has a knob {knob!r} "
                f"(raced: {', '.join(names)})"
            )
        for n in holders:
            by_program[n][knob] = value
    for n, held in by_program.items():
        schema = get_program(n).Knobs
        typed = knobs_mod.validate(n, schema, held)  # a bad value named as it was given
        by_program[n] = {k: typed[k] for k in knobs_mod.renamed_for(n, schema, held)}
    return by_program


def knob_holders(names: Sequence[str], knob: str) -> list[str]:
    """The programs of ``names`` that have ``knob`` (by its name or an alias)."""
    return [n for n in names if knobs_mod.holds(get_program(n).Knobs, knob)]


def knob_scope(names: Sequence[str], fixed: dict[str, Any]) -> list[str]:
    """A line for each ``--set`` knob of a race: the strategies it reaches (with the knob's
    own name where it was given by an alias) and those it leaves at their defaults."""
    lines = []
    for knob, value in fixed.items():
        holders = knob_holders(names, knob)
        reached = [
            n + (f" (as {own})" if (own := get_program(n).Knobs.aliases().get(knob)) else "")
            for n in holders
        ]
        line = f"--set {knob}={json.dumps(value)} applies to {', '.join(reached) or 'none'}"
        others = [n for n in names if n not in holders]
        if others:
            line += f"; not to {', '.join(others)} (no such knob)"
        lines.append(line)
    return lines


@dataclass
class Runner:
    """One strategy in the race."""

    name: str
    state: str = "running"  # running | dropped | failed | out of budget | finished
    reason: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)  # its defaults, on the rungs
    saved: dict[str, dict[str, Any]] = field(default_factory=dict)  # rows an earlier run kept
    joint: Any = None  # its JointResult, after the depth stage
    trials: list[dict[str, Any]] = field(default_factory=list)  # its joint trials, any state
    choice: dict[str, Any] | None = None  # what it is judged by: scores, tokens, knobs, demos

    def scores(self, metric: str) -> dict[str, float]:
        return {r["id"]: r["scores"][metric] or 0.0 for r in self.rows}


@dataclass
class RaceResult:
    program_name: str
    knobs: dict[str, Any]
    demos: str
    program: dspy.Module
    table: list[dict[str, Any]]  # every strategy and grid point tried
    choice: dict[str, Any]  # the winner, the leader, the ties and the test
    spent: int
    budget: int | None
    complete: bool = True  # nothing was cut short by the budget
    held: dict[str, Any] = field(default_factory=dict)  # the knobs the winner held
    seconds: float = 0.0  # the race's wall time


def _summary(rows: Sequence[dict[str, Any]], metric: str) -> dict[str, Any]:
    agg = aggregate(rows) if rows else {"n": 0}
    n = agg["n"]
    return {
        "n": n,
        "score": agg.get(metric),
        "tokens": (agg.get("tokens_in") or 0) + (agg.get("tokens_out") or 0) if n else None,
        "seconds": agg.get("seconds"),
        "calls": sum(CallBudget.cost(r) for r in rows),
    }


class Candidates(dict):
    """A race's student: each strategy's program by name, and the ``--set`` knobs as they were
    given (``fixed``: the race reports which strategies each reaches, ``knob_scope``)."""

    def __init__(self, programs: Mapping[str, NetcastProgram], fixed: Mapping[str, Any]):
        super().__init__(programs)
        self.fixed = dict(fixed)


def candidates(
    spec: str | Sequence[str], retriever: Any, fixed: dict[str, Any] | None = None, lm: Any = None
) -> Candidates:
    """A race's student: the programs ``spec`` names (``race_programs``), each built with the
    knobs of ``fixed`` (``--set``) it has, by name or alias (``shared_knobs``), which it holds
    throughout."""
    names = race_programs(spec)
    held = shared_knobs(names, dict(fixed or {}))
    programs = {n: get_program(n)(retriever, lm=lm, **held[n]) for n in names}
    return Candidates(programs, fixed or {})


def check_race(
    names: Sequence[str],
    fixed: dict[str, Any],
    demos: Sequence[str],
    budget: int | None,
    first: int = RaceSettings.first,
) -> dict[str, dict[str, Any]]:
    """A race's knobs (``shared_knobs``), demonstration sources and budget checked before any
    model call; the knobs each program holds."""
    held = shared_knobs(names, fixed)
    check_lanes(held, demos, budget, first)
    return held


def check_lanes(
    held: Mapping[str, dict[str, Any]], demos: Sequence[str], budget: int | None, first: int
) -> None:
    """Each strategy's demonstration sources with the knobs it holds, and a budget that must
    cover the first rung, checked before any model call."""
    for n, knobs in held.items():
        check_search(n, knobs, None, demo_sources(n, demos))
    if budget is not None and budget < len(held) * first:
        raise InputError(
            f"--budget {budget} is too small for the race's first rung: {len(held)} programs x "
            f"{first} questions need at least {len(held) * first} model calls"
        )


class StrategyRace(Teleprompter):
    """Race candidate programs on training questions (module docstring).

    ``compile(student, trainset=...)``: ``student`` maps each strategy's name to its program
    (``candidates``; a sequence of programs is keyed by their names), each holding the knobs it
    was built with (``optimize.joint.held_knobs``). Returns the winner compiled
    (``self.result``: the race's table and choice). ``workdir`` keeps what was scored (rung
    rows, joint trials) so a rerun resumes; ``report(event, state)`` is told of each step (for
    a live display). Run under ``dspy.context(lm=lm)``."""

    def __init__(
        self,
        settings: RaceSettings | None = None,
        *,
        lm: Any = None,
        metric: str = "f1",
        teacher_lm: Any = None,
        seed: int = 0,
        workdir: str | Path | None = None,
        report: Callable[[str, dict[str, Any]], None] | None = None,
    ):
        super().__init__()
        self.settings = settings or RaceSettings()
        self.lm, self.metric, self.teacher_lm, self.seed = lm, metric, teacher_lm, seed
        self.workdir = Path(workdir) if workdir else None
        self.report = report or (lambda event, state: None)
        self.result: RaceResult | None = None

    def compile(self, student, *, trainset, teacher=None, valset=None, **kwargs) -> dspy.Module:
        """The winner, compiled (``valset`` is not used: the race scores held-out training
        questions, so dev stays unseen)."""
        start = time.perf_counter()
        race = _Race.open(self, student, trainset)
        race.rungs()
        race.depth(trainset)
        self.result = race.finish(time.perf_counter() - start)
        return self.result.program


@dataclass
class _Race:
    """A race under way: the candidates and the knobs they hold, the validation fold, the
    runners, the budget, and the calls an earlier run of it spent on joint trials."""

    tele: StrategyRace
    built: dict[str, dspy.Module]
    held: dict[str, dict[str, Any]]
    valset: list[dspy.Example]
    first: int
    runners: dict[str, Runner]
    calls: CallBudget
    prior: dict[str, int] = field(default_factory=dict)

    @classmethod
    def open(cls, tele: StrategyRace, student: Any, trainset: Sequence) -> _Race:
        built = dict(student) if isinstance(student, Mapping) else {p.name: p for p in student}
        if len(built) < 2:
            raise InputError("a race needs at least two different programs (or --program auto)")
        s = tele.settings
        _, valset = (
            ([], list(trainset)) if set(s.demos) == {"none"} else hold_out(trainset, s.share)
        )
        if not valset:
            raise InputError("the race has no validation questions (give more training questions)")
        first = max(1, min(s.first, len(valset)))
        held = {n: held_knobs(p) for n, p in built.items()}
        check_lanes(held, s.demos, s.budget, first)
        if tele.workdir:
            tele.workdir.mkdir(parents=True, exist_ok=True)
        runners = {n: Runner(n) for n in built}
        race = cls(tele, built, held, valset, first, runners, CallBudget(s.budget))
        race.prior = race.earlier_trials()
        if fixed := getattr(student, "fixed", None):  # before the first call: what --set reaches
            race.tell("knobs", {**race.state(), "scope": knob_scope(list(built), fixed)})
        race.take_saved_rows()
        return race

    @property
    def storage(self) -> str | None:
        work = self.tele.workdir
        return f"sqlite:///{work / 'trials.db'}" if work else None

    def study_name(self, n: str) -> str:
        s = self.tele.settings
        key = {"knobs": self.held[n], "demos": list(s.demos), "seed": self.tele.seed}
        return f"joint-{n}-{short_hash(key)}"

    def state(self) -> dict[str, Any]:
        s, metric = self.tele.settings, self.tele.metric
        return {
            "runners": self.runners,
            "spent": self.calls.spent,
            "budget": s.budget,
            "metric": metric,
        }

    def tell(self, event: str, state: dict[str, Any]) -> None:
        self.tele.report(event, state)

    def alive(self) -> list[Runner]:
        return [r for r in self.runners.values() if r.state == "running"]

    def earlier_trials(self) -> dict[str, int]:
        """Calls an earlier run of this race spent on joint trials (reused, not redone): each
        strategy's joint compile charges its own to its share of the deep stage, so that a
        resumed race gives every survivor the share an uninterrupted one would have."""
        work = self.tele.workdir
        if not work or not (work / "trials.db").exists():
            return {}
        prior = {}
        for n in self.built:
            try:
                old = optuna.load_study(study_name=self.study_name(n), storage=self.storage)
            except KeyError:
                continue
            trials = old.get_trials(deepcopy=False)
            prior[n] = sum(model_calls(t.user_attrs.get("aggregate") or {}) for t in trials)
        return prior

    def take_saved_rows(self) -> None:
        """Rows an earlier run of this race scored (and paid for) are taken, not redone."""
        work = self.tele.workdir
        if not work:
            return
        for n, runner in self.runners.items():
            if (work / n / "run.json").exists():
                runner.saved = RunLog(work / n, _run_info(n, self.built[n], self.tele.lm)).rows
                self.calls.charge(n, list(runner.saved.values()))

    def score(self, runner: Runner, questions: Sequence[dspy.Example]) -> None:
        def chunk() -> None:  # a live line per chunk of a rung
            self.tell("chunk", {**self.state(), "program": runner.name})

        work, lm = self.tele.workdir, self.tele.lm
        _score_rung(runner, self.built[runner.name], questions, self.calls, work, lm, chunk)

    def rungs(self) -> None:
        """Every strategy at its defaults, the trailing ones dropped, the rest halved, on
        twice the questions each rung (module docstring, 1)."""
        # each strategy's first question scored before any other: its calls a question are
        # unknown until then, and every later chunk is admitted at the most one of its took
        for runner in self.runners.values():
            self.score(runner, self.valset[:1])
        n_questions = self.first
        while True:
            questions = self.valset[:n_questions]
            for runner in self.alive():
                self.score(runner, questions)
                self.tell("scored", self.state())
            if not self.alive():
                break
            leader = self.drop_trailing(self.alive())
            last = self.last_rung(n_questions)
            # successive halving: the better half goes on, and the cheapest of all; after the
            # last rung too, so that the deep stage's shares go to the best few, not to all
            _halve(self.alive(), self.tele.metric, len(questions))
            self.tell("rung", {**self.state(), "questions": len(questions), "leader": leader.name})
            if len(self.alive()) <= 1 or last:
                break
            n_questions = min(2 * n_questions, len(self.valset))

    def drop_trailing(self, alive: list[Runner]) -> Runner:
        """Drop the strategies the paired test says trail the leader at ``drop_p``; the
        leader."""
        metric, drop_p = self.tele.metric, self.tele.settings.drop_p
        leader = max(alive, key=lambda r: _mean(r.scores(metric)))
        for r in alive:
            if r is leader:
                continue
            test = paired(r.scores(metric), leader.scores(metric), interval=False)
            if test.trails(drop_p):
                r.state = "dropped"
                r.reason = (
                    f"trails {leader.name} by {-test.diff:.3f} on {test.n} questions "
                    f"(p = {test.p:.3g})"
                )
        return leader

    def last_rung(self, n_questions: int) -> bool:
        """Whether the rung of ``n_questions`` is the last: the fold is scored, or the rungs'
        own calls have reached their share of the budget (a resumed race's ``calls.spent``
        also holds the rows and trials of later stages, which must not end the rungs earlier
        than the first run did)."""
        budget = self.tele.settings.budget
        rung_calls = sum(CallBudget.cost(row) for r in self.runners.values() for row in r.rows)
        scored = n_questions >= len(self.valset)
        return scored or (budget is not None and rung_calls >= RUNG_SHARE * budget)

    def depth(self, trainset: Sequence[dspy.Example]) -> None:
        """Each survivor's joint compile, the leader first, an equal share of what is left."""
        metric, budget = self.tele.metric, self.tele.settings.budget
        alive = sorted(self.alive(), key=lambda r: -_mean(r.scores(metric)))
        for i, runner in enumerate(alive):
            share = None if budget is None else (budget - self.calls.spent) // (len(alive) - i)
            if share is not None and share <= 0:
                break
            self.deepen(runner, self.calls.lane(share), trainset)
        for n, spent in self.prior.items():  # trials of strategies this run gave no share (none,
            self.calls.charge(n, [], extra=spent)  # if the earlier run was this race): spent

    def deepen(self, runner: Runner, lane: CallBudget, trainset: Sequence[dspy.Example]) -> None:
        """``runner``'s joint compile within ``lane``; a failing one is recorded, never fatal."""
        tele, name = self.tele, runner.name
        self.prior.pop(name, None)  # its joint compile charges its earlier trials to ``lane``

        def chunk_scored(trial: dict[str, Any]) -> None:
            live = {**self.state(), "spent": self.calls.spent + lane.spent}
            self.tell("trial", {**live, "program": name, "trial": trial})

        study = joint_study(self.storage, self.study_name(name))
        joint = JointCompile(
            tele.settings.joint(tuple(demo_sources(name, tele.settings.demos))),
            lm=tele.lm,
            metric=tele.metric,
            teacher_lm=tele.teacher_lm,
            seed=tele.seed,
            budget=lane,
            study=study,
            progress=False,
            on_chunk=chunk_scored,
        )
        try:
            joint.compile(self.built[name], trainset=trainset)
            runner.joint = joint.result
        except InputError as err:  # no trial completed within its share
            runner.reason = str(err)
        except Exception as err:  # a failing strategy is recorded and left out, never fatal
            runner.state, runner.reason = "failed", one_line(err)
        finally:
            self.calls.absorb(lane)
            runner.trials = trial_rows(study)  # with no trial complete too: what it spent
        self.tell("deep", self.state())

    def finalists(self) -> list[Runner]:
        """The strategies judged: finished, or stopped by the budget on a rung (judged on the
        questions they scored)."""
        finalists = []
        for runner in self.runners.values():
            if runner.state not in ("running", "out of budget"):
                continue
            runner.choice = _choice(runner, self.tele.metric)
            if runner.choice["scores"]:
                runner.state = "finished" if runner.state == "running" else runner.state
                finalists.append(runner)
        if not finalists:
            raise InputError("no strategy finished the race: " + _reasons(self.runners))
        return finalists

    def finish(self, seconds: float) -> RaceResult:
        """The choice (module docstring, 3), the race's table, and the winner compiled."""
        s, metric = self.tele.settings, self.tele.metric
        finalists = self.finalists()
        winner, choice = pick_winner(finalists, s.alpha, s.drop_p, len(self.valset))
        if gate := _gate(winner):
            choice["versus_defaults"] = gate
        if winner.joint is not None:
            program, knobs, source = winner.joint.program, winner.joint.knobs, winner.joint.demos
        else:
            program = self.built[winner.name]
            knobs, source = program.knobs.model_dump(), "none"
        complete = all(r.state == "finished" for r in finalists) and all(
            r.joint is not None and not r.joint.untried for r in finalists
        )
        self.tell("done", {**self.state(), "choice": choice})
        table = race_table(self.runners, metric)
        if self.tele.workdir:
            (self.tele.workdir / "race.json").write_text(json.dumps(table, indent=1))
        return RaceResult(
            winner.name,
            knobs,
            source,
            program,
            table,
            choice,
            self.calls.spent,
            s.budget,
            complete,
            self.held[winner.name],
            seconds,
        )


def pick_winner(
    finalists: Sequence[Runner], alpha: float, drop_p: float, n: int
) -> tuple[Runner, dict[str, Any]]:
    """The best validation score; among the finalists it cannot be told from at ``alpha``, the
    cheapest in tokens a question. The winner, and the choice as the recipe records it."""
    top = max(finalists, key=lambda r: (r.choice["score"], -r.choice["tokens"]))
    tied = [
        r
        for r in finalists
        if r is top
        or not paired(top.choice["scores"], r.choice["scores"], interval=False).beats(alpha)
    ]
    winner = min(tied, key=lambda r: (r.choice["tokens"], -r.choice["score"]))
    test = paired(winner.choice["scores"], top.choice["scores"], interval=False)
    return winner, {
        "winner": winner.name,
        "top": top.name,
        "tied": sorted(r.name for r in tied),
        "versus_top": {"n": test.n, "diff": round(test.diff, 4), "p": round(test.p, 4)},
        "alpha": alpha,
        "drop_p": drop_p,
        "validation_questions": n,
    }


def _halve(alive: list[Runner], metric: str, n: int) -> None:
    """Keep the better half of ``alive`` by mean score (at least two), and the cheapest in
    tokens a question of all of them (it can win the race only among ties, which a few more
    questions decide); the rest leave the race."""
    ranked = sorted(alive, key=lambda r: -_mean(r.scores(metric)))
    kept = ranked[: max(2, math.ceil(len(ranked) / ETA))]
    cheapest = min(alive, key=lambda r: _summary(r.rows, metric)["tokens"] or 0)
    if cheapest not in kept:
        kept.append(cheapest)
    for r in alive:
        if r not in kept:
            r.state = "dropped"
            r.reason = f"halved: {_mean(r.scores(metric)):.3f}, not in the better half on {n}"


def _mean(scores: dict[str, float]) -> float:
    return sum(scores.values()) / len(scores) if scores else 0.0


def _reasons(runners: dict[str, Runner]) -> str:
    return "; ".join(f"{r.name}: {r.state} ({r.reason})" for r in runners.values())


def _score_rung(
    runner: Runner,
    program: dspy.Module,
    questions: Sequence[dspy.Example],
    calls: CallBudget,
    work: Path | None,
    lm: Any,
    on_chunk: Callable[[], None] = lambda: None,
) -> None:
    """Score ``runner`` at its defaults on ``questions`` (those not scored yet, or saved by an
    earlier run), a chunk at a time while the budget covers it, ``on_chunk`` told after each;
    a failing question drops the strategy."""
    done = {r["id"] for r in runner.rows}
    for q in questions:
        if q.id not in done and q.id in runner.saved:
            runner.rows.append(runner.saved[q.id])
            done.add(q.id)
    todo = [q for q in questions if q.id not in done]
    run_dir = work / runner.name if work else None
    info = _run_info(runner.name, program, lm)
    start = 0
    while start < len(todo):
        n = calls.affordable(runner.name, min(CHUNK, len(todo) - start))
        if n == 0:
            runner.state, runner.reason = "out of budget", f"scored {len(runner.rows)} questions"
            return
        result = evaluate(
            program,
            todo[start : start + n],
            run_dir=run_dir,
            run_info=info,
            progress=False,
            max_errors=0,
        )
        fresh = [r for r in result.rows if r["id"] not in done]
        # rows an earlier run saved were charged by it (recounted from the run directory)
        calls.charge(runner.name, fresh)
        runner.rows += fresh
        done |= {r["id"] for r in fresh}
        on_chunk()
        if result.errors:
            first_id, first = next(iter(result.errors.items()))
            runner.state, runner.reason = "failed", f"{first_id}: {first}"
            return
        start += n


def _run_info(name: str, program: dspy.Module, lm: Any) -> dict[str, Any]:
    return {
        "program": name,
        "knobs": program.knobs.model_dump(),
        "model": getattr(lm, "model", None),
    }


def _choice(runner: Runner, metric: str) -> dict[str, Any]:
    """What a finished strategy is judged by: its joint compile's choice (on the whole fold),
    else its defaults on the rungs."""
    joint = runner.joint
    if joint is not None:
        row = next(t for t in joint.trials if t["trial"] == joint.trial)
        scores = dict(row["question_scores"])
        return {
            "scores": scores,
            "score": _mean(scores),
            "tokens": row["tokens"] or 0,
            "knobs": joint.knobs,
            "demos": joint.demos,
        }
    scores = runner.scores(metric)
    summary = _summary(runner.rows, metric)
    return {
        "scores": scores,
        "score": _mean(scores),
        "tokens": summary["tokens"] or 0,
        "knobs": None,
        "demos": "none",
    }


def _gate(runner: Runner) -> dict[str, Any] | None:
    """The winner's joint compile's test of the grid point it compared with its defaults (the
    best, or with ties "nearest" the nearest tie), with both points' knobs and scores: None
    where the defaults scored best or no joint compile ran."""
    versus = runner.joint.versus_defaults if runner.joint is not None else None
    if not versus or versus["best_trial"] == versus["default_trial"]:
        return None
    rows = {t["trial"]: t for t in runner.joint.trials}
    best, default = rows[versus["best_trial"]], rows[versus["default_trial"]]
    return {
        **versus,
        "knobs": best["knobs"],
        "demos": best["demos"],
        "score": best["score"],
        "default_score": default["score"],
    }


def race_table(runners: dict[str, Runner], metric: str) -> list[dict[str, Any]]:
    """Every strategy's defaults on the rungs and every grid point of its joint compile: n,
    score, tokens and seconds a question, calls that reached the model, state."""
    table = []
    for r in runners.values():
        table.append(
            {
                "program": r.name,
                "stage": "rungs",
                "knobs": "defaults",
                "demos": "none",
                **_summary(r.rows, metric),
                "state": r.state,
                "reason": r.reason,
                "question_scores": r.scores(metric),
            }
        )
        for t in r.trials:
            table.append(
                {
                    "program": r.name,
                    "stage": "joint",
                    "knobs": t["knobs"],
                    "demos": t["demos"],
                    "n": t["n"],
                    "score": t["score"],
                    "tokens": t["tokens"],
                    "seconds": t.get("seconds"),
                    "calls": t["model_calls"],  # as the rungs count them: cache hits free
                    "state": t["state"],
                    "reason": "chosen" if r.joint and t["trial"] == r.joint.trial else t["reason"],
                    "question_scores": t["question_scores"],
                }
            )
    return table


def clear(workdir: str | Path) -> None:
    """Remove a finished race's working directory (its rows are in the recipe)."""
    shutil.rmtree(workdir, ignore_errors=True)
