"""netcast's own overhead per basic question: the program (and a full evaluation) with a
zero-latency scripted LM and DSPy's cache off, against the bare BM25 call it wraps.

    .venv/bin/python benchmarks/overhead.py --questions 300
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import dev_questions, header, table
from dspy import LM, context

from netcast.evaluation import evaluate
from netcast.programs import BasicRAG
from netcast.testing import ScriptedEngine


def per_question_ms(fn, items) -> float:
    start = time.perf_counter()
    for item in items:
        fn(item)
    return (time.perf_counter() - start) * 1000 / len(items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=300)
    args = parser.parse_args()
    # chunk tokens counted by the embedded tokenizer, as in a real run with the embedded model
    data, retriever = dev_questions("hotpotqa-sample", args.questions, None)
    lm = LM(
        "scripted/instant",
        engine=ScriptedEngine(lambda p: {"answer": "x"}),
        cache=False,
        num_retries=0,
    )
    program = BasicRAG(retriever, lm=lm)
    questions = [ex.question for ex in data.examples]

    header(f"Framework overhead per basic question ({len(questions)} questions, BM25 top-5)")
    bare = per_question_ms(lambda q: retriever.search(q, 5), questions)
    with context(lm=lm):
        lm.history.clear()
        call = per_question_ms(lambda q: program(question=q), questions)
        lm.history.clear()
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            evaluate(program, data.examples, run_dir=Path(tmp) / "run", progress=False)
            full = (time.perf_counter() - start) * 1000 / len(questions)
    table(
        ["what", "ms/question", "overhead over bare retrieval ms"],
        [
            ["bare retriever.search(q, 5)", bare, 0.0],
            ["BasicRAG(q) with a zero-latency LM", call, call - bare],
            ["evaluate(): program + metrics + run log", full, full - bare],
        ],
    )
    print("The overhead is DSPy's prompt formatting and parsing, netcast's trace, metrics and the")
    print("per-question JSONL append; one pass each, in one process.")


if __name__ == "__main__":
    main()
