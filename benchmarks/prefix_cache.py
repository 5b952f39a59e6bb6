"""Prompt reuse on 2 cores: llama.cpp KV-state reuse per predictor (``prefix_cache=
"predictor"``) against reuse of the last prompt only (``"last"``) and no reuse (``"off"``), for
a multi-step program, and the cost of a compiled program's longer prompts.

Two measurements, each taken in one run with the settings alternating question by question (the
machine is shared: absolute seconds drift, ratios much less):

1. ``iterative`` (it alternates the decide, chunk_delete and answer predictors) under each
   mode: prompt tokens in the requests, prompt tokens llama.cpp actually evaluated (a reused
   prefix is not evaluated; llama.cpp's performance counters, deterministic), the seconds it
   spent evaluating them, and seconds per question (generation included). The target is
   >= 1.5x faster prompt processing with per-predictor reuse than without it.
2. ``basic`` uncompiled and compiled (DSPy's LabeledFewShot, k demonstrations from the training
   split, as a compile would put in the prompt) with ``prefix_cache="predictor"``: seconds per
   question, compiled / uncompiled (the target is <= 1.3x).

    .venv/bin/python benchmarks/prefix_cache.py --questions 3
"""

from __future__ import annotations

import time

import dspy
from _common import header, parser, table

from netcast.data import load_dataset
from netcast.models import make_lm, token_counter
from netcast.programs import BasicRAG, Iterative
from netcast.session import open_retriever

MODES = ("off", "last", "predictor")


def timed(program, question: str, lm) -> dict[str, float]:
    """One question: wall seconds, prompt tokens asked, prompt tokens evaluated and their s."""
    evaluated, eval_seconds = lm.engine.prompt_evaluation()
    start = time.perf_counter()
    prediction = program(question=question)
    seconds = time.perf_counter() - start
    evaluated_after, eval_seconds_after = lm.engine.prompt_evaluation()
    return {
        "seconds": seconds,
        "asked": prediction.trace["tokens_in"],
        "evaluated": evaluated_after - evaluated,
        "eval_seconds": eval_seconds_after - eval_seconds,
    }


def alternate(programs: dict[str, tuple], questions: list[str]) -> dict[str, list[dict]]:
    """Run each question with every setting, the first setting rotating, under each LM."""
    runs: dict[str, list] = {name: [] for name in programs}
    names = list(programs)
    for i, question in enumerate(questions):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            program, lm = programs[name]
            with dspy.context(lm=lm):
                runs[name].append(timed(program, question, lm))
    return runs


def per_question(runs: list[dict], key: str) -> float:
    return sum(r[key] for r in runs) / len(runs)


def main() -> None:
    args = parser(__doc__, questions=3).parse_args()
    data = load_dataset("hotpotqa-sample", "dev", limit=args.questions)
    train = load_dataset("hotpotqa-sample", "train", limit=8)
    lms = {mode: make_lm(args.model, cache=False, prefix_cache=mode) for mode in MODES}
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
    rows = [
        [
            f"iterative, prefix_cache={mode}",
            len(runs),
            per_question(runs, "asked"),
            per_question(runs, "evaluated"),
            per_question(runs, "eval_seconds"),
            per_question(runs, "seconds"),
        ]
        for mode, runs in agents.items()
    ]
    table(
        [
            "program",
            "questions",
            "prompt tokens asked/q",
            "prompt tokens evaluated/q",
            "prompt eval s/q",
            "s/q (all)",
        ],
        rows,
    )
    by_mode = {mode: row for mode, row in zip(MODES, rows, strict=True)}
    for base in ("off", "last"):
        tokens = by_mode[base][3] / max(by_mode["predictor"][3], 1)
        seconds = by_mode[base][4] / max(by_mode["predictor"][4], 1e-9)
        print(
            f"{base} / predictor: prompt tokens evaluated {tokens:.2f}x, "
            f"prompt eval seconds {seconds:.2f}x"
        )
    print()
    rows = [
        [
            f"basic {name}",
            len(runs),
            per_question(runs, "seconds"),
            per_question(runs, "asked"),
            per_question(runs, "evaluated"),
        ]
        for name, runs in basics.items()
    ]
    table(
        [
            "program (prefix_cache=predictor)",
            "questions",
            "s/question",
            "prompt tokens asked/q",
            "prompt tokens evaluated/q",
        ],
        rows,
    )
    print(f"compiled / uncompiled seconds per question: {rows[1][2] / rows[0][2]:.2f}x\n")


if __name__ == "__main__":
    main()
