"""What every paper's table reads: a configuration's saved rows with the judge's verdicts
(``Run``), the spec's runs and options (``Ablation``), a table's declaration (``Table``), the
questions' difficulty levels, the judge's note and the quality and cost table."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any

from netcast.evaluation.evaluate import aggregate
from netcast.render import cell, markdown_table
from netcast.specs.model import Spec


@dataclass
class Run:
    """One configuration's saved rows, with the judge's verdicts on them (by question id)."""

    label: str
    program: str
    knobs: dict[str, Any]
    rows: list[dict[str, Any]]
    verdicts: dict[str, float | None] = field(default_factory=dict)
    retriever: str = "bm25"
    step_models: dict[str, str] = field(default_factory=dict)

    @property
    def summary(self) -> dict[str, Any]:
        return aggregate(self.rows)

    def judged(self, rows: Sequence[dict[str, Any]] | None = None) -> float | None:
        """The mean verdict over ``rows`` (default: all) the judge read; None without any."""
        values = [self.verdicts.get(r["id"]) for r in (self.rows if rows is None else rows)]
        known = [v for v in values if v is not None]
        return mean(known) if known else None


@dataclass
class Ablation:
    """What a table is built from: the spec, its configurations' runs in the spec's order, the
    table's options and the questions' difficulty levels (by id; empty without a ``level``)."""

    spec: Spec
    runs: list[Run]
    options: dict[str, Any]
    levels: dict[str, Any]

    @property
    def judged(self) -> bool:
        return any(run.verdicts for run in self.runs)


@dataclass(frozen=True)
class Table:
    name: str
    title: str
    build: Callable[[Ablation], list[str]]
    judge: str | None = None  # "score" (0-100) or "match" (1/0): the judge column's kind
    records_context: bool = False  # rows keep the text handed to the generator
    options: dict[str, Any] = field(default_factory=dict)


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}"


def quality_cost(
    runs: Sequence[Run],
    extra: Callable[[Run], list[object]] | None = None,
    extra_columns: Sequence[str] = (),
    title: str = "Quality and cost (all questions)",
) -> list[str]:
    """Every run's means per question: quality, searches, calls, tokens and seconds."""
    columns = [
        "configuration", "n", "EM", "F1", "recall", "precision", "searches/q", "LM calls/q",
        "of which cached/q", "tokens in/q", "tokens out/q", "s/q", *extra_columns,
    ]  # fmt: skip
    rows = []
    for run in runs:
        a = run.summary
        rows.append(
            [
                run.label, a["n"], a["em"], a["f1"], a["recall"], a["precision"], a["searches"],
                a["lm_calls"], a["cached_calls"], a["tokens_in"], a["tokens_out"], a["seconds"],
                *(extra(run) if extra else []),
            ]
        )  # fmt: skip
    return [
        f"## {title}",
        "",
        *markdown_table(columns, rows),
        "s/q is the wall time a question took in the run that saved it; calls served from "
        "DSPy's cache (an earlier row or run) take almost no time.",
        "",
    ]


def record_field(dataset: str, name: str) -> dict[str, Any]:
    """``{question id: record[name]}`` for the records of ``dataset`` that have the field (a
    bundled sample's files, or a local JSONL file)."""
    from netcast.data import read_records
    from netcast.data.registry import SAMPLES, sample_path

    if dataset in SAMPLES:
        records = [
            r for fs in SAMPLES[dataset].values() for f in fs for r in read_records(sample_path(f))
        ]
    elif dataset.endswith(".jsonl") and Path(dataset).exists():
        records = read_records(dataset)
    else:
        return {}
    return {str(r["id"]): r[name] for r in records if r.get(name) not in (None, "")}


def level_groups(rows: Sequence[dict], levels: dict[str, Any]) -> dict[str, list[int]]:
    """Row positions by the question's level (easy, medium, hard first), then all under Avg."""
    order = {"easy": 0, "medium": 1, "hard": 2}
    found: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        level = levels.get(row["id"])
        if level is not None:
            found.setdefault(str(level), []).append(i)
    ordered = sorted(found, key=lambda lv: (order.get(lv, 99), lv))
    return {**{lv: found[lv] for lv in ordered}, "Avg": list(range(len(rows)))}


def level_note(ab: Ablation) -> str:
    spec = ab.spec.file
    if not ab.levels:
        return f"{spec.dataset} records have no `level` field: no grouping by difficulty (Avg)"
    rows = [r for run in ab.runs for r in run.rows]
    present = sorted({str(ab.levels[r["id"]]) for r in rows if r["id"] in ab.levels})
    note = (
        f"difficulty levels: the records' `level` field ({', '.join(present) or 'none'} among "
        f"these {spec.split} questions); the paper's L1-L4 are its own benchmark's"
    )
    if len(present) == 1 and spec.dataset.startswith("hotpotqa") and spec.split == "dev":
        note += "; HotpotQA's dev questions are all 'hard' (split = 'train' has all three)"
    return note


def by_level(ab: Ablation, run: Run, subscript: Callable[[dict], float] | None = None) -> list[str]:
    """The run's judge score per level of the first run's questions (``-`` without verdicts),
    with ``subscript``'s mean over the level's rows in brackets."""
    groups = level_groups(ab.runs[0].rows, ab.levels)
    mine = level_groups(run.rows, ab.levels)  # a failed question is absent from a run
    cells = []
    for level in groups:
        rows = [run.rows[i] for i in mine.get(level, [])]
        value = cell(run.judged(rows), 1) if run.verdicts else "-"
        if subscript and rows:
            value += f" ({mean(subscript(r) for r in rows):.2f})"
        cells.append(value)
    return cells


def level_columns(ab: Ablation) -> list[str]:
    return [f"{lv} (n={len(ix)})" for lv, ix in level_groups(ab.runs[0].rows, ab.levels).items()]


def judge_note(ab: Ablation) -> list[str]:
    judge = ab.spec.file.judge
    if not judge:
        return ["No judge (the spec names none): the judge columns show -.", ""]
    unread = sum(
        1
        for run in ab.runs
        for r in run.rows
        if r["id"] in run.verdicts and run.verdicts[r["id"]] is None
    )
    missing = sum(1 for run in ab.runs for r in run.rows if r["id"] not in run.verdicts)
    line = f"Judge: {judge}; replies it gave no verdict in (left out of the means): {unread}"
    if missing:
        line += f"; answers not yet judged: {missing} (`{ab.spec.command('bench')}`)"
    return [line + ".", ""]
