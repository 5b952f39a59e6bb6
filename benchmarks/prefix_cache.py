"""Prompt reuse on 2 cores: llama.cpp KV-state reuse per predictor against reuse of the last
prompt only, for a multi-step program, and the cost of a compiled program's longer prompts.

Two measurements, each a ratio taken in one run with the two settings alternating question by
question (the machine is shared: absolute seconds drift, ratios much less):

1. ``iterative`` (it alternates the decide, chunk_delete and answer predictors) with
   ``prefix_cache="last"`` and ``"predictor"``: prompt tokens per second of wall time
   (prompt tokens as the engine reports them, reused or not, over the question's seconds)
   and seconds per question.
2. ``basic`` uncompiled and compiled (DSPy's LabeledFewShot, k demonstrations from the training
   split, as a compile would put in the prompt) with ``prefix_cache="predictor"``: seconds per
   question, compiled / uncompiled (the target is <= 1.3x).

    .venv/bin/python benchmarks/prefix_cache.py --questions 3
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import dspy
from _common import header, parser, table

from netcast.data import load_dataset
from netcast.models import make_lm, token_counter
from netcast.programs import BasicRAG, Iterative
from netcast.session import open_retriever


def timed(program, question: str) -> tuple[float, int]:
    """(seconds, prompt tokens) of one question."""
    start = time.perf_counter()
    prediction = program(question=question)
    return time.perf_counter() - start, prediction.trace["tokens_in"]


def alternate(programs: dict[str, tuple], questions: list[str]) -> dict[str, list]:
    """Run each question with every setting, the first setting rotating, under each LM."""
    runs: dict[str, list] = {name: [] for name in programs}
    names = list(programs)
    for i, question in enumerate(questions):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            program, lm = programs[name]
            with dspy.context(lm=lm):
                runs[name].append(timed(program, question))
    return runs


def main() -> None:
    args = parser(__doc__, questions=3).parse_args()
    data = load_dataset("hotpotqa-sample", "dev", limit=args.questions)
    train = load_dataset("hotpotqa-sample", "train", limit=8)
    lms = {
        mode: make_lm(args.model, cache=False, prefix_cache=mode) for mode in ("last", "predictor")
    }
    retriever = open_retriever(data, counter=token_counter(lms["last"]))
    questions = [ex.question for ex in data.examples]

    agents = alternate(
        {mode: (Iterative(retriever, lm=lm), lm) for mode, lm in lms.items()}, questions
    )
    lm = lms["predictor"]
    plain = BasicRAG(retriever, lm=lm)
    compiled = dspy.LabeledFewShot(k=2).compile(BasicRAG(retriever, lm=lm), trainset=train.examples)
    basics = alternate({"uncompiled": (plain, lm), "compiled": (compiled, lm)}, questions)

    header(f"Prompt reuse: {len(questions)} HotpotQA dev questions, {args.model} model")
    rows = []
    for mode, runs in agents.items():
        seconds = sum(s for s, _ in runs)
        tokens = sum(t for _, t in runs)
        rows.append(
            [
                f"iterative, prefix_cache={mode}",
                len(runs),
                seconds / len(runs),
                tokens / len(runs),
                tokens / seconds,
            ]
        )
    table(["program", "questions", "s/question", "prompt tokens/question", "prompt tokens/s"], rows)
    speedup = rows[1][4] / rows[0][4]
    print(f"predictor / last prompt tokens per second: {speedup:.2f}x\n")
    rows = []
    for name, runs in basics.items():
        rows.append(
            [
                f"basic {name}",
                len(runs),
                sum(s for s, _ in runs) / len(runs),
                sum(t for _, t in runs) / len(runs),
            ]
        )
    table(
        ["program (prefix_cache=predictor)", "questions", "s/question", "prompt tokens/question"],
        rows,
    )
    print(f"compiled / uncompiled seconds per question: {rows[1][2] / rows[0][2]:.2f}x\n")


if __name__ == "__main__":
    main()
