"""The strategy race's arms and the steps of its successive halving (``optimize.race`` runs
them): an arm is one (strategy, grid point, demonstration source), scored on the first ``n``
validation questions, ``n`` its fidelity.

- ``lanes``: each strategy's arms in the order they enter, nearest its defaults first
  (``optimize.joint.grid_points``: its defaults without demonstrations, then one knob
  changed, then two, ...).
- ``entrants``: the arms a wave brings in: in the first, every strategy's defaults; after it,
  from each strategy still in contention the arms worth the same calls (a strategy at a
  tenth of another's calls a question brings ten arms to its one), so cheap arms are seen
  early, and from a strategy out of contention its next arm after 1, 2, 4, ... waves; the
  contenders' arms first, in turns (each one's nearest, then its next, ...).
- ``first_rungs``: the questions a strategy's arms enter on: the first rung's, or, where
  they would cost more than its share of a first wave held to 1/``eta`` of the budget, as
  many as that share covers, at least the fewest on which the test can drop an arm.
- ``ladder``: the rungs an arm climbs, one a wave: the first rung's questions, twice as
  many, ... up to the whole fold.
- ``drop_trailing``: the arms the paired sign-flip test says trail the leader at
  ``drop_p`` (on a rung's questions, or on all each scored) get no more calls.
- ``halve``: the better 1/``eta`` of a rung's arms by mean go on, and the cheapest in tokens a
  question that the test at ``alpha`` cannot tell apart from the leader (it can win only
  among ties, which more questions decide); the arms scored past the rung, and those judged
  at their own rungs, are ranked but stay.
- ``score_arm``: an arm scored up to ``n`` questions, a chunk at a time while the budget
  covers it, its rows saved in its own run directory (a rerun takes them, and charges them
  as the first run did, so it makes the same choices without calling the model again), and
  each chunk a line of the race's chunk log (``log_chunk``: the order arms were scored in,
  which the run directories alone do not keep).
- ``pick_winner``: among the finalists the test cannot tell from the best (and within
  ``margin`` of it), the cheapest; ``race_table``: every arm entered, as the recipe keeps it.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

from netcast.evaluation.evaluate import aggregate, evaluate
from netcast.evaluation.stats import paired
from netcast.files import short_hash
from netcast.optimize.budget import CallBudget
from netcast.optimize.joint import grid_points, knob_grid
from netcast.optimize.settings import RaceSettings
from netcast.programs import get_program

CHUNK = 5  # questions scored between budget checks
CHUNK_LOG = "chunks.jsonl"  # in the race's work directory, beside the arms' run directories


@dataclass
class Arm:
    """One (strategy, grid point, demonstration source) of the race: ``order`` its place in
    its strategy's order (0: the defaults), ``knobs`` all its knobs (held and searched)."""

    strategy: str
    order: int
    point: dict[str, Any]
    knobs: dict[str, Any]
    wave: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)
    state: str = "running"  # running | dropped | halved | failed | out of budget | finished
    reason: str = ""
    choice: dict[str, Any] | None = None  # what it is judged by, if a finalist

    @property
    def demos(self) -> str:
        return self.point["demos"]

    @property
    def name(self) -> str:
        """The arm as a line names it: its strategy, the knobs it changed from the
        strategy's defaults, its demonstrations."""
        defaults = get_program(self.strategy).knob_defaults()
        changed = [f"{k}={json.dumps(v)}" for k, v in self.knobs.items() if defaults.get(k) != v]
        demos = [] if self.demos == "none" else [f"demos {self.demos}"]
        return f"{self.strategy} " + (", ".join(changed + demos) or "at its defaults")

    @property
    def key(self) -> str:
        """Its run directory's name (the same arm in a rerun of the same race)."""
        return f"{self.strategy}-{self.order}-{short_hash(self.point)}"

    def scores(self, metric: str, n: int | None = None) -> dict[str, float]:
        """Each of its first ``n`` questions' score, by id."""
        return {r["id"]: r["scores"][metric] or 0.0 for r in self.rows[:n]}

    def mean(self, metric: str, n: int | None = None) -> float:
        scores = self.scores(metric, n)
        return sum(scores.values()) / len(scores) if scores else 0.0

    def tokens(self) -> float:
        """Its tokens (in and out) a question."""
        agg = aggregate(self.rows) if self.rows else {}
        return (agg.get("tokens_in") or 0) + (agg.get("tokens_out") or 0)

    def calls(self) -> int:
        return sum(CallBudget.cost(r, cached_free=False) for r in self.rows)


@dataclass
class Lane:
    """One strategy's arms: its grid points in the order they enter, the knobs it holds, how
    many have entered, and why it left (a model error), if it did."""

    name: str
    points: list[dict[str, Any]]
    held: dict[str, Any]
    entered: int = 0
    failed: str = ""
    idle: int = 0  # waves since one of its arms was last left in the race
    first: int = 0  # the questions its arms are first scored on (``first_rungs``)

    def settle(self, arms: Sequence[Arm]) -> None:
        """After a wave: whether one of its arms is still in the race."""
        running = any(a.strategy == self.name and a.state == "running" for a in arms)
        self.idle = 0 if running else self.idle + 1

    @property
    def until_due(self) -> int:
        """Waves until it next brings an arm (0: in contention, or due now)."""
        return 0 if self.idle == 0 else (1 << (self.idle - 1).bit_length()) - self.idle

    @property
    def due(self) -> bool:
        """Whether it brings an arm to the next wave: in contention, or after 1, 2, 4, ...
        waves out of it."""
        return self.idle & (self.idle - 1) == 0

    def arm(self, wave: int) -> Arm:
        """Its next arm."""
        point = self.points[self.entered]
        knobs = {**self.held, **{k: v for k, v in point.items() if k != "demos"}}
        self.entered += 1
        return Arm(self.name, self.entered - 1, point, knobs, wave)

    @property
    def open(self) -> bool:
        return not self.failed and self.entered < len(self.points)


def lanes(
    programs: dict[str, dspy.Module],
    held: dict[str, dict[str, Any]],
    sources: Callable[[str], list[str]],
    lm: Any,
    seed: int,
) -> dict[str, Lane]:
    """Each strategy's lane: its grid (the knobs it does not hold) x its demonstration
    sources, nearest its defaults first."""
    out = {}
    for name, program in programs.items():
        cls = type(program)
        grid = knob_grid(cls, lm, held[name])
        points = grid_points(grid, sources(name), cls.knob_defaults(), seed)
        out[name] = Lane(name, points, held[name])
    return out


def entrants(lanes: dict[str, Lane], calls: CallBudget, wave: int) -> list[Arm]:
    """The arms wave ``wave`` brings in, in the order they are scored: every strategy's
    defaults in the first; after it, from each strategy in contention (an arm of it still in
    the race) as many of its next arms as cost what one arm of the dearest of them does (by
    the most calls a question of each has taken), and from each out of contention its next
    arm after 1, 2, 4, ... waves. Taken in turns: each strategy in contention's next arm,
    then its arm after that, ..., then those of the strategies out of contention, so a
    budget that ends within the wave has entered every contender's nearest arm first."""
    open_lanes = [lane for lane in lanes.values() if lane.open]
    if not open_lanes:
        return []
    cost = {lane.name: calls.per_question(lane.name) for lane in open_lanes}
    contending = [lane.name for lane in open_lanes if lane.idle == 0]
    dearest = max((cost[n] for n in contending), default=1)
    counts = {}
    for lane in open_lanes:
        if wave == 0 or lane.idle:
            count = int(wave == 0 or lane.due)
        else:
            count = max(1, dearest // cost[lane.name])
        counts[lane.name] = min(count, len(lane.points) - lane.entered)
    new = []
    for group in ([n for n in open_lanes if not n.idle], [n for n in open_lanes if n.idle]):
        for turn in range(max((counts[lane.name] for lane in group), default=0)):
            new += [lane.arm(wave) for lane in group if turn < counts[lane.name]]
    return new


def first_rungs(
    lanes: dict[str, Lane],
    calls: CallBudget,
    first: int,
    budget: int | None,
    eta: int,
    drop_p: float,
) -> None:
    """Each strategy's first rung (``Lane.first``), set once its first question is scored:
    ``first`` questions, or, where they would cost more than its share of a first wave held
    to 1/``eta`` of the budget (``budget / (eta x strategies)`` calls, at its most calls a
    question so far), as many as that share covers, but no fewer than the paired test needs
    to drop an arm at ``drop_p`` (``fewest``: 6 at 0.05). The dear strategies' defaults then
    leave most of the budget to the next arms of the strategies in contention."""
    share = budget // (eta * len(lanes)) if budget is not None else None
    least = min(first, fewest(drop_p))
    for lane in lanes.values():
        n = first if share is None else share // calls.per_question(lane.name)
        lane.first = min(first, max(least, n))


def fewest(drop_p: float) -> int:
    """The fewest questions on which the paired sign-flip test can drop an arm at ``drop_p``:
    its smallest p, one arm behind on every question, is 2 / 2**n."""
    n = 1
    while 2 / 2**n >= drop_p:
        n += 1
    return n


def ladder(first: int, fold: int) -> list[int]:
    """The rungs' questions: ``first``, twice as many, ... up to the whole fold."""
    rungs = [min(first, fold)]
    while rungs[-1] < fold:
        rungs.append(min(2 * rungs[-1], fold))
    return rungs


def drop_trailing(alive: Sequence[Arm], n: int | None, metric: str, drop_p: float) -> Arm:
    """Drop the arms that trail the leader (the best mean on the first ``n`` questions; None:
    on every question each scored) by the paired test at ``drop_p`` (on the questions both
    scored); the leader."""
    leader = max(alive, key=lambda a: (a.mean(metric, n), -a.tokens()))
    for arm in alive:
        if arm is leader:
            continue
        test = paired(arm.scores(metric, n), leader.scores(metric, n), interval=False)
        if test.trails(drop_p):
            arm.state = "dropped"
            arm.reason = (
                f"trails {leader.name} by {-test.diff:.3f} on {test.n} questions (p = {test.p:.3g})"
            )
    return leader


def halve(
    alive: Sequence[Arm],
    n: int,
    metric: str,
    eta: int,
    alpha: float,
    last: bool,
    stay: Collection[Arm] = (),
) -> None:
    """The rung of ``n`` questions halved: the better 1/``eta`` of ``alive`` by mean (fewer
    tokens among equals) and the cheapest the test at ``alpha`` cannot tell apart from the
    leader are kept; the others leave (halved), except the arms in ``stay`` (arms judged at
    their own rung) and, below the ``last`` rung, the arms scored past it: those take their
    places in the ranking but stay."""
    if len(alive) <= 1:
        return
    ranked = sorted(alive, key=lambda a: (-a.mean(metric, n), a.tokens(), a.strategy, a.order))
    kept = ranked[: max(1, math.ceil(len(alive) / eta))]
    lead = ranked[0].scores(metric, n)
    ties = [a for a in alive if not paired(lead, a.scores(metric, n), interval=False).beats(alpha)]
    kept.append(min(ties, key=lambda a: (a.tokens(), a.strategy, a.order)))
    for arm in alive:
        if arm not in kept and arm not in stay and (last or len(arm.rows) <= n):
            arm.state = "halved"
            arm.reason = f"{arm.mean(metric, n):.3f}, not in the better 1/{eta} on {n}"


class Scored(enum.Enum):
    """How scoring an arm ended: its ``n`` questions scored; a chunk it could not afford (it
    is out of budget); replies that fit no field (the arm leaves); a model error (its strategy
    leaves)."""

    DONE = "done"
    OUT_OF_BUDGET = "out of budget"
    UNREADABLE = "unreadable"
    MODEL_ERROR = "model error"


@dataclass
class Scorer:
    """What scoring an arm needs: the validation fold, the budget, the metric, where rows are
    kept, the model (named in each run directory), and who hears of each chunk."""

    valset: list[dspy.Example]
    calls: CallBudget
    metric: str
    work: Path | None
    lm: Any
    on_chunk: Callable[[Arm], None] = lambda arm: None


def score_arm(arm: Arm, program: dspy.Module, n: int, scorer: Scorer) -> Scored:
    """``arm`` scored up to its first ``n`` questions, a chunk at a time while the budget
    covers it: how it ended (``Scored``). Rows its run directory holds are taken, not asked
    again, and charged as when they were scored."""
    run_dir = scorer.work / arm.key if scorer.work else None
    info = {"program": arm.strategy, "knobs": program.knobs.model_dump(), "demos": arm.demos}
    info["model"] = getattr(scorer.lm, "model", None)
    while len(arm.rows) < n:
        todo = scorer.valset[len(arm.rows) : min(n, len(arm.rows) + CHUNK)]
        k = scorer.calls.affordable(arm.strategy, len(todo))
        if k == 0:
            arm.state, arm.reason = "out of budget", f"scored {len(arm.rows)} questions"
            return Scored.OUT_OF_BUDGET
        result = evaluate(
            program, todo[:k], run_dir=run_dir, run_info=info, progress=False, max_errors=0
        )
        scorer.calls.charge(arm.strategy, result.rows)
        arm.rows += result.rows
        if scorer.work:
            log_chunk(scorer.work, arm, scorer.calls.spent)
        scorer.on_chunk(arm)
        if result.errors:
            first_id, first = next(iter(result.errors.items()))
            arm.state, arm.reason = "failed", f"{first_id}: {first}"
            parse = all(isinstance(e, AdapterParseError) for e in result.raised.values())
            return Scored.UNREADABLE if parse else Scored.MODEL_ERROR
    return Scored.DONE


def log_chunk(work: Path, arm: Arm, spent: int) -> None:
    """A line of the race's chunk log (``CHUNK_LOG`` in ``work``) for a chunk of ``arm`` just
    scored: its run directory, its wave, its questions scored so far, the calls the race had
    spent. The lines are in the order the chunks were scored (across arms), which is what a
    calls-to-winner curve needs (``benchmarks/race_curve.py``); a chunk an earlier run logged
    (a resumed race taking its rows) is not logged again."""
    path = work / CHUNK_LOG
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    seen = set()
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            seen.add((entry["arm"], entry["n"]))
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a torn line (a kill mid-write): the log is a record, not an input
    if (arm.key, len(arm.rows)) in seen:
        return
    entry = {"arm": arm.key, "wave": arm.wave, "n": len(arm.rows), "spent": spent}
    with path.open("a", encoding="utf-8") as handle:
        handle.write(("\n" if text and not text.endswith("\n") else "") + json.dumps(entry) + "\n")


def pick_winner(
    finalists: Sequence[Arm],
    alpha: float,
    drop_p: float,
    n: int,
    margin: float = RaceSettings.margin,
) -> tuple[Arm, dict[str, Any]]:
    """The best validation score; among the finalists it cannot be told from at ``alpha`` and
    that trail it by at most ``margin``, the cheapest in tokens a question. The winner, and
    the choice as the recipe records it (strategies by name, the ties as arms)."""
    top = max(finalists, key=lambda a: (a.choice["score"], -a.choice["tokens"]))
    tied = [
        a
        for a in finalists
        if a is top
        or (
            top.choice["score"] - a.choice["score"] <= margin + 1e-9
            and not paired(top.choice["scores"], a.choice["scores"], interval=False).beats(alpha)
        )
    ]
    winner = min(tied, key=lambda a: (a.choice["tokens"], -a.choice["score"]))
    test = paired(winner.choice["scores"], top.choice["scores"], interval=False)
    return winner, {
        "winner": winner.strategy,
        "top": top.strategy,
        "winner_arm": winner.name,
        "top_arm": top.name,
        "tied": sorted(a.name for a in tied),
        "versus_top": {"n": test.n, "diff": round(test.diff, 4), "p": round(test.p, 4)},
        "alpha": alpha,
        "margin": margin,
        "drop_p": drop_p,
        "validation_questions": n,
    }


def arm_versus_defaults(
    winner: Arm, defaults: Arm | None, metric: str, alpha: float
) -> dict[str, Any] | None:
    """The winner's test against its strategy's defaults on the questions both scored (None
    where the winner is the defaults, or they were not scored): recorded, not a gate (the
    choice is the race's, ``pick_winner``)."""
    if defaults is None or defaults is winner or not defaults.rows:
        return None
    test = paired(winner.scores(metric), defaults.scores(metric), interval=False)
    verdict = "beats them" if test.beats(alpha) else "not told apart"
    return {
        "best_trial": winner.name,
        "default_trial": defaults.name,
        "n": test.n,
        "diff": round(test.diff, 4),
        "p": round(test.p, 4),
        "alpha": alpha,
        "kept_defaults": False,
        "verdict": verdict,
        "knobs": winner.knobs,
        "demos": winner.demos,
        "score": round(winner.mean(metric, test.n), 4),
        "default_score": round(defaults.mean(metric, test.n), 4),
    }


def reasons(arms: Sequence[Arm]) -> str:
    return "; ".join(f"{a.name}: {a.state} ({a.reason})" for a in arms)


def choice_of(arm: Arm, metric: str, n: int | None = None) -> dict[str, Any]:
    """What a finalist is judged by: its first ``n`` questions' scores (the questions every
    finalist scored), their mean, tokens a question."""
    scores = arm.scores(metric, n)
    return {
        "scores": scores,
        "score": arm.mean(metric, n),
        "tokens": arm.tokens(),
        "knobs": arm.knobs,
        "demos": arm.demos,
    }


def race_table(arms: Sequence[Arm], metric: str, winner: Arm | None = None) -> list[dict]:
    """Every arm entered: its strategy, wave, knobs, demonstrations, questions scored, score,
    tokens and seconds a question, calls that reached the model, state and why it stopped
    (``chosen``: the winner), its questions' scores."""
    table = []
    for a in arms:
        agg = aggregate(a.rows) if a.rows else {}
        table.append(
            {
                "program": a.strategy,
                "stage": f"wave {a.wave}",
                "knobs": a.knobs,
                "demos": a.demos,
                "n": len(a.rows),
                "score": a.mean(metric) if a.rows else None,
                "tokens": a.tokens() if a.rows else None,
                "seconds": agg.get("seconds"),
                "calls": a.calls(),
                "state": a.state,
                "reason": "chosen" if a is winner else a.reason,
                "question_scores": a.scores(metric),
            }
        )
    return table
