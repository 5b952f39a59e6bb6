"""Fishing for Answers, Tables 1 and 2, on the bundled HotpotQA dev questions with the embedded
model: Basic RAG (top-5), token-constrained Top-K_max, + chunk filter, + chunk cropping,
+ filter & cropping; and the chunk retention after each refinement stage.

    .venv/bin/python benchmarks/one_shot_tables.py --questions 20
"""

from __future__ import annotations

import sys
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).parent))

from _common import dev_questions, header, model_label, parser, setup, table
from _tables import quality_cost_table, run_configs

from netcast.programs import BasicRAG, OneShot


def stage_values(result, stage, key):
    return [s[key] for r in result.rows for s in r["trace"]["stages"] if s["stage"] == stage]


def main() -> None:
    args = parser(__doc__, questions=20).parse_args()
    lm = setup(args)
    data, retriever = dev_questions("hotpotqa-sample", args.questions, lm)
    top_k_max = OneShot(retriever, lm=lm)
    configs = [
        ("Basic RAG (top-5)", BasicRAG(retriever, lm=lm, top_k=5)),
        ("Top-K_max", top_k_max),
        ("+ chunk filter", OneShot(retriever, lm=lm, filter=True)),
        ("+ chunk cropping", OneShot(retriever, lm=lm, crop=True)),
        ("+ filter & cropping", OneShot(retriever, lm=lm, filter=True, crop=True)),
    ]
    results = run_configs("one_shot", configs, data.examples, lm)

    header(
        f"One-SHOT, Table 1: {args.questions} HotpotQA dev questions, {model_label(lm)}, "
        f"BM25, token budget {top_k_max.budget()} (a quarter of the context window, at most "
        "32k), pool 50, exact knapsack"
    )
    quality_cost_table(results)

    rows = []
    for label, result in results[1:]:
        kept = stage_values(result, "filter", "kept")
        pooled = stage_values(result, "filter", "candidates")
        added = [len(a) for a in stage_values(result, "filter", "added")]
        before = stage_values(result, "crop", "tokens_before")
        after = stage_values(result, "crop", "tokens_after")
        rejected = stage_values(result, "crop", "rejected")
        cropped = stage_values(result, "crop", "cropped")
        selected = stage_values(result, "select", "selected")
        rows.append(
            [
                label,
                f"{sum(kept) / sum(pooled):.3f}" if pooled else "-",
                f"{mean(added):.2f}" if added else "-",
                f"{sum(after) / sum(before):.3f}" if before else "-",
                f"{sum(cropped)}/{sum(rejected)}" if before else "-",
                mean(selected),
            ]
        )
    print("### Table 2: retention after each refinement stage\n")
    table(
        [
            "strategy",
            "filter: chunks kept / pool",
            "filter: chunks added/q",
            "crop: tokens kept / tokens before",
            "crops accepted / rejected (not verbatim)",
            "chunks in context/q",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
