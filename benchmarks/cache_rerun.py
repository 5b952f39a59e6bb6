"""An evaluation rerun served from DSPy's cache against the first run (embedded model, basic,
bundled HotpotQA dev questions). Both runs use a fresh netcast home, so the first run starts
with an empty cache; the rerun writes a new run directory, so nothing is skipped by resuming.

    .venv/bin/python benchmarks/cache_rerun.py --questions 10
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from _common import dev_questions, header, model_label, parser, setup, table
from dspy import context

from netcast import settings
from netcast.evaluation import evaluate
from netcast.programs import BasicRAG


def main() -> None:
    args = parser(__doc__, questions=10).parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["NETCAST_MODELS_DIR"] = str(settings.models_dir())
        os.environ["NETCAST_HOME"] = home  # DSPy's cache (set up by make_lm) starts empty

        lm = setup(args)
        data, retriever = dev_questions("hotpotqa-sample", args.questions, lm)
        program = BasicRAG(retriever, lm=lm)
        timings, results = [], []
        with context(lm=lm):
            program(question="warm-up: load the model")  # model load outside the timings
            for run in ("first", "rerun"):
                start = time.perf_counter()
                result = evaluate(program, data.examples, run_dir=Path(home) / run, progress=False)
                timings.append(time.perf_counter() - start)
                results.append(result.aggregate)
    header(
        f"Evaluation rerun from DSPy's cache ({args.questions} questions, basic, {model_label(lm)})"
    )
    table(
        ["run", "seconds", "LM calls/q", "of which cached/q", "F1"],
        [
            [name, t, r["lm_calls"], r["cached_calls"], r["f1"]]
            for name, t, r in zip(("first run", "rerun"), timings, results, strict=True)
        ],
    )
    same = results[0]["f1"] == results[1]["f1"]
    print(f"speed-up: {timings[0] / timings[1]:.0f}x; identical F1: {same}")


if __name__ == "__main__":
    main()
