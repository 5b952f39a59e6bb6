"""The strategy race's arms and the steps of its successive halving (``optimize.race`` runs
them): an arm is one (strategy, grid point, demonstration source), scored on the first ``n``
validation questions, ``n`` its fidelity.

- ``lanes``: each strategy's arms in the order they enter, nearest its defaults first
  (``optimize.joint.grid_points``: its defaults without demonstrations, then one knob
  changed, then two, ...).
- ``entrants``: the arms a wave brings in: in the first, every strategy's defaults; after it,
  from each strategy still in contention the arms worth the same calls (a strategy at a
  tenth of another's calls a question brings ten arms to its one), so cheap arms are seen
  early, and from a strategy out of contention its next arm after 1, 2, 4, ... waves.
- ``drop_trailing``: the arms the paired sign-flip test says trail the rung's leader at
  ``drop_p`` get no more calls.
- ``halve``: the better 1/``eta`` of a rung's arms by mean go on, and the cheapest in tokens a
  question that the test at ``alpha`` cannot tell apart from the leader (it can win only
  among ties, which more questions decide); an arm an earlier wave kept (scored past the
  rung) is ranked at the rung but leaves only at the last rung (the whole fold).
- ``score_arm``: an arm scored up to ``n`` questions, a chunk at a time while the budget
  covers it, its rows saved in its own run directory (a rerun takes them, and charges them
  as the first run did, so it makes the same choices without calling the model again).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
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
from netcast.programs import get_program

CHUNK = 5  # questions scored between budget checks


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
    """The arms wave ``wave`` brings in: every strategy's defaults in the first; after it, from
    each strategy in contention (an arm of it still in the race) as many of its next arms as
    cost what one arm of the dearest of them does (by the most calls a question of each has
    taken), and from each out of contention its next arm after 1, 2, 4, ... waves."""
    open_lanes = [lane for lane in lanes.values() if lane.open]
    if not open_lanes:
        return []
    cost = {lane.name: calls.per_question(lane.name) for lane in open_lanes}
    contending = [lane.name for lane in open_lanes if lane.idle == 0]
    dearest = max((cost[n] for n in contending), default=1)
    new = []
    for lane in open_lanes:
        if wave == 0 or lane.idle:
            count = int(wave == 0 or lane.due)
        else:
            count = max(1, dearest // cost[lane.name])
        for _ in range(min(count, len(lane.points) - lane.entered)):
            new.append(lane.arm(wave))
    return new


def drop_trailing(alive: Sequence[Arm], n: int, metric: str, drop_p: float) -> Arm:
    """Drop the arms that trail the leader (the best mean on the first ``n`` questions) by the
    paired test at ``drop_p``; the leader."""
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


def halve(alive: Sequence[Arm], n: int, metric: str, eta: int, alpha: float, last: bool) -> None:
    """The rung of ``n`` questions halved: the better 1/``eta`` of ``alive`` by mean (fewer
    tokens among equals) and the cheapest the test at ``alpha`` cannot tell apart from the
    leader are kept; the newcomers not kept leave (halved). Below the ``last`` rung the arms
    scored past it (kept by an earlier wave) take their places in the ranking but stay."""
    if len(alive) <= 1:
        return
    ranked = sorted(alive, key=lambda a: (-a.mean(metric, n), a.tokens(), a.strategy, a.order))
    kept = ranked[: max(1, math.ceil(len(alive) / eta))]
    lead = ranked[0].scores(metric, n)
    ties = [a for a in alive if not paired(lead, a.scores(metric, n), interval=False).beats(alpha)]
    kept.append(min(ties, key=lambda a: (a.tokens(), a.strategy, a.order)))
    for arm in alive:
        if arm not in kept and (last or len(arm.rows) <= n):
            arm.state = "halved"
            arm.reason = f"{arm.mean(metric, n):.3f}, not in the better 1/{eta} on {n}"


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


def score_arm(arm: Arm, program: dspy.Module, n: int, s: Scorer) -> str:
    """``arm`` scored up to its first ``n`` questions, a chunk at a time while the budget
    covers it: ``"ok"``, ``"budget"`` (a chunk it could not afford: it is out of budget),
    ``"failed"`` (its replies fit no field: the arm leaves) or ``"error"`` (a model error:
    its strategy leaves). Rows its run directory holds are taken, not asked again, and
    charged as when they were scored."""
    run_dir = s.work / arm.key if s.work else None
    info = {"program": arm.strategy, "knobs": program.knobs.model_dump(), "demos": arm.demos}
    info["model"] = getattr(s.lm, "model", None)
    while len(arm.rows) < n:
        todo = s.valset[len(arm.rows) : min(n, len(arm.rows) + CHUNK)]
        k = s.calls.affordable(arm.strategy, len(todo))
        if k == 0:
            arm.state, arm.reason = "out of budget", f"scored {len(arm.rows)} questions"
            return "budget"
        result = evaluate(
            program, todo[:k], run_dir=run_dir, run_info=info, progress=False, max_errors=0
        )
        s.calls.charge(arm.strategy, result.rows)
        arm.rows += result.rows
        s.on_chunk(arm)
        if result.errors:
            first_id, first = next(iter(result.errors.items()))
            arm.state, arm.reason = "failed", f"{first_id}: {first}"
            parse = all(isinstance(e, AdapterParseError) for e in result.raised.values())
            return "failed" if parse else "error"
    return "ok"
