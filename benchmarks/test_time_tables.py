"""Test-Time Strategies for Agentic RAG, Table 1, on the bundled HotpotQA dev questions with
the embedded model: the Search-R1-style baseline, + contextualization, + de-duplication,
+ hybrid; EM, LLM-judge match, searches and tokens per question.

    .venv/bin/python benchmarks/test_time_tables.py --questions 5
"""

from __future__ import annotations

import sys
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).parent))

from _common import dev_questions, header, model_label, parser, setup, table
from _tables import run_configs

from netcast.optimize.evaluate import judge_match
from netcast.programs import SearchR1


def main() -> None:
    args = parser(__doc__, questions=5).parse_args()
    lm = setup(args)
    data, r = dev_questions("hotpotqa-sample", args.questions, lm)
    configs = [
        ("Search-R1 baseline", SearchR1(r, lm=lm)),
        ("+ Cont", SearchR1(r, lm=lm, contextualize=True)),
        ("+ De-Dup", SearchR1(r, lm=lm, dedup=True)),
        ("+ Hybrid", SearchR1(r, lm=lm, dedup=True, contextualize=True)),
    ]
    results = run_configs("test_time", configs, data.examples, lm)
    by_id = {ex.id: ex for ex in data.examples}
    rows = []
    for label, result in results:
        judged = [judge_match(by_id[row["id"]], str(row["answer"]), lm) for row in result.rows]
        a = result.aggregate
        rows.append(
            [
                label,
                a["n"],
                a["em"],
                mean(judged),
                a["searches"],
                a["tokens_in"] + a["tokens_out"],
                a["lm_calls"],
                a["seconds"],
            ]
        )
    header(
        f"Search-R1 test-time modules, Table 1: {args.questions} HotpotQA dev questions, "
        f"{model_label(lm)} (also the judge), BM25, k=3, max 4 searches"
    )
    table(
        ["strategy", "n", "EM", "LLM match (judge)", "searches/q", "tokens/q", "LM calls/q", "s/q"],
        rows,
    )


if __name__ == "__main__":
    main()
