"""Compile `basic` with BootstrapFewShot on bundled training questions and score it on dev
questions before and after (embedded model); then a small Optuna study over basic's knobs and
the Pareto front (F1 vs tokens per question) it finds.

    .venv/bin/python benchmarks/compile_tune.py --train 20 --dev 50 --tune-dev 20 --trials 6
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import header, model_args, model_label, setup, table
from dspy import context

from netcast.data import load_dataset
from netcast.models import token_counter
from netcast.optimize import study as tuning
from netcast.optimize.workflow import compile_recipe, make_recipe
from netcast.session import open_retriever


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--train", type=int, default=20)
    parser.add_argument("--dev", type=int, default=50)
    parser.add_argument("--tune-dev", type=int, default=20)
    parser.add_argument("--trials", type=int, default=6)
    model_args(parser)
    args = parser.parse_args()
    lm = setup(args)
    with tempfile.TemporaryDirectory() as tmp:
        recipe = make_recipe(
            program="basic",
            knobs={},
            dataset="hotpotqa-sample",
            train_limit=args.train,
            dev_limit=args.dev,
            optimizer="bootstrap",
            model=args.model,
        )
        result = compile_recipe(recipe, Path(tmp) / "artifact", lm=lm, progress=False)

        train = load_dataset("hotpotqa-sample", "train", args.train)
        dev = load_dataset("hotpotqa-sample", "dev", args.tune_dev)
        study = tuning.open_study("bench", f"sqlite:///{tmp}/tune.db", ["f1", "cost"])
        with context(lm=lm):
            tuning.tune(
                study,
                args.trials,
                progress=False,
                program_name="basic",
                retriever=open_retriever(train, counter=token_counter(lm)),
                trainset=train.examples,
                devset=dev.examples,
                objectives=["f1", "cost"],
                lm=lm,
            )
        # read the study while its database still exists
        done = [t for t in study.trials if t.values is not None]
        front = {t.number for t in tuning.pareto_front(done)}
        knee = tuning.pick(study, "knee").number
    report(args, lm, result, done, front, knee)


def report(args, lm, result, done: list, front: set[int], knee: int) -> None:
    """The compile's before/after table, then the study's trials with its Pareto front."""
    header(
        f"Compile basic (BootstrapFewShot, {args.train} train questions; scored on "
        f"{args.dev} dev questions, {model_label(lm)})"
    )
    rows = []
    for name, agg in (("uncompiled", result.before), ("compiled", result.after)):
        rows.append(
            [
                name,
                agg["f1"],
                agg["em"],
                agg["lm_calls"],
                agg["tokens_in"],
                agg["tokens_out"],
                agg["seconds"],
            ]
        )
    table(["program", "F1", "EM", "LM calls/q", "tokens in/q", "tokens out/q", "s/q"], rows)
    print(f"compile wall time: {result.seconds:.0f} s\n")

    print(
        f"### netcast tune: {args.trials} trials, {args.tune_dev} dev questions, F1 vs "
        "tokens per question\n"
    )
    table(
        ["trial", "knobs", "F1", "tokens/q", "Pareto", "knee"],
        [
            [
                t.number,
                t.user_attrs["knobs"],
                t.values[0],
                t.values[1],
                "*" if t.number in front else "",
                "<-" if t.number == knee else "",
            ]
            for t in sorted(done, key=lambda t: t.number)
        ],
    )


if __name__ == "__main__":
    main()
