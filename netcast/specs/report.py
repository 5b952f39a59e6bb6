"""Strategy comparison reports from saved results (no model calls): a table with 95% bootstrap
confidence intervals on quality and a paired difference and significance test against the
``basic`` strategy with the same model, a quality-vs-cost scatter plot with the Pareto front
(PNG) and, per model, the cheapest strategy within 0.02 F1 of the best, the same strategy
compared across models, and a per-question diff view. Written as ``report.md`` and a
self-contained ``report.html``. Several run directories (one per model: a bench run has one
model) combine into one report."""

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
from netcast.evaluation.evaluate import step_totals
from netcast.evaluation.metrics import BY_NAME, COST, QUALITY
from netcast.evaluation.runlog import read_rows, read_run_info
from netcast.evaluation.stats import bootstrap_ci, paired
from netcast.pareto import pareto_indices
from netcast.render import fmt, fmt_ci, fmt_diff, fmt_p, markdown_table
from netcast.specs.reference import GOLD, REFERENCES

BASELINE = "basic"
NEAR_BEST = 0.02  # "within 2 F1 of the best" (the cost target), on the 0-1 scale


@dataclass
class Results:
    """One program's per-question rows on one dataset."""

    dataset: str
    program: str
    rows: list[dict[str, Any]]
    model: str | None = None  # the run's model (``run.json``), None for rows without one
    source: str = ""  # the run directory's name when several are combined
    strategy: str = ""  # the program it runs (``run.json``): a compiled artifact's folder is
    # named after the artifact, its strategy after the program compiled

    @property
    def group(self) -> tuple[str, str, str | None]:
        """What a comparison against ``basic`` holds fixed: the run, dataset and model."""
        return self.source, self.dataset, self.model

    def values(self, metric: str) -> list[float]:
        return [r["scores"][metric] for r in self.rows if r["scores"].get(metric) is not None]

    def by_id(self) -> dict[str, dict[str, Any]]:
        return {r["id"]: r for r in self.rows}


def bench_commands(meta: dict[str, Any]) -> list[str]:
    """The commands a run directory's ``bench.json`` names: its ``commands`` list, or the single
    ``command`` older ones hold."""
    return list(meta.get("commands") or ([meta["command"]] if meta.get("command") else []))


def read_results(*run_dirs: str | Path) -> list[Results]:
    """Every ``<dataset>/<program>/predictions.jsonl`` under each of ``run_dirs``, with the
    model its ``run.json`` names."""
    found = []
    dirs = [Path(d) for d in run_dirs]
    names = [d.name for d in dirs]
    for run_dir in dirs:
        # the directory's name labels its rows; two directories of the same name (in different
        # parents) are labelled by their paths, so their baselines are never mixed
        source = "" if len(dirs) == 1 else run_dir.name
        if names.count(run_dir.name) > 1:
            source = str(run_dir)
        mine = []
        for path in sorted(run_dir.glob("*/*/predictions.jsonl")):
            rows, _ = read_rows(path)  # a last line cut by a crash is dropped, not an error
            info = read_run_info(path.parent)
            program = path.parent.name
            mine.append(
                Results(
                    path.parent.parent.name,
                    program,
                    rows,
                    info.get("model"),
                    source,
                    info.get("program") or program,
                )
            )
        if not mine:
            raise InputError(
                f"{run_dir}: no results (expected <dataset>/<program>/predictions.jsonl)"
            )
        found += mine
    return found


def compare(a: Results, b: Results, quality: str = "f1", seed: int = 0) -> dict[str, Any]:
    """``a`` - ``b`` on the questions both answered: n, the mean difference with its 95%
    bootstrap interval, and the paired sign-flip p-value (``stats.paired``)."""
    theirs = {i: r["scores"][quality] for i, r in b.by_id().items()}
    test = paired({i: r["scores"][quality] for i, r in a.by_id().items()}, theirs, seed=seed)
    return {"n": test.n, "diff": test.ci, "p": test.p}


def short_model(model: str | None) -> str:
    return "-" if model is None else model.removeprefix("netcast/")


def summary_rows(results: Sequence[Results], quality: str = "f1", seed: int = 0) -> list[dict]:
    """One row per (dataset, model, program): quality means with 95% CIs, cost means, and the
    paired difference and p-value of ``quality`` against ``basic`` with the same model on the
    questions both answered."""
    rows = []
    baselines = {r.group: r for r in results if r.program == BASELINE}
    uncompiled = {(r.group, r.program): r for r in results}
    for res in results:
        row: dict[str, Any] = {
            "dataset": f"{res.source}/{res.dataset}" if res.source else res.dataset,
            "model": res.model,
            "program": res.program,
            "n": len(res.rows),
        }
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
        base = baselines.get(res.group)
        row["p_vs_basic"], row["diff_vs_basic"] = None, (None, None, None)
        if base is not None and base is not res:
            test = compare(res, base, quality, seed)
            row["p_vs_basic"], row["diff_vs_basic"] = test["p"], test["diff"]
        # a compiled artifact against the same program uncompiled, when both ran
        source = uncompiled.get((res.group, res.strategy)) if res.strategy else None
        row["p_vs_uncompiled"], row["diff_vs_uncompiled"] = None, (None, None, None)
        if source is not None and source is not res:
            test = compare(res, source, quality, seed)
            row["p_vs_uncompiled"], row["diff_vs_uncompiled"] = test["p"], test["diff"]
        # reference-gold-<artifact> runs reference-gold's reader with the artifact's answer step
        row["reference"] = res.program in REFERENCES or res.strategy in REFERENCES
        rows.append(row)
    add_gap_closed(rows, quality)
    return rows


def add_gap_closed(rows: Sequence[dict], quality: str = "f1") -> None:
    """Each row's share of the gap between ``basic`` and the gold-passage reference with the
    same run, dataset and model closed: ``(Q - basic) / (gold - basic)`` (None without both
    rows, or when gold does not beat basic)."""
    means = {(r["dataset"], r["model"], r["program"]): r[quality][0] for r in rows}
    for row in rows:
        key = (row["dataset"], row["model"])
        base, gold = means.get((*key, BASELINE)), means.get((*key, GOLD))
        mine = row[quality][0]
        ok = None not in (base, gold, mine) and gold > base
        row["gap_closed"] = (mine - base) / (gold - base) if ok else None


def strategies(rows: Sequence[dict]) -> list[dict]:
    """The rows of strategies: reference rows (measurement aids) left out."""
    return [r for r in rows if not r.get("reference")]


def cheapest_near_best(rows: Sequence[dict], quality: str = "f1") -> list[dict]:
    """Per (dataset, model): the strategy with the best mean ``quality`` and the cheapest one
    (tokens per question) within ``NEAR_BEST`` of it."""
    found = []
    for group in sorted({(r["dataset"], r["model"] or "") for r in rows}):
        mine = [r for r in rows if (r["dataset"], r["model"] or "") == group and r[quality][0]]
        if not mine:
            continue
        best = max(mine, key=lambda r: r[quality][0])
        near = [r for r in mine if r[quality][0] >= best[quality][0] - NEAR_BEST]
        cheapest = min(near, key=lambda r: (r["tokens"], -r[quality][0]))
        found.append(
            {"dataset": group[0], "model": best["model"], "best": best, "cheapest": cheapest}
        )
    return found


def across_models(results: Sequence[Results], quality: str = "f1", seed: int = 0) -> list[dict]:
    """The same strategy on the same dataset with two models: each pair's paired difference."""
    pairs = []
    for i, a in enumerate(results):
        for b in results[i + 1 :]:
            if (a.dataset, a.program) == (b.dataset, b.program) and a.model != b.model:
                test = compare(b, a, quality, seed)
                pairs.append({"dataset": a.dataset, "program": a.program, "a": a, "b": b, **test})
    return pairs


def _run_label(res: Results) -> str:
    return short_model(res.model) + (f" ({res.source})" if res.source else "")


def question_diffs(results: Sequence[Results], quality: str = "em") -> list[dict]:
    """For each program vs basic on the same dataset: the questions one gets right and the other
    wrong (by ``quality`` >= 0.5), with both answers and traces."""
    diffs = []
    baselines = {r.group: r for r in results if r.program == BASELINE}
    for res in results:
        base = baselines.get(res.group)
        if base is None or base is res or res.program in REFERENCES:
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
                        "dataset": f"{res.source}/{res.dataset}" if res.source else res.dataset,
                        "model": short_model(res.model),
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
        several = len({r["model"] for r in mine}) > 1
        for i, (r, (q, c)) in enumerate(zip(mine, points, strict=True)):
            low, high = r[quality][1], r[quality][2]
            ax.errorbar(c, q, yerr=[[q - low], [high - q]], fmt="o", capsize=3)
            label = f"{r['program']} ({short_model(r['model'])})" if several else r["program"]
            ax.annotate(
                label, (c, q), textcoords="offset points", xytext=(5, 5 + 11 * (i % 3))
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


TABLE_COLUMNS = [
    "dataset",
    "model",
    "program",
    "n",
    *(BY_NAME[m].label for m in QUALITY),
    "F1 - basic [95% CI]",
    "p (F1 vs basic)",
    "F1 - its program [95% CI]",
    "p (vs its program)",
    "gap closed",
    *(BY_NAME[m].label for m in COST),
    "parse failures /100 calls",
    "checks passed",
]


def table_cells(row: dict) -> list[str]:
    return [
        row["dataset"],
        short_model(row["model"]),
        row["program"] + (" (reference)" if row.get("reference") else ""),
        str(row["n"]),
        *(fmt_ci(row[m]) for m in QUALITY),
        fmt_diff(row["diff_vs_basic"]),
        fmt_p(row["p_vs_basic"]),
        fmt_diff(row["diff_vs_uncompiled"]),
        fmt_p(row["p_vs_uncompiled"]),
        "-" if row.get("gap_closed") is None else f"{100 * row['gap_closed']:.0f}%",
        *(BY_NAME[m].format(row[m]) for m in COST),
        fmt(row["parse_failures_per_100_calls"], 1),
        "-" if row["acceptance"] is None else f"{100 * row['acceptance']:.0f}%",
    ]


STEP_COLUMNS = (
    "calls",
    "parse_failures",
    "unreadable",
    "truncated",
    "fallbacks",
    "accepted",
    "rejected",
)


def step_lines(rows: Sequence[dict]) -> list[str]:
    """Markdown: each LLM step's calls and outcomes per strategy, summed over questions, with
    the most frequent rejection reason."""
    lines = [
        "## Per-step outcomes",
        "",
        "Summed over the questions: `parse_failures` = no usable reply; `unreadable` = a reply "
        "the first adapter could not read (DSPy then tried JSON); `truncated` = model replies cut "
        "at the new-token limit (a call DSPy retried in JSON has two replies; - where the rows "
        "predate this count); `fallbacks` = the program "
        "went on without the step's output; `accepted`/`rejected` = rule checks on its output.",
        "",
    ]
    cells = []
    for row in rows:
        for name, counts in sorted(row["steps"].items()):
            reasons = counts.get("reasons") or {}
            top = max(reasons, key=reasons.get) if reasons else "-"
            counted = [str(counts[c]) if c in counts else "-" for c in STEP_COLUMNS]
            cells.append(
                [row["dataset"], short_model(row["model"]), row["program"], name, *counted, top]
            )
    columns = ["dataset", "model", "program", "step", *STEP_COLUMNS, "top rejection"]
    return [*lines, *markdown_table(columns, cells)]


def cost_lines(rows: Sequence[dict], quality: str = "f1") -> list[str]:
    lines = [
        "## Cost",
        "",
        f"Per model: the best mean {quality.upper()} and the cheapest strategy (tokens per "
        f"question) within {NEAR_BEST:.2f} of it.",
        "",
    ]
    for found in cheapest_near_best(strategies(rows), quality):
        best, cheapest = found["best"], found["cheapest"]
        lines.append(
            f"- {found['dataset']}, {short_model(found['model'])}: best **{best['program']}** "
            f"({best[quality][0]:.3f}, {best['tokens']:,.0f} tokens/q); cheapest within "
            f"{NEAR_BEST:.2f}: **{cheapest['program']}** ({cheapest[quality][0]:.3f}, "
            f"{cheapest['tokens']:,.0f} tokens/q)"
        )
    return [*lines, ""]


def model_lines(results: Sequence[Results], quality: str = "f1", seed: int = 0) -> list[str]:
    pairs = across_models(results, quality, seed)
    if not pairs:
        return []
    lines = [
        "## The same strategy on two models",
        "",
        f"Paired on the questions both answered: {quality.upper()} of B - A, 95% bootstrap "
        "interval, sign-flip p.",
        "",
    ]
    cells = [
        [p["dataset"], p["program"], _run_label(p["a"]), _run_label(p["b"]), str(p["n"]),
         fmt_diff(p["diff"]), fmt_p(p["p"])]
        for p in pairs
    ]  # fmt: skip
    columns = ["dataset", "program", "A", "B", "n", "B - A [95% CI]", "p"]
    return [*lines, *markdown_table(columns, cells)]


def write_report(
    run_dir: str | Path, quality: str = "f1", seed: int = 0, sources: Sequence[Path] = ()
) -> Path:
    """Rebuild ``report.md``, ``report.html`` and ``quality_vs_cost.png`` in ``run_dir`` from
    its rows, or from the rows of ``sources`` (run directories, e.g. one per model)."""
    run_dir = Path(run_dir)
    dirs = [Path(d) for d in sources] or [run_dir]
    results = read_results(*dirs)
    run_dir.mkdir(parents=True, exist_ok=True)
    rows = summary_rows(results, quality=quality, seed=seed)
    png = scatter_png(strategies(rows), run_dir / "quality_vs_cost.png", quality=quality)
    diffs = question_diffs(results)
    info = {}
    if not sources and (run_dir / "bench.json").exists():
        info = json.loads((run_dir / "bench.json").read_text())
    lines = ["# netcast bench report", ""]
    if sources:
        lines += ["Run directories: " + ", ".join(f"`{d}`" for d in dirs), ""]
    for d in dirs:
        bench = d / "bench.json"
        meta = json.loads(bench.read_text()) if bench.exists() else {}
        commands = bench_commands(meta)
        if len(commands) == 1:
            lines += [f"Command: `{commands[0]}`", ""]
        elif commands:  # several benches filled this directory, one part each
            lines += ["Commands:", "", *(f"- `{c}`" for c in commands), ""]
    if info.get("model"):
        lines += [f"Model: {info['model']}; retriever: {info.get('retriever')}", ""]
    lines += [
        "Quality: mean [95% bootstrap CI]; F1 - basic and p: paired difference (95% bootstrap "
        "CI) and sign-flip permutation test of F1 against basic with the same model on the "
        "same questions; F1 - its program: the same for a compiled artifact or a knob variant "
        "against its program as shipped (uncompiled, default knobs). Cost: means per question. "
        "Reference rows (measurement aids, not strategies): basic's answer step given only the "
        "question's gold passages (reference-gold) or none (reference-closed); gap closed = "
        "(F1 - basic) / (reference-gold - basic), same model and questions.",
        "",
        *markdown_table(TABLE_COLUMNS, [table_cells(r) for r in rows]),
        f"![quality vs cost]({png.name})",
        "",
    ]
    lines += cost_lines(rows, quality)
    lines += model_lines(results, quality, seed)
    lines += step_lines(rows)
    lines += ["## Per-question differences vs basic", ""]
    for d in diffs:
        lines.append(
            f"- [{d['dataset']}, {d['model']}] **{d['winner']}** right on {d['id']}: "
            f"{d['question']} (gold {d['gold']}; {d['program']}: {d['answer']!r}; basic: "
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
        f"<details><summary>[{html.escape(d['dataset'])}, {html.escape(d['model'])}] "
        f"<b>{html.escape(d['winner'])}</b> "
        f"right on {html.escape(d['question'])}</summary><p>gold {html.escape(str(d['gold']))}; "
        f"{html.escape(d['program'])}: {html.escape(str(d['answer']))}; basic: "
        f"{html.escape(str(d['basic_answer']))}</p>"
        f"{trace_block(d['trace'])}{trace_block(d['basic_trace'])}</details>"
        for d in diffs
    )
    command = "<br>".join(html.escape(c) for c in bench_commands(info))
    return (
        "<!doctype html><meta charset='utf-8'><title>netcast bench report</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}</style>"
        f"<h1>netcast bench report</h1><p><code>{command}</code></p>"
        f"<table><tr>{head}</tr>{body}</table>"
        f"<p><img alt='quality vs cost' src='data:image/png;base64,{image}'></p>"
        f"<h2>Per-question differences vs basic</h2>{items}"
    )
