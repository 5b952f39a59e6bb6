"""Fishing for Answers, Appendix B (retrieval laziness): give the agent a first context that
holds only part of the gold evidence (one of the question's supporting paragraphs), padded with
irrelevant chunks to a fixed length, and measure how often its first decision is a follow-up
search. Embedded model, bundled HotpotQA dev questions; lengths scaled to its n_ctx.

    .venv/bin/python benchmarks/laziness.py --questions 15 --lengths 1000,2000,3000,4000
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import dev_questions, header, model_label, parser, setup, table
from dspy import context

from netcast.models import context_window
from netcast.programs import Iterative
from netcast.programs.iterative.program import WorkingContext


def first_context(example, corpus, length: int, rng: random.Random) -> WorkingContext:
    gold = [c for c in corpus if c.doc_id in set(example.gold_ids)]
    gold_ids = {c.doc_id for c in gold}
    context = WorkingContext()
    context.add(gold[0])  # part of the evidence
    others = [c for c in corpus.chunks if c.doc_id not in gold_ids]
    fillers = iter(rng.sample(others, 200))
    while context.tokens() < length:
        context.add(next(fillers))
    return context


def main() -> None:
    arguments = parser(__doc__, questions=15)
    arguments.add_argument("--lengths", default="1000,2000,3000,4000")
    args = arguments.parse_args()
    lm = setup(args)
    data, retriever = dev_questions("hotpotqa-sample", args.questions, lm)
    program = Iterative(retriever, lm=lm, fallback=False, delete=False)
    lengths = [int(x) for x in args.lengths.split(",")]
    rows = []
    for length in lengths:
        rng = random.Random(length)
        actions = []
        for ex in data.examples:
            working = first_context(ex, retriever.corpus, length, rng)
            with context(lm=lm):
                decision = program.next_action(ex.question, working, [])
            actions.append(decision["action"])
        n = len(actions)
        rows.append(
            [
                length,
                n,
                actions.count("search") / n,
                actions.count("answer") / n,
                (n - actions.count("search") - actions.count("answer")) / n,
            ]
        )
        print(f"length {length}: {actions}", flush=True)
    header(
        f"Retrieval laziness (Appendix B): {args.questions} HotpotQA dev questions, "
        f"{model_label(lm)} (context window {context_window(lm)}), first context = 1 of 2 gold "
        "paragraphs + irrelevant chunks"
    )
    table(
        ["first-context tokens", "questions", "P(follow-up search)", "P(answer)", "P(unreadable)"],
        rows,
    )


if __name__ == "__main__":
    main()
