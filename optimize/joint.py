"""Knobs and demonstrations in one compile (``netcast compile --optimizer joint``).

The knobs' declared ranges (sized to the model's window) become a small grid; each grid point
is paired with each demonstration source (``none``; ``annotations``: the data's own, see
``optimize.annotations``; ``bootstrap``: the model's successful traces, DSPy's
BootstrapFewShot). Points are tried once each, the program's defaults without demonstrations
first, then the nearest to them first (one knob changed, then two, ...), as Optuna trials
(enqueued, so no point repeats; resumable in any Optuna storage) until the grid or the budget
of model calls is spent. A trial reports each validation question's score as its own step and
is stopped early (pruned) when it trails the best complete trial on the questions both scored
(Optuna's ``WilcoxonPruner``, one-sided at ``PRUNE_P / 2``: tested after every chunk), from the
third chunk of questions on and while a whole chunk is left (a race, as F-race does): a median
rule stops settings on a few dozen questions' noise, which the rule among ties below needs
scored in full. Demonstrations
are drawn from the first part of the training questions and every trial is scored on the rest
(the validation fold), never on dev; the retriever is the one the program will search.

When every demonstration source searched is ``none`` no demonstration is drawn, and every
training question validates.

The best trial replaces the defaults only if it beats them on the validation fold's questions
by a paired sign-flip test at ``alpha`` (0.1): on a few dozen questions settings a few F1 points
apart are noise, and a compile that follows noise makes the program worse as often as better
(measured: benchmarks/README.md, the wide-pool decisive tier). The same noise separates the
defaults from a setting far better but not neighbouring settings from each other, so with
``ties="nearest"`` (the default) the compile takes, among the trials that beat the defaults and
that the same test cannot tell apart from the best, the one nearest the defaults: fewest knobs
changed (the demonstration source counts as one), then fewest steps along the knobs' grids,
then the higher score (the parsimony of the "one standard error" rule; measured:
benchmarks/README.md). ``ties="best"`` takes the best trial.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy
import optuna
from dspy.utils.exceptions import AdapterParseError

from netcast.errors import InputError
from netcast.evaluation.evaluate import aggregate, evaluate
from netcast.evaluation.stats import paired
from netcast.models.factory import context_window
from netcast.optimize.annotations import PER_STEP, teach
from netcast.optimize.compile import compile_program, hold_out
from netcast.programs import get_program
from netcast.programs import knobs as knobs_mod
from netcast.programs.shared.budget import budget_range
from netcast.retrievers import Retriever

DEMO_SOURCES = ("none", "annotations", "bootstrap")
TIES = ("nearest", "best")  # among trials the test cannot tell apart from the best
PRUNE_P = 0.01  # a trial trailing the best complete one at this p stops early
JOINT_DEMOS = ("none", "annotations")  # the sources searched when a recipe names none
GRID_POINTS = 6  # values tried per numeric knob whose range holds more
COMPLETE = optuna.trial.TrialState.COMPLETE


def knob_grid(cls: type, lm: Any = None, fixed: dict[str, Any] | None = None) -> dict[str, list]:
    """Each tunable knob of program class ``cls`` (not in ``fixed``) with the values the joint
    compile tries: every value of a choice or of an integer range of at most ``GRID_POINTS``
    values; else ``GRID_POINTS`` spread over the range (log-spaced for a token budget, sized to
    ``lm``'s window); the knob's default first where it is not one of them."""
    window = context_window(lm)
    grid = {}
    for name, f in cls.Knobs.model_fields.items():
        search = (f.json_schema_extra or {}).get("search")
        if search is None or name in (fixed or {}):
            continue
        if isinstance(search, knobs_mod.Choice):
            grid[name] = list(search.options)
        elif isinstance(search, knobs_mod.IntRange):
            span = search.high - search.low + 1
            step = max(1, math.ceil(span / GRID_POINTS))
            grid[name] = list(range(search.low, search.high + 1, step))
        elif isinstance(search, knobs_mod.FloatRange):
            width = (search.high - search.low) / (GRID_POINTS - 1)
            grid[name] = [round(search.low + i * width, 4) for i in range(GRID_POINTS)]
        elif isinstance(search, knobs_mod.BudgetRange):
            low, high = budget_range(window)
            ratio = (high / low) ** (1 / (GRID_POINTS - 1))
            grid[name] = sorted({round(low * ratio**i) for i in range(GRID_POINTS)})
        else:
            continue
        if f.default not in grid[name]:  # the defaults' point must be on the grid (e.g. a
            grid[name].insert(0, f.default)  # budget of None: sized to the window at run time)
    return grid


def check_search(
    program_name: str,
    fixed: dict[str, Any],
    values: dict[str, list[Any]] | None,
    demos: Sequence[str],
) -> dict[str, list[Any]]:
    """The demonstration sources and the values given for knobs to search (``--grid``) checked,
    the values as the knobs' types, each once; ``InputError`` names the first bad one (a knob
    also held in ``fixed`` is one)."""
    for source in demos:
        if source not in DEMO_SOURCES:
            raise InputError(f"unknown demos {source!r}; choose from {', '.join(DEMO_SOURCES)}")
    if not demos:
        raise InputError("give at least one demonstration source (none, annotations, bootstrap)")
    schema = get_program(program_name).Knobs
    # an alias (a paper's name for a knob) is read as its knob, a bad value named as given
    fixed = knobs_mod.renamed_for(program_name, schema, fixed)
    knobs_mod.renamed_for(program_name, schema, values or {})  # a knob named twice stops here
    checked = {}
    for name, options in (values or {}).items():
        knob = schema.aliases().get(name, name)
        if knob in fixed:
            raise InputError(f"{program_name}: knob {name!r} is held by --set and in --grid")
        typed = [knobs_mod.validate(program_name, schema, {name: v})[knob] for v in options]
        checked[knob] = [v for i, v in enumerate(typed) if v not in typed[:i]]  # each once
    return checked


def grid_points(
    grid: dict[str, list], demos: Sequence[str], defaults: dict[str, Any], seed: int = 0
) -> list[dict[str, Any]]:
    """Every (knobs, demos) point once: the defaults without demonstrations first (the row a
    compile must beat), then the points nearest them (``distance``: fewest knobs changed, then
    fewest grid steps; equals in a seeded random order), so a budget that stops the search
    leaves the furthest untried."""
    names = list(grid)
    points = [
        {**dict(zip(names, values, strict=True)), "demos": source}
        for values in itertools.product(*(grid[n] for n in names))
        for source in demos
    ]
    random.Random(seed).shuffle(points)
    first = {**{n: defaults[n] for n in names}, "demos": demos[0]}
    points.sort(key=lambda p: distance(p, first, grid, demos))  # stable: equals stay shuffled
    if first in points:
        points.remove(first)
    return [first, *points]


class CallBudget:
    """Model calls a search may spend (``None``: no limit), counted as calls that reached the
    model (DSPy cache hits are free). A chunk of questions is started only when the calls left
    cover it at the most calls one question of that program has taken so far (before its
    first question, the most of any program, at least 1)."""

    def __init__(self, limit: int | None, most: dict[str, int] | None = None):
        self.limit = limit
        self.spent = 0
        self.most = most if most is not None else {}  # per program, calls of its worst question

    @staticmethod
    def cost(row: dict[str, Any]) -> int:
        scores = row["scores"]
        return int(scores.get("lm_calls") or 0) - int(scores.get("cached_calls") or 0)

    def charge(self, program: str, rows: Sequence[dict[str, Any]], extra: int = 0) -> None:
        self.spent += sum(self.cost(r) for r in rows) + extra
        if rows:
            worst = max(int(r["scores"].get("lm_calls") or 0) for r in rows)
            self.most[program] = max(self.most.get(program, 0), worst)

    def per_question(self, program: str) -> int:
        return self.most.get(program) or max(self.most.values(), default=1) or 1

    def affordable(self, program: str, n: int) -> int:
        """How many of the next ``n`` questions of ``program`` the calls left cover."""
        if self.limit is None:
            return n
        return max(0, min(n, (self.limit - self.spent) // self.per_question(program)))

    def lane(self, limit: int | None) -> CallBudget:
        """A share of what is left, with the same per-question estimates."""
        return CallBudget(limit, self.most)

    def absorb(self, lane: CallBudget) -> None:
        self.spent += lane.spent


@dataclass
class JointResult:
    knobs: dict[str, Any]
    demos: str
    program: dspy.Module
    study: optuna.Study
    trials: list[dict[str, Any]] = field(default_factory=list)
    # the best trial against the defaults' on the same validation questions: trial numbers,
    # mean difference, sign-flip p, and whether the defaults were kept
    versus_defaults: dict[str, Any] = field(default_factory=dict)
    untried: int = 0  # grid points the budget of calls left untried
    trial: int = 0  # the number of the trial taken


@dataclass(frozen=True)
class Candidate:
    """A finished trial as the choice rules read it: its grid point, validation score, tokens
    per question and per-question scores."""

    number: int
    point: dict[str, Any]
    score: float
    tokens: float = 0.0
    scores: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, t: optuna.trial.FrozenTrial) -> Candidate:
        agg = t.user_attrs.get("aggregate") or {}
        return cls(
            t.number,
            {**t.params},
            float(t.value or 0.0),
            float(agg.get("tokens") or 0),
            dict(t.user_attrs.get("scores") or {}),
        )


def versus_defaults(best: Candidate, default: Candidate, alpha: float) -> dict[str, Any]:
    """``best`` against ``default`` on the questions both scored (paired sign-flip test), and
    whether the defaults are kept (``best`` does not beat them at ``alpha``)."""
    test = paired(best.scores, default.scores, interval=False)
    return {
        "best_trial": best.number,
        "default_trial": default.number,
        "n": test.n,
        "diff": round(test.diff, 4),
        "p": round(test.p, 4),
        "alpha": alpha,
        "kept_defaults": not test.beats(alpha),
    }


def distance(
    point: dict[str, Any], origin: dict[str, Any], grid: dict[str, list], demos: Sequence[str]
) -> tuple[int, int]:
    """How far a grid point is from ``origin`` (the defaults' point): knobs changed (the
    demonstration source one of them), then steps along each knob's grid (numbers in order)."""
    changed = steps = 0
    for name, value in point.items():
        if value == origin.get(name):
            continue
        changed += 1
        values = list(demos) if name == "demos" else list(grid.get(name, [value]))
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            values = sorted(values)
        if value in values and origin.get(name) in values:
            steps += abs(values.index(value) - values.index(origin[name]))
        else:
            steps += 1
    return changed, steps


def nearest_tie(
    best: Candidate,
    default: Candidate,
    done: Sequence[Candidate],
    grid: dict[str, list],
    demos: Sequence[str],
    alpha: float,
) -> tuple[Candidate, list[int]]:
    """Among the candidates that beat ``default`` at ``alpha`` and that the same test cannot
    tell apart from ``best`` (``best`` one of them), the one nearest the defaults
    (``distance``; the higher score, then fewer tokens, among equals), and the numbers of
    those ties. A pure function of the candidates' scores."""
    ties = [best]
    for c in done:
        if c.number in (best.number, default.number):
            continue
        if not paired(c.scores, default.scores, interval=False).beats(alpha):
            continue
        if not paired(best.scores, c.scores, interval=False).beats(alpha):
            ties.append(c)

    def key(c: Candidate) -> tuple:
        return (*distance(c.point, default.point, grid, demos), -c.score, c.tokens)

    return min(ties, key=key), sorted(c.number for c in ties)


def model_calls(agg: dict[str, Any]) -> int:
    """The calls a trial's questions made that reached the model (DSPy's cache answered the
    rest), from its stored aggregate (means over its ``n`` questions)."""
    return round(
        ((agg.get("lm_calls") or 0) - (agg.get("cached_calls") or 0)) * (agg.get("n") or 0)
    )


def trial_rows(study: optuna.Study) -> list[dict[str, Any]]:
    """Each trial of the study: its knobs, demonstration source, validation score, tokens
    and seconds a question, model calls (all, and those that reached the model), questions
    scored, state."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        agg = t.user_attrs.get("aggregate") or {}
        rows.append(
            {
                "trial": t.number,
                "knobs": t.user_attrs.get("knobs", {}),
                "demos": t.params.get("demos"),
                # a stopped trial's Optuna value is its last question's score, not its mean
                "score": t.value if t.state == COMPLETE else t.user_attrs.get("partial"),
                "tokens": agg.get("tokens"),
                "calls": t.user_attrs.get("calls"),
                "model_calls": model_calls(agg),
                "n": agg.get("n"),
                "seconds": agg.get("seconds"),
                "state": t.user_attrs.get("stopped") or t.state.name.lower(),
                "reason": t.user_attrs.get("failed", ""),
                # each validation question's score, so a choice can be checked (or another
                # rule applied) from the recipe alone
                "question_scores": t.user_attrs.get("scores") or {},
            }
        )
    return rows


def joint_study(storage: str | None = None, name: str = "joint") -> optuna.Study:
    """The joint compile's study: in memory, or in ``storage`` (an Optuna URL, e.g.
    ``sqlite:///path.db``) where a killed compile's finished trials wait for its rerun. Its
    pruner races each trial against the best complete one, question by question (Optuna's
    ``WilcoxonPruner``: a trial stops when the paired signed-rank test says it is worse at
    ``PRUNE_P``, one-sided)."""
    with warnings.catch_warnings():  # the pruner is "experimental" in Optuna since 3.6
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        pruner = optuna.pruners.WilcoxonPruner(p_threshold=PRUNE_P / 2, n_startup_steps=2)
    return optuna.create_study(
        study_name=name,
        storage=storage,
        direction="maximize",
        pruner=pruner,
        load_if_exists=True,
    )


def _stored_aggregate(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A trial's means as its storage keeps them: with tokens in and out summed, without the
    per-step counts."""
    agg = aggregate(rows)
    agg["tokens"] = (agg.get("tokens_in") or 0) + (agg.get("tokens_out") or 0)
    return {k: v for k, v in agg.items() if k != "steps"}


def joint_compile(
    program_name: str,
    retriever: Retriever,
    trainset: Sequence[dspy.Example],
    *,
    lm: Any,
    fixed: dict[str, Any] | None = None,
    values: dict[str, list[Any]] | None = None,
    demos: Sequence[str] = JOINT_DEMOS,
    budget: int | None = None,
    metric: str = "f1",
    per_step: int = PER_STEP,
    share: float = 0.6,
    chunk: int = 10,
    alpha: float = 0.1,
    ties: str = "nearest",
    teacher_lm: Any = None,
    seed: int = 0,
    study: optuna.Study | None = None,
    progress: bool = True,
    calls: CallBudget | None = None,
    on_chunk: Callable[[dict[str, Any]], None] | None = None,
) -> JointResult:
    """Search ``program_name``'s knobs (``fixed`` ones held; ``values`` names the values tried
    for a knob instead of its declared range, ``knob_grid``, the default added where missing)
    and demonstration sources together on the training questions: demonstrations from the
    first ``1 - share``, scores on the last ``share`` (the validation fold). ``budget`` caps
    the model calls the trials spend (checked between trials); the best validation score
    (fewer tokens on a tie) replaces the defaults if it beats the defaults' trial at ``alpha``,
    else the defaults stay; with ``ties="nearest"`` the trial taken is the one nearest the
    defaults among those the test cannot tell apart from the best (module docstring).
    ``calls`` (the strategy race's) is checked before each chunk of questions: a chunk it
    does not cover stops the trial (pruned, its scores kept) and the search. ``on_chunk`` is
    told of each chunk scored (trial, point, questions and running score so far). Run under
    ``dspy.context(lm=lm)``."""
    fixed = knobs_mod.renamed_for(program_name, get_program(program_name).Knobs, fixed or {})
    searched = check_search(program_name, fixed, values, demos)
    if ties not in TIES:
        raise InputError(f"unknown ties rule {ties!r}; choose from {', '.join(TIES)}")
    cls = get_program(program_name)
    knobs_mod.validate(program_name, cls.Knobs, fixed)  # a bad knob stops here
    # no demonstration drawn (demos none only): every training question validates
    pool, valset = ([], list(trainset)) if set(demos) == {"none"} else hold_out(trainset, share)
    grid = knob_grid(cls, lm, fixed)
    defaults = cls.knob_defaults()
    for name, checked in searched.items():
        # the defaults' point stays on the grid: the trial a compile must beat
        grid[name] = ([defaults[name]] if defaults[name] not in checked else []) + checked
    points = grid_points(grid, list(demos), defaults, seed)
    study = study or joint_study()
    # a trial left running by a killed compile (SIGKILL, a lost machine) is failed, so its point
    # is tried again and the recipe lists it as failed (one compile per study at a time)
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        study.tell(t.number, state=optuna.trial.TrialState.FAIL)
    tried = [
        {**t.params}
        for t in study.get_trials(deepcopy=False)
        if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    ]
    spent = sum(t.user_attrs.get("calls", 0) for t in study.get_trials(deepcopy=False))
    cache: dict[tuple, dspy.Module] = {}

    def build(knobs: dict[str, Any], source: str) -> dspy.Module:
        key = (tuple(sorted(knobs.items(), key=lambda kv: kv[0])), source)
        if key not in cache:
            program = cls(retriever, lm=lm, **knobs)
            if source == "annotations":
                program = teach(program, pool, per_step, seed)
            elif source == "bootstrap":
                settings = {"max_bootstrapped_demos": per_step, "max_labeled_demos": 0}
                program = compile_program(
                    program, pool, teacher_lm=teacher_lm, seed=seed, settings=settings
                )
            cache[key] = program
        return cache[key]

    def objective(trial: optuna.Trial) -> float:
        params = {n: trial.suggest_categorical(n, grid[n]) for n in grid}
        source = trial.suggest_categorical("demos", list(demos))
        knobs = {**fixed, **params}
        trial.set_user_attr("knobs", knobs)
        program = build(knobs, source)
        rows: list[dict[str, Any]] = []
        try:
            for step, start in enumerate(range(0, len(valset), chunk)):
                size = min(chunk, len(valset) - start)
                if calls is not None and calls.affordable(program_name, size) < size:
                    out_of_calls.append(trial.number)
                    trial.set_user_attr("stopped", "out of budget")
                    raise optuna.TrialPruned()
                result = evaluate(program, valset[start : start + chunk], progress=False)
                if calls is not None:
                    calls.charge(program_name, result.rows)
                if result.errors:
                    first = next(iter(result.errors.values()))
                    message = f"{len(result.errors)} question(s) failed (first: {first})"
                    if all(isinstance(e, AdapterParseError) for e in result.raised.values()):
                        # the model's replies at this point fit no field: the point fails
                        # (recorded, not tried again) and the search goes on; Optuna's state
                        # is PRUNED, as it is for any trial that stopped without a score
                        trial.set_user_attr("stopped", "failed")
                        trial.set_user_attr("failed", message)
                        raise optuna.TrialPruned()
                    raise RuntimeError(message)  # a model error: the compile stops (resumable)
                for offset, row in enumerate(result.rows):  # each question its own step
                    trial.report(float(row["scores"][metric] or 0.0), start + offset)
                rows += result.rows
                # kept as each chunk ends: a process killed mid-trial (no finally) still leaves
                # what its questions cost, which a resumed race charges to its budget
                stored = _stored_aggregate(rows)
                partial = float(stored[metric] or 0.0)
                trial.set_user_attr("partial", partial)
                trial.set_user_attr("aggregate", stored)
                if on_chunk is not None:
                    point = {**params, "demos": source}
                    on_chunk(
                        {"trial": trial.number, "point": point, "n": len(rows), "score": partial}
                    )
                # raced from the third chunk on (10 questions are noise) and only while a
                # whole chunk is left: near the end it would save a few calls and drop a
                # finished score from the candidates
                left = len(valset) - start - chunk
                if step >= 2 and left >= chunk and trial.should_prune():
                    raise optuna.TrialPruned()
        finally:
            trial.set_user_attr("calls", sum(r["scores"]["lm_calls"] for r in rows))
            trial.set_user_attr("scores", {r["id"]: r["scores"][metric] or 0.0 for r in rows})
            agg = _stored_aggregate(rows)
            trial.set_user_attr("aggregate", agg)
        return float(agg[metric] or 0.0)

    untried = 0
    out_of_calls: list[int] = []  # the trial the race's budget stopped
    for point in points:
        if point in tried:
            continue
        first_chunk = min(chunk, len(valset))
        if (
            out_of_calls
            or (budget is not None and spent >= budget)
            # the race's share cannot cover the first chunk: no trial is opened (a resumed
            # race would otherwise open an empty one where the first run had stopped)
            or (calls is not None and calls.affordable(program_name, first_chunk) < first_chunk)
        ):
            untried += 1
            continue
        study.enqueue_trial(point)
        study.optimize(objective, n_trials=1, catch=(), show_progress_bar=False)
        last = study.trials[-1]
        spent += last.user_attrs.get("calls", 0)
        if progress:
            row = trial_rows(study)[-1]
            print(
                f"trial {row['trial']}: {point} -> {row['state']} "
                f"{metric} {row['score'] or 0:.3f} on {row['n']} ({spent} calls so far)",
                flush=True,
            )
    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not done:
        raise InputError("the joint compile completed no trial (budget too small?)")
    candidates = [Candidate.of(t) for t in done]
    best = max(candidates, key=lambda c: (c.score, -c.tokens))
    default = next((c for c in candidates if c.point == points[0]), None)
    compared = versus_defaults(best, default, alpha) if default is not None else {}
    if compared.get("kept_defaults"):
        best = default
    elif compared and ties == "nearest":
        chosen, tied = nearest_tie(best, default, candidates, grid, demos, alpha)
        # the test is reported for the trial taken (best_trial: the one compared with the
        # defaults); top_trial is the highest score, and tied the trials not told apart from it
        compared = {**versus_defaults(chosen, default, alpha), "ties": ties, "tied": tied}
        compared["top_trial"] = best.number
        best = chosen
    taken = next(t for t in done if t.number == best.number)
    knobs, source = taken.user_attrs["knobs"], taken.params["demos"]
    return JointResult(
        knobs,
        source,
        build(knobs, source),
        study,
        trial_rows(study),
        compared,
        untried,
        best.number,
    )


def versus_defaults_line(versus: dict[str, Any] | None) -> str | None:
    """The joint compile's test of its best trial against the defaults' trial, or None where
    the defaults' trial was the best (nothing to test)."""
    if not versus or versus["best_trial"] == versus["default_trial"]:
        return None
    verdict = "kept the defaults" if versus["kept_defaults"] else "took it"
    top = versus.get("top_trial", versus["best_trial"])
    ties = ""
    if top != versus["best_trial"]:
        others = [t for t in versus["tied"] if t != top]
        ties = (
            f"the best trial {top} could not be told apart from trial(s) "
            f"{', '.join(map(str, others))}; the nearest the defaults, "
        )
    return (
        f"{ties}trial {versus['best_trial']} vs the defaults' trial {versus['default_trial']} "
        f"on {versus['n']} validation questions: {versus['diff']:+.3f}, sign-flip p = "
        f"{versus['p']:.3f} (alpha {versus['alpha']}): {verdict}"
    )


def searched_knobs(trials: Sequence[dict[str, Any]]) -> list[str]:
    """The knobs whose value differs between ``trials`` (rows of ``trial_rows``)."""
    names = sorted({n for t in trials for n in t["knobs"]})
    return [n for n in names if len({json.dumps(t["knobs"].get(n)) for t in trials}) > 1]


def trial_cells(t: dict[str, Any], knobs: str) -> list[str]:
    """A trial row as text cells: trial, ``knobs`` (as the caller shows them), demonstrations,
    validation score, questions, tokens a question, calls, state."""
    return [
        str(t["trial"]),
        knobs,
        str(t["demos"]),
        "-" if t["score"] is None else f"{t['score']:.3f}",
        str(t["n"] or "-"),
        "-" if t["tokens"] is None or not t["n"] else f"{t['tokens']:,.0f}",
        str(t["calls"] or 0),
        state_cell(t["state"], t.get("reason") or ""),
    ]


REASON_WIDTH = 80  # characters of a failure's reason a table shows (the recipe keeps it all)


def state_cell(state: str, reason: str = "") -> str:
    """A trial's state as a table shows it, with its reason cut to ``REASON_WIDTH``
    characters; a trial a killed or stopped compile left unfinished (Optuna's ``fail``, with
    no reason: its grid point is tried again by the rerun) reads ``interrupted``."""
    if state == "fail" and not reason:
        return "interrupted"
    reason = " ".join(reason.split())
    if len(reason) > REASON_WIDTH:
        reason = reason[: REASON_WIDTH - 3].rstrip() + "..."
    return state + (f": {reason}" if reason else "")
