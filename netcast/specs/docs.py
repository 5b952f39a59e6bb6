"""The docs' result tables, generated from the specs' saved rows (``netcast report --spec ...
--markdown``), so that every figure a page shows has one source. A page holds each table
between two markers, the first of which is the command that prints it:

    <!-- netcast report --markdown --spec benchmarks/specs/decisive-wide-0.5b.toml -->
    | row | n | F1 [95% CI] | ...
    <!-- /netcast report -->

``--write PAGE`` rewrites the blocks of a page whose command is the one run; a test holds every
committed page to what its commands print.

Views (``--view``): ``rows`` (each row of the specs but those of earlier code, best F1 first; a
model column, the spec's ``model``, where there are several specs), ``race`` (each spec's
strategy race: its size, its winner on the spec's questions) and ``headline`` (each spec's
``basic`` at its defaults, its best compiled row and the gold-passage reference), ``paper``
(Fishing for Answers' strategies, each untuned and at its best fine-tuned row, beside the
paper's own figures), ``agent`` (what each agent row did: retrieval rounds, searching again
where the first round missed a gold passage, deletions and their precision)."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from netcast.errors import InputError
from netcast.render import changed_knobs, fmt, fmt_ci, fmt_diff, fmt_p, markdown_table, race_hours
from netcast.specs.model import Spec
from netcast.specs.report import GOLD, summary_rows
from netcast.specs.tables import spec_results

VIEWS = ("rows", "race", "headline", "paper", "agent")
BLOCK = re.compile(
    r"^<!-- (netcast report [^\n]*?) -->\n(.*?)^<!-- /netcast report -->$", re.M | re.S
)


def _rows(spec: Spec) -> dict[str, dict[str, Any]]:
    """A bench spec's summary rows (``report.summary_rows``) by row name."""
    if spec.file.kind != "bench":
        raise InputError(
            f"{spec.path}: an ablation spec has no docs table; its report has its tables"
        )
    results = spec_results(spec)
    return {r["program"]: r for r in summary_rows(results)} if results else {}


def _tokens(row: dict[str, Any] | None) -> str:
    return "-" if row is None or row["tokens_in"] is None else f"{row['tokens_in']:,.0f}"


def rows_table(specs: Sequence[Spec]) -> list[str]:
    """Every row of ``specs`` but those of earlier code (``kept``: the spec's full report has
    them), best F1 first: F1 with its interval, the paired difference against ``basic``, the
    gap closed, the answer in context and the prompt tokens."""
    several = len(specs) > 1
    columns = ["row", "n", "F1 [95% CI]", "vs `basic` [95% CI]", "p", "gap closed"]
    columns += ["answer in context", "prompt tokens/q"]
    cells = []
    for spec in specs:
        rows = [r for r in _rows(spec).values() if r["program"] not in spec.file.kept]
        rows.sort(key=lambda r: -(r["f1"][0] or 0.0))
        for r in rows:
            gap = r.get("gap_closed")
            name = r["program"] + (" (reference)" if r["reference"] else "")
            cells.append(
                [*([spec.file.model] if several else []), name, str(r["n"]),
                 fmt_ci(r["f1"]), fmt_diff(r["diff_vs_basic"]), fmt_p(r["p_vs_basic"]),
                 "-" if gap is None else f"{100 * gap:.0f}%", fmt(r["answer_in_context"][0], 2),
                 _tokens(r)]
            )  # fmt: skip
    return markdown_table(["model", *columns] if several else columns, cells)


def _recipe(entry: Any) -> dict[str, Any] | None:
    path = Path(entry.artifact) / "recipe.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _winner(recipe: dict[str, Any]) -> str:
    """A race's winner: the program, the knobs it changed, the demonstrations it kept."""
    program = recipe["program"]
    won = [r for r in recipe["race"]["table"] if r["program"] == program]
    demos = next((r["demos"] for r in won if r["reason"] == "chosen"), "none")
    knobs = changed_knobs(program, recipe["knobs"])
    return f"{program}: {knobs}" + ("" if demos == "none" else f", demos {demos}")


def race_table(specs: Sequence[Spec]) -> list[str]:
    """Each spec's strategy race (a compiled artifact that a race made): the calls it spent of
    its budget and its model time, its winner, and the winner's row on the spec's questions
    beside ``basic`` and the gold-passage reference."""
    columns = ["spec", "race", "winner", "n", "F1 [95% CI]", "vs `basic` [95% CI]", "p"]
    columns += ["gold passages", "prompt tokens/q"]
    cells = []
    for spec in specs:
        rows = _rows(spec)
        gold = rows.get(GOLD)
        for entry in spec.file.compiled:
            recipe = _recipe(entry)
            if not recipe or not recipe.get("race") or entry.name not in rows:
                continue
            race, r = recipe["race"], rows[entry.name]
            budget = race.get("budget")
            size = f"{race['spent']:,}" + (f" of {budget:,}" if budget is not None else "")
            cells.append(
                [spec.name, f"{size} calls, {race_hours(race):.1f} h", _winner(recipe),
                 str(r["n"]), fmt_ci(r["f1"]), fmt_diff(r["diff_vs_basic"]),
                 fmt_p(r["p_vs_basic"]), fmt_ci(gold["f1"]) if gold else "-", _tokens(r)]
            )  # fmt: skip
    return markdown_table(columns, cells)


def best_compiled(rows: dict[str, dict[str, Any]], names: Sequence[str]) -> dict[str, Any] | None:
    """The highest F1 among the rows ``names`` (the first in their order on a tie) that were
    scored on every question ``basic`` was: a row a bench is still filling is not a spec's
    best on a part of its questions."""
    full = rows["basic"]["n"]
    done = [rows[n] for n in names if n in rows and rows[n]["n"] >= full]
    return max(done, key=lambda r: r["f1"][0] or 0.0) if done else None


def headline_table(specs: Sequence[Spec]) -> list[str]:
    """Each spec's ``basic`` at its defaults, its best compiled row (``best_compiled``: the
    highest F1 among its compiled artifacts scored on all of ``basic``'s questions) with the
    paired difference against ``basic``, and the gold-passage reference."""
    columns = ["spec", "model", "n", "`basic`", "best compiled", "F1 [95% CI]"]
    columns += ["vs `basic` [95% CI]", "p", "gold passages"]
    cells = []
    for spec in specs:
        rows = _rows(spec)
        if "basic" not in rows:
            continue
        best = best_compiled(rows, [e.name for e in spec.file.compiled])
        if best is None:
            continue
        gold = rows.get(GOLD)
        cells.append(
            [spec.name, spec.file.model, str(best["n"]), fmt_ci(rows["basic"]["f1"]),
             best["program"], fmt_ci(best["f1"]), fmt_diff(best["diff_vs_basic"]),
             fmt_p(best["p_vs_basic"]), fmt_ci(gold["f1"]) if gold else "-"]
        )  # fmt: skip
    return markdown_table(columns, cells)


WEIGHT_TUNING = ("finetune", "better-together")


def _tuned_rows(spec: Spec, program: str) -> list[str]:
    """The rows of ``spec`` that run ``program`` with tuned weights: its artifacts compiled by
    a weight-tuning optimizer (as their recipes say, a recompile's too) and its variants
    that run such an artifact (``from=``)."""
    names = []
    for entry in spec.file.compiled:
        unmade = {"program": entry.program, "optimizer": {"name": entry.optimizer}}
        recipe = _recipe(entry) or unmade
        if recipe["program"] == program and recipe["optimizer"]["name"] in WEIGHT_TUNING:
            names.append(entry.name)
    for variant in getattr(spec, "variants", ()):
        source = variant.source and _recipe(SimpleNamespace(artifact=variant.source))
        if variant.program == program and source and source["optimizer"]["name"] in WEIGHT_TUNING:
            names.append(variant.label)
    return names


def paper_table(specs: Sequence[Spec]) -> list[str]:
    """Fishing for Answers' main comparison on each spec's questions: each of the paper's
    strategies (``fishing_for_answers.MAIN_TABLE``) at its defaults and at its best fine-tuned
    row (``best_compiled`` among the spec's artifacts of that program made by ``finetune``),
    F1 against ``basic`` (top-5) and the tuned row against the untuned one, beside the paper's
    judge score and its gain over top-5."""
    from netcast.specs.papers.fishing_for_answers import MAIN_TABLE

    columns = ["strategy", "paper", "paper vs top-5", "n", "untuned F1 [95% CI]"]
    columns += ["untuned vs top-5 [95% CI]", "tuned row", "tuned F1 [95% CI]"]
    columns += ["tuned vs top-5 [95% CI]", "p"]
    columns += ["vs untuned [95% CI]", "p"]
    top5 = MAIN_TABLE["basic"][1]
    cells = []
    for spec in specs:
        rows = _rows(spec)
        if "basic" not in rows:
            continue
        for program, (label, score) in MAIN_TABLE.items():
            untuned = rows.get(program)
            tuned = best_compiled(rows, _tuned_rows(spec, program))
            if untuned is None and tuned is None:
                continue
            paper = "-" if score is None else f"{score:.1f}"
            gain = "-" if score is None or top5 is None else f"{score - top5:+.1f}"
            cells.append(
                [label, paper, "-" if program == "basic" else gain,
                 str((untuned or tuned)["n"]),
                 fmt_ci(untuned["f1"]) if untuned else "not run",
                 fmt_diff(untuned["diff_vs_basic"]) if untuned and program != "basic" else "-",
                 tuned["program"] if tuned else "not run",
                 fmt_ci(tuned["f1"]) if tuned else "-",
                 fmt_diff(tuned["diff_vs_basic"]) if tuned else "-",
                 fmt_p(tuned["p_vs_basic"]) if tuned else "-",
                 fmt_diff(tuned["diff_vs_uncompiled"]) if tuned else "-",
                 fmt_p(tuned["p_vs_uncompiled"]) if tuned else "-"]
            )  # fmt: skip
    return markdown_table(columns, cells)


def agent_table(specs: Sequence[Spec]) -> list[str]:
    """Each spec's agent rows (rows whose questions record turns: ``iterative``, ``combined``
    and their compiles), by ``fishing_for_answers.agent_behaviour``."""
    from netcast.specs.papers.fishing_for_answers import agent_behaviour

    columns = ["row", "n", "F1 [95% CI]", "rounds/q", "first round missed a gold passage"]
    columns += ["of those, searched again", "chunks deleted/q", "deletions not gold"]
    columns += ["prompt tokens/q"]
    cells = []
    for spec in specs:
        summary = _rows(spec)
        for result in spec_results(spec):
            if not any(r["trace"].get("turns") for r in result.rows):
                continue
            b = agent_behaviour(result.rows)
            again, precision = b["searched_again"], b["deletion_precision"]
            cells.append(
                [result.program, str(b["n"]), fmt_ci(summary[result.program]["f1"]),
                 fmt(b["retrievals"], 2),
                 f"{b['missed']} ({b['missed'] / b['known']:.0%})" if b["known"] else "-",
                 "-" if again is None else f"{again:.0%}", fmt(b["deleted"], 2),
                 "-" if precision is None else f"{precision:.0%}",
                 "-" if b["tokens_in"] is None else f"{b['tokens_in']:,.0f}"]
            )  # fmt: skip
    return markdown_table(columns, cells)


def docs_table(specs: Sequence[Spec], view: str = "rows") -> str:
    """The ``view`` table of ``specs`` in markdown (no blank line after it)."""
    views = {"rows": rows_table, "race": race_table, "headline": headline_table}
    views |= {"paper": paper_table, "agent": agent_table}
    if view not in views:
        raise InputError(f"unknown --view {view!r}; choose one of {', '.join(VIEWS)}")
    return "\n".join(views[view](specs)).rstrip("\n")


def command(specs: Sequence[str | Path], view: str = "rows") -> str:
    """The command that prints a docs table, as its block's marker names it."""
    words = ["netcast", "report", "--markdown"] + (["--view", view] if view != "rows" else [])
    for spec in specs:
        words += ["--spec", str(spec)]
    return shlex.join(words)


def blocks(text: str) -> list[tuple[str, str]]:
    """A page's generated blocks: (the command its marker names, the text between markers)."""
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def write_blocks(page: str | Path, line: str, table: str) -> int:
    """Put ``table`` between the markers of every block of ``page`` whose command is ``line``;
    how many blocks there were (none: one ``InputError`` naming the page and the marker)."""
    page = Path(page)
    try:
        text = page.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"{page}: cannot read the page ({err.strerror})") from None
    mine = shlex.split(line)
    found = 0

    def fill(match: re.Match[str]) -> str:
        nonlocal found
        if shlex.split(match.group(1)) != mine:
            return match.group(0)
        found += 1
        return f"<!-- {match.group(1)} -->\n{table}\n<!-- /netcast report -->"

    text = BLOCK.sub(fill, text)
    if not found:
        raise InputError(f"{page}: no block marked <!-- {line} --> ... <!-- /netcast report -->")
    page.write_text(text, encoding="utf-8")
    return found
