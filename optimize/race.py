"""The strategy race (``netcast compile --program auto``): which strategy, with which knobs and
demonstrations, is best for this data and this model, found on held-out training questions
(never dev) within a budget of model calls, and handed back compiled. ``StrategyRace`` is the
teleprompter (its student: the candidate programs), configured by ``RaceSettings``.

Every (strategy, grid point, demonstration source) is an arm, and one successive halving runs
over all of them, the validation questions its fidelity (as HbBoPs and TRIPLE select prompts;
the steps: ``optimize.halving``):

1. Waves. The first wave brings in every strategy at its defaults; each later one the next
   arms of each strategy in contention (an arm of it still in the race), nearest its defaults
   first, as many as cost what one arm of the dearest of them does (cheap arms are seen
   early), and the next arm of each strategy out of contention after 1, 2, 4, ... waves.
2. Rungs, breadth first (as asynchronous successive halving, ASHA, promotes): an arm enters
   on the first ``first`` validation questions (its strategy's first rung: fewer where they
   would cost more than its share of a first wave held to 1/``eta`` of the budget,
   ``halving.first_rungs``) and climbs one rung a wave (twice the questions, up to the whole
   fold). A wave scores the contenders' new arms in turns (each one's nearest, then its
   next, ...), then lets the arms earlier waves kept climb a rung (the lower rungs first),
   then scores the arms of the strategies out of contention: no arm climbs before the next
   arms of the strategies in contention have been scored. At each rung an arm that trails
   the leader by the paired sign-flip test at ``drop_p`` gets no more calls, as does, before
   a climb, one trailing the best arm left on the questions both scored; the better
   1/``eta`` by mean go on, and the cheapest the test at ``alpha`` cannot tell apart from
   the leader; the arms scored past the rung are ranked but stay, and at the last rung
   every arm that reached it is judged alike. An arm whose replies fit no field leaves; a
   model error takes its strategy out.
3. Choice. The finalists: the arms left in the race scored on the most questions or on the
   rung below (a wave's arms are a rung behind the previous wave's, whatever their scores),
   each judged on the questions all of them scored. The best validation score wins, except
   that among the finalists the test at ``alpha`` cannot tell apart from it and that trail
   it by at most ``margin``, the cheapest in prompt tokens a question wins. The winner's
   test against its strategy's defaults (on the questions both scored) is recorded.

The budget counts every call the arms' programs made, answered from DSPy's cache or not (the
race's choices and length do not depend on what the cache holds; a rerun on a warm cache is
fast, not longer). In the
first wave each strategy's first question is scored before any other question (what a
question of it costs is unknown until then; a budget below one call a question of the first
rung is refused before any call); a chunk of questions is scored as far as the calls left
cover it at the most calls one question of that strategy has taken so far, and the race ends
where they cover no question of the arm next in line. Every question scored is kept (each
arm's rows in a run directory, the order its chunks were scored in a chunk log beside them):
a killed race rerun with the same settings takes them, not asking the model again, and,
charging them as the first run did, makes the same choices.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy
from dspy.teleprompt import Teleprompter

from netcast.errors import InputError
from netcast.optimize.budget import CallBudget
from netcast.optimize.compile import hold_out
from netcast.optimize.halving import (
    Arm,
    Lane,
    Scored,
    Scorer,
    arm_versus_defaults,
    choice_of,
    drop_trailing,
    entrants,
    fewest,
    first_rungs,
    halve,
    ladder,
    lanes,
    pick_winner,
    race_table,
    reasons,
    score_arm,
)
from netcast.optimize.joint import check_search, held_knobs, point_program
from netcast.optimize.settings import RaceSettings
from netcast.programs import get_program, program_names
from netcast.programs import knobs as knobs_mod
from netcast.programs.base import NetcastProgram

AUTO = "auto"


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
class RaceResult:
    program_name: str
    knobs: dict[str, Any]
    demos: str
    program: dspy.Module
    table: list[dict[str, Any]]  # every arm scored
    choice: dict[str, Any]  # the winner, the leader, the ties and the test
    spent: int
    budget: int | None
    complete: bool = True  # every arm entered and settled: nothing cut short by the budget
    held: dict[str, Any] = field(default_factory=dict)  # the knobs the winner held
    seconds: float = 0.0  # the race's wall time


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
    drop_p: float = RaceSettings.drop_p,
) -> dict[str, dict[str, Any]]:
    """A race's knobs (``shared_knobs``), demonstration sources and budget checked before any
    model call; the knobs each program holds."""
    held = shared_knobs(names, fixed)
    check_lanes(held, demos, budget, first, drop_p)
    return held


def check_lanes(
    held: Mapping[str, dict[str, Any]],
    demos: Sequence[str],
    budget: int | None,
    first: int,
    drop_p: float,
) -> None:
    """Each strategy's demonstration sources with the knobs it holds, and a budget that must
    cover the first rung at its fewest questions (``first_rungs`` caps a rung to no fewer than
    ``fewest(drop_p)``), at one call a question, checked before any model call."""
    for n, knobs in held.items():
        check_search(n, knobs, None, demo_sources(n, demos))
    least = min(first, fewest(drop_p))
    if budget is not None and budget < len(held) * least:
        raise InputError(
            f"--budget {budget} is too small for the race's first rung: {len(held)} programs x "
            f"{least} questions need at least {len(held) * least} model calls"
        )


class StrategyRace(Teleprompter):
    """Race candidate programs on training questions (module docstring).

    ``compile(student, trainset=...)``: ``student`` maps each strategy's name to its program
    (``candidates``; a sequence of programs is keyed by their names), each holding the knobs it
    was built with (``optimize.joint.held_knobs``). Returns the winner compiled
    (``self.result``: the race's table and choice). ``workdir`` keeps what was scored (each
    arm's rows) so a rerun resumes; ``report(event, state)`` is told of each step (for
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
        self.settings = (settings or RaceSettings()).for_teacher("model")  # the CLI's default
        self.lm, self.metric, self.teacher_lm, self.seed = lm, metric, teacher_lm, seed
        self.workdir = Path(workdir) if workdir else None
        self.report = report or (lambda event, state: None)
        self.result: RaceResult | None = None

    def compile(self, student, *, trainset, teacher=None, valset=None, **kwargs) -> dspy.Module:
        """The winner, compiled (``valset`` is not used: the race scores held-out training
        questions, so dev stays unseen)."""
        start = time.perf_counter()
        race = _Race.open(self, student, trainset)
        race.run()
        self.result = race.finish(time.perf_counter() - start)
        return self.result.program


@dataclass
class _Race:
    """A race under way: the candidates and the knobs they hold, the validation fold and the
    questions demonstrations are drawn from, each strategy's lane, the arms entered, the
    budget."""

    tele: StrategyRace
    built: dict[str, dspy.Module]
    held: dict[str, dict[str, Any]]
    valset: list[dspy.Example]
    pool: list[dspy.Example]
    first: int
    lanes: dict[str, Lane]
    calls: CallBudget
    arms: list[Arm] = field(default_factory=list)
    programs: dict[str, dspy.Module] = field(default_factory=dict)  # by arm key, built once

    @classmethod
    def open(cls, tele: StrategyRace, student: Any, trainset: Sequence) -> _Race:
        built = dict(student) if isinstance(student, Mapping) else {p.name: p for p in student}
        if len(built) < 2:
            raise InputError("a race needs at least two different programs (or --program auto)")
        s = tele.settings
        s.check()
        pool, valset = (
            ([], list(trainset)) if set(s.demos) == {"none"} else hold_out(trainset, s.share)
        )
        if not valset:
            raise InputError("the race has no validation questions (give more training questions)")
        first = max(1, min(s.first, len(valset)))
        held = {n: held_knobs(p) for n, p in built.items()}
        check_lanes(held, s.demos, s.budget, first, s.drop_p)
        if tele.workdir:
            tele.workdir.mkdir(parents=True, exist_ok=True)

        def sources(name: str) -> list[str]:
            return demo_sources(name, s.demos)

        by_strategy = lanes(built, held, sources, tele.lm, tele.seed)
        calls = CallBudget(s.budget, cached_free=False)
        race = cls(tele, built, held, valset, list(pool), first, by_strategy, calls)
        if fixed := getattr(student, "fixed", None):  # before the first call: what --set reaches
            race.tell("knobs", {**race.state(), "scope": knob_scope(list(built), fixed)})
        return race

    def state(self) -> dict[str, Any]:
        s = self.tele.settings
        return {
            "arms": self.arms,
            "spent": self.calls.spent,
            "budget": s.budget,
            "metric": self.tele.metric,
        }

    def tell(self, event: str, state: dict[str, Any]) -> None:
        self.tele.report(event, state)

    def program(self, arm: Arm) -> dspy.Module:
        """``arm``'s program: its strategy's at its knobs, with demonstrations from its
        source (built once)."""
        if arm.key not in self.programs:
            tele, base = self.tele, self.built[arm.strategy]
            self.programs[arm.key] = point_program(
                type(base)(base.retriever, lm=tele.lm, **arm.knobs),
                arm.demos,
                self.pool,
                per_step=tele.settings.per_step,
                teacher_lm=tele.teacher_lm,
                seed=tele.seed,
            )
        return self.programs[arm.key]

    def run(self) -> None:
        """Waves (module docstring): each brings its arms in at their first rung, then the
        arms earlier waves kept climb a rung, until every arm has entered and settled or the
        budget ends the race."""
        fold = len(self.valset)
        wave = 0
        while True:
            # the arms earlier waves kept, below the whole fold: they climb after the entrants
            climbers = [a for a in self.arms if a.state == "running" and len(a.rows) < fold]
            new = entrants(self.lanes, self.calls, wave)
            if not new and not climbers and not any(lane.open for lane in self.lanes.values()):
                return
            if new:
                self.arms += new
                self.tell("wave", {**self.state(), "wave": wave, "entered": len(new)})
                if wave == 0:
                    # each strategy's first question before any other: its calls a question
                    # are unknown until then, and they set its first rung
                    if not all(self.score(arm, 1) for arm in new):
                        return
                    s = self.tele.settings
                    first_rungs(self.lanes, self.calls, self.first, s.budget, s.eta, s.drop_p)
            # the contenders' next arms enter, then the kept arms climb, then the arms of the
            # strategies out of contention enter
            contending = [a for a in new if self.lanes[a.strategy].idle == 0]
            if contending and not self.enter(contending):
                return
            if climbers and not self.climb(climbers):
                return
            others = [a for a in new if self.lanes[a.strategy].idle]
            if others and not self.enter(others):
                return
            for lane in self.lanes.values():
                lane.settle(self.arms)
            wave += 1
            if any(a.state == "running" and len(a.rows) < fold for a in self.arms):
                continue  # a wave with nothing to enter still has arms to climb
            # waves in which no open strategy is due bring nothing: skip them at once
            skip = min((lane.until_due for lane in self.lanes.values() if lane.open), default=0)
            for lane in self.lanes.values():
                lane.idle += skip * bool(lane.idle)
            wave += skip

    def score(self, arm: Arm, n: int) -> bool:
        """``arm`` scored up to ``n`` questions; False when the budget ends the race."""
        if arm.state != "running":
            return True

        def chunk(a: Arm) -> None:  # a live line per chunk
            self.tell("chunk", {**self.state(), "arm": a})

        scorer = Scorer(
            self.valset, self.calls, self.tele.metric, self.tele.workdir, self.tele.lm, chunk
        )
        outcome = score_arm(arm, self.program(arm), n, scorer)
        if outcome is Scored.MODEL_ERROR:  # a model error: the strategy leaves the race
            lane = self.lanes[arm.strategy]
            lane.failed = arm.reason
            for other in self.arms:
                if other.strategy == arm.strategy and other.state == "running":
                    other.state, other.reason = "failed", f"{arm.name}: {arm.reason}"
        return outcome is not Scored.OUT_OF_BUDGET

    def enter(self, new: list[Arm]) -> bool:
        """A wave's arms scored on their strategies' first rungs, in turn, and judged at the
        first rung with the arms earlier waves kept, which are ranked there but stay (they
        are judged at their own rungs); False when the budget ends the race."""
        for arm in new:
            if not self.score(arm, self.lanes[arm.strategy].first or self.first):
                return False
        older = [a for a in self.arms if a.state == "running" and a not in new]
        self.judge([*older, *new], self.first, stay=older)
        return True

    def climb(self, climbers: list[Arm]) -> bool:
        """Each arm earlier waves kept scored up to its next rung (the lower rungs first), and
        judged there with the arms scored past it, which are ranked but stay, except at the
        last rung (the whole fold), where every arm that reached it is judged alike. Before
        each rung's climb, an arm that trails the best arm left on the questions both scored
        (at ``drop_p``) is dropped: it climbs no further. False when the budget ends the
        race."""
        s, metric, fold = self.tele.settings, self.tele.metric, len(self.valset)
        rungs = ladder(self.first, fold)
        target = {id(a): next(n for n in rungs if n > len(a.rows)) for a in climbers}
        for n in sorted(set(target.values())):
            if left := [a for a in self.arms if a.state == "running" and a.rows]:
                drop_trailing(left, None, metric, s.drop_p)
            group = [a for a in climbers if target[id(a)] == n and a.state == "running"]
            for arm in group:
                if not self.score(arm, n):
                    return False
            last = n >= fold
            rest = [
                a
                for a in self.arms
                if a.state == "running"
                and all(a is not b for b in group)
                and (len(a.rows) > n or (last and len(a.rows) == n))
            ]
            self.judge([*group, *rest], n, last=last)
        return True

    def judge(
        self, field_: list[Arm], n: int, last: bool = False, stay: Sequence[Arm] = ()
    ) -> None:
        """A rung of ``n`` questions: the arms of ``field_`` trailing the leader at ``drop_p``
        dropped, the rest halved (``optimize.halving.halve``)."""
        s, metric = self.tele.settings, self.tele.metric
        alive = [a for a in field_ if a.state == "running" and a.rows]
        if not alive:
            return
        leader = drop_trailing(alive, n, metric, s.drop_p)
        alive = [a for a in alive if a.state == "running"]
        halve(alive, n, metric, s.eta, s.alpha, last or n >= len(self.valset), stay)
        self.tell("rung", {**self.state(), "questions": n, "leader": leader})

    def finalists(self) -> list[Arm]:
        """The arms judged: those left in the race scored on the most questions, or on the
        rung below it (arms climb a rung a wave, so an arm that entered a wave later is a rung
        behind whatever its score), each judged on the questions all of them scored (the
        others left are marked out of budget)."""
        left = [a for a in self.arms if a.state in ("running", "out of budget") and a.rows]
        if not left:
            raise InputError("no arm finished the race: " + reasons(self.arms))
        most = max(len(a.rows) for a in left)
        below = max((n for n in ladder(self.first, len(self.valset)) if n < most), default=most)
        finalists = [a for a in left if len(a.rows) >= below]
        shared = min(len(a.rows) for a in finalists)
        for arm in self.arms:  # entered, but the budget ended the race before its first chunk
            if arm.state == "running" and not arm.rows:
                arm.state, arm.reason = "out of budget", "scored 0 questions"
        for arm in left:
            if arm in finalists:
                arm.state, arm.reason = "finished", ""
            else:
                arm.state = "out of budget"
                arm.reason = arm.reason or f"scored {len(arm.rows)} questions"
            arm.choice = choice_of(arm, self.tele.metric, shared)
        return finalists

    def finish(self, seconds: float) -> RaceResult:
        """The choice (module docstring, 3), the race's table, and the winner compiled."""
        s, metric = self.tele.settings, self.tele.metric
        finalists = self.finalists()
        winner, choice = pick_winner(finalists, s.alpha, s.drop_p, len(self.valset), s.margin)
        defaults = next(
            (a for a in self.arms if a.strategy == winner.strategy and a.order == 0), None
        )
        if gate := arm_versus_defaults(winner, defaults, metric, s.alpha):
            choice["versus_defaults"] = gate
        complete = not any(lane.open for lane in self.lanes.values()) and all(
            a.state != "out of budget" for a in self.arms
        )
        self.tell("done", {**self.state(), "choice": choice})
        table = race_table(self.arms, metric, winner)
        if self.tele.workdir:
            (self.tele.workdir / "race.json").write_text(json.dumps(table, indent=1))
        return RaceResult(
            winner.strategy,
            winner.knobs,
            winner.demos,
            self.program(winner),
            table,
            choice,
            self.calls.spent,
            s.budget,
            complete,
            self.held[winner.strategy],
            seconds,
        )


def clear(workdir: str | Path) -> None:
    """Remove a finished race's working directory (its rows are in the recipe)."""
    shutil.rmtree(workdir, ignore_errors=True)
