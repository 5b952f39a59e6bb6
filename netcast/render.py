"""Rendering: every table and progress line netcast prints or writes, in one place.

- Cells and markdown tables: :func:`markdown_table` is the one markdown table of the bench
  reports, the specs' tables, the papers' tables and the benchmark scripts.
- The joint compile's trials and the strategy race's rows and verdict lines, read from what a
  recipe keeps (``recipe.json``'s ``joint`` and ``race``), for ``netcast compile``, ``show``
  and ``report --spec`` alike.
- The command line's rich tables and live progress lines (stdout and stderr consoles)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
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
from netcast.evaluation.stats import paired

# --- cells and markdown tables ----------------------------------------------------------------


def cell(value: object, digits: int | None = None) -> str:
    """A table cell: ``-`` for None, a float to 3 significant digits (or ``digits`` decimals),
    thousands with separators (whole numbers too)."""
    if value is None:
        return "-"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        if digits is not None:
            return f"{value:.{digits}f}"
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def fmt_ci(ci) -> str:
    mean, low, high = ci
    return "-" if mean is None else f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def fmt_diff(ci) -> str:
    mean, low, high = ci
    return "-" if mean is None else f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]"


def fmt_p(p: float | None) -> str:
    """A p-value; below the permutation test's resolution (5,000 sign flips) as a bound."""
    return "-" if p is None else "<0.001" if p < 0.001 else f"{p:.3f}"


def fmt(value, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """A markdown table, every cell through :func:`cell`, and the blank line after it: the one
    table of every report, spec, paper table and benchmark script."""
    return [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
        *("| " + " | ".join(cell(v) for v in row) + " |" for row in rows),
        "",
    ]


# --- the joint compile and the strategy race (a recipe's record) -----------------------------


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


def race_line(race: dict[str, Any]) -> str:
    """The race's choice in a sentence; a second line where the winner's joint compile tested a
    grid point against its defaults (the test, and whether it took the point); a last one where
    the budget ended the race before the finalists were scored on the whole validation fold
    (the questions the choice rests on)."""
    c = race["choice"]
    # a race of arms names the winning arm and the top one (strategy and knobs changed)
    winner, top = c.get("winner_arm", c["winner"]), c.get("top_arm", c["top"])
    tied = [t for t in c["tied"] if t != winner]
    if winner == top:
        how = "best validation score" + (
            f"; {', '.join(tied)} not told apart from it, at more tokens" if tied else ""
        )
    else:
        v = c["versus_top"]
        how = (
            f"{top} scored best, but {winner} is not told apart from it "
            f"({v['diff']:+.3f} on {v['n']} questions, sign-flip p = {v['p']:.3f}, alpha "
            f"{c['alpha']}) and takes fewer tokens"
        )
    line = f"race winner: {winner} ({how})"
    if gate := c.get("versus_defaults"):  # its joint compile's test against its defaults
        point = changed_knobs(c["winner"], gate["knobs"])
        point += "" if gate["demos"] == "none" else f", demos {gate['demos']}"
        verdict = gate.get("verdict") or (
            "kept the defaults" if gate["kept_defaults"] else "took it"
        )
        top = gate.get("top_trial", gate["best_trial"])
        tie = "the nearest tie of its top grid point, " if top != gate["best_trial"] else ""
        line += (
            f"\n{c['winner']}: {tie}{point} ({gate['score']:.3f}) vs its defaults "
            f"({gate['default_score']:.3f}) on {gate['n']} validation questions: "
            f"{gate['diff']:+.3f}, sign-flip p = {gate['p']:.3f} (alpha {gate['alpha']}): {verdict}"
        )
    fold, n = c.get("validation_questions"), (c.get("versus_top") or {}).get("n")
    if fold and n and n < fold:  # the budget ended the race before any arm scored the fold
        line += (
            f"\nthe budget ended before any arm was scored on all {fold} validation questions: "
            f"the choice rests on {n} (a larger --budget scores the leaders on more)"
        )
    return line


RACE_COLUMNS = ("program", "stage", "knobs", "demos", "score", "n", "tokens/q", "calls", "state")


def race_hours(race: dict[str, Any]) -> float:
    """The model time a race's rows and trials took, in hours (the sum of their questions'
    seconds)."""
    return sum((r.get("seconds") or 0) * (r.get("n") or 0) for r in race.get("table") or []) / 3600


def race_title(race: dict[str, Any]) -> str:
    """The race's size in a line: calls spent of the budget, validation questions, and the
    model time its rows and trials took (the sum of their questions' seconds)."""
    choice = race.get("choice") or {}
    hours = race_hours(race)
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
        # a race of arms marks the arm chosen; an earlier race its winner's rungs row
        won = (
            chosen
            if r["stage"].startswith("wave")
            else (r["program"] == winner and r["stage"] == "rungs")
        )
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
    from netcast.programs import get_program

    cls = get_program(program)
    defaults, aliases = cls.knob_defaults(), cls.Knobs.aliases()
    changed = {k: v for k, v in knobs.items() if defaults.get(aliases.get(k, k)) != v}
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in changed.items()) or "defaults"


# --- the command line: rich tables and progress ----------------------------------------------


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


def adapter_line(recipe: dict[str, Any]) -> str | None:
    """What a tuned artifact's adapter is (its recipe's ``finetune`` entry), in one line: the
    file and its sha256, the base model, the examples it was trained on, the loss and the
    training time; with one adapter per step, each step's, one line each."""
    entry = recipe.get("finetune")
    if not isinstance(entry, dict):
        return None
    steps = entry.get("steps")
    if isinstance(steps, dict):
        return "\n".join(
            f"{step}'s " + _adapter_line(e) for step, e in steps.items() if isinstance(e, dict)
        )
    return _adapter_line(entry)


def _adapter_line(entry: dict[str, Any]) -> str:
    adapter, base = entry.get("adapter") or {}, entry.get("base") or {}
    examples = entry.get("examples") or {}
    steps = ", ".join(f"{k} {v}" for k, v in (examples.get("per_step") or {}).items())
    teacher = examples.get("teacher") or "the model's own"
    losses = entry.get("loss_curve") or []
    tail = f"; {len(losses)} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}" if losses else ""
    seconds = entry.get("seconds")  # the steps' time, summed over a resumed training's runs
    if isinstance(seconds, int | float):
        tail += f", {seconds:,.0f} s of training"
    questions = f"{examples.get('questions')} {examples.get('split')} questions"
    if teacher == "annotations":
        source = f" from the annotations of {questions}"
        if examples.get("retrieved"):
            source += f" ({examples['retrieved']} contexts retrieved without gold)"
    else:
        source = f" from {teacher} passing traces on {examples.get('passing')} of {questions}"
        if isinstance(traced := examples.get("trace_seconds"), int | float):
            source += f" ({traced:,.0f} s of tracing)"
    return (
        f"adapter: {adapter.get('file', 'lora.gguf')} (sha256 {str(adapter.get('sha256'))[:12]}"
        f"...), a rank-{entry.get('rank')} LoRA of {base.get('name')} (sha256 "
        f"{str(base.get('sha256'))[:12]}...), trained on {examples.get('count')} examples"
        + (f" ({steps})" if steps else "")
        + source
        + tail
    )


def better_together_line(recipe: dict[str, Any]) -> str | None:
    """A better-together compile's candidates (each strategy's selection score) and the one
    kept, in one line."""
    candidates = (recipe.get("better_together") or {}).get("candidates")
    if not candidates:
        return None
    parts = [
        f"{c.get('strategy')} {c.get('score')}" + (" (kept)" if c.get("chosen") else "")
        for c in candidates
    ]
    return "better-together, each step's program scored: " + "; ".join(parts)


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

    from netcast.optimize.study import pareto_front

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
    """The strategy race (:func:`race_cells`): each arm it scored (an earlier race's: each
    strategy's defaults on the rungs and each grid point of its joint compile), with the
    calls that reached the model."""
    table = Table(title=race_title(race))
    for col in RACE_COLUMNS:
        table.add_column(col)
    for cells in race_cells(race):
        table.add_row(*cells)
    return table


RACE_SHOWN = 5  # arms a progress line names, the best first


def race_progress(event: str, state: dict[str, Any]) -> None:
    """A live line per race step on stderr: calls spent (of the budget), arms entered and
    left in the race, the best few by running score (questions scored), who was dropped;
    on a chunk, the arm being scored and its score so far. First, a line for each --set
    knob: the strategies it reaches."""
    if event == "knobs":
        for line in state["scope"]:
            err_console.print(f"race: {line}", markup=False, soft_wrap=True)
        return
    metric, arms = state["metric"], state["arms"]
    alive = [a for a in arms if a.state in ("running", "finished") and a.rows]
    ranked = sorted(alive, key=lambda a: -a.mean(metric))
    budget = state["budget"]
    spent = f"{state['spent']} calls" + (f" of {budget}" if budget is not None else "")
    out = sum(a.state in ("dropped", "halved", "failed") for a in arms)
    best = ", ".join(
        f"{a.name} {a.mean(metric):.3f} ({len(a.rows)} q)" for a in ranked[:RACE_SHOWN]
    )
    line = f"race [{event}] {spent}; {len(arms)} arms entered, {len(alive)} in the race, {out} out"
    line += f"; {best}" if best else ""
    if event == "chunk":
        a = state["arm"]
        point = ", ".join(f"{k} {v}" for k, v in a.point.items())
        line += f"; scoring {a.name} ({point}): {a.mean(metric):.3f} on {len(a.rows)} q"
    if event == "wave":
        line += f"; wave {state['wave']}: {state['entered']} arms enter"
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


def rerank_table(check: Any, data: str, retriever: str, lm=None, seed: int = 0) -> Table:
    """``netcast rerank-check``'s measurement (``netcast.specs.rerank.RerankCheck``) as a
    table: per signal, recall@keep with its 95% interval per keep, and reranking seconds per
    question."""
    shown = ",".join(str(k) for k in check.keeps)
    table = Table(
        title=f"rerank-check: {data}, {retriever} pool of {check.pool}, keep {shown}, "
        f"n = {check.n}",
        caption=f"recall@{check.pool} of the pool itself: {check.pool_mean_recall():.3f} "
        f"(retrieval {check.pool_seconds / check.n:.3f} s/q); seconds: reranking only"
        + (f"; model {lm.model}" if lm is not None else ""),
    )
    table.add_column("signal", min_width=max(map(len, check.signals)))  # names are never cut
    for k in check.keeps:
        table.add_column(f"recall@{k}", justify="right")
        table.add_column("95% CI", justify="right")
    table.add_column("s/q", justify="right")
    for name in check.signals:
        cells = []
        for k in check.keeps:
            low, high = check.interval(name, k, seed)
            cells += [f"{check.mean_recall(name, k):.3f}", f"[{low:.3f}, {high:.3f}]"]
        table.add_row(name, *cells, f"{check.seconds_per_question(name):.3f}")
    return table


# --- what a compile's dev scores show ----------------------------------------------------------

DECISIVE_N = 150  # the dev questions netcast's own claims are decided on
ALPHA = 0.05


def verdict_lines(
    before: Mapping[str, float | None],
    after: Mapping[str, float | None],
    *,
    compared: str,
    searched: bool,
) -> list[str]:
    """Lines for the end of a compile: ``after`` - ``before`` (per-question dev F1 by question
    id) with its 95% interval and sign-flip p; for fewer than ``DECISIVE_N`` questions, what the
    run does and does not show, and the command that would decide it. ``searched``: the compile
    scored candidates on held-out training questions (a race or a joint compile)."""
    d = paired(after, before)
    if d.n == 0:
        return []
    interval = "" if d.low is None else f" [{d.low:+.3f}, {d.high:+.3f}]"
    lines = [
        f"What this run shows: compiled - {compared}, F1 on the same {d.n} dev questions: "
        f"{d.diff:+.3f}{interval}, sign-flip p = {d.p:.3f}"
        + (" (a difference at p < 0.05)." if d.p < ALPHA else " (no difference shown).")
    ]
    if searched:
        lines.append(
            "The search's scores above are on held-out training questions, the ones it chose "
            "by, so the best of them runs high; the dev scores are on questions it never saw."
        )
    if d.n < DECISIVE_N:
        width = 0.0 if d.low is None else d.high - d.low
        lines.append(
            f"n = {d.n} is a smoke run: it shows the compile works end to end (scored, saved, "
            "loaded back), not whether it helps"
            + (
                f": an interval {width:.2f} wide cannot show a gain of a few F1 points."
                if width > 0
                else "."
            )
        )
        lines.append(
            f"What decides a claim: the same command with --dev-limit {DECISIVE_N} (paired "
            "interval and p on 150 questions), or `netcast bench` on both programs; a "
            "difference counts at p < 0.05."
        )
    return lines
