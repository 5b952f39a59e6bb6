"""Constrained decoding speed: generated tokens/s of the embedded model with xgrammar's token
mask (a JSON-schema ``response_format`` from DSPy's JSONAdapter) against free decoding, on the
same DSPy prompts (a Signature with ``Literal``, ``list[str]`` and ``bool`` outputs), and how
many replies parse.

Each prompt is evaluated once untimed; the timed runs then reuse its KV cache (one prompt token
re-evaluated), so their time is generation. Constrained and free runs alternate, each taking
the lead in turn.

    .venv/bin/python benchmarks/constrained.py --prompts 3 --repeats 2
"""

from __future__ import annotations

import argparse
import time
from importlib.metadata import version
from typing import Literal

import dspy
from _common import header, table
from dspy.adapters.json_adapter import _get_structured_outputs_response_format

from netcast.models import embedded
from netcast.models.grammar import Grammars
from netcast.models.llama import LlamaCppEngine


class ReviewFacts(dspy.Signature):
    """Classify the sentiment of a product review and list the product aspects it mentions."""

    review: str = dspy.InputField()
    sentiment: Literal["positive", "negative", "mixed"] = dspy.OutputField()
    aspects: list[str] = dspy.OutputField(desc="product aspects the review mentions")
    recommends: bool = dspy.OutputField(desc="does the reviewer recommend the product?")


REVIEWS = [
    "The battery lasts forever but the screen scratches easily. Still, I'd buy it again.",
    "Terrible. The hinge broke after a week and support never answered my emails.",
    "Great sound, comfortable fit and cheap. Highly recommended for commuters!",
    "Fast shipping, but the charger runs hot and the manual is useless.",
    "It does what it says. The app is clunky; the camera is excellent in low light.",
    "Returned it: the keyboard double-types and the trackpad is tiny.",
]


def run(lm: dspy.LM, review: str) -> tuple[float, int, bool]:
    """(seconds, generated tokens, reply parsed) of one DSPy call."""
    start = time.perf_counter()
    try:
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            prediction = dspy.Predict(ReviewFacts)(review=review)
        parsed = prediction.sentiment in ("positive", "negative", "mixed")
    except Exception:  # DSPy's AdapterParseError: the reply did not parse
        parsed = False
    seconds = time.perf_counter() - start
    return seconds, int(lm.history[-1]["usage"]["completion_tokens"]), parsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=3, help=f"at most {len(REVIEWS)}")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args()

    header("Constrained decoding (xgrammar token mask) vs free decoding, embedded model")
    engine = LlamaCppEngine(str(embedded.model_path()), n_ctx=4096, max_tokens=args.max_tokens)
    lm = dspy.LM(
        "netcast/embedded",
        engine=engine,
        cache=False,
        temperature=0.0,
        max_tokens=args.max_tokens,
        num_retries=0,
    )
    start = time.perf_counter()
    import xgrammar  # noqa: F401

    import_s = time.perf_counter() - start
    start = time.perf_counter()
    engine._grammars = Grammars.for_model(engine._model())  # timed here instead of on first use
    vocab_s = time.perf_counter() - start
    # the schema DSPy's JSONAdapter sends for the signature
    schema = _get_structured_outputs_response_format(ReviewFacts).model_json_schema()
    start = time.perf_counter()
    engine._grammars.compile(schema)
    compile_s = time.perf_counter() - start

    results: dict[bool, list[tuple[float, int, bool]]] = {True: [], False: []}
    for i, review in enumerate(REVIEWS[: args.prompts]):
        engine.constrained = False
        run(lm, review)  # puts the prompt in the KV cache
        for r in range(args.repeats):
            for constrained in (True, False) if (i + r) % 2 == 0 else (False, True):
                engine.constrained = constrained
                results[constrained].append(run(lm, review))

    rows, rates = [], {}
    for constrained in (True, False):
        runs = results[constrained]
        tokens = sum(n for _, n, _ in runs)
        rates[constrained] = tokens / sum(s for s, _, _ in runs)
        per_run = [n / s for s, n, _ in runs]
        rows.append(
            [
                "xgrammar mask" if constrained else "free",
                len(runs),
                tokens / len(runs),
                rates[constrained],
                f"{min(per_run):.1f}-{max(per_run):.1f}",
                f"{sum(p for _, _, p in runs)}/{len(runs)}",
            ]
        )
    table(
        ["decoding", "runs", "tokens/run", "generated tok/s", "per-run tok/s", "replies parsed"],
        rows,
    )
    print(f"constrained/free generated tok/s: {rates[True] / rates[False]:.2f}x\n")
    table(
        ["one-time cost", "seconds"],
        [
            [f"import xgrammar {version('xgrammar')} (torch, transformers)", import_s],
            ["vocabulary -> xgrammar tokenizer info (once per model)", vocab_s],
            ["the signature's JSON schema compiled (once per schema)", compile_s],
        ],
    )
    print(
        f"{args.prompts} review prompts x {args.repeats} repeats, temperature 0, "
        f"max_tokens {args.max_tokens}; DSPy JSONAdapter, response cache off."
    )
    engine.close()


if __name__ == "__main__":
    main()
