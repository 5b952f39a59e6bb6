"""IterKey analyses on the bundled HotpotQA dev questions with the embedded model: RAG (BM25)
and RAG (dense) rows (Table 2), accuracy per iteration (Table 5), new keywords and new
documents per iteration (Tables 3-4), average iterations (Table 13), and Base / VerifiedTrue /
VerifiedAll (Table 9).

    .venv/bin/python benchmarks/iterkey_tables.py --questions 5
"""

from __future__ import annotations

import sys
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).parent))

from _common import dev_questions, header, model_label, parser, setup, table
from _tables import quality_cost_table, run_configs

from netcast.models import token_counter
from netcast.optimize.metrics import exact_match, f1_score
from netcast.programs import BasicRAG, IterKey
from netcast.session import open_retriever


def per_iteration(result, max_iters: int):
    """EM/F1 if each question had stopped at iteration i (its last answer up to i)."""
    rows = []
    for i in range(1, max_iters + 1):
        em, f1 = [], []
        for r in result.rows:
            turns = r["trace"]["turns"]
            answer = turns[min(i, len(turns)) - 1]["answer"]
            em.append(exact_match(answer, r["answers"]))
            f1.append(f1_score(answer, r["answers"]))
        new_kw = [
            len(r["trace"]["turns"][i - 1]["new_keywords"])
            for r in result.rows
            if len(r["trace"]["turns"]) >= i
        ]
        new_docs = [
            len(r["trace"]["turns"][i - 1]["new_docs"])
            for r in result.rows
            if len(r["trace"]["turns"]) >= i
        ]
        rows.append(
            [
                i,
                mean(em),
                mean(f1),
                len(new_kw),
                mean(new_kw) if new_kw else "-",
                mean(new_docs) if new_docs else "-",
            ]
        )
    return rows


def verified(result):
    rows = result.rows
    base = mean(
        r["scores"]["em"]
        if len(r["trace"]["turns"]) == 1
        else exact_match(r["trace"]["turns"][0]["answer"], r["answers"])
        for r in rows
    )
    true_rows = [r for r in rows if r["trace"]["turns"][-1]["valid"]]
    return [
        base,
        mean(r["scores"]["em"] for r in true_rows) if true_rows else "-",
        len(true_rows),
        mean(r["scores"]["em"] for r in rows),
        mean(len(r["trace"]["turns"]) for r in rows),
    ]


def main() -> None:
    args = parser(__doc__, questions=5).parse_args()
    lm = setup(args)
    data, bm25 = dev_questions("hotpotqa-sample", args.questions, lm)
    dense = open_retriever(data, kind="dense", counter=token_counter(lm))
    configs = [
        ("RAG (BM25, top-3)", BasicRAG(bm25, lm=lm, top_k=3)),
        ("RAG (dense, top-3)", BasicRAG(dense, lm=lm, top_k=3)),
        ("IterKey (BM25, text validation)", IterKey(bm25, lm=lm)),
        (
            "IterKey (BM25, forced decoding, threshold 0.3)",
            IterKey(bm25, lm=lm, validation="logprobs", threshold=0.3),
        ),
    ]
    results = run_configs("iterkey", configs, data.examples, lm)
    header(
        f"IterKey: {args.questions} HotpotQA dev questions, {model_label(lm)}, k=3, "
        "max 5 iterations"
    )
    quality_cost_table(results)
    for label, result in results[2:]:
        print(f"### {label}: per iteration (Tables 3-5)\n")
        table(
            [
                "iteration",
                "EM if stopped here",
                "F1 if stopped here",
                "questions still running",
                "new keywords",
                "new documents",
            ],
            per_iteration(result, 5),
        )
    print("### Base / VerifiedTrue / VerifiedAll (Table 9) and average iterations (Table 13)\n")
    table(
        [
            "IterKey",
            "Base EM (1st answer)",
            "VerifiedTrue EM",
            "validated questions",
            "VerifiedAll EM (final)",
            "avg iterations",
        ],
        [[label, *verified(result)] for label, result in results[2:]],
    )


if __name__ == "__main__":
    main()
