"""Knowledge-Aware Iterative Retrieval, Tables 1-2 / Figures 3-5, on bundled HotpotQA dev and
MuSiQue questions with the embedded model: one-step retrieval (naive RAG, BM25 top-10) against
1, 2 and 3 competitive agents: retrieval precision / recall / F1 against the supporting
paragraphs, answer F1, steps to convergence and cost per question.

    .venv/bin/python benchmarks/knowledge_tables.py --questions 3
"""

from __future__ import annotations

import sys
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).parent))

from _common import dev_questions, header, model_label, parser, setup, table
from _tables import run_configs

from netcast.programs import BasicRAG, KnowledgeAware


def steps(result) -> float | str:
    values = [
        s["steps"] for r in result.rows for s in r["trace"]["stages"] if s["stage"] == "result"
    ]
    return mean(values) if values else "-"


def main() -> None:
    args = parser(__doc__, questions=3).parse_args()
    lm = setup(args)
    for name in ("hotpotqa-sample", "musique-sample"):
        data, r = dev_questions(name, args.questions, lm)
        configs = [
            ("one-step retrieval (naive RAG, top-10)", BasicRAG(r, lm=lm, top_k=10)),
            ("1 agent", KnowledgeAware(r, lm=lm, n_agents=1)),
            ("2 agents (competitive)", KnowledgeAware(r, lm=lm, n_agents=2)),
            ("3 agents (competitive)", KnowledgeAware(r, lm=lm, n_agents=3)),
        ]
        results = run_configs(f"knowledge-{name}", configs, data.examples, lm)
        header(
            f"Knowledge-aware retrieval on {name}: {args.questions} dev questions, "
            f"{model_label(lm)}, BM25 top-10, max 4 steps"
        )
        rows = []
        for label, result in results:
            a = result.aggregate
            rows.append(
                [
                    label,
                    a["n"],
                    a["precision"],
                    a["recall"],
                    a["retrieval_f1"],
                    a["f1"],
                    steps(result),
                    a["lm_calls"],
                    a["tokens_in"] + a["tokens_out"],
                    a["seconds"],
                ]
            )
        table(
            [
                "retrieval",
                "n",
                "precision",
                "recall",
                "retrieval F1",
                "answer F1",
                "steps",
                "LM calls/q",
                "tokens/q",
                "s/q",
            ],
            rows,
        )


if __name__ == "__main__":
    main()
