"""Knobs and demonstrations in one compile (``netcast compile --optimizer joint``): the
``JointCompile`` teleprompter, configured by ``JointSettings``.

The knobs the student was not built with (its held knobs: ``held_knobs``) are searched: their
declared ranges (sized to the model's window) become a small grid; each grid point
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
scored in full. Demonstrations are drawn from the first part of the training questions and
every trial is scored on the rest (the validation fold), never on dev; the retriever is the one
the program will search. When every demonstration source searched is ``none`` no demonstration
is drawn, and every training question validates.

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
import math
import random
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy
import optuna
from dspy.teleprompt import Teleprompter
from dspy.utils.exceptions import AdapterParseError

from netcast.errors import InputError
from netcast.evaluation.evaluate import EvalResult, aggregate, evaluate
from netcast.evaluation.stats import paired
from netcast.models.factory import context_window
from netcast.optimize.annotations import AnnotationTeacher
from netcast.optimize.budget import CallBudget
from netcast.optimize.compile import compile_program, hold_out
from netcast.optimize.settings import DEMO_SOURCES, AnnotationSettings, JointSettings
from netcast.programs import get_program
from netcast.programs import knobs as knobs_mod
from netcast.programs.shared.budget import budget_range

PRUNE_P = 0.01  # a trial trailing the best complete one at this p stops early
GRID_POINTS = 6  # values tried per numeric knob whose range holds more
COMPLETE = optuna.trial.TrialState.COMPLETE
PRUNED = optuna.trial.TrialState.PRUNED
RUNNING = optuna.trial.TrialState.RUNNING
FAIL = optuna.trial.TrialState.FAIL


def held_knobs(program: dspy.Module) -> dict[str, Any]:
    """The knobs ``program`` was built with (its ``Knobs`` fields given, not defaulted): what a
    compile of it holds while it searches the others."""
    knobs = program.knobs
    return {k: getattr(knobs, k) for k in type(knobs).model_fields if k in knobs.model_fields_set}


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


def point_program(
    program: dspy.Module,
    source: str,
    pool: Sequence[dspy.Example],
    *,
    per_step: int,
    teacher_lm: Any = None,
    seed: int = 0,
) -> dspy.Module:
    """``program`` (built at a grid point's knobs) with demonstrations from ``source`` drawn
    from ``pool``: none, the data's annotations, or the model's (``teacher_lm``'s) successful
    traces (BootstrapFewShot: its calls are the teacher's, not a budget's)."""
    if source == "annotations":
        teacher = AnnotationTeacher(AnnotationSettings(per_step), seed=seed)
        return teacher.compile(program, trainset=list(pool))
    if source == "bootstrap":
        settings = {"max_bootstrapped_demos": per_step, "max_labeled_demos": 0}
        return compile_program(
            program, list(pool), teacher_lm=teacher_lm, seed=seed, settings=settings
        )
    return program


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


def choose(
    candidates: Sequence[Candidate],
    origin: dict[str, Any],
    grid: dict[str, list],
    demos: Sequence[str],
    alpha: float,
    ties: str,
) -> tuple[Candidate, dict[str, Any]]:
    """The trial a joint compile takes among the complete ``candidates``, and its test against
    the defaults' trial (the one at ``origin``; ``{}`` where none completed): the best score
    (fewer tokens among equals), unless it does not beat the defaults at ``alpha`` (the defaults
    stay), or, with ``ties="nearest"``, the tie nearest the defaults (``nearest_tie``)."""
    best = max(candidates, key=lambda c: (c.score, -c.tokens))
    default = next((c for c in candidates if c.point == origin), None)
    if default is None:
        return best, {}
    compared = versus_defaults(best, default, alpha)
    if compared["kept_defaults"]:
        return default, compared
    if ties != "nearest":
        return best, compared
    chosen, tied = nearest_tie(best, default, candidates, grid, demos, alpha)
    # the test is reported for the trial taken (best_trial: the one compared with the
    # defaults); top_trial is the highest score, and tied the trials not told apart from it
    compared = {**versus_defaults(chosen, default, alpha), "ties": ties, "tied": tied}
    compared["top_trial"] = best.number
    return chosen, compared


def resume(study: optuna.Study) -> list[dict[str, Any]]:
    """The grid points ``study`` has finished (not tried again). A trial left running by a
    killed compile (SIGKILL, a lost machine) is failed first, so its point is tried again and
    the recipe lists it as failed (one compile per study at a time)."""
    for t in study.get_trials(deepcopy=False, states=(RUNNING,)):
        study.tell(t.number, state=FAIL)
    return [{**t.params} for t in study.get_trials(deepcopy=False) if t.state in (COMPLETE, PRUNED)]


def spent_on(study: optuna.Study) -> int:
    """The model calls ``study``'s trials spent (an earlier run's, resumed)."""
    return sum(model_calls(t.user_attrs.get("aggregate") or {}) for t in study.get_trials())


class JointCompile(Teleprompter):
    """Search a program's knobs and demonstration sources together (module docstring).

    ``compile(student, trainset=...)`` holds the knobs ``student`` was built with
    (``held_knobs``) and searches the others on held-out training questions; it returns the
    program of the trial taken (``self.result``: the trials and the test against the
    defaults). ``budget`` is the ``CallBudget`` the trials spend (default: one of
    ``settings.budget`` calls, checked between trials; the strategy race gives each survivor a
    share checked before each chunk, which stops the trial it does not cover and the search).
    ``on_chunk`` is told of each chunk scored (trial, point, questions and running score so
    far). Run under ``dspy.context(lm=lm)``."""

    def __init__(
        self,
        settings: JointSettings | None = None,
        *,
        lm: Any = None,
        metric: str = "f1",
        teacher_lm: Any = None,
        seed: int = 0,
        budget: CallBudget | None = None,
        study: optuna.Study | None = None,
        progress: bool = True,
        on_chunk: Callable[[dict[str, Any]], None] | None = None,
    ):
        super().__init__()
        self.settings = (settings or JointSettings()).for_teacher("model")  # the CLI's default
        self.lm, self.metric, self.teacher_lm, self.seed = lm, metric, teacher_lm, seed
        self.budget = budget or CallBudget(self.settings.budget, checked="trial")
        self.study, self.progress, self.on_chunk = study, progress, on_chunk
        self.result: JointResult | None = None

    def compile(self, student, *, trainset, teacher=None, valset=None, **kwargs) -> dspy.Module:
        """The program of the trial taken (``valset`` is not used: trials score held-out
        training questions, so dev stays unseen)."""
        search = _Search.open(self, student, trainset)
        search.run()
        self.result = search.result()
        return self.result.program


@dataclass
class _Search:
    """One joint compile under way: the program class and what it holds, the grid points in
    the order tried, the questions (demonstrations from ``pool``, scores on ``valset``), the
    study and the points it finished."""

    tele: JointCompile
    cls: type
    retriever: Any
    fixed: dict[str, Any]
    grid: dict[str, list]
    points: list[dict[str, Any]]
    pool: list[dspy.Example]
    valset: list[dspy.Example]
    study: optuna.Study
    tried: list[dict[str, Any]] = field(default_factory=list)
    built: dict[tuple, dspy.Module] = field(default_factory=dict)
    out_of_calls: bool = False  # the budget stopped a trial midway: the search stops
    untried: int = 0

    @classmethod
    def open(cls, tele: JointCompile, student: dspy.Module, trainset: Sequence) -> _Search:
        s, program = tele.settings, type(student)
        fixed = held_knobs(student)
        searched = check_search(program.name, fixed, dict(s.grid), s.demos)
        s.check()
        demos = list(s.demos)
        pool, valset = (
            ([], list(trainset)) if set(demos) == {"none"} else hold_out(trainset, s.share)
        )
        grid = knob_grid(program, tele.lm, fixed)
        defaults = program.knob_defaults()
        for name, checked in searched.items():
            # the defaults' point stays on the grid: the trial a compile must beat
            grid[name] = ([defaults[name]] if defaults[name] not in checked else []) + checked
        study = tele.study or joint_study()
        tried = resume(study)
        tele.budget.charge(program.name, [], extra=spent_on(study))
        points = grid_points(grid, demos, defaults, tele.seed)
        return cls(
            tele, program, student.retriever, fixed, grid, points, pool, valset, study, tried
        )

    @property
    def name(self) -> str:
        return self.cls.name

    def build(self, knobs: dict[str, Any], source: str) -> dspy.Module:
        """The program at ``knobs`` with demonstrations from ``source`` (built once)."""
        key = (tuple(sorted(knobs.items(), key=lambda kv: kv[0])), source)
        if key not in self.built:
            tele = self.tele
            self.built[key] = point_program(
                self.cls(self.retriever, lm=tele.lm, **knobs),
                source,
                self.pool,
                per_step=tele.settings.per_step,
                teacher_lm=tele.teacher_lm,
                seed=tele.seed,
            )
        return self.built[key]

    def run(self) -> None:
        """Each grid point not finished yet, in order, while the budget opens a trial."""
        first_chunk = min(self.tele.settings.chunk, len(self.valset))
        for point in self.points:
            if point in self.tried:
                continue
            # the budget's share cannot cover the first chunk: no trial is opened (a resumed
            # race would otherwise open an empty one where the first run had stopped)
            if self.out_of_calls or not self.tele.budget.opens(self.name, first_chunk):
                self.untried += 1
                continue
            self.study.enqueue_trial(point)
            self.study.optimize(self.objective, n_trials=1, catch=(), show_progress_bar=False)
            if self.tele.progress:
                self.print_trial(point)

    def print_trial(self, point: dict[str, Any]) -> None:
        row = trial_rows(self.study)[-1]
        print(
            f"trial {row['trial']}: {point} -> {row['state']} {self.tele.metric} "
            f"{row['score'] or 0:.3f} on {row['n']} ({self.tele.budget.spent} calls so far)",
            flush=True,
        )

    def objective(self, trial: optuna.Trial) -> float:
        """One grid point scored on the validation fold, a chunk at a time: each question a
        step Optuna's pruner reads, stopped where it trails (from the third chunk on, while a
        whole chunk is left), where a chunk is not covered by the budget, or where the
        model's replies fit no field."""
        params = {n: trial.suggest_categorical(n, self.grid[n]) for n in self.grid}
        source = trial.suggest_categorical("demos", list(self.tele.settings.demos))
        knobs = {**self.fixed, **params}
        trial.set_user_attr("knobs", knobs)
        program = self.build(knobs, source)
        chunk, metric = self.tele.settings.chunk, self.tele.metric
        rows: list[dict[str, Any]] = []
        try:
            for step, start in enumerate(range(0, len(self.valset), chunk)):
                self.score_chunk(trial, program, start, rows, {**params, "demos": source})
                # raced from the third chunk on (10 questions are noise) and only while a
                # whole chunk is left: near the end it would save a few calls and drop a
                # finished score from the candidates
                left = len(self.valset) - start - chunk
                if step >= 2 and left >= chunk and trial.should_prune():
                    raise optuna.TrialPruned()
        finally:
            trial.set_user_attr("calls", sum(r["scores"]["lm_calls"] for r in rows))
            trial.set_user_attr("scores", {r["id"]: r["scores"][metric] or 0.0 for r in rows})
            agg = _stored_aggregate(rows)
            trial.set_user_attr("aggregate", agg)
        return float(agg[metric] or 0.0)

    def score_chunk(
        self,
        trial: optuna.Trial,
        program: dspy.Module,
        start: int,
        rows: list[dict[str, Any]],
        point: dict[str, Any],
    ) -> None:
        """The chunk of validation questions from ``start`` scored into ``rows``."""
        questions = self.valset[start : start + self.tele.settings.chunk]
        if not self.tele.budget.covers(self.name, len(questions)):
            self.out_of_calls = True
            trial.set_user_attr("stopped", "out of budget")
            raise optuna.TrialPruned()
        result = evaluate(program, questions, progress=False)
        self.tele.budget.charge(self.name, result.rows)
        if result.errors:
            _stop_failed(trial, result)
        metric = self.tele.metric
        for offset, row in enumerate(result.rows):  # each question its own step
            trial.report(float(row["scores"][metric] or 0.0), start + offset)
        rows += result.rows
        # kept as each chunk ends: a process killed mid-trial (no finally) still leaves
        # what its questions cost, which a resumed race charges to its budget
        stored = _stored_aggregate(rows)
        partial = float(stored[metric] or 0.0)
        trial.set_user_attr("partial", partial)
        trial.set_user_attr("aggregate", stored)
        if self.tele.on_chunk is not None:
            self.tele.on_chunk(
                {"trial": trial.number, "point": point, "n": len(rows), "score": partial}
            )

    def result(self) -> JointResult:
        """The trial taken (``choose``) and the search's record."""
        done = self.study.get_trials(deepcopy=False, states=(COMPLETE,))
        if not done:
            raise InputError("the joint compile completed no trial (budget too small?)")
        s = self.tele.settings
        candidates = [Candidate.of(t) for t in done]
        best, compared = choose(candidates, self.points[0], self.grid, s.demos, s.alpha, s.ties)
        taken = next(t for t in done if t.number == best.number)
        knobs, source = taken.user_attrs["knobs"], taken.params["demos"]
        program = self.build(knobs, source)
        rows = trial_rows(self.study)
        return JointResult(
            knobs, source, program, self.study, rows, compared, self.untried, best.number
        )


def _stop_failed(trial: optuna.Trial, result: EvalResult) -> None:
    """A chunk whose questions failed: where the model's replies at this point fit no field,
    the point fails (recorded, not tried again) and the search goes on; Optuna's state is
    PRUNED, as it is for any trial that stopped without a score. Any other error (a model
    error) stops the compile (resumable)."""
    first = next(iter(result.errors.values()))
    message = f"{len(result.errors)} question(s) failed (first: {first})"
    if all(isinstance(e, AdapterParseError) for e in result.raised.values()):
        trial.set_user_attr("stopped", "failed")
        trial.set_user_attr("failed", message)
        raise optuna.TrialPruned()
    raise RuntimeError(message)
