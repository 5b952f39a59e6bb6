"""A spec's tables, rebuilt from its saved per-question rows without a model call
(:func:`spec_report`): a bench spec's main table, its pairs, the same strategy across models,
each compile's search and the cost and per-step lines; an ablation spec's paper tables
(``netcast.specs.papers``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from netcast.render import (
    RACE_COLUMNS,
    changed_knobs,
    fmt,
    fmt_ci,
    fmt_diff,
    fmt_p,
    markdown_table,
    race_cells,
    race_line,
    race_title,
    searched_knobs,
    trial_cells,
    versus_defaults_line,
)
from netcast.specs.model import Spec, header_lines
from netcast.specs.report import (
    compare,
    cost_lines,
    model_lines,
    read_results,
    step_lines,
    summary_rows,
)
from netcast.specs.spec import read_spec


def spec_report(spec: Spec) -> str:
    """The spec's tables in markdown, from its saved per-question rows (no model call)."""
    if spec.file.kind == "ablation":
        from netcast.specs.papers.ablation import ablation_report

        return ablation_report(spec)
    return "\n".join(bench_report(spec)) + "\n"


def spec_results(spec: Spec) -> list[Any]:
    """The saved rows (``report.Results``) of a bench spec's rows, in the spec's order."""
    if not (spec.run_dir / spec.folder).is_dir():
        return []
    wanted = spec.rows()
    found = [
        r
        for r in read_results(spec.run_dir)
        if r.dataset == spec.folder and r.program in wanted and r.rows
    ]
    return sorted(found, key=lambda r: wanted.index(r.program))


BENCH_COLUMNS = [
    "row",
    "n",
    "F1 [95% CI]",
    "EM",
    "vs basic [95% CI]",
    "p",
    "vs its program [95% CI]",
    "p",
    "gap closed",
    "gold recall",
    "answer in context",
    "prompt tokens/q",
    "tokens/q",
    "s/q",
]


def bench_cells(row: dict[str, Any], kept: Sequence[str] = ()) -> list[str]:
    """One row of the spec's main table from ``report.summary_rows``' row."""
    name = row["program"]
    if row.get("reference"):
        name += " (reference)"
    elif row["program"] in kept:
        name += " (earlier code, kept)"
    gap = row.get("gap_closed")

    def mean(metric: str, digits: int) -> str:
        return fmt(row[metric][0], digits)

    def count(value: float | None) -> str:
        return "-" if value is None else f"{value:,.0f}"

    return [
        name,
        str(row["n"]),
        fmt_ci(row["f1"]),
        mean("em", 3),
        fmt_diff(row["diff_vs_basic"]),
        fmt_p(row["p_vs_basic"]),
        fmt_diff(row["diff_vs_uncompiled"]),
        fmt_p(row["p_vs_uncompiled"]),
        "-" if gap is None else f"{100 * gap:.0f}%",
        mean("recall", 3),
        mean("answer_in_context", 2),
        count(row["tokens_in"]),
        count(row["tokens"]),
        fmt(row["seconds"], 1),
    ]


def bench_report(spec: Spec) -> list[str]:
    """A bench spec's tables: one row per spec row (intervals, paired differences against
    ``basic`` and against the row's own program, gap closed, cost), its named pairs, the same
    strategy across the models of the specs it names in ``across``, the cost line and the
    per-step outcomes (``netcast.specs.report``'s)."""
    lines = header_lines(spec)
    results = spec_results(spec)
    missing = [r for r in spec.rows() if r not in {res.program for res in results}]
    rows = summary_rows(results) if results else []
    lines += [
        "F1 and EM: SQuAD answer scores; F1 with its 95% bootstrap interval over questions. vs "
        "basic: the paired F1 difference against `basic` on the same questions (95% bootstrap "
        "interval, sign-flip p); vs its program: the same for a compiled artifact or a knob "
        "variant against its program as shipped. Gap closed: (F1 - basic) / (reference-gold - "
        "basic). Gold recall: the gold passages among those retrieved; answer in context: the "
        "share of questions whose gold answer is in the passages read. Cost: means per "
        "question.",
        "",
        *markdown_table(BENCH_COLUMNS, [bench_cells(r, spec.file.kept) for r in rows]),
    ]
    if missing:
        lines += [f"Not run yet: {', '.join(missing)} (`{spec.command('bench')}`).", ""]
    by_name = {r.program: r for r in results}
    pairs = [(a, b) for a, b in spec.file.pairs if a in by_name and b in by_name]
    if pairs:
        cells = []
        for a, b in pairs:
            test = compare(by_name[a], by_name[b])
            cells.append([a, b, str(test["n"]), fmt_diff(test["diff"]), fmt_p(test["p"])])
        lines += ["## Pairs", "", "F1 of A - B on the questions both answered.", ""]
        lines += markdown_table(["A", "B", "n", "A - B [95% CI]", "p"], cells)
    for other_name in spec.file.across:
        other = read_spec(spec.path.parent / f"{other_name}.toml")
        mine, theirs = spec_results(spec), spec_results(other)
        if not mine or not theirs:
            continue
        both = read_results(other.run_dir, spec.run_dir)  # B - A: this spec's model - other's
        keep = {(r.source, r.dataset, r.program) for r in both if _in(r, spec) or _in(r, other)}
        lines += model_lines([r for r in both if (r.source, r.dataset, r.program) in keep])
    lines += compile_lines(spec)
    if rows:
        lines += cost_lines(rows)
        lines += step_lines(rows)
    return lines


def compile_lines(spec: Spec) -> list[str]:
    """Each compiled artifact's search as its recipe keeps it: the knobs it chose and, for a
    joint compile, every trial on held-out training questions and its test against the
    defaults (a race: the race's choice)."""
    lines: list[str] = []
    for entry in spec.file.compiled:
        path = Path(entry.artifact) / "recipe.json"
        if not path.exists():
            continue
        recipe = json.loads(path.read_text())
        joint = recipe.get("joint") or {}
        trials = joint.get("trials") or []
        searched = searched_knobs(trials)
        race = recipe.get("race")
        if race:
            won = [r for r in race["table"] if r["program"] == recipe["program"]]
            demos = next((r["demos"] for r in won if r["reason"] == "chosen"), "none")
            knobs = f"the winner {recipe['program']}, " + changed_knobs(
                recipe["program"], recipe["knobs"]
            )
            knobs += f", demonstrations {demos}"
        elif searched:
            knobs = "chose " + json.dumps({k: recipe["knobs"].get(k) for k in searched})
            knobs += f" with demonstrations {joint.get('chosen_demos', '-')}"
        else:
            knobs = "knobs " + (json.dumps(entry.knobs) if entry.knobs else "at their defaults")
        lines += [f"## Compile: {entry.name}", ""]
        lines += [f"Optimizer {recipe['optimizer']['name']}; {knobs}.", ""]
        if race:
            lines += [race_line(race).replace("\n", "\n\n"), "", race_title(race) + ":", ""]
            lines += markdown_table(list(RACE_COLUMNS), race_cells(race))
        if trials:
            cells = [
                trial_cells(
                    t,
                    ", ".join(f"{n} {json.dumps(t['knobs'].get(n))}" for n in searched) or "-",
                )
                for t in trials
            ]
            columns = ["trial", "knobs", "demos", "validation F1", "questions", "tokens/q"]
            lines += markdown_table([*columns, "calls", "state"], cells)
            if line := versus_defaults_line(joint.get("versus_defaults")):
                lines += [line, ""]
            if joint.get("untried"):
                lines += [f"{joint['untried']} grid point(s) left untried by the budget.", ""]
    return lines


def _in(result: Any, spec: Spec) -> bool:
    return (
        result.source == spec.run_dir.name
        and result.dataset == spec.folder
        and result.program in spec.rows()
    )
