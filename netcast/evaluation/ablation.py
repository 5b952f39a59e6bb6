"""Papers' ablation tables, as specs (``kind = "ablation"`` in ``netcast.evaluation.spec``):
each configuration (a label, a program and its knobs) runs on the same questions into its own
resumable folder, ``<run_dir>/<configuration>/``, and the paper's tables are built from the
saved per-question rows, without a model call. A table with an LLM-judge column asks the
spec's ``judge`` model once per saved answer when the spec runs and keeps the verdicts beside
the rows (``judge.jsonl``), so the tables rebuild from them too.

The tables (``TABLES``), with the papers' definitions of their columns:

- ``one-shot``: Fishing for Answers (Lin et al.) §4.2, Tables 1-3. Table 1: the LLM-judge score
  (0-100; the paper judges with SenseChat-5) by difficulty level (the records' ``level``: the
  paper's L1-L4 are its own benchmark's), beside EM and F1. Table 2: chunk retention, the
  chunks that left a refinement stage over those that entered it (counted in chunks, summed
  over questions): the filter's kept share of the retrieved pool, the crop's share of examined
  chunks not removed (a crop reply that says no sentence helps removes the chunk; a reply that
  is not the chunk's own sentences keeps it whole), and their product. Table 3: judge score,
  minutes summed over the questions' wall times, cached calls.
- ``iterative``: the same paper, §4.3-4.4. Table 4: judge score by level of Basic RAG and the
  iterative ablations. Table 5: judge score with the average retrievals (a retrieval is a
  round: Basic RAG's one search, an agent's turn that searched). Fig. 5: the combined strategy
  by first-round token budget, with gold recall, retrievals, turns and chunks deleted.
- ``test-time``: Test-Time Strategies (Zhang et al.), Table 1 and Fig. 2: Exact Match, the
  binary LLM Match of a separate judge (the paper's GPT-4.1-mini), searches a question; EM by
  the number of searches a question took, with 95% bootstrap intervals.
- ``knowledge``: Knowledge-Aware Iterative Retrieval, Tables 1-2: retrieval precision, recall and
  F1 as token overlap between the context handed to the generator and the gold supporting
  paragraphs (SQuAD-normalized bags of tokens), answer F1, steps until no open gap, and cost
  units (steps x agents x the option ``price_ratio``: the paper's GPT-4o rows use 10).
- ``iterkey``: IterKey (Hayashi et al.), Tables 2, 3-5, 9, 11 and 13: accuracy and cost; the
  share of each question's searches with a gold answer in the top K documents (retrieved again,
  no model call); EM if every question had stopped by iteration i; Table 9's Base,
  VerifiedTrue and VerifiedAll EM from a configuration with ``stop_when_valid = false``; and a
  configuration's per-step models (``step_models``: Tables 7-8) against the same IterKey.
  Table 12 (latency per step) is measured live and has no rows to rebuild from: the seconds a
  question are in the accuracy and cost table."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import TYPE_CHECKING, Any

import dspy

from netcast.errors import InputError
from netcast.evaluation.evaluate import aggregate

if TYPE_CHECKING:
    from netcast.evaluation.spec import ConfigEntry, MakeLM, Spec, SpecRun

JUDGE_FILE = "judge.jsonl"


# --- what a table reads -----------------------------------------------------------------------


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


# --- markdown ---------------------------------------------------------------------------------


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


def table(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    return [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
        *("| " + " | ".join(cell(v) for v in row) + " |" for row in rows),
        "",
    ]


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
        *table(columns, rows),
        "s/q is the wall time a question took in the run that saved it; calls served from "
        "DSPy's cache (an earlier row or run) take almost no time.",
        "",
    ]


# --- difficulty levels ------------------------------------------------------------------------


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


# --- One-SHOT (Fishing for Answers §4.2) ------------------------------------------------------

CROP_OUTCOMES = ("cropped", "unchanged", "dropped", "rejected")


def stages(row: dict, stage: str) -> list[dict]:
    return [s for s in row["trace"].get("stages") or [] if s["stage"] == stage]


def retention(rows: Sequence[dict]) -> dict[str, float | None]:
    """Chunk retention of each refinement stage over ``rows`` (fractions of chunk counts)."""
    filtered = [s for r in rows for s in stages(r, "filter")]
    cropped = [s for r in rows for s in stages(r, "crop")]
    out: dict[str, float | None] = {"filter": None, "crop": None}
    examined = sum(s["candidates"] for s in filtered)
    if filtered and examined:
        out["filter"] = sum(s["kept"] for s in filtered) / examined
    seen = sum(s.get(k, 0) for s in cropped for k in CROP_OUTCOMES)
    if cropped and seen:
        out["crop"] = (seen - sum(s.get("dropped", 0) for s in cropped)) / seen
    known = [v for v in out.values() if v is not None]
    out["all"] = None
    if known:
        out["all"] = 1.0
        for v in known:
            out["all"] *= v
    return out


def stage_detail(run: Run) -> list[object]:
    rows = run.rows
    kept = retention(rows)
    filtered = [s for r in rows for s in stages(r, "filter")]
    crops = [s for r in rows for s in stages(r, "crop")]
    selected = [s for r in rows for s in stages(r, "select")]
    counts = {k: sum(s.get(k, 0) for s in crops) for k in CROP_OUTCOMES}
    accepted = counts["cropped"] + counts["unchanged"] + counts["dropped"]
    chosen = "-"
    if selected:
        chosen = (
            f"{mean(s['selected'] for s in selected):.1f} / "
            f"{mean(s['candidates'] for s in selected):.1f}"
        )
    return [
        run.label,
        chosen,
        percent(kept["filter"]),
        f"{mean(len(s['added']) for s in filtered):.2f}" if filtered else "-",
        percent(kept["crop"]),
        f"{accepted} / {counts['rejected']}" if crops else "-",
        f"{counts['cropped']} / {counts['unchanged']} / {counts['dropped']}" if crops else "-",
        percent(kept["all"]) if filtered or crops else "-",
    ]


def one_shot_tables(ab: Ablation) -> list[str]:
    runs = ab.runs
    lines = [level_note(ab), "", *judge_note(ab)]
    lines += ["## Table 1: LLM-judge score (0-100) by difficulty level", ""]
    lines += table(
        ["strategy", *[f"judge {c}" for c in level_columns(ab)], "EM", "F1"],
        [[r.label, *by_level(ab, r), r.summary["em"], r.summary["f1"]] for r in runs],
    )
    if ab.judged and len(runs) > 1:
        base = runs[0].judged() or 0.0
        best = max(runs[1:], key=lambda r: r.judged() or -1.0)
        lines += [
            f"Best row after the first: {best.label}, {(best.judged() or 0.0) - base:+.1f} judge "
            f"points over {runs[0].label} (Avg).",
            "",
        ]
    lines += quality_cost(runs)
    refined = [r for r in runs if any(stages(x, "filter") or stages(x, "crop") for x in r.rows)]
    groups = level_groups(runs[0].rows, ab.levels)
    lines += [
        "## Table 2: chunk retention (%) after the refinement stages, by level",
        "",
        "Chunks that left a stage / chunks that entered it (counts); filter & cropping is the "
        "product of the two stages.",
        "",
    ]
    rows = []
    for run in refined:
        mine = level_groups(run.rows, ab.levels)
        rows.append(
            [run.label]
            + [percent(retention([run.rows[i] for i in mine.get(lv, [])])["all"]) for lv in groups]
        )
    lines += table(["strategy", *level_columns(ab)], rows)
    staged = [r for r in runs if any(stages(x, "select") for x in r.rows)]
    lines += ["## Table 2, stage detail (all questions)", ""]
    lines += table(
        [
            "strategy",
            "knapsack: chunks selected / candidates (per q)",
            "filter: kept / pool (%)",
            "filter: chunks added/q",
            "crop: kept / examined (%)",
            "crop replies accepted / rejected",
            "accepted: cropped / unchanged / dropped",
            "retained after refinement (%)",
        ],
        [stage_detail(run) for run in staged],
    )
    lines += [f"## Table 3: score and time with {ab.spec.file.model}", ""]
    rows = []
    for run in runs:
        minutes = sum(r["trace"]["seconds"] for r in run.rows) / 60
        cached = run.summary["cached_calls"] or 0.0
        rows.append([run.label, cell(run.judged(), 1), f"{minutes:.1f}", f"{cached:.2f}"])
    lines += table(
        ["strategy", "judge score (Avg)", "minutes (all questions)", "cached calls/q"], rows
    )
    return lines


# --- iterative and combined (Fishing for Answers §4.3-4.4) ------------------------------------


def retrievals(row: dict) -> int:
    """Retrieval rounds of one question: the agent's turns that searched, or (a program that
    records no turns, e.g. Basic RAG) its searches."""
    turns = row["trace"].get("turns") or []
    if turns:
        return sum(t.get("action") == "search" for t in turns)
    return len(row["trace"].get("searches") or [])


def deleted(row: dict) -> int:
    return sum(len(t.get("deleted") or []) for t in row["trace"].get("turns") or [])


AGENT_COLUMNS = ("retrievals/q", "turns/q", "chunks deleted/q")


def agent_cells(run: Run) -> list[object]:
    rows = run.rows
    if not rows:
        return ["-", "-", "-"]
    return [
        mean(retrievals(r) for r in rows),
        mean(len(r["trace"].get("turns") or []) for r in rows),
        mean(deleted(r) for r in rows),
    ]


def iterative_tables(ab: Ablation) -> list[str]:
    runs = ab.runs
    lines = [level_note(ab), "", *judge_note(ab)]
    ablation = [r for r in runs if r.program in ("basic", "iterative")]
    lines += ["## Table 4: LLM-judge score (0-100) by difficulty level, iterative ablation", ""]
    lines += table(
        ["method", *[f"judge {c}" for c in level_columns(ab)], "EM", "F1"],
        [[r.label, *by_level(ab, r), r.summary["em"], r.summary["f1"]] for r in ablation],
    )
    full = [
        r
        for r in runs
        if r.program == "basic"
        or (r.program == "iterative" and r.knobs.get("fallback") and r.knobs.get("delete"))
    ]
    lines += [
        f"## Table 5: judge score (average retrievals) by level, {ab.spec.file.model}",
        "",
        "Basic RAG retrieves once (1.00); an agent counts one retrieval per turn that searched.",
        "",
    ]
    lines += table(
        ["method", *level_columns(ab)], [[r.label, *by_level(ab, r, retrievals)] for r in full]
    )
    combined = [r for r in runs if r.program == "combined"]
    agents = [r for r in full if r.program == "iterative"][:1] + combined
    lines += ["## §4.4 and Fig. 5: combined strategy by context budget", ""]
    rows = []
    for run in agents:
        budget = run.knobs.get("token_budget") if run.program == "combined" else "-"
        rows.append(
            [
                run.label,
                "default (a quarter of the window)" if budget is None else budget,
                cell(run.judged(), 1),
                run.summary["em"],
                run.summary["recall"],
                *agent_cells(run),
            ]
        )
    lines += table(
        ["configuration", "first-round budget (tokens)", "judge (Avg)", "EM", "gold recall",
         *AGENT_COLUMNS],
        rows,
    )  # fmt: skip
    lines += quality_cost(runs, agent_cells, AGENT_COLUMNS)
    return lines


# --- Test-Time Strategies (Search-R1 modules) -------------------------------------------------


def searches(row: dict) -> int:
    return len(row["trace"].get("searches") or [])


def em_by_searches(rows: Sequence[dict]) -> dict[int, tuple[int, Any, Any, Any]]:
    """{number of searches: (questions, EM mean, 95% bootstrap low, high)}."""
    from netcast.evaluation.report import bootstrap_ci

    groups: dict[int, list[float]] = defaultdict(list)
    for row in rows:
        groups[searches(row)].append(row["scores"]["em"])
    out = {}
    for n, values in sorted(groups.items()):
        em, low, high = bootstrap_ci(values)
        out[n] = (len(values), em, low, high)
    return out


def test_time_tables(ab: Ablation) -> list[str]:
    lines = judge_note(ab)
    rows = []
    for run in ab.runs:
        a = run.summary
        tokens = (a["tokens_in"] or 0) + (a["tokens_out"] or 0)
        rows.append(
            [run.label, a["n"], a["em"], cell(run.judged(), 3), a["searches"], tokens,
             a["lm_calls"], a["seconds"]]
        )  # fmt: skip
    lines += ["## Table 1", ""]
    lines += table(
        ["variant", "n", "Exact Match", "LLM Match", "avg. # searches", "tokens/q", "LM calls/q",
         "s/q"],
        rows,
    )  # fmt: skip
    lines += ["## Fig. 2: Exact Match by number of searches (95% bootstrap CI)", ""]
    curves = {run.label: em_by_searches(run.rows) for run in ab.runs}
    counts = sorted({n for curve in curves.values() for n in curve})
    fig = []
    for n in counts:
        row: list[object] = [n]
        for curve in curves.values():
            point = curve.get(n)
            row.append(
                f"{point[1]:.3f} [{point[2]:.3f}, {point[3]:.3f}] (n={point[0]})" if point else "-"
            )
        fig.append(row)
    return lines + table(["searches", *[f"EM {label}" for label in curves]], fig)


# --- Knowledge-Aware Iterative Retrieval ------------------------------------------------------


class WithContext(dspy.Module):
    """Runs ``program`` and keeps the text it hands the generator (the prediction's context)
    in the saved trace (a ``context`` stage), so retrieval F1 can be computed from saved rows."""

    def __init__(self, program: dspy.Module):
        super().__init__()
        self.program = program
        self.name = program.name
        self.knobs = program.knobs
        self.knob_defaults = program.knob_defaults

    def forward(self, question: str) -> dspy.Prediction:
        prediction = self.program(question=question)
        prediction.trace["stages"].append(
            {"stage": "context", "passages": [str(p) for p in prediction.context or []]}
        )
        return prediction


def retrieved_text(row: dict) -> list[str] | None:
    for stage in row["trace"].get("stages") or []:
        if stage["stage"] == "context":
            return stage["passages"]
    return None


def steps(row: dict) -> int:
    values = [s["steps"] for s in row["trace"].get("stages") or [] if s["stage"] == "result"]
    return values[-1] if values else 1  # one-step retrieval


def knowledge_tables(ab: Ablation) -> list[str]:
    from netcast.corpus import format_passage
    from netcast.data import load_dataset
    from netcast.evaluation.metrics import token_prf

    spec = ab.spec.file
    data = load_dataset(spec.dataset, spec.split, spec.limit)
    documents = {d.id: format_passage(d.title, d.text) for d in data.documents}
    gold = {ex.id: [documents[d] for d in ex.gold_ids if d in documents] for ex in data.examples}
    price = float(ab.options["price_ratio"])
    rows, missing = [], 0
    for run in ab.runs:
        a = run.summary
        prf = []
        for row in run.rows:
            text = retrieved_text(row)
            if text is None:
                missing += 1
                continue
            prf.append(token_prf(text, gold.get(row["id"], [])))
        scored = [p for p in prf if p["f1"] is not None]
        agents = run.knobs.get("n_agents") if run.program == "knowledge" else None
        step_mean = mean(steps(r) for r in run.rows) if run.rows else None
        rows.append(
            [
                run.label,
                a["n"],
                agents or "-",
                step_mean,
                step_mean * agents * price if agents and step_mean else "-",
                mean(p["precision"] for p in scored) if scored else "-",
                mean(p["recall"] for p in scored) if scored else "-",
                mean(p["f1"] for p in scored) if scored else "-",
                a["f1"],
                a["em"],
                a["recall"],
                a["precision"],
                a["lm_calls"],
                (a["tokens_in"] or 0) + (a["tokens_out"] or 0),
                a["seconds"],
            ]
        )
    lines = [
        f"Price ratio of the model under test: {price:g} (cost units = steps x agents x ratio).",
        "",
        "## Tables 1-2: retrieval and answer quality, steps and cost per agent count",
        "",
        *table(
            ["retrieval", "n", "agents", "steps", "cost units", "retrieval P (tokens)",
             "retrieval R (tokens)", "retrieval F1 (tokens)", "answer F1", "EM", "gold-doc recall",
             "gold-doc precision", "LM calls/q", "tokens/q", "s/q"],
            rows,
        ),
    ]  # fmt: skip
    if missing:
        lines += [
            f"{missing} saved rows hold no context text: left out of the retrieval columns.",
            "",
        ]
    return lines


# --- IterKey ----------------------------------------------------------------------------------


def per_iteration(run: Run, max_iters: int = 5) -> list[list[object]]:
    """EM and F1 if each question had stopped at iteration i (its last answer up to i), the
    questions still running, and their new keywords and documents."""
    from netcast.evaluation.metrics import exact_match, f1_score

    rows = []
    for i in range(1, max_iters + 1):
        em, f1 = [], []
        for r in run.rows:
            turns = r["trace"]["turns"]
            answer = turns[min(i, len(turns)) - 1]["answer"]
            em.append(exact_match(answer, r["answers"]))
            f1.append(f1_score(answer, r["answers"]))
        running = [r["trace"]["turns"][i - 1] for r in run.rows if len(r["trace"]["turns"]) >= i]
        rows.append(
            [
                i,
                mean(em),
                mean(f1),
                len(running),
                mean(len(t["new_keywords"]) for t in running) if running else "-",
                mean(len(t["new_docs"]) for t in running) if running else "-",
            ]
        )
    return rows


def verification(rows: Sequence[dict]) -> dict[str, float]:
    """Table 9 from rows of a run with ``stop_when_valid=False`` (every iteration in the trace):
    the first iteration's EM, Base (the answer IterKey returns), VerifiedTrue (any iteration the
    validation judged True holds a right answer; Base where none was True), VerifiedAll (any
    iteration's answer is right), and the iterations to the first True."""
    from netcast.evaluation.metrics import exact_match

    first, base, true, every, first_true = [], [], [], [], []
    for r in rows:
        turns = r["trace"]["turns"]
        right = [bool(exact_match(t["answer"], r["answers"])) for t in turns]
        judged_true = [ok for ok, t in zip(right, turns, strict=True) if t["valid"]]
        first.append(float(right[0]))
        base.append(r["scores"]["em"])
        true.append(float(any(judged_true)) if judged_true else r["scores"]["em"])
        every.append(float(any(right)))
        first_true.append(next((i for i, t in enumerate(turns, 1) if t["valid"]), len(turns)))
    return {
        "first": mean(first),
        "base": mean(base),
        "true": mean(true),
        "all": mean(every),
        "iterations": mean(len(r["trace"]["turns"]) for r in rows),
        "first_true": mean(first_true),
    }


def recall_at(rows: Sequence[dict], retriever: Any, ks: Sequence[int]) -> tuple[list[float], float]:
    """(Top-K answer recall for each K, share of the retrieved documents with an answer),
    averaged over each question's searches, then over questions: each saved query is searched
    again for the top max(K) (no model call)."""
    from netcast.corpus import format_passage
    from netcast.evaluation.metrics import documents_with_answer, top_k_answer_recall

    corpus = retriever.corpus
    at_k: list[list[float]] = [[] for _ in ks]
    share: list[float] = []
    for r in rows:
        found = r["trace"].get("searches") or []
        if not found:
            continue
        per_k: list[list[float]] = [[] for _ in ks]
        docs: list[float] = []
        for s in found:
            ranked = retriever.search(s["query"], max(ks))
            passages = [format_passage(h.chunk.title, h.chunk.text) for h in ranked]
            for j, k in enumerate(ks):
                per_k[j].append(top_k_answer_recall(passages, r["answers"], k))
            got = [format_passage(corpus[i].title, corpus[i].text) for i in s["ids"]]
            if got:
                docs.append(mean(documents_with_answer(got, r["answers"])))
        for j in range(len(ks)):
            at_k[j].append(mean(per_k[j]))
        if docs:
            share.append(mean(docs))
    return [mean(v) if v else float("nan") for v in at_k], mean(share) if share else float("nan")


def iterkey_tables(ab: Ablation) -> list[str]:
    from netcast.data import load_dataset
    from netcast.session import open_retriever

    spec = ab.spec.file
    ks = sorted({int(k) for k in ab.options["top_k"]})
    if not ks or ks[0] < 1:
        raise InputError(f"{ab.spec.path}: field 'options.top_k': positive integers")
    lines = quality_cost(ab.runs, title="Table 2 / Table 6: accuracy and cost")
    data = load_dataset(spec.dataset, spec.split, spec.limit)
    opened: dict[str, Any] = {}
    rows = []
    for run in ab.runs:
        if not run.rows:
            continue
        if run.retriever not in opened:
            opened[run.retriever] = open_retriever(data, kind=run.retriever)
        curve, share = recall_at(run.rows, opened[run.retriever], ks)
        rows.append([run.label, *[f"{100 * v:.1f}" for v in curve], f"{100 * share:.1f}"])
    lines += ["## Fig. 2 / Table 11: retrieval recall (% of searches with an answer in Top-K)", ""]
    lines += table(
        ["method", *[f"Top{k} (%)" for k in ks], "retrieved docs with an answer (%)"], rows
    )
    iterkeys = [r for r in ab.runs if r.program == "iterkey" and r.rows]
    stopping = [r for r in iterkeys if r.knobs.get("stop_when_valid", True)]
    plain = [r for r in stopping if not r.step_models]
    per_step = [r for r in stopping if r.step_models]
    if per_step:
        rows = []
        for run in per_step:
            base = next(
                (b for b in plain if (b.retriever, b.knobs) == (run.retriever, run.knobs)), None
            )
            em, base_em = run.summary["em"], base.summary["em"] if base else None
            change = "-" if em is None or base_em is None else f"{em - base_em:+.3f}"
            rows.append(
                [run.label, ", ".join(f"{k}: {v}" for k, v in run.step_models.items()), em, change]
            )
        lines += ["## Tables 7-8: per-step models (EM against the same IterKey on one model)", ""]
        lines += table(["IterKey", "step models", "EM", "change"], rows)
    for run in stopping:
        lines += [f"## {run.label}: per iteration (Tables 3-5)", ""]
        lines += table(
            ["iteration", "EM if stopped by here", "F1 if stopped by here",
             "questions still running", "new keywords", "new documents"],
            per_iteration(run),
        )  # fmt: skip
    lines += ["## Table 13: average iterations", ""]
    lines += table(
        ["IterKey", "avg iterations"],
        [[r.label, mean(len(x["trace"]["turns"]) for x in r.rows)] for r in stopping],
    )
    for run in (r for r in iterkeys if not r.knobs.get("stop_when_valid", True)):
        v = verification(run.rows)
        lines += [f"## Table 9: validation over every iteration ({run.label})", ""]
        lines += table(
            ["1st iteration EM", "Base EM (first True)", "VerifiedTrue EM", "VerifiedAll EM",
             "miss True", "miss False", "iterations to the first True"],
            [[v["first"], v["base"], v["true"], v["all"], v["true"] - v["base"],
              v["all"] - v["true"], v["first_true"]]],
        )  # fmt: skip
    lines += [
        "Table 12 (latency per step) is measured live, not kept in the rows: the seconds a "
        "question are in the accuracy and cost table.",
        "",
    ]
    return lines


TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table(
            "one-shot", "Fishing for Answers §4.2, Tables 1-3 (One-SHOT)", one_shot_tables, "score"
        ),
        Table(
            "iterative",
            "Fishing for Answers §4.3-4.4, Tables 4-5 and Fig. 5 (iterative, combined)",
            iterative_tables,
            "score",
        ),
        Table("test-time", "Test-Time Strategies, Table 1 and Fig. 2", test_time_tables, "match"),
        Table(
            "knowledge",
            "Knowledge-Aware Iterative Retrieval, Tables 1-2",
            knowledge_tables,
            records_context=True,
            options={"price_ratio": 1.0},
        ),
        Table(
            "iterkey",
            "IterKey, Tables 2-5, 9, 11 and 13",
            iterkey_tables,
            options={"top_k": [1, 2, 3, 4, 5]},
        ),
    )
}


# --- running and reporting --------------------------------------------------------------------


def full_knobs(program: str, knobs: dict[str, Any]) -> dict[str, Any]:
    from netcast.programs import get_program
    from netcast.programs.knobs import validate

    return validate(program, get_program(program).Knobs, knobs)


def run_info(config: ConfigEntry, model: str) -> dict[str, Any]:
    """What a configuration's folder holds (``run.json``): label, program, every knob, model,
    and the retriever and per-step models where they are not the default."""
    info: dict[str, Any] = {
        "label": config.label,
        "program": config.program,
        "knobs": full_knobs(config.program, dict(config.knobs)),
        "model": model,
    }
    if config.retriever != "bm25":
        info["retriever"] = config.retriever
    if config.step_models:
        info["step_models"] = dict(config.step_models)
    return info


def read_verdicts(folder: Path, judge: str, kind: str) -> dict[str, float | None]:
    """The saved verdicts of ``judge`` (``kind``: score or match) on a folder's answers."""
    from netcast.evaluation.spec import saved_rows

    return {
        str(item["id"]): item["value"]
        for item in saved_rows(folder / JUDGE_FILE)
        if item.get("judge") == judge and item.get("kind") == kind
    }


def ask_judge(example: dspy.Example, answer: str, judge_lm: Any, kind: str) -> float | None:
    """One verdict: the binary LLM Match (``JudgeAnswer``) or the 0-100 score (``ScoreAnswer``,
    clamped); None when the judge's reply gives none."""
    from dspy.utils.exceptions import AdapterParseError

    from netcast.evaluation.evaluate import judge_match
    from netcast.models import default_adapter
    from netcast.signatures.judge import ScoreAnswer

    try:
        with dspy.context(lm=judge_lm, adapter=default_adapter(judge_lm)):
            if kind == "match":
                return judge_match(example, answer, judge_lm)
            out = dspy.Predict(ScoreAnswer)(
                question=example.question,
                reference_answers=list(example.answers),
                predicted_answer=answer,
            )
        return float(min(100, max(0, int(out.score))))
    except (AdapterParseError, TypeError, ValueError):
        return None


def judge_missing(
    folder: Path,
    rows: Sequence[dict],
    examples: Sequence[dspy.Example],
    judge: str,
    judge_lm: Any,
    kind: str,
) -> int:
    """Ask ``judge_lm`` (recorded as ``judge``) about every saved answer it has no verdict on;
    each verdict is appended to the folder's ``judge.jsonl`` as it comes (a stopped run
    resumes). Returns how many it asked."""
    done = read_verdicts(folder, judge, kind)
    by_id = {ex.id: ex for ex in examples}
    asked = 0
    with (folder / JUDGE_FILE).open("a", encoding="utf-8") as out:
        for row in rows:
            if row["id"] in done or row["id"] not in by_id:
                continue
            value = ask_judge(by_id[row["id"]], str(row["answer"] or ""), judge_lm, kind)
            item = {"id": row["id"], "judge": judge, "kind": kind, "value": value}
            out.write(json.dumps(item) + "\n")
            out.flush()
            asked += 1
    return asked


def judge_name(spec: Spec) -> str | None:
    """The judge as its verdicts record it (its netcast model name), None without one."""
    from netcast.models import model_name

    return model_name(spec.file.judge) if spec.file.judge else None


def run_ablation(spec: Spec, make: MakeLM, threads: int = 1, progress: bool = True) -> SpecRun:
    """Run an ablation spec's configurations (resuming: saved questions are kept), then ask its
    judge about the answers it has not judged."""
    from netcast.data import load_dataset
    from netcast.evaluation.evaluate import evaluate
    from netcast.evaluation.spec import SpecRun, lm_kwargs
    from netcast.models import model_name, token_counter
    from netcast.models.factory import check_questions, preflight
    from netcast.session import build_program, open_retriever

    table_ = TABLES[spec.file.table]
    f = spec.file
    if f.judge and model_name(f.judge) == model_name(f.model) and not f.allow_same_judge:
        raise InputError(
            f"{spec.path}: field 'judge': {f.judge} is the model under test; the papers judge "
            "with a separate model (allow_same_judge = true to let it judge its own answers)"
        )
    data = load_dataset(f.dataset, f.split, f.limit)
    wanted = {ex.id for ex in data.examples}
    judged = judge_name(spec) if table_.judge else None
    if all(
        wanted <= {r["id"] for r in run.rows} and (not judged or wanted <= set(run.verdicts))
        for run in read_runs(spec)
    ):
        return SpecRun(spec)  # every question run and judged: no model is made
    lm = make(f.model, **lm_kwargs(spec))
    check_questions(data.questions(), lm)
    preflight(lm)
    judge_lm = make(f.judge) if f.judge and table_.judge else None
    if judge_lm is not None:
        preflight(judge_lm)
    retrievers: dict[str, Any] = {}
    done = SpecRun(spec)
    for config in f.configs:
        if config.retriever not in retrievers:
            retrievers[config.retriever] = open_retriever(
                data, kind=config.retriever, counter=token_counter(lm)
            )
        program = build_program(config.program, retrievers[config.retriever], config.knobs, lm=lm)
        for step, model in config.step_models.items():
            step_lm = make(model)
            for name, predictor in program.named_predictors():
                if name.split(".")[0] == step:
                    predictor.lm = step_lm
        runner = WithContext(program) if table_.records_context else program
        folder = spec.run_dir / config.folder
        if progress:
            print(f"[{spec.name}] {config.label}: {len(data.examples)} questions -> {folder}")
        with dspy.context(lm=lm):
            result = evaluate(
                runner,
                data.examples,
                run_dir=folder,
                run_info=run_info(config, lm.model),
                threads=threads,
                progress=progress,
            )
        if judge_lm is not None and table_.judge:
            judge_missing(folder, result.rows, data.examples, judged or "", judge_lm, table_.judge)
        done.results.append((config.label, result, lm))
    return done


def read_runs(spec: Spec) -> list[Run]:
    """The saved rows of every configuration of an ablation spec (a configuration not yet run
    has none), with the judge's verdicts where the table has a judge."""
    from netcast.evaluation.spec import saved_rows

    table_ = TABLES[spec.file.table]
    judge = judge_name(spec) if table_.judge else None
    runs = []
    for config in spec.file.configs:
        folder = spec.run_dir / config.folder
        rows = saved_rows(folder / "predictions.jsonl")
        verdicts = read_verdicts(folder, judge, table_.judge or "") if judge else {}
        runs.append(
            Run(
                config.label,
                config.program,
                full_knobs(config.program, dict(config.knobs)),
                rows,
                verdicts,
                config.retriever,
                dict(config.step_models),
            )
        )
    return runs


def ablation_report(spec: Spec) -> str:
    """An ablation spec's tables from its saved rows and verdicts (no model call)."""
    from netcast.evaluation.spec import header_lines

    table_ = TABLES[spec.file.table]
    runs = read_runs(spec)
    lines = [*header_lines(spec), f"Tables: {table_.title}.", ""]
    done = [r for r in runs if r.rows]
    missing = [r.label for r in runs if not r.rows]
    if missing:
        lines += [f"Not run yet: {'; '.join(missing)} (`{spec.command('bench')}`).", ""]
    if not done:
        return "\n".join(lines) + "\n"
    levels = record_field(spec.file.dataset, "level")
    ab = Ablation(spec, done, spec.options, levels)
    return "\n".join(lines + table_.build(ab)) + "\n"
