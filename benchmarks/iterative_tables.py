"""Fishing for Answers, Table 4 and §4.4, on the bundled HotpotQA dev questions with the
embedded model: Basic RAG (top-5), Basic Agentic, + Fallback Search, + Chunk Delete, and the
combined strategy with and without chunk delete.

    .venv/bin/python benchmarks/iterative_tables.py --questions 10
"""

from __future__ import annotations

import sys
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).parent))

from _common import dev_questions, header, model_label, parser, setup
from _tables import quality_cost_table, run_configs

from netcast.models import context_window
from netcast.programs import BasicRAG, Combined, Iterative
from netcast.programs.shared.budget import default_token_budget


def agent_columns(result):
    turns = [r["trace"]["turns"] for r in result.rows]
    retrievals = [sum(t["action"] == "search" for t in ts) for ts in turns]
    deletes = [sum(len(t.get("deleted", [])) for t in ts) for ts in turns]
    return [
        mean(retrievals) if turns and turns[0] is not None else 0,
        mean(len(ts) for ts in turns),
        mean(deletes),
    ]


agent_columns.columns = ["retrievals/q", "turns/q", "chunks deleted/q"]


def main() -> None:
    args = parser(__doc__, questions=10).parse_args()
    lm = setup(args)
    data, r = dev_questions("hotpotqa-sample", args.questions, lm)
    configs = [
        ("Basic RAG (top-5)", BasicRAG(r, lm=lm, top_k=5)),
        ("Basic Agentic", Iterative(r, lm=lm, fallback=False, delete=False)),
        ("+ Fallback Search", Iterative(r, lm=lm, fallback=True, delete=False)),
        ("+ Chunk Delete", Iterative(r, lm=lm, fallback=True, delete=True)),
        ("Combined (Top-K_max fallback), no delete", Combined(r, lm=lm, delete=False)),
        ("Combined (Top-K_max fallback), with delete", Combined(r, lm=lm, delete=True)),
    ]
    results = run_configs("iterative", configs, data.examples, lm)
    header(
        f"Iterative agentic retrieval, Table 4 and §4.4: {args.questions} HotpotQA dev "
        f"questions, {model_label(lm)}, BM25, k=5, max 5 turns, combined budget "
        f"{default_token_budget(context_window(lm))} tokens"
    )
    quality_cost_table(results, agent_columns)


if __name__ == "__main__":
    main()
