"""Strategy comparison reports from saved results (no model calls): a table with 95% bootstrap
confidence intervals on quality and a paired significance test against the ``basic`` strategy,
a quality-vs-cost scatter plot with the Pareto front (PNG), and a per-question diff view.
Written as ``report.md`` and a self-contained ``report.html``."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from netcast.errors import InputError
from netcast.optimize.evaluate import step_totals
from netcast.optimize.metrics import BY_NAME, COST, QUALITY
from netcast.pareto import pareto_indices

BASELINE = "basic"


@dataclass
class Results:
    """One program's per-question rows on one dataset."""

    dataset: str
    program: str
    rows: list[dict[str, Any]]

    def values(self, metric: str) -> list[float]:
        return [r["scores"][metric] for r in self.rows if r["scores"].get(metric) is not None]

    def by_id(self) -> dict[str, dict[str, Any]]:
        return {r["id"]: r for r in self.rows}


def bootstrap_ci(values: Sequence[float], n: int = 2000, seed: int = 0, alpha: float = 0.05):
    """(mean, low, high): percentile bootstrap of the mean; reproducible for a given seed."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return None, None, None
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(n, data.size))].mean(axis=1)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(data.mean()), float(low), float(high)


def paired_p_value(a: Sequence[float], b: Sequence[float], n: int = 5000, seed: int = 0) -> float:
    """Two-sided paired permutation (sign-flip) test of mean(a - b) = 0."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if d.size == 0 or not np.any(d):
        return 1.0
    rng = np.random.default_rng(seed)
    signs = rng.choice([-1.0, 1.0], size=(n, d.size))
    observed = abs(d.mean())
    return float((np.abs((signs * d).mean(axis=1)) >= observed - 1e-12).mean())


def read_results(run_dir: str | Path) -> list[Results]:
    """Every ``<dataset>/<program>/predictions.jsonl`` under ``run_dir``."""
    run_dir = Path(run_dir)
    found = []
    for path in sorted(run_dir.glob("*/*/predictions.jsonl")):
        rows = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                if n < len(path.read_text().splitlines()):
                    raise InputError(f"{path}:{n}: corrupted row") from None
        found.append(Results(path.parent.parent.name, path.parent.name, rows))
    if not found:
        raise InputError(f"{run_dir}: no results (expected <dataset>/<program>/predictions.jsonl)")
    return found


def summary_rows(results: Sequence[Results], quality: str = "f1", seed: int = 0) -> list[dict]:
    """One row per (dataset, program): quality means with 95% CIs, cost means, and the paired
    p-value of ``quality`` against ``basic`` on the questions both answered."""
    rows = []
    baselines = {r.dataset: r for r in results if r.program == BASELINE}
    for res in results:
        row: dict[str, Any] = {"dataset": res.dataset, "program": res.program, "n": len(res.rows)}
        for metric in QUALITY:
            row[metric] = bootstrap_ci(res.values(metric), seed=seed)
        for metric in COST:
            values = res.values(metric)
            row[metric] = float(np.mean(values)) if values else None
        row["tokens"] = (row["tokens_in"] or 0) + (row["tokens_out"] or 0)
        protocol = step_totals(res.rows)
        row["parse_failures_per_100_calls"] = protocol["parse_failures_per_100_calls"]
        row["acceptance"] = protocol["acceptance"]
        row["steps"] = protocol["steps"]
        base = baselines.get(res.dataset)
        row["p_vs_basic"] = None
        if base is not None and base is not res:
            mine, theirs = res.by_id(), base.by_id()
            shared = [i for i in mine if i in theirs]
            row["p_vs_basic"] = paired_p_value(
                [mine[i]["scores"][quality] for i in shared],
                [theirs[i]["scores"][quality] for i in shared],
                seed=seed,
            )
        rows.append(row)
    return rows


def question_diffs(results: Sequence[Results], quality: str = "em") -> list[dict]:
    """For each program vs basic on the same dataset: the questions one gets right and the other
    wrong (by ``quality`` >= 0.5), with both answers and traces."""
    diffs = []
    baselines = {r.dataset: r for r in results if r.program == BASELINE}
    for res in results:
        base = baselines.get(res.dataset)
        if base is None or base is res:
            continue
        theirs = base.by_id()
        for qid, row in res.by_id().items():
            other = theirs.get(qid)
            if other is None:
                continue
            mine_ok = row["scores"][quality] >= 0.5
            base_ok = other["scores"][quality] >= 0.5
            if mine_ok != base_ok:
                diffs.append(
                    {
                        "dataset": res.dataset,
                        "program": res.program,
                        "id": qid,
                        "question": row["question"],
                        "gold": row["answers"],
                        "winner": res.program if mine_ok else BASELINE,
                        "answer": row["answer"],
                        "basic_answer": other["answer"],
                        "trace": row["trace"],
                        "basic_trace": other["trace"],
                    }
                )
    return diffs


def scatter_png(rows: Sequence[dict], path: Path, quality: str = "f1") -> Path:
    """Quality (y) against tokens per question (x), one panel per dataset, Pareto front drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = sorted({r["dataset"] for r in rows})
    fig, axes = plt.subplots(1, len(datasets), figsize=(6 * len(datasets), 4.5), squeeze=False)
    for ax, dataset in zip(axes[0], datasets, strict=True):
        mine = [r for r in rows if r["dataset"] == dataset and r[quality][0] is not None]
        points = [(r[quality][0], r["tokens"]) for r in mine]
        for i, (r, (q, c)) in enumerate(zip(mine, points, strict=True)):
            low, high = r[quality][1], r[quality][2]
            ax.errorbar(c, q, yerr=[[q - low], [high - q]], fmt="o", capsize=3)
            ax.annotate(
                r["program"], (c, q), textcoords="offset points", xytext=(5, 5 + 11 * (i % 3))
            )  # staggered so close labels stay legible
        front = [points[i] for i in pareto_indices(points)]
        if front:
            ax.plot(
                [c for _, c in front],
                [q for q, _ in front],
                "--",
                color="gray",
                label="Pareto front",
            )
            ax.legend(loc="best")
        ax.set_xlabel("tokens per question (in + out)")
        ax.set_ylabel(f"{quality.upper()} (95% bootstrap CI)")
        ax.set_title(dataset)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _fmt_ci(ci) -> str:
    mean, low, high = ci
    return "-" if mean is None else f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def _fmt(value, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


TABLE_COLUMNS = [
    "dataset",
    "program",
    "n",
    *(BY_NAME[m].label for m in QUALITY),
    "p (F1 vs basic)",
    *(BY_NAME[m].label for m in COST),
    "parse failures /100 calls",
    "checks passed",
]


def table_cells(row: dict) -> list[str]:
    return [
        row["dataset"],
        row["program"],
        str(row["n"]),
        *(_fmt_ci(row[m]) for m in QUALITY),
        _fmt(row["p_vs_basic"], 3),
        *(BY_NAME[m].format(row[m]) for m in COST),
        _fmt(row["parse_failures_per_100_calls"], 1),
        "-" if row["acceptance"] is None else f"{100 * row['acceptance']:.0f}%",
    ]


STEP_COLUMNS = ("calls", "parse_failures", "unreadable", "fallbacks", "accepted", "rejected")


def step_lines(rows: Sequence[dict]) -> list[str]:
    """Markdown: each LLM step's calls and outcomes per strategy, summed over questions, with
    the most frequent rejection reason."""
    lines = [
        "## Per-step outcomes",
        "",
        "Summed over the questions: `parse_failures` = no usable reply; `unreadable` = a reply "
        "the first adapter could not read (DSPy then tried JSON); `fallbacks` = the program "
        "went on without the step's output; `accepted`/`rejected` = rule checks on its output.",
        "",
        "| dataset | program | step | " + " | ".join(STEP_COLUMNS) + " | top rejection |",
        "|" + "|".join("---" for _ in range(len(STEP_COLUMNS) + 4)) + "|",
    ]
    for row in rows:
        for name, counts in sorted(row["steps"].items()):
            reasons = counts.get("reasons") or {}
            top = max(reasons, key=reasons.get) if reasons else "-"
            cells = [str(counts.get(c, 0)) for c in STEP_COLUMNS]
            lines.append(
                f"| {row['dataset']} | {row['program']} | {name} | "
                + " | ".join(cells)
                + f" | {top} |"
            )
    return [*lines, ""]


def write_report(run_dir: str | Path, quality: str = "f1", seed: int = 0) -> Path:
    """Rebuild ``report.md``, ``report.html`` and ``quality_vs_cost.png`` in ``run_dir``."""
    run_dir = Path(run_dir)
    results = read_results(run_dir)
    rows = summary_rows(results, quality=quality, seed=seed)
    png = scatter_png(rows, run_dir / "quality_vs_cost.png", quality=quality)
    diffs = question_diffs(results)
    info = {}
    if (run_dir / "bench.json").exists():
        info = json.loads((run_dir / "bench.json").read_text())
    lines = ["# netcast bench report", ""]
    if info.get("command"):
        lines += [f"Command: `{info['command']}`", ""]
    if info.get("model"):
        lines += [f"Model: {info['model']}; retriever: {info.get('retriever')}", ""]
    lines += [
        "Quality: mean [95% bootstrap CI]; p: paired sign-flip permutation test of F1 "
        "against basic on the same questions. Cost: means per question.",
        "",
        "| " + " | ".join(TABLE_COLUMNS) + " |",
        "|" + "|".join("---" for _ in TABLE_COLUMNS) + "|",
    ]
    lines += ["| " + " | ".join(table_cells(r)) + " |" for r in rows]
    lines += ["", f"![quality vs cost]({png.name})", ""]
    lines += step_lines(rows)
    lines += ["## Per-question differences vs basic", ""]
    for d in diffs:
        lines.append(
            f"- [{d['dataset']}] **{d['winner']}** right on {d['id']}: {d['question']} "
            f"(gold {d['gold']}; {d['program']}: {d['answer']!r}; basic: "
            f"{d['basic_answer']!r})"
        )
    (run_dir / "report.md").write_text("\n".join(lines) + "\n")
    (run_dir / "report.html").write_text(_html(rows, diffs, png, info))
    return run_dir / "report.md"


def _html(rows, diffs, png: Path, info: dict) -> str:
    image = base64.b64encode(png.read_bytes()).decode()
    head = "".join(f"<th>{html.escape(c)}</th>" for c in TABLE_COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in table_cells(r)) + "</tr>"
        for r in rows
    )

    def trace_block(trace: dict) -> str:
        return f"<pre>{html.escape(json.dumps(trace, indent=1)[:4000])}</pre>"

    items = "".join(
        f"<details><summary>[{html.escape(d['dataset'])}] <b>{html.escape(d['winner'])}</b> "
        f"right on {html.escape(d['question'])}</summary><p>gold {html.escape(str(d['gold']))}; "
        f"{html.escape(d['program'])}: {html.escape(str(d['answer']))}; basic: "
        f"{html.escape(str(d['basic_answer']))}</p>"
        f"{trace_block(d['trace'])}{trace_block(d['basic_trace'])}</details>"
        for d in diffs
    )
    command = html.escape(info.get("command", ""))
    return (
        "<!doctype html><meta charset='utf-8'><title>netcast bench report</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}</style>"
        f"<h1>netcast bench report</h1><p><code>{command}</code></p>"
        f"<table><tr>{head}</tr>{body}</table>"
        f"<p><img alt='quality vs cost' src='data:image/png;base64,{image}'></p>"
        f"<h2>Per-question differences vs basic</h2>{items}"
    )
