"""Test-Time Strategies for Agentic RAG (Zhang et al.), Table 1 and Fig. 2 (``test-time``):
Exact Match, the binary LLM Match of a separate judge (the paper's GPT-4.1-mini), searches a
question; EM by the number of searches a question took, with 95% bootstrap intervals."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from netcast.render import cell, markdown_table
from netcast.specs.papers.common import Ablation, judge_note


def searches(row: dict) -> int:
    return len(row["trace"].get("searches") or [])


def em_by_searches(rows: Sequence[dict]) -> dict[int, tuple[int, Any, Any, Any]]:
    """{number of searches: (questions, EM mean, 95% bootstrap low, high)}."""
    from netcast.evaluation.stats import bootstrap_ci

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
    lines += markdown_table(
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
    return lines + markdown_table(["searches", *[f"EM {label}" for label in curves]], fig)
