"""Fishing for Answers (Lin et al.), §4.3-4.4: Tables 4 and 5 and Fig. 5 of the iterative
strategy, on the bundled HotpotQA questions: Basic RAG (top-5), Basic Agentic (multi-turn),
+ Fallback Search, + Chunk Delete, and the combined strategy (§4.4: the fallback search's top-5
replaced by the token-constrained Top-K_max selection) with and without chunk delete.

What each table measures (the paper's definitions):

- Table 4 (§4.3.1, ablation): the LLM-judge score, 0-100, by difficulty level and on average
  (§4.1: "an LLM-as-a-judge evaluation framework to assess answer quality across multiple
  dimensions including factual accuracy, completeness, and relevance ... normalized to a 0-100
  scale"): ``ScoreAnswer`` (netcast.signatures.judge) asked of ``--judge-model``, a model that
  is not the one under test (refused if equal to ``--model`` unless ``--allow-same-judge``).
  Levels: HotpotQA's ``level`` field where the records have one (the paper's L1-L4 are its own
  benchmark's; the dev sample is all hard, ``--split train`` has easy, medium and hard).
- Table 5 (§4.3.2, different LLMs): the judge score with "the average retrieval times executed
  as the subscript", by level, for Basic RAG and the full agentic strategy with the ``--model``
  given (run once per model). A retrieval is one retrieval round: Basic RAG's one search
  (1.00), or an agent turn that searched (its fallback search for the original question in the
  same round is not a second retrieval; the combined strategy's Top-K_max first round is its
  first retrieval).
- §4.4 and Fig. 5 ("Performance comparison of combined strategies with different
  configurations", "testing various context budgets to maximize golden chunk recall in the
  first retrieval round"): the combined strategy with and without chunk delete at the default
  budget (a quarter of the context window) and at each ``--budgets`` value: judge score, EM,
  gold-document recall, retrievals and chunks deleted per question.

EM / F1 (SQuAD), retrieval recall of the gold documents and cost per question are printed
beside every table. ``--aux-model`` is accepted and ignored (no auxiliary model in this paper).

    .venv/bin/python benchmarks/iterative_tables.py --questions 10
    .venv/bin/python benchmarks/iterative_tables.py --questions 10 --budgets 512,1024,2048
"""

from __future__ import annotations

import sys
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).parent))

from _common import (
    dev_questions,
    header,
    judge_setup,
    model_label,
    model_notes,
    parser,
    record_field,
    setup,
    table,
)
from _tables import (
    cell,
    judge_rows,
    level_groups,
    level_note,
    mean_of,
    quality_cost_table,
    run_configs,
    unjudged,
)

from netcast.models import context_window
from netcast.programs import BasicRAG, Combined, Iterative
from netcast.programs.shared.budget import default_token_budget

DATASET = "hotpotqa-sample"


def retrievals(row: dict) -> int:
    """Retrieval rounds of one question: the agent's turns that searched, or (a program that
    records no turns, e.g. Basic RAG) its searches."""
    turns = row["trace"].get("turns") or []
    if turns:
        return sum(t.get("action") == "search" for t in turns)
    return len(row["trace"].get("searches") or [])


def deleted(row: dict) -> int:
    return sum(len(t.get("deleted") or []) for t in row["trace"].get("turns") or [])


def agent_columns(result) -> list[object]:
    rows = result.rows
    if not rows:
        return ["-", "-", "-"]
    return [
        mean(retrievals(r) for r in rows),
        mean(len(r["trace"].get("turns") or []) for r in rows),
        mean(deleted(r) for r in rows),
    ]


agent_columns.columns = ["retrievals/q", "turns/q", "chunks deleted/q"]


def budgets_of(text: str | None) -> list[int]:
    if not text:
        return []
    values = [int(v) for v in text.split(",") if v.strip()]
    if any(v <= 0 for v in values):
        raise SystemExit(f"--budgets {text}: budgets are positive token counts")
    return values


def main(argv: list[str] | None = None) -> None:
    arguments = parser(
        __doc__,
        questions=10,
        judge="the LLM judge of the 0-100 score; the paper: SenseChat-5",
    )
    arguments.add_argument(
        "--split", default="dev", choices=("dev", "train"), help="questions (default: dev)"
    )
    arguments.add_argument(
        "--budgets",
        default=None,
        help="comma-separated token budgets for the combined strategy's Top-K_max first round "
        "(Fig. 5); default: only the default budget",
    )
    args = arguments.parse_args(argv)
    budgets = budgets_of(args.budgets)
    lm = setup(args)
    judge = judge_setup(args)
    data, r = dev_questions(DATASET, args.questions, lm, split=args.split)
    default_budget = default_token_budget(context_window(lm))
    configs = [
        ("Basic RAG (top-5)", BasicRAG(r, lm=lm, top_k=5)),
        ("Basic Agentic (multi-turn)", Iterative(r, lm=lm, fallback=False, delete=False)),
        ("+ Fallback Search", Iterative(r, lm=lm, fallback=True, delete=False)),
        ("+ Chunk Delete", Iterative(r, lm=lm, fallback=True, delete=True)),
        ("Combined (Top-K_max fallback), no delete", Combined(r, lm=lm, delete=False)),
        ("Combined (Top-K_max fallback), with delete", Combined(r, lm=lm, delete=True)),
    ]
    for budget in budgets:
        for delete in (False, True):
            label = f"Combined, budget {budget}, {'with' if delete else 'no'} delete"
            configs.append((label, Combined(r, lm=lm, delete=delete, token_budget=budget)))
    name = "iterative" if args.split == "dev" else f"iterative-{args.split}"
    results = run_configs(name, configs, data.examples, lm)
    scores = judge_rows(results, data.examples, judge, "score")
    levels = record_field(DATASET, "level")
    rows0 = results[0][1].rows
    groups = level_groups(rows0, levels)
    level_cols = [f"{lv} (n={len(ix)})" for lv, ix in groups.items()]

    header(
        f"Iterative agentic retrieval (Fishing for Answers §4.3-4.4): {len(rows0)} HotpotQA "
        f"{args.split} questions, {model_label(lm)}, BM25, k=5, max 5 turns, combined budget "
        f"{default_budget} tokens by default",
        [*model_notes(args), level_note(DATASET, args.split, levels, rows0)],
    )
    if scores:
        print(f"judge replies that could not be read (left out of the means): {unjudged(scores)}\n")
    else:
        print("no judge (--judge-model none): the judge columns show -\n")

    def by_level(label: str, result, subscript: bool = False) -> list[str]:
        judged = scores.get(label)
        mine = level_groups(result.rows, levels)  # a config's rows (a failed question is absent)
        cells = []
        for lv in groups:
            ix = mine.get(lv, [])
            value = cell(mean_of([judged[i] for i in ix])) if judged else "-"
            if subscript:
                value += f" ({mean(retrievals(result.rows[i]) for i in ix):.2f})" if ix else ""
            cells.append(value)
        return cells

    print("### Table 4: LLM-judge score (0-100) by difficulty level, iterative ablation\n")
    table(
        ["method", *[f"judge {c}" for c in level_cols], "EM", "F1"],
        [
            [label, *by_level(label, result), result.aggregate["em"], result.aggregate["f1"]]
            for label, result in results[:4]
        ],
    )

    print(
        f"### Table 5: judge score (average retrievals) by level, {model_label(lm)}\n\n"
        "Basic RAG retrieves once (1.00); an agent counts one retrieval per turn that searched.\n"
    )
    table(
        ["method", *level_cols],
        [
            [label, *by_level(label, result, subscript=True)]
            for label, result in (results[0], results[3])
        ],
    )

    print("### §4.4 and Fig. 5: combined strategy by context budget\n")
    rows = []
    combined = [(lab, res) for lab, res in results if lab.startswith("Combined")]
    for label, result in [results[3], *combined]:
        a = result.aggregate
        program = dict(configs)[label]
        budget = (
            program.knobs.get("token_budget") or default_budget
            if label.startswith("Combined")
            else "-"
        )
        judged = scores.get(label)
        rows.append(
            [
                label,
                budget,
                cell(mean_of(judged)) if judged else "-",
                a["em"],
                a["recall"],
                *agent_columns(result),
            ]
        )
    table(
        [
            "configuration",
            "first-round budget (tokens)",
            "judge (Avg)",
            "EM",
            "gold recall",
            *agent_columns.columns,
        ],
        rows,
    )

    print("### Quality and cost (all questions)\n")
    quality_cost_table(results, agent_columns)


if __name__ == "__main__":
    main()
