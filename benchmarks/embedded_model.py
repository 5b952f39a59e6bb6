"""Embedded model speed: prompt and generation tokens/s, seconds per basic question, and
whether llama.cpp's KV-cache prefix reuse speeds up repeated DSPy prompts.

    .venv/bin/python benchmarks/embedded_model.py --questions 10
"""

from __future__ import annotations

import statistics
import time

from _common import dev_questions, header, parser, table
from dspy import context

from netcast.models import EmbeddedLM, embedded, make_lm
from netcast.models.llama import LlamaCppEngine
from netcast.programs import BasicRAG


def raw_speeds(engine: LlamaCppEngine, passages: list[str]) -> tuple[float, float]:
    """(prompt tokens/s, generated tokens/s) measured on the llama object directly."""
    llm = engine._model()
    prompt = "\n\n".join(passages)
    n_prompt = len(llm.tokenize(prompt.encode()))
    llm.reset()
    start = time.perf_counter()
    llm.create_completion(prompt, max_tokens=1, temperature=0)
    prompt_rate = n_prompt / (time.perf_counter() - start)
    llm.reset()
    short = "Write a long story about a fisherman and the sea."
    start = time.perf_counter()
    out = llm.create_completion(short, max_tokens=128, temperature=0)
    n_gen = out["usage"]["completion_tokens"]
    return prompt_rate, n_gen / (time.perf_counter() - start)


def basic_seconds(lm: EmbeddedLM, questions, retriever) -> list[float]:
    program = BasicRAG(retriever, lm=lm)
    seconds = []
    with context(lm=lm):
        program(question="warm-up: who wrote Hamlet?")
        for ex in questions:
            start = time.perf_counter()
            program(question=ex.question)
            seconds.append(time.perf_counter() - start)
    lm.engine.close()
    return seconds


def main() -> None:
    args = parser(__doc__, questions=10, models=sorted(embedded.MODELS)).parse_args()
    # DSPy's response cache off, so every call runs; the engines load the model on first use
    lms = {mode: make_lm(args.model, cache=False, prefix_cache=mode) for mode in ("off", "last")}
    data, retriever = dev_questions("hotpotqa-sample", args.questions, lms["off"])

    header(f"Embedded model {args.model} ({embedded.spec(args.model).file_name}, llama.cpp)")
    import llama_cpp

    print(f"llama.cpp build: {llama_cpp.llama_print_system_info().decode().strip()}\n")
    engine = LlamaCppEngine(str(embedded.model_path(args.model)))
    passages = BasicRAG.passages(retriever.search(data.examples[0].question, 5))
    prompt_rate, gen_rate = raw_speeds(engine, passages)
    engine.close()
    table(
        ["measure", "value"],
        [["prompt tokens/s (~1k-token prompt)", prompt_rate], ["generated tokens/s", gen_rate]],
    )

    rows = []
    for mode, lm in lms.items():
        secs = basic_seconds(lm, data.examples, retriever)
        rows.append([mode, len(secs), statistics.mean(secs), statistics.median(secs), max(secs)])
    base = rows[0][2]
    table(
        ["prefix cache", "questions", "mean s/question", "median s", "max s", "vs off"],
        [[*r, f"{base / r[2]:.2f}x"] for r in rows],
    )
    print("basic = BM25 top-5 + one answer call; DSPy's response cache off, so every call runs.")


if __name__ == "__main__":
    main()
