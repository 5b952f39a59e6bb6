"""The strategy race (``netcast compile --program auto``): which strategy, with which knobs and
demonstrations, is best for this data and this model, found on held-out training questions
(never dev) within a budget of model calls, and handed back compiled.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy
import optuna

from netcast.errors import InputError, one_line
from netcast.evaluation.evaluate import aggregate, evaluate
from netcast.evaluation.runlog import RunLog
from netcast.evaluation.stats import paired
from netcast.files import short_hash
from netcast.optimize.compile import hold_out
from netcast.optimize.joint import (
    CallBudget,
    check_search,
    joint_compile,
    joint_study,
    model_calls,
    state_cell,
    trial_rows,
)
from netcast.programs import get_program, program_names
from netcast.programs import knobs as knobs_mod
from netcast.programs.base import NetcastProgram

AUTO = "auto"
FIRST = 10  # questions of the first rung
DROP_P = 0.05  # a strategy trailing the leader at this p leaves the race
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


def check_race(
    names: Sequence[str],
    fixed: dict[str, Any],
    demos: Sequence[str],
    budget: int | None,
    first: int = FIRST,
) -> dict[str, dict[str, Any]]:
    """A race's knobs (``shared_knobs``), demonstration sources and budget checked before any
    model call; the knobs each program holds."""
    held = shared_knobs(names, fixed)
    for n in names:
        check_search(n, held[n], None, demo_sources(n, demos))
    if budget is not None and budget < len(names) * first:
        raise InputError(
            f"--budget {budget} is too small for the race's first rung: {len(names)} programs x "
            f"{first} questions need at least {len(names) * first} model calls"
        )
    return held


def race(
    programs: Sequence[str],
    retriever: Any,
    trainset: Sequence[dspy.Example],
    *,
    lm: Any,
    fixed: dict[str, Any] | None = None,
    demos: Sequence[str] = ("none", "annotations"),
    budget: int | None = None,
    metric: str = "f1",
    first: int = FIRST,
    drop_p: float = DROP_P,
    alpha: float = 0.1,
    share: float = 0.6,
    ties: str = "nearest",
    teacher_lm: Any = None,
    seed: int = 0,
    workdir: str | Path | None = None,
    report: Callable[[str, dict[str, Any]], None] | None = None,
) -> RaceResult:
    """Race ``programs`` on ``trainset`` (module docstring). ``workdir`` keeps what was scored
    (rung rows, joint trials) so a rerun resumes; ``report(event, state)`` is told of each
    step (for a live display), first (event ``knobs``, with ``fixed`` knobs) of the strategies
    each ``fixed`` knob reaches (``knob_scope``). Run under ``dspy.context(lm=lm)``."""
    names = list(programs)
    _, valset = ([], list(trainset)) if set(demos) == {"none"} else hold_out(trainset, share)
    if not valset:
        raise InputError("the race has no validation questions (give more training questions)")
    first = max(1, min(first, len(valset)))
    held = check_race(names, dict(fixed or {}), demos, budget, first)
    work = Path(workdir) if workdir else None
    runners = {n: Runner(n) for n in names}
    calls = CallBudget(budget)
    storage = f"sqlite:///{work / 'trials.db'}" if work else None
    if work:
        work.mkdir(parents=True, exist_ok=True)
    tell = report or (lambda event, state: None)

    def study_name(n: str) -> str:
        return f"joint-{n}-{short_hash({'knobs': held[n], 'demos': list(demos), 'seed': seed})}"

    def state() -> dict[str, Any]:
        return {"runners": runners, "spent": calls.spent, "budget": budget, "metric": metric}

    # calls an earlier run of this race spent on joint trials (reused, not redone): charged to
    # each strategy's own share of the deep stage, so that a resumed race gives every
    # survivor the share an uninterrupted one would have
    prior: dict[str, int] = {}
    if work and (work / "trials.db").exists():
        for n in names:
            try:
                old = optuna.load_study(study_name=study_name(n), storage=storage)
            except KeyError:
                continue
            trials = old.get_trials(deepcopy=False)
            prior[n] = sum(model_calls(t.user_attrs.get("aggregate") or {}) for t in trials)

    if fixed:  # which strategies each --set knob reaches, before the first call
        tell("knobs", {**state(), "scope": knob_scope(names, dict(fixed))})
    # 1. rungs: every strategy at its defaults, the trailing ones dropped
    built = {n: get_program(n)(retriever, lm=lm, **held[n]) for n in names}
    if work:  # rows an earlier run of this race scored (and paid for) are taken, not redone
        for n, runner in runners.items():
            if (work / n / "run.json").exists():
                runner.saved = RunLog(work / n, _run_info(n, built[n], lm)).rows
                calls.charge(n, list(runner.saved.values()))

    def chunk(runner: Runner) -> Callable[[], None]:  # a live line per chunk of a rung
        return lambda: tell("chunk", {**state(), "program": runner.name})

    # each strategy's first question scored before any other: its calls a question are unknown
    # until then, and every later chunk is admitted at the most one of its questions took
    for runner in runners.values():
        _score_rung(runner, built[runner.name], valset[:1], calls, work, lm, chunk(runner))
    n_questions = first
    while True:
        questions = valset[:n_questions]
        for runner in [r for r in runners.values() if r.state == "running"]:
            _score_rung(runner, built[runner.name], questions, calls, work, lm, chunk(runner))
            tell("scored", state())
        alive = [r for r in runners.values() if r.state == "running"]
        if not alive:
            break
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
        alive = [r for r in runners.values() if r.state == "running"]
        # the rungs' own calls (a resumed race's ``calls.spent`` also holds the rows and
        # trials of later stages, which must not end the rungs earlier than the first run did)
        rung_calls = sum(CallBudget.cost(row) for r in runners.values() for row in r.rows)
        last = n_questions >= len(valset) or (
            budget is not None and rung_calls >= RUNG_SHARE * budget
        )
        # successive halving: the better half goes on, and the cheapest of all; after the
        # last rung too, so that the deep stage's shares go to the best few, not to all
        _halve(alive, metric, len(questions))
        tell("rung", {**state(), "questions": len(questions), "leader": leader.name})
        alive = [r for r in runners.values() if r.state == "running"]
        if len(alive) <= 1 or last:
            break
        n_questions = min(2 * n_questions, len(valset))

    # 2. depth: each survivor's joint compile, the leader first, an equal share of what is left
    alive = sorted(
        (r for r in runners.values() if r.state == "running"),
        key=lambda r: -_mean(r.scores(metric)),
    )
    for i, runner in enumerate(alive):
        share_of = None if budget is None else (budget - calls.spent) // (len(alive) - i)
        if share_of is not None and share_of <= 0:
            break
        lane = calls.lane(share_of)
        lane.charge(runner.name, [], extra=prior.pop(runner.name, 0))

        def chunk_scored(trial: dict[str, Any], name: str = runner.name, lane=lane) -> None:
            live = {**state(), "spent": calls.spent + lane.spent}
            tell("trial", {**live, "program": name, "trial": trial})

        study = joint_study(storage, study_name(runner.name))
        try:
            runner.joint = joint_compile(
                runner.name,
                retriever,
                trainset,
                lm=lm,
                fixed=held[runner.name],
                demos=demo_sources(runner.name, demos),
                metric=metric,
                share=share,
                alpha=alpha,
                ties=ties,
                teacher_lm=teacher_lm,
                seed=seed,
                study=study,
                progress=False,
                calls=lane,
                on_chunk=chunk_scored,
            )
        except InputError as err:  # no trial completed within its share
            runner.reason = str(err)
        except Exception as err:  # a failing strategy is recorded and left out, never fatal
            runner.state, runner.reason = "failed", one_line(err)
        finally:
            calls.absorb(lane)
            runner.trials = trial_rows(study)  # with no trial complete too: what it spent
        tell("deep", state())

    for n, spent in prior.items():  # trials of strategies this run gave no share (none, if
        calls.charge(n, [], extra=spent)  # the earlier run was this race): still spent
    # 3. choice: the best validation score; among those it cannot be told from, the cheapest
    finalists = []
    for runner in runners.values():  # the budget may have stopped some on a rung: judged there
        if runner.state not in ("running", "out of budget"):
            continue
        runner.choice = _choice(runner, metric)
        if runner.choice["scores"]:
            runner.state = "finished" if runner.state == "running" else runner.state
            finalists.append(runner)
    if not finalists:
        raise InputError("no strategy finished the race: " + _reasons(runners))
    top = max(finalists, key=lambda r: (r.choice["score"], -r.choice["tokens"]))
    tied = [
        r
        for r in finalists
        if r is top
        or not paired(top.choice["scores"], r.choice["scores"], interval=False).beats(alpha)
    ]
    winner = min(tied, key=lambda r: (r.choice["tokens"], -r.choice["score"]))
    test = paired(winner.choice["scores"], top.choice["scores"], interval=False)
    choice = {
        "winner": winner.name,
        "top": top.name,
        "tied": sorted(r.name for r in tied),
        "versus_top": {"n": test.n, "diff": round(test.diff, 4), "p": round(test.p, 4)},
        "alpha": alpha,
        "drop_p": drop_p,
        "validation_questions": len(valset),
    }
    if gate := _gate(winner):
        choice["versus_defaults"] = gate
    if winner.joint is not None:
        program, knobs, source = winner.joint.program, winner.joint.knobs, winner.joint.demos
    else:
        program = built[winner.name]
        knobs, source = program.knobs.model_dump(), "none"
    complete = all(r.state == "finished" for r in finalists) and all(
        r.joint is not None and not r.joint.untried for r in finalists
    )
    tell("done", {**state(), "choice": choice})
    if work:
        (work / "race.json").write_text(json.dumps(race_table(runners, metric), indent=1))
    return RaceResult(
        winner.name,
        knobs,
        source,
        program,
        race_table(runners, metric),
        choice,
        calls.spent,
        budget,
        complete,
    )


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


def race_line(race: dict[str, Any]) -> str:
    """The race's choice in a sentence; a second line where the winner's joint compile tested a
    grid point against its defaults (the test, and whether it took the point)."""
    c = race["choice"]
    tied = [t for t in c["tied"] if t != c["winner"]]
    if c["winner"] == c["top"]:
        how = "best validation score" + (
            f"; {', '.join(tied)} not told apart from it, at more tokens" if tied else ""
        )
    else:
        v = c["versus_top"]
        how = (
            f"{c['top']} scored best, but {c['winner']} is not told apart from it "
            f"({v['diff']:+.3f} on {v['n']} questions, sign-flip p = {v['p']:.3f}, alpha "
            f"{c['alpha']}) and takes fewer tokens"
        )
    line = f"race winner: {c['winner']} ({how})"
    if gate := c.get("versus_defaults"):  # its joint compile's test against its defaults
        point = changed_knobs(c["winner"], gate["knobs"])
        point += "" if gate["demos"] == "none" else f", demos {gate['demos']}"
        verdict = "kept the defaults" if gate["kept_defaults"] else "took it"
        top = gate.get("top_trial", gate["best_trial"])
        tie = "the nearest tie of its top grid point, " if top != gate["best_trial"] else ""
        line += (
            f"\n{c['winner']}: {tie}{point} ({gate['score']:.3f}) vs its defaults "
            f"({gate['default_score']:.3f}) on {gate['n']} validation questions: "
            f"{gate['diff']:+.3f}, sign-flip p = {gate['p']:.3f} (alpha {gate['alpha']}): {verdict}"
        )
    return line


RACE_COLUMNS = ("program", "stage", "knobs", "demos", "score", "n", "tokens/q", "calls", "state")


def race_title(race: dict[str, Any]) -> str:
    """The race's size in a line: calls spent of the budget, validation questions, and the
    model time its rows and trials took (the sum of their questions' seconds)."""
    choice = race.get("choice") or {}
    rows = race.get("table") or []
    hours = sum((r.get("seconds") or 0) * (r.get("n") or 0) for r in rows) / 3600
    budget = race.get("budget")
    return (
        f"strategy race: {race.get('spent')} model calls"
        + (f" of {budget}" if budget is not None else "")
        + f", {choice.get('validation_questions', '?')} validation questions, "
        + f"{hours:.1f} h of model time"
    )


def race_cells(race: dict[str, Any]) -> list[list[str]]:
    """Each row of the race's table as text: program (the winner marked), stage, the knobs
    changed from the program's defaults, demonstrations, validation score, questions, tokens
    a question, calls that reached the model, state (with its reason)."""
    winner = (race.get("choice") or {}).get("winner")
    cells = []
    for r in race.get("table") or []:
        chosen = r["reason"] == "chosen"
        won = r["program"] == winner and r["stage"] == "rungs"
        state = "chosen" if chosen else state_cell(r["state"], r["reason"])
        cells.append(
            [
                r["program"] + (" <- winner" if won else ""),
                r["stage"],
                changed_knobs(r["program"], r["knobs"]),
                str(r["demos"]),
                "-" if r["score"] is None else f"{r['score']:.3f}",
                str(r["n"] or "-"),
                "-" if not r["tokens"] or not r["n"] else f"{r['tokens']:,.0f}",
                str(r["calls"] or 0),
                state,
            ]
        )
    return cells


def changed_knobs(program: str, knobs: Any) -> str:
    """``knobs`` as the ones that differ from ``program``'s defaults (``defaults`` if none),
    each under the name it is stored under (a recipe's may be an alias)."""
    if not isinstance(knobs, dict):
        return str(knobs)
    cls = get_program(program)
    defaults, aliases = cls.knob_defaults(), cls.Knobs.aliases()
    changed = {k: v for k, v in knobs.items() if defaults.get(aliases.get(k, k)) != v}
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in changed.items()) or "defaults"
