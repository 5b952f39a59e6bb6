"""The calls-to-winner curve of a strategy race, from its stored rows (no model is called):
after every N model calls, the arm the race would pick at that point (the best mean F1 on the
questions it had scored, among arms scored on at least the first rung's questions) with that
arm's F1 on the race's whole validation fold, and the best of the arms scored on the whole
fold by then (the race picks among those); at the end, the charged calls by which the race's
pick had been scored on the whole fold.

.venv/bin/python benchmarks/race_curve.py benchmarks/results/artifacts/race-wide-0.5b \\
    benchmarks/results/artifacts/.race-halving-musique-0.5b.race-4856bfff \\
    [--step 100] [--fold N] [--png FILE]

Each argument is a race's artifact (its recipe's ``race`` section; its work directory
``.NAME.race-KEY`` beside it holds the rows) or the work directory itself. The order the
questions were scored in is rebuilt as the race scored them:

- old allocation (rungs of every strategy at its defaults, then each survivor's joint compile):
  each strategy's rung rows (its run directory) by rung (each strategy's first question, then
  the first ``first`` questions, then twice as many...), strategies in the race's order within
  a rung; then the joint trials (``trials.db``) in the order they started, each trial's
  questions in the fold's order. A trial keeps only its total calls, so its calls are spread
  evenly over its questions; a trial killed before it stored them counts none.
- new allocation (one successive halving over arms): the chunk log (``chunks.jsonl``), else the
  race's table (``race.json`` or the recipe: each arm's wave, in the order arms entered), each
  wave's arms by rung, in the order they entered, the first wave's first questions first.

Calls: ``charged`` as the race's budget counted them (old: the calls that reached the model,
DSPy cache hits free; new: every call), ``all`` every call the programs made, ``model`` the
calls that reached the model. ``>=`` marks a count that misses calls the files do not keep.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import header, table

ARM_DIR = re.compile(r"^(?P<program>.+)-(?P<order>\d+)-(?P<hash>[0-9a-f]{8})$")
WORKDIR = re.compile(r"^\.(?P<name>.+)\.race-[0-9a-f]+$")
CHUNK_LOG = "chunks.jsonl"  # optimize.halving.CHUNK_LOG (imported lazily: no DSPy for --help)


class BadInput(Exception):
    """A file the curve cannot be read from: one line naming it."""


@dataclass
class Scored:
    """One question scored by one arm, in the order the race scored it: its calls as the race
    charged them, all calls (None: not kept), and the calls that reached the model."""

    arm: str
    qid: str
    score: float
    charged: float
    all: float | None
    model: float


@dataclass
class Race:
    name: str
    allocation: str
    events: list[Scored]
    first: int
    fold: int | None  # the validation fold's questions, where known
    budget: int | None = None
    dataset: str | None = None
    choice: str | None = None  # the race's own pick, from its recipe
    notes: list[str] = field(default_factory=list)


@dataclass
class Point:
    """The curve by a number of charged calls (``at``): what the race had scored by then."""

    at: float
    all: float | None
    all_exact: bool
    model: float
    entered: int
    arm: str | None  # the best so far (``best``), its questions and score on them
    n: int
    score: float | None
    whole_arm: str | None  # the best of the arms scored on the whole fold, its score
    whole_score: float | None


# --- reading a race ----------------------------------------------------------------------------


def locate(path: Path) -> tuple[Path | None, dict[str, Any] | None, str]:
    """(the race's work directory, its recipe, its name) for an artifact or a work directory."""
    if (path / "recipe.json").is_file():
        recipe = _json(path / "recipe.json")
        if not isinstance(recipe.get("race"), dict):
            raise BadInput(f"{path / 'recipe.json'}: no race section (not a race's artifact)")
        dirs = sorted(path.parent.glob(f".{path.name}.race-*"))
        dirs = [d for d in dirs if d.is_dir()]
        if len(dirs) > 1:
            names = ", ".join(d.name for d in dirs)
            raise BadInput(f"{path}: several race work directories ({names}); give one")
        return (dirs[0] if dirs else None), recipe, path.name
    match = WORKDIR.match(path.name)
    if path.is_dir() and match:
        artifact = path.parent / match["name"] / "recipe.json"
        recipe = _json(artifact) if artifact.is_file() else None
        return path, recipe, match["name"]
    raise BadInput(
        f"{path}: neither a race's artifact (recipe.json with a race) nor its work directory "
        "(.NAME.race-KEY)"
    )


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BadInput(f"{path}: not readable JSON ({err})") from None


def _rows(run_dir: Path) -> list[dict[str, Any]]:
    from netcast.errors import InputError
    from netcast.specs.model import saved_rows  # a torn last line (a kill mid-write) left out

    path = run_dir / "predictions.jsonl"
    try:
        rows = saved_rows(path)
    except InputError as err:
        raise BadInput(str(err)) from None
    for n, row in enumerate(rows, start=1):
        scores = row.get("scores") if isinstance(row, dict) else None
        if not isinstance(scores, dict) or "id" not in row:
            raise BadInput(f"{path}:{n}: a row needs an id and scores")
        if not isinstance(scores.get("lm_calls"), int | float):
            raise BadInput(f"{path}:{n}: scores.lm_calls missing (a row the race cannot charge)")
    return rows


def arm_name(program: str, knobs: dict[str, Any], demos: str) -> str:
    """An arm as the race's lines name it (``optimize.halving.Arm.name``), its knobs read
    under their current names with the program's defaults filled in, so a strategy's defaults
    on the rungs and the same point in a joint trial are one arm."""
    from netcast.optimize.halving import Arm
    from netcast.programs import get_program
    from netcast.programs.registry import stored_knobs

    try:
        defaults = get_program(program).knob_defaults()
    except Exception:  # a program no longer registered: its knobs as stored
        defaults = {}
    full = {**defaults, **stored_knobs(program, knobs)}
    if not defaults:
        return f"{program} {json.dumps(full, sort_keys=True)}" + (
            "" if demos == "none" else f", demos {demos}"
        )
    return Arm(program, 0, {"demos": demos}, full).name


def rung(i: int, first: int, probe: bool) -> int:
    """The rung the ``i``-th question (0-based) of an arm was scored on: -1 for the first
    question of a first-wave arm (each is probed before any other), else 0 below ``first``,
    1 below twice that, ... (the last rung, cut at the fold, takes the rest alike)."""
    if probe and i == 0:
        return -1
    k = 0
    while i >= first * 2**k:
        k += 1
    return k


def _event(arm: str, row: dict[str, Any], charged_all: bool) -> Scored:
    s = row["scores"]
    calls = float(s.get("lm_calls") or 0)
    model = calls - float(s.get("cached_calls") or 0)
    return Scored(
        arm,
        str(row["id"]),
        float(s.get("f1") or 0.0),
        calls if charged_all else model,
        calls,
        model,
    )


def read_race(path: Path) -> Race:
    work, recipe, name = locate(path)
    if work is None:
        raise BadInput(f"{path}: its race's work directory (.{name}.race-KEY) is not beside it")
    race = recipe["race"] if recipe else {}
    settings = (recipe or {}).get("optimizer", {}).get("settings", {})
    first = int(settings.get("first", 10))
    fold = (race.get("choice") or {}).get("validation_questions")
    table_ = race.get("table")
    if table_ is None and (work / "race.json").is_file():
        table_ = _json(work / "race.json")
    old = (work / "trials.db").exists() or any(r.get("stage") == "rungs" for r in table_ or [])
    reader = _old_events if old else _new_events
    out = Race(name, allocation(old, (work / CHUNK_LOG).is_file()), [], first, fold)
    out.events = reader(work, table_, first, out)
    if recipe:
        out.budget = race.get("budget")
        out.dataset = (recipe.get("dataset") or {}).get("name")
        choice = race.get("choice") or {}
        out.choice = choice.get("winner_arm") or choice.get("winner")
        if out.choice and "winner_arm" not in choice:  # the old race named a strategy
            chosen = [
                r
                for r in table_ or []
                if r.get("program") == out.choice and r.get("reason") == "chosen"
            ]
            if chosen and isinstance(chosen[0].get("knobs"), dict):
                out.choice = arm_name(
                    out.choice, chosen[0]["knobs"], chosen[0].get("demos", "none")
                )
            elif chosen:
                out.choice = arm_name(out.choice, {}, "none")
    if out.fold is None and table_:
        out.notes.append("the fold's size is not recorded (race unfinished): no whole-fold F1")
    return out


def allocation(old: bool, chunk_log: bool) -> str:
    """How a race spent its calls, as its files show: rungs then joint trials (``trials.db``),
    else successive halving over arms: breadth-first (each wave's contenders' next arms enter
    before kept arms climb) where it logged its chunks, else as first built (each wave's arms
    climbed to the whole fold before the next wave entered)."""
    if old:
        return "rungs, then joint compiles"
    return "halving, breadth-first" if chunk_log else "successive halving"


# --- the old allocation ------------------------------------------------------------------------


def _old_events(work: Path, table_: list | None, first: int, race: Race) -> list[Scored]:
    subdirs = {d.name: d for d in work.iterdir() if (d / "run.json").is_file()}
    order = list(dict.fromkeys(r["program"] for r in table_ or [] if r.get("stage") == "rungs"))
    if not order:
        from netcast.programs import program_names

        order = [n for n in program_names() if n in subdirs]
        race.notes.append("strategies' order taken as the registry's (no race table)")
    order += sorted(set(subdirs) - set(order))
    keyed = []
    fold_order: list[str] = []
    for position, program in enumerate(order):
        if program not in subdirs:
            continue
        info = _json(subdirs[program] / "run.json")
        name = arm_name(program, info.get("knobs") or {}, "none")
        rows = _rows(subdirs[program])
        if len(rows) > len(fold_order):
            fold_order = [str(r["id"]) for r in rows]
        for i, row in enumerate(rows):
            keyed.append(((rung(i, first, True), position, i), _event(name, row, False)))
    events = [e for _, e in sorted(keyed, key=lambda k: k[0])]
    if (work / "trials.db").exists():
        events += _trial_events(work / "trials.db", fold_order, race)
    return events


def _trial_events(db: Path, fold_order: list[str], race: Race) -> list[Scored]:
    """The joint trials' questions, trials in the order they started (a copy of the storage
    is read: Optuna may write to the file it opens)."""
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "trials.db"
        shutil.copy(db, copy)
        storage = f"sqlite:///{copy}"
        trials = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for summary in optuna.get_all_study_summaries(storage):
                study = optuna.load_study(study_name=summary.study_name, storage=storage)
                program = summary.study_name.removeprefix("joint-").rsplit("-", 1)[0]
                trials += [(t, program) for t in study.get_trials(deepcopy=False)]
    trials.sort(
        key=lambda tp: (tp[0].datetime_start is None, tp[0].datetime_start, tp[0]._trial_id)
    )
    for t, _ in trials:  # a complete trial holds the whole fold's ids in order
        scores = t.user_attrs.get("scores") or {}
        if len(scores) > len(fold_order):
            fold_order = list(scores)
    events, unknown = [], 0
    for t, program in trials:
        scores = dict(t.user_attrs.get("scores") or {})
        if not scores and t.intermediate_values:  # killed mid-trial: its reports, by step
            steps = sorted(t.intermediate_values)
            if steps[-1] >= len(fold_order):
                raise BadInput(f"{db}: trial {t.number} reports question {steps[-1]} past the fold")
            scores = {fold_order[s]: float(t.intermediate_values[s]) for s in steps}
        if not scores:
            continue
        agg = t.user_attrs.get("aggregate") or {}
        n = len(scores)
        charged = round(
            ((agg.get("lm_calls") or 0) - (agg.get("cached_calls") or 0)) * (agg.get("n") or 0)
        )
        total = t.user_attrs.get("calls")
        if total is None and agg:
            total = round((agg.get("lm_calls") or 0) * (agg.get("n") or 0))
        if total is None:
            unknown += 1
        name = arm_name(program, t.user_attrs.get("knobs") or {}, t.params.get("demos", "none"))
        for qid, score in scores.items():
            each_all = None if total is None else total / n
            events.append(
                Scored(name, qid, float(score or 0.0), charged / n, each_all, charged / n)
            )
    if unknown:
        race.notes.append(
            f"{unknown} trial(s) killed before storing their calls: charged none (as the race "
            "did), their calls missing from the all-calls count (>=)"
        )
    race.notes.append("a joint trial's calls are spread evenly over its questions")
    return events


# --- the new allocation ------------------------------------------------------------------------


@dataclass
class _Arm:
    key: str
    program: str
    order: int
    name: str
    rows: list[dict[str, Any]]
    knobs: dict[str, Any]
    demos: str


def _arms(work: Path) -> dict[str, _Arm]:
    arms = {}
    for d in sorted(work.iterdir()):
        match = ARM_DIR.match(d.name)
        if not (match and (d / "run.json").is_file()):
            continue
        info = _json(d / "run.json")
        program, knobs, demos = match["program"], info.get("knobs") or {}, info.get("demos", "none")
        name = arm_name(program, knobs, demos)
        arms[d.name] = _Arm(d.name, program, int(match["order"]), name, _rows(d), knobs, demos)
    return arms


def _new_events(work: Path, table_: list | None, first: int, race: Race) -> list[Scored]:
    arms = _arms(work)
    if (work / CHUNK_LOG).is_file():
        return _logged(work / CHUNK_LOG, arms, race)
    if table_:
        placed = _by_table(table_, arms, work)
    elif all(a.order == 0 for a in arms.values()):
        from netcast.programs import program_names

        names = program_names()
        ranked = sorted(
            arms.values(),
            key=lambda a: names.index(a.program) if a.program in names else len(names),
        )
        placed = [(0, a) for a in ranked]
        race.notes.append(
            "first wave only, no race table: strategies in the registry's order (the race's "
            "order for --program auto)"
        )
    else:
        later = sorted(k for k, a in arms.items() if a.order > 0)
        raise BadInput(
            f"{work}: arms past the first wave ({later[0]}, ...) and no {CHUNK_LOG}, race.json or "
            "recipe: the order they were scored in is not kept"
        )
    keyed = []
    for position, (wave, arm) in enumerate(placed):
        for i, row in enumerate(arm.rows):
            keyed.append(
                ((wave, rung(i, first, wave == 0), position, i), _event(arm.name, row, True))
            )
    return [e for _, e in sorted(keyed, key=lambda k: k[0])]


def _by_table(table_: list, arms: dict[str, _Arm], work: Path) -> list[tuple[int, _Arm]]:
    """Each table entry's arm (the same program and demonstrations, its knobs among the run
    directory's), with its wave, in the order the arms entered."""
    free = dict(arms)
    placed = []
    for entry in table_:
        wave = re.fullmatch(r"wave (\d+)", str(entry.get("stage", "")))
        if not wave:
            raise BadInput(f"{work}: a race table entry's stage {entry.get('stage')!r} is no wave")
        if not entry.get("n"):
            continue  # entered, never scored: no run directory
        knobs = entry.get("knobs") or {}
        match = next(
            (
                a
                for a in free.values()
                if a.program == entry.get("program")
                and a.demos == entry.get("demos", "none")
                and all(a.knobs.get(k) == v for k, v in knobs.items())
                and len(a.rows) == entry["n"]
            ),
            None,
        )
        if match is None:
            raise BadInput(
                f"{work}: no run directory holds the table's arm {entry.get('program')} {knobs}"
            )
        placed.append((int(wave[1]), free.pop(match.key)))
    return placed


def _logged(log: Path, arms: dict[str, _Arm], race: Race) -> list[Scored]:
    events, done = [], {k: 0 for k in arms}
    for n, line in enumerate(log.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            entry = json.loads(line)
            key, upto = entry["arm"], int(entry["n"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            continue  # a torn line: the rows it would have placed come last
        if key not in arms:
            raise BadInput(f"{log}:{n}: arm {key!r} has no run directory")
        arm = arms[key]
        events += [_event(arm.name, r, True) for r in arm.rows[done[key] : upto]]
        done[key] = max(done[key], upto)
    left = sum(len(a.rows) - done[k] for k, a in arms.items())
    if left:
        race.notes.append(f"{left} row(s) not in the chunk log (a kill before the line): last")
        for k, a in arms.items():
            events += [_event(a.name, r, True) for r in a.rows[done[k] :]]
    return events


# --- the curve ---------------------------------------------------------------------------------


def best(scored: dict[str, dict[str, float]], first: int) -> tuple[str | None, int, float | None]:
    """The arm the race would pick now: the best mean among the arms scored on at least
    ``first`` questions (more questions, then the earlier arm, among equals)."""
    top = None
    for arm, scores in scored.items():
        if len(scores) < first:
            continue
        key = (sum(scores.values()) / len(scores), len(scores))
        if top is None or key > top[0]:
            top = (key, arm)
    if top is None:
        return None, 0, None
    return top[1], top[0][1], top[0][0]


def curve(events: list[Scored], first: int, step: int, fold: int | None) -> list[Point]:
    """The curve by every ``step`` charged calls and at the end: what the race had scored by
    then (every question whose calls were spent by then), the best so far (``best``), and
    the best of the arms scored on the whole ``fold`` by then (it only rises)."""
    scored: dict[str, dict[str, float]] = {}
    points: list[Point] = []
    charged = all_ = model = 0.0
    exact = True

    def mark(at: float) -> None:
        arm, n, score = best(scored, first)
        whole = best({a: s for a, s in scored.items() if fold and len(s) >= fold}, 1)
        points.append(Point(at, all_, exact, model, len(scored), arm, n, score, whole[0], whole[2]))

    mark_at = step
    for e in events:
        while charged + e.charged > mark_at + 1e-9:
            mark(mark_at)
            mark_at += step
        charged += e.charged
        model += e.model
        if e.all is None:
            exact = False
        else:
            all_ += e.all
        scored.setdefault(e.arm, {})[e.qid] = e.score
    if not points or points[-1].at != charged:
        mark(charged)
    return points


def leads_from(events: list[Scored], first: int, arm: str | None) -> float | None:
    """The charged calls after which ``arm`` was the best so far (``best``) to the end."""
    if arm is None:
        return None
    scored: dict[str, dict[str, float]] = {}
    charged, since = 0.0, None
    for e in events:
        charged += e.charged
        scored.setdefault(e.arm, {})[e.qid] = e.score
        leader = best(scored, first)[0]
        since = (since if since is not None else charged) if leader == arm else None
    return since


def fold_values(events: list[Scored], fold: int | None) -> dict[str, list[float]]:
    """Each question's F1 on the whole validation fold, for the arms scored on all of it."""
    final: dict[str, dict[str, float]] = {}
    for e in events:
        final.setdefault(e.arm, {})[e.qid] = e.score
    if fold is None:
        return {}
    return {a: list(s.values()) for a, s in final.items() if len(s) >= fold}


def fold_scores(events: list[Scored], fold: int | None) -> dict[str, float]:
    """Each arm's F1 on the whole validation fold, for the arms scored on all of it."""
    return {a: sum(v) / len(v) for a, v in fold_values(events, fold).items()}


def _calls(value: float | None, exact: bool = True) -> str:
    if value is None:
        return "-"
    return ("" if exact else ">= ") + f"{round(value):,}"


def completed_at(events: list[Scored], arm: str | None, fold: int | None) -> float | None:
    """The charged calls by which ``arm`` was scored on the whole fold (it could be picked)."""
    if arm is None or fold is None:
        return None
    charged, ids = 0.0, set()
    for e in events:
        charged += e.charged
        if e.arm == arm:
            ids.add(e.qid)
            if len(ids) >= fold:
                return charged
    return None


def _f1(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def print_race(race: Race, step: int) -> list[Point]:
    points = curve(race.events, race.first, step, race.fold)
    whole = fold_scores(race.events, race.fold)
    print(f"### {race.name} ({race.allocation})\n")
    said = [
        f"budget {race.budget:,} calls" if race.budget else "budget not recorded",
        f"validation fold {race.fold} questions" if race.fold else "validation fold not known",
        f"first rung {race.first} questions",
        f"{len(race.events):,} questions scored",
    ]
    print("; ".join(said) + ".")
    for note in race.notes:
        print(f"- {note}")
    print()
    rows = [
        [
            _calls(p.at),
            _calls(p.all, p.all_exact),
            _calls(p.model),
            p.entered,
            p.arm or "-",
            p.n or None,
            _f1(p.score),
            _f1(whole.get(p.arm)),
            p.whole_arm or "-",
            _f1(p.whole_score),
        ]
        for p in points
    ]
    fold = f" ({race.fold} q)" if race.fold else ""
    table(
        [
            "by charged calls",
            "all calls",
            "reached the model",
            "arms",
            f"best so far (n >= {race.first})",
            "n",
            "F1 so far",
            f"its F1 on the fold{fold}",
            "best on the whole fold so far",
            "its F1",
        ],
        rows,
    )
    last = points[-1].arm
    since = leads_from(race.events, race.first, last)
    line = f"best so far at the end: {last or '-'}"
    if since is not None:
        line += f", from {round(since):,} charged calls on"
    if race.choice:
        line += f"; the race's pick (cost breaks ties): {race.choice}"
        if race.choice in whole:
            line += f", {whole[race.choice]:.3f} on the fold"
    print(line + ".\n")
    return points


def summary(races: list[Race]) -> None:
    """One line a race: its pick, and the best of the arms scored on the whole fold, each with
    its F1 there (95% bootstrap interval over the fold's questions) and the charged calls by
    which it had been scored on all of them."""
    from netcast.evaluation.stats import bootstrap_ci
    from netcast.render import fmt_ci

    rows = []
    for race in races:
        values = fold_values(race.events, race.fold)
        top = max(values, key=lambda a: sum(values[a]) / len(values[a]), default=None)
        spent = curve(race.events, race.first, 10**9, race.fold)[-1]

        def ci(arm: str | None, values: dict[str, list[float]] = values) -> str:
            return fmt_ci(bootstrap_ci(values[arm])) if arm in values else "-"

        rows.append(
            [
                race.name,
                race.allocation,
                _calls(spent.at),
                _calls(spent.all, spent.all_exact),
                race.choice or "- (not finished)",
                ci(race.choice),
                _calls(completed_at(race.events, race.choice, race.fold)),
                top or "-",
                ci(top),
                _calls(completed_at(race.events, top, race.fold)),
            ]
        )
    print("### Calls to the winner\n")
    table(
        [
            "race",
            "allocation",
            "charged calls",
            "all calls",
            "the race's pick",
            "its F1 on the fold [95% CI]",
            "on the whole fold by (charged calls)",
            "best on the whole fold",
            "its F1 [95% CI]",
            "on the whole fold by",
        ],
        rows,
    )


def plot(races: list[Race], curves: list[list[Point]], path: Path) -> None:
    """The best on the whole fold so far (solid) and the best so far on at least the first
    rung (dotted) against the calls that reached the model, one axis per dataset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[str, list[int]] = {}
    for i, race in enumerate(races):
        groups.setdefault(race.dataset or race.name, []).append(i)
    fig, axes = plt.subplots(1, len(groups), figsize=(6 * len(groups), 4.2), squeeze=False)
    for ax, (dataset, members) in zip(axes[0], groups.items(), strict=True):
        for i in members:
            pts, label = curves[i], f"{races[i].name} ({races[i].allocation})"
            line = ax.step(
                [p.model for p in pts if p.whole_score is not None],
                [p.whole_score for p in pts if p.whole_score is not None],
                where="post",
                label=f"{label}, whole fold",
            )
            ax.step(
                [p.model for p in pts if p.score is not None],
                [p.score for p in pts if p.score is not None],
                where="post",
                linestyle=":",
                linewidth=0.8,
                alpha=0.6,
                color=line[0].get_color() if line else None,
                label=f"{label}, so far",
            )
        ax.set_title(dataset)
        ax.set_xlabel("calls that reached the model")
        ax.set_ylabel("best validation F1")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def same_questions(races: list[Race], fold: int | None) -> None:
    """A race without a recipe takes the dataset of a race that scored the same questions
    (and ``fold``, where given, as its validation fold's size)."""
    ids = [{e.qid for e in race.events} for race in races]
    for i, race in enumerate(races):
        if race.fold is None and fold is not None:
            race.fold = fold
            race.notes.append(f"validation fold of {fold} questions (--fold)")
        if race.dataset is None:
            race.dataset = next(
                (r.dataset for j, r in enumerate(races) if r.dataset and ids[i] & ids[j]), None
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("races", nargs="+", type=Path, help="race artifacts or work directories")
    parser.add_argument("--step", type=int, default=100, help="charged calls between rows")
    parser.add_argument(
        "--fold", type=int, help="validation questions of a race whose recipe is not written yet"
    )
    parser.add_argument("--png", type=Path, help="also draw the curves into this PNG")
    args = parser.parse_args()
    if args.step < 1:
        parser.error("--step must be >= 1")
    try:
        races = [read_race(p) for p in args.races]
    except BadInput as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    same_questions(races, args.fold)
    header(
        "Calls-to-winner curves of the strategy race (from the stored rows; no model called)",
        [
            "best so far: the best mean F1 on the questions it had scored, among arms scored on "
            "at least the first rung's questions; best on the whole fold: among the arms scored "
            "on all the validation questions (the race picks among those); charged: calls as the "
            "race's budget counted them (rungs, then joint compiles: DSPy cache hits free; "
            "halving: every call)",
        ],
    )
    for race in races:
        print_race(race, args.step)
    summary(races)
    if args.png:  # drawn at every 5 charged calls
        plot(races, [curve(r.events, r.first, 5, r.fold) for r in races], args.png)
        print(f"curves drawn in {args.png}")


if __name__ == "__main__":
    main()
