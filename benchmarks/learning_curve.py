"""What more training questions buy: F1 on the same dev questions of the same recipe tuned on
more questions, from committed spec rows and the artifacts' recipes (no model is called), with
reference lines (an untuned row, the untuned larger model, the gold-passage row), as a markdown
table and a PNG.

    python benchmarks/learning_curve.py benchmarks/results/decisive-wide-0.5b/hotpotqa-wide \\
        basic-tuned-wide-0.5b basic-tuned-300-wide-0.5b \\
        --line "compiled basic=basic-joint-links-wide-0.5b" --line "gold passages=reference-gold" \\
        --line "untuned 1.5B=../../decisive-wide-1.5b/hotpotqa-wide/basic" \\
        --png docs/learning-curve.png

Each row is a folder of the run directory (a tuned artifact's row, named after the artifact in
``benchmarks/results/artifacts``): its training questions are its recipe's ``train_limit``, its
training examples the adapter's record. A ``--line`` is LABEL=ROW, ROW relative to the run
directory. F1 with its 95% bootstrap interval over the rows' questions.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _common import header, table

from netcast.models.lora import artifact_adapters

ARTIFACTS = Path("benchmarks/results/artifacts")


def f1s(folder: Path) -> list[float]:
    """A row's per-question F1 (its ``predictions.jsonl``)."""
    path = folder / "predictions.jsonl"
    if not path.is_file():
        raise SystemExit(f"error: {path}: no such row")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [row["scores"]["f1"] for row in rows]


def trained_on(row: str) -> tuple[int, int]:
    """(training questions, training examples) of the artifact that filled ``row``."""
    path = ARTIFACTS / row / "recipe.json"
    if not path.is_file():
        raise SystemExit(f"error: {path}: the row's artifact has no recipe")
    recipe = json.loads(path.read_text())
    if "finetune" not in recipe:
        raise SystemExit(f"error: {path}: not a tuned artifact (no 'finetune' record)")
    adapters = artifact_adapters(recipe["finetune"]).values()
    return recipe["dataset"]["train_limit"], sum(e["examples"]["count"] for e in adapters)


def main() -> None:
    from netcast.evaluation.stats import bootstrap_ci

    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("run", type=Path, help="a spec's run directory for one dataset")
    args.add_argument("rows", nargs="+", help="the tuned rows, one a training-set size")
    args.add_argument("--line", action="append", default=[], help="LABEL=ROW (repeatable)")
    args.add_argument("--png", type=Path, help="write the plot here")
    opts = args.parse_args()
    header("F1 against training questions", [f"rows: {opts.run}"])
    points = []
    for row in opts.rows:
        questions, examples = trained_on(row)
        mean, low, high = bootstrap_ci(f1s(opts.run / row))
        points.append((questions, examples, mean, low, high, row, len(f1s(opts.run / row))))
    points.sort()
    lines = []
    for given in opts.line:
        label, _, row = given.partition("=")
        values = f1s(opts.run / row)
        lines.append((label, *bootstrap_ci(values), len(values)))
    table(
        ["training questions", "examples", "F1 [95% CI]", "n", "row"],
        [[q, e, f"{m:.3f} [{lo:.3f}, {hi:.3f}]", n, r] for q, e, m, lo, hi, r, n in points]
        + [["-", "-", f"{m:.3f} [{lo:.3f}, {hi:.3f}]", n, label] for label, m, lo, hi, n in lines],
    )
    if opts.png:
        plot(points, lines, opts.png)
        print(f"plot: {opts.png}")


def plot(points: list, lines: list, png: Path) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [p[0] for p in points]
    means = [p[2] for p in points]
    errors = [[p[2] - p[3] for p in points], [p[4] - p[2] for p in points]]
    ax.errorbar(xs, means, yerr=errors, marker="o", capsize=4, label="tuned (95% CI)")
    for (label, mean, _, _, _), style in zip(lines, ["--", ":", "-.", "--"], strict=False):
        ax.axhline(mean, linestyle=style, color="gray", linewidth=1)
        ax.annotate(
            f"{label} {mean:.3f}",
            (min(xs), mean),
            textcoords="offset points",
            xytext=(2, 3),
            fontsize=8,
            color="dimgray",
        )
    ax.set_xscale("log")
    ax.set_xlim(70, 1300)  # room up to the 1,003 bundled training questions
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("training questions")
    ax.set_ylabel("F1 on the same dev questions")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=120)


if __name__ == "__main__":
    main()
