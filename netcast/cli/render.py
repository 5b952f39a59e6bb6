"""Rendering for the command line: rich tables built from the one metrics table."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.progress import (
    BarColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from netcast.evaluation.metrics import BY_NAME, COST, PROTOCOL, QUALITY

console = Console()
err_console = Console(stderr=True)


PIPED_WIDTH = 200  # the widest a table is printed where the output is not a terminal


def print_table(table: Table, to: Console | None = None) -> None:
    """Print ``table`` whole. Where the output is not a terminal (a pipe, a log file: rich
    would fit it to 80 columns and cut its cells with "..."), at its natural width up to
    ``PIPED_WIDTH`` and never narrower than its longest words; in a terminal too narrow for
    it, with long cells folded onto more lines, never cut."""
    to = to or console
    for column in table.columns:
        column.overflow = "fold"
    if not to.is_terminal:  # rich caps a print's width at the console's: a wider one, same file
        size = Measurement.get(to, to.options.update_width(100_000), table)
        width = max(to.width, min(size.maximum, PIPED_WIDTH), size.minimum)
        to = Console(file=to.file, width=width, color_system=to.color_system)
    to.print(table)


# The short table ``compile`` and ``show`` print: the headline measures and the question count.
SCORE_ROWS = ("f1", "em", "recall", "lm_calls", "tokens_in", "tokens_out")
ARTIFACT_FIELDS = (
    "program",
    "knobs",
    "retriever",
    "dataset",
    "optimizer",
    "metric",
    "model",
    "teacher_model",
    "seed",
    "tuning",
)


def results_table(title: str, aggregate: dict[str, Any]) -> Table:
    """Quality and cost side by side, averaged per question."""
    table = Table(title=title, caption=f"{aggregate.get('n', 0)} questions")
    for header in ("quality", "", "cost per question", ""):
        table.add_column(header)
    right = (*COST, *PROTOCOL)
    for i in range(max(len(QUALITY), len(right))):
        cells = []
        for names in (QUALITY, right):
            measure = BY_NAME[names[i]] if i < len(names) else None
            cells += (
                [measure.label, measure.format(aggregate.get(measure.name))]
                if measure
                else ["", ""]
            )
        table.add_row(*cells)
    return table


SMOKE_N = 30  # fewer dev questions than this: a smoke check, said so under the scores


def score_table(columns: dict[str, dict[str, Any] | None]) -> Table:
    """Dev scores of several programs (columns), per question; a caption where the dev
    questions are fewer than ``SMOKE_N`` (a check that the program runs, not a finding)."""
    sizes = [agg["n"] for agg in columns.values() if agg and agg.get("n")]
    smoke = bool(sizes) and min(sizes) < SMOKE_N
    table = Table(
        caption=f"n = {min(sizes)}: a smoke check, not a finding (netcast bench for one)"
        if smoke
        else None
    )
    table.add_column("dev score")
    for name in columns:
        table.add_column(name, justify="right")
    for name in SCORE_ROWS:
        measure = BY_NAME[name]
        label = measure.label + ("/q" if measure.scope == "cost" else "")
        table.add_row(label, *[measure.format((agg or {}).get(name)) for agg in columns.values()])
    table.add_row("questions", *[str((agg or {}).get("n", "-")) for agg in columns.values()])
    return table


def study_table(result) -> Table:
    """A tuning study's completed trials: knobs, objective values, Pareto front, the pick."""
    from optuna.trial import TrialState

    from netcast.optimize.tune import pareto_front

    study = result.study
    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    front = {t.number for t in pareto_front(done)}
    objectives = result.objectives
    table = Table(title=f"study {result.name} ({len(done)} completed trials)")
    for col in ("trial", "knobs", *objectives, "Pareto", "picked"):
        table.add_column(col)
    for t in sorted(done, key=lambda t: t.number):
        table.add_row(
            str(t.number),
            json.dumps(t.user_attrs.get("knobs")),
            *[f"{v:.3f}" for v in t.values],
            "*" if t.number in front else "",
            "<-" if t.number == result.chosen.number else "",
        )
    return table


def trials_table(trials: list[dict[str, Any]]) -> Table:
    """The joint compile's trials: the knobs searched (those held at one value across the
    trials are named once, in the caption), demonstrations, validation score, cost, state."""
    from netcast.optimize.joint import searched_knobs, trial_cells

    searched = searched_knobs(trials)
    names = sorted({n for t in trials for n in t["knobs"]})
    held = {n: trials[0]["knobs"].get(n) for n in names if n not in searched}
    table = Table(
        title=f"joint compile: {len(trials)} trials on held-out training questions",
        caption=f"held in every trial: {json.dumps(held)}" if held else None,
    )
    for col in ("trial", "knobs", "demos", "score", "n", "tokens/q", "calls", "state"):
        table.add_column(col)
    for t in trials:
        table.add_row(*trial_cells(t, json.dumps({n: t["knobs"].get(n) for n in searched})))
    return table


def race_table(race: dict[str, Any]) -> Table:
    """The strategy race (``optimize.race.race_cells``): each strategy's defaults on the rungs
    and each grid point of its joint compile, with the calls that reached the model."""
    from netcast.optimize.race import RACE_COLUMNS, race_cells, race_title

    table = Table(title=race_title(race))
    for col in RACE_COLUMNS:
        table.add_column(col)
    for cells in race_cells(race):
        table.add_row(*cells)
    return table


def race_progress(event: str, state: dict[str, Any]) -> None:
    """A live line per race step on stderr: strategies in the race with their running score,
    questions scored, calls spent (of the budget), the leader and its margin; on a rung, the
    strategy being scored; in the deep stage, the joint trial running, its grid point and its
    score so far. First, a line for each --set knob: the strategies it reaches."""
    if event == "knobs":
        for line in state["scope"]:
            err_console.print(f"race: {line}", markup=False, soft_wrap=True)
        return
    runners = state["runners"].values()
    alive = [r for r in runners if r.state in ("running", "finished", "out of budget")]
    means = {r.name: sum(r.scores(state["metric"]).values()) / len(r.rows) for r in alive if r.rows}
    ranked = sorted(means, key=means.get, reverse=True)
    margin = f" by {means[ranked[0]] - means[ranked[1]]:.3f}" if len(ranked) > 1 else ""
    budget = state["budget"]
    spent = f"{state['spent']} calls" + (f" of {budget}" if budget is not None else "")
    out = [r.name for r in runners if r.state in ("dropped", "failed")]
    line = (
        f"race [{event}] {len(alive)} in the race, {spent}; "
        + ", ".join(
            f"{n} {means[n]:.3f} ({len(next(r for r in alive if r.name == n).rows)} q)"
            for n in ranked
        )
        + (f"; leader {ranked[0]}{margin}" if ranked else "")
        + (f"; out: {', '.join(out)}" if out else "")
    )
    if event == "chunk":  # a rung, a chunk of questions at a time
        line += f"; scoring {state['program']} at its defaults"
    if event == "trial":  # the deep stage: a survivor's joint compile, a chunk at a time
        t = state["trial"]
        point = ", ".join(f"{k} {v}" for k, v in t["point"].items())
        line += f"; {state['program']} trial {t['trial']} ({point}): {t['score']:.3f} on {t['n']} q"
    err_console.print(line, markup=False, soft_wrap=True)


def artifact_table(title: str, recipe: dict[str, Any], meta: dict[str, Any]) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column("field")
    table.add_column("value", overflow="fold")
    for key in ARTIFACT_FIELDS:
        if key in recipe:
            table.add_row(key, json.dumps(recipe[key], sort_keys=True))
    table.add_row("versions", json.dumps(meta.get("versions")))
    table.add_row("created", str(meta.get("created")))
    lineage = meta.get("lineage")
    table.add_row("lineage", lineage["parent"] if lineage else "- (no parent)")
    return table


@contextmanager
def indexing_progress() -> Iterator[Callable[[str, int, int], None]]:
    """A progress bar on stderr for ``build_stored_index``: documents read (bytes of the
    corpus files), then chunks indexed. A build that fails takes its bar away, so the error is
    the one line left."""
    labels = {"read": "reading documents", "index": "indexing chunks", "embed": "encoding chunks"}
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[amount]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=False,
    ) as bar:
        tasks: dict[str, Any] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(labels.get(phase, phase), total=total, amount="")
            amount = (
                f"{done / 1e6:,.1f} / {total / 1e6:,.1f} MB"
                if phase == "read"
                else (f"{done:,} / {total:,}")
            )
            bar.update(tasks[phase], completed=done, total=total, amount=amount)

        try:
            yield update
        except BaseException:
            bar.live.transient = True  # cleared as the bar stops (printed nowhere if not a tty)
            raise
