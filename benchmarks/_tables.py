"""Run several program configurations on the same questions (resumable run directories under
runs/bench/) and print the paper-style quality and cost table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import dspy
from _common import table

from netcast.files import slug
from netcast.models import embedded_name
from netcast.optimize import EvalResult, evaluate


def run_dir(name: str, label: str, lm: dspy.BaseLM) -> Path:
    """``runs/bench/<name>/<label>``; another model than the default embedded one runs into
    ``runs/bench/<name>-<model>/<label>`` (a run directory holds one model's run)."""
    model = embedded_name(lm) or lm.model
    group = name if model == "embedded" else f"{name}-{slug(model).lower()}"
    return Path("runs/bench") / group / slug(label).lower()


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
