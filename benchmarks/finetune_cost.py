"""What a fine-tuned program cost: training (examples, seconds in all and per example, peak
memory beside the memory check's estimate, adapter size, the loss at the start and the end)
from a tuned artifact's recipe, and the tuned program's seconds and tokens a question against
an untuned row on the same questions, from two committed spec rows (no model is called).

    python benchmarks/finetune_cost.py benchmarks/results/artifacts/multihop-tuned-wide-0.5b \\
        --tuned benchmarks/results/decisive-wide-0.5b/hotpotqa-wide/multihop-tuned-wide-0.5b \\
        --untuned benchmarks/results/decisive-wide-0.5b/hotpotqa-wide/multihop-reasoning-false

Seconds are wall time on the machine that ran the rows (shared cores: compare the two rows'
ratio, measured in one run of the spec, not across tables); a question answered from DSPy's
cache is left out of both rows' seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from _common import header, table

from netcast.models.lora import artifact_adapters


def read_rows(folder: Path) -> dict[str, dict]:
    """A spec row's questions by id (its ``predictions.jsonl``)."""
    path = folder / "predictions.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {row["id"]: row for row in rows}


def estimate(tuned: dict) -> str:
    """What the memory check expected, with the longest example it was for (recorded since
    the estimate was stored; older artifacts lack it)."""
    if not tuned.get("memory_estimate"):
        return "not recorded"
    ratio = tuned["peak_memory"] / tuned["memory_estimate"]
    checkpointed = "; gradient checkpointing" if tuned.get("gradient_checkpointing") else ""
    return (
        f"{tuned['memory_estimate'] / 2**30:.1f} GiB (longest example "
        f"{tuned['longest_tokens']:,} tokens{checkpointed}; peak {ratio:.2f}x)"
    )


def training_rows(tuned: dict) -> list[list[object]]:
    """One adapter's training (a recipe's ``finetune`` entry, or one step's)."""
    examples = tuned["examples"]
    losses = tuned["loss_curve"]
    window = max(1, min(25, len(losses) // 4))
    count = examples["count"]
    traced = examples.get("trace_seconds")  # a model teacher's tracing (recorded since 2026-12)
    tracing = [["seconds tracing the teacher", f"{traced:,.0f}"]] if traced else []
    return [
        ["examples", f"{count} ({', '.join(f'{k} {v}' for k, v in examples['per_step'].items())})"],
        [
            "teacher, split, limit",
            f"{examples['teacher']}, {examples['split']}, {examples['limit']}",
        ],
        *tracing,
        ["training seconds", f"{tuned['seconds']:,.0f}"],
        ["seconds an example", f"{tuned['seconds'] / count:.1f}"],
        [
            "peak memory (the training's processes, highest)",
            f"{tuned['peak_memory'] / 2**30:.1f} GiB",
        ],
        ["memory check's estimate", estimate(tuned)],
        ["adapter", f"{tuned['adapter']['size'] / 2**20:.1f} MiB (rank {tuned['rank']})"],
        [
            f"loss, first and last {window} steps",
            f"{statistics.mean(losses[:window]):.3f} -> {statistics.mean(losses[-window:]):.3f}",
        ],
    ]


def inference_rows(tuned: dict[str, dict], untuned: dict[str, dict]) -> list[list[object]]:
    both = [
        q
        for q in tuned
        if q in untuned
        and not tuned[q]["scores"].get("cached_calls")
        and not untuned[q]["scores"].get("cached_calls")
    ]
    if not both:
        raise SystemExit("finetune_cost: no question both rows answered without DSPy's cache")

    def total(rows, field):
        return sum(rows[q]["scores"][field] for q in both)

    rows = []
    for field, what in (
        ("seconds", "seconds a question"),
        ("tokens_in", "prompt tokens a question"),
    ):
        a, b = total(tuned, field) / len(both), total(untuned, field) / len(both)
        rows.append([what, f"{a:,.1f}", f"{b:,.1f}", f"{a / b:.2f}x"])
    calls = total(tuned, "lm_calls") / len(both), total(untuned, "lm_calls") / len(both)
    rows.append(["model calls a question", f"{calls[0]:.2f}", f"{calls[1]:.2f}", "-"])
    rows.append(["questions", len(both), len(both), "-"])
    return rows


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("artifact", type=Path, help="a tuned artifact (its recipe.json)")
    args.add_argument("--tuned", type=Path, required=True, help="the tuned program's spec row")
    args.add_argument("--untuned", type=Path, required=True, help="the untuned row it runs beside")
    parsed = args.parse_args()
    recipe = json.loads((parsed.artifact / "recipe.json").read_text())
    if "finetune" not in recipe:
        raise SystemExit(f"finetune_cost: {parsed.artifact}/recipe.json holds no adapter")
    header("What a fine-tuned program cost", [f"artifact: {parsed.artifact}"])
    for step, entry in artifact_adapters(recipe["finetune"]).items():
        what = "training" if step is None else f"training {step}'s adapter"
        table([what, "value"], training_rows(entry))
    rows = inference_rows(read_rows(parsed.tuned), read_rows(parsed.untuned))
    table(["a question", parsed.tuned.name, parsed.untuned.name, "ratio"], rows)


if __name__ == "__main__":
    main()
