"""Run several program configurations on the same questions (resumable run directories under
benchmarks/results/paper-tables/, committed like the tiers' rows so another session or
machine continues where one stopped) and print the paper-style quality and cost table; ask an
LLM judge about the saved answers (binary LLM Match or a 0-100 score,
``netcast.signatures.judge``); group rows by the records' difficulty level."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import dspy
from _common import table

from netcast.evaluation import EvalResult, evaluate
from netcast.files import slug
from netcast.models import embedded_name

# relative to the working directory, the repository root in every command shown
RESULTS = Path("benchmarks/results/paper-tables")


def run_dir(name: str, label: str, lm: dspy.BaseLM) -> Path:
    """``RESULTS/<name>/<label>``; another model than the default embedded one runs into
    ``RESULTS/<name>-<model>/<label>`` (a run directory holds one model's run)."""
    model = embedded_name(lm) or lm.model
    group = name if model == "embedded" else f"{name}-{slug(model).lower()}"
    return RESULTS / group / slug(label).lower()


def run_configs(
    name: str,
    configs: Sequence[tuple[str, dspy.Module]],
    examples: Sequence[dspy.Example],
    lm: dspy.BaseLM,
) -> list[tuple[str, EvalResult]]:
    """Evaluate each (label, program) on ``examples`` with ``lm`` into its run directory
    (finished questions there are kept and not run again)."""
    results = []
    for label, program in configs:
        directory = run_dir(name, label, lm)
        info = {"label": label, "program": program.name, "knobs": program.knobs, "model": lm.model}
        print(f"[{name}] {label}: {len(examples)} questions -> {directory}", flush=True)
        with dspy.context(lm=lm):
            result = evaluate(program, examples, run_dir=directory, run_info=info, progress=False)
        results.append((label, result))
    return results


def quality_cost_table(results: Sequence[tuple[str, EvalResult]], extra=None) -> None:
    columns = [
        "strategy",
        "n",
        "EM",
        "F1",
        "recall",
        "precision",
        "searches/q",
        "LM calls/q",
        "of which cached/q",
        "tokens in/q",
        "tokens out/q",
        "s/q",
    ]
    rows = []
    for label, result in results:
        a = result.aggregate
        row = [
            label,
            a["n"],
            a["em"],
            a["f1"],
            a["recall"],
            a["precision"],
            a["searches"],
            a["lm_calls"],
            a["cached_calls"],
            a["tokens_in"],
            a["tokens_out"],
            a["seconds"],
        ]
        rows.append(row + (extra(result) if extra else []))
    table(columns + (extra.columns if extra else []), rows)
    print(
        "s/q is wall time per question in the run that produced the row; calls served from "
        "DSPy's cache (reused from an earlier row or run) take almost no time, so rows with "
        "cached calls are faster than a fresh run.\n"
    )


# --- LLM judges ------------------------------------------------------------------------------


def judge_rows(
    results: Sequence[tuple[str, EvalResult]],
    examples: Sequence[dspy.Example],
    judge_lm: dspy.BaseLM | None,
    kind: str,
) -> dict[str, list[float | None]]:
    """Each row's judge value per label, in the rows' order: ``kind="match"`` is the binary
    LLM Match (``JudgeAnswer`` through ``judge_match``: 1.0 or 0.0), ``kind="score"`` the 0-100
    judge score (``ScoreAnswer``). A verdict the judge's reply does not give is ``None`` (left
    out of means and counted by ``unjudged``). No judge: an empty dict."""
    if judge_lm is None:
        return {}
    from netcast.models import default_adapter

    by_id = {ex.id: ex for ex in examples}
    judged: dict[str, list[float | None]] = {}
    with dspy.context(lm=judge_lm, adapter=default_adapter(judge_lm)):
        for label, result in results:
            print(f"[judge {judge_lm.model}] {label}: {len(result.rows)} answers", flush=True)
            ask = score_answer if kind == "score" else match_answer
            judged[label] = [
                ask(by_id[row["id"]], str(row["answer"] or ""), judge_lm) for row in result.rows
            ]
    return judged


def match_answer(example: dspy.Example, answer: str, judge_lm: dspy.BaseLM) -> float | None:
    """LLM Match (1.0 / 0.0) of ``answer``, or None if the judge's reply could not be read."""
    from dspy.utils.exceptions import AdapterParseError

    from netcast.evaluation.evaluate import judge_match

    try:
        return judge_match(example, answer, judge_lm)
    except AdapterParseError:
        return None


def score_answer(example: dspy.Example, answer: str, judge_lm: dspy.BaseLM) -> float | None:
    """The 0-100 judge score of ``answer`` (clamped), or None if it could not be read."""
    from dspy.utils.exceptions import AdapterParseError

    from netcast.signatures.judge import ScoreAnswer

    try:
        with dspy.context(lm=judge_lm):
            out = dspy.Predict(ScoreAnswer)(
                question=example.question,
                reference_answers=list(example.answers),
                predicted_answer=answer,
            )
        return float(min(100, max(0, int(out.score))))
    except (AdapterParseError, TypeError, ValueError):
        return None


def unjudged(judged: dict[str, list[float | None]]) -> int:
    return sum(v is None for values in judged.values() for v in values)


def mean_of(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


# --- difficulty levels ----------------------------------------------------------------------


def level_groups(rows: Sequence[dict], levels: dict[str, object]) -> dict[str, list[int]]:
    """Row positions by the question's level (sorted; easy/medium/hard in that order), then
    every row under "Avg"."""
    order = {"easy": 0, "medium": 1, "hard": 2}
    found: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        level = levels.get(row["id"])
        if level is not None:
            found.setdefault(str(level), []).append(i)
    ordered = sorted(found, key=lambda lv: (order.get(lv, 99), lv))
    return {**{lv: found[lv] for lv in ordered}, "Avg": list(range(len(rows)))}


def level_note(dataset: str, split: str, levels: dict[str, object], rows: Sequence[dict]) -> str:
    """What the by-level columns are: the records' ``level`` field, or that there is none."""
    if not levels:
        return (
            f"{dataset} records have no `level` field: results are not grouped by difficulty "
            "(only Avg)"
        )
    present = sorted({str(levels[r["id"]]) for r in rows if r["id"] in levels})
    note = (
        f"difficulty levels: the records' `level` field ({', '.join(present) or 'none'} among "
        f"these {split} questions); the paper's L1-L4 are its own benchmark's levels"
    )
    if len(present) == 1 and dataset.startswith("hotpotqa") and split == "dev":
        note += (
            "; HotpotQA's dev questions are all 'hard': --split train gives easy, medium and hard"
        )
    return note


def cell(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
