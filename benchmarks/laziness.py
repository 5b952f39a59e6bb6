"""Fishing for Answers (Lin et al.), Appendix B, Table 6 (retrieval laziness): "We manually
injected redundant irrelevant chunks into the initial retrieval results to reach specific
context lengths while ensuring that the retrieved chunks contained only partial golden chunks
... We then measured the probability that the model would make a subsequent chunk_search call."

Here: the agent's first context holds one chunk of one of the question's supporting paragraphs
(part of the gold evidence), padded with randomly drawn chunks of non-supporting documents up
to each ``--lengths`` value (tokens, counted with the model's tokenizer); the agent (the
iterative strategy's decide step, no fallback or delete) is asked its next action once.
Columns: P(follow-up search) = share of questions whose decision is chunk_search (the paper's
"Follow-up Retrieval Probability"), P(answer), and P(unreadable) (the reply could not be read).
The paper's lengths are 3k-12k tokens for a 32B model; the defaults are scaled to the embedded
model's context window. The measure is the model's own decision: no judge. It keeps no
per-question rows (one decision per question and length, seeded padding: a rerun is served from
DSPy's cache).

    .venv/bin/python benchmarks/laziness.py --questions 15 --lengths 1000,2000,3000,4000
"""

from __future__ import annotations

import random

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
    for filler in rng.sample(others, len(others)):
        if context.tokens() >= length:
            break
        context.add(filler)
    return context


def main(argv: list[str] | None = None) -> None:
    arguments = parser(__doc__, questions=15)
    arguments.add_argument(
        "--lengths",
        default="1000,2000,3000,4000",
        help="first-context lengths in tokens (default: %(default)s)",
    )
    args = arguments.parse_args(argv)
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
            # the adapter the program reads this model's replies with (as in a full run)
            adapter = {"adapter": program.adapter} if program.adapter is not None else {}
            with context(lm=lm, **adapter):
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
        f"Retrieval laziness (Appendix B): {len(data.examples)} HotpotQA dev questions, "
        f"{model_label(lm)} (context window {context_window(lm)}), first context = 1 of 2 gold "
        "paragraphs + irrelevant chunks",
        [f"model under test: {args.model}"],
    )
    table(
        ["first-context tokens", "questions", "P(follow-up search)", "P(answer)", "P(unreadable)"],
        rows,
    )


if __name__ == "__main__":
    main()
