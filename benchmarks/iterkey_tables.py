"""IterKey (Hayashi et al.) analyses on the bundled HotpotQA dev questions: RAG (BM25) and RAG
(dense) against IterKey (BM25) and IterKey (dense), and IterKey run through all iterations.

What each table measures (the paper's definitions):

- Table 2 / Table 6: Exact Match (§3: "an answer correct if it matches any reference after
  normalization (lower-casing, removing articles and punctuation, and whitespace
  consolidation)"), with F1, searches, LM calls, tokens and seconds per question beside.
- Fig. 2 / Table 11, retrieval recall at Top-K: §3 "the percentage of retrieved documents that
  contain at least one reference answer", plotted as Top-1..Top-5 curves ("Recall rates are
  averaged over five iterations"). Here: for each search a question made (RAG: its one search;
  IterKey: each iteration's question + keywords query), whether any of the top K documents
  that query retrieves contains a gold answer (SQuAD-normalized, whole words:
  ``netcast.evaluation.metrics.top_k_answer_recall``), averaged over the question's searches,
  then over questions, for each K of ``--top-k``. The documents are retrieved again for each K
  (no model calls). Beside it: the share of the k documents actually retrieved that contain an
  answer (per document).
- Tables 3-5 and 13 (the standard run, stopping at the first True): EM if every question had
  stopped by iteration i (its answer at min(i, its last iteration)), questions still running,
  new keywords and new documents per iteration, average iterations.
- Table 9 (the run with ``stop_when_valid=False``: §4.4 "we iterated up to five times,
  including after a 'True' judgment"). "'Base' uses the first 'True' in the Answer Verification
  step as the answer, then stops" (the answer IterKey returns: the first validated answer, or
  the last one when none validated); "'VerifiedTrue' checks if any iteration judged 'True'
  contains the correct answer" (a question with no True iteration counts as Base does);
  "'VerifiedAll' checks all iterations, both 'True' and 'False', for the correct answer" (EM
  of any iteration's answer). Also printed: the first iteration's EM (no validation at all),
  miss True (VerifiedTrue - Base) and miss False (VerifiedAll - VerifiedTrue).
- Table 12, latency per step (s per question): query expansion (keyword generation and
  regeneration), retrieval, answer generation, answer validation, measured in this run with a
  DSPy callback timing each step's LM calls (and the validation check, which in forced-decoding
  mode calls the model outside DSPy); retrieval seconds are read from the trace. Questions
  resumed from an earlier run are not timed; calls answered by DSPy's cache take ~0 s.
- Tables 7-8, per-step models: ``--keyword-model`` runs IterKey with keyword generation and
  regeneration on that model ("IterKey w/ HQ/LQ Keywords"); ``--validation-model`` with the
  validation step on that model ("IterKey w/ HQ/LQ Validation Model"); everything else on
  ``--model``.

``--judge-model`` and ``--aux-model`` are accepted and ignored (the paper scores with EM; its
auxiliary models are the per-step ones above).

    .venv/bin/python benchmarks/iterkey_tables.py --questions 5
    .venv/bin/python benchmarks/iterkey_tables.py --questions 5 --validation-model embedded-1.5b
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).parent))

from _common import dev_questions, header, make_model, model_label, model_notes, parser, setup
from _common import table as print_table
from _tables import quality_cost_table, run_configs
from dspy import context, settings
from dspy.utils.callback import BaseCallback

from netcast.corpus import format_passage
from netcast.evaluation.metrics import (
    documents_with_answer,
    exact_match,
    f1_score,
    top_k_answer_recall,
)
from netcast.models import token_counter
from netcast.programs import BasicRAG, IterKey
from netcast.session import open_retriever

# Table 12's steps, by the predictor that runs them
STEPS = ("query expansion", "retrieval", "answer generation", "answer validation")
STEP_OF = {
    "generate": "query expansion",
    "regenerate": "query expansion",
    "regenerate_from_document": "query expansion",
    "answer": "answer generation",
}
KEYWORD_STEPS = ("generate", "regenerate", "regenerate_from_document")
VALIDATION_STEPS = ("validate", "validate_next_token")


class StepTimer(BaseCallback):
    """Seconds per Table 12 step over the questions ``program`` answers while this callback is
    installed: each predictor's call (the LM call and reading its reply) is timed from DSPy's
    module start to its end; IterKey's validation is timed around its ``check`` (forced
    decoding calls the model outside DSPy)."""

    def __init__(self, program) -> None:
        self.program = program
        self.steps = {
            id(p): name.removesuffix(".predict") for name, p in program.named_predictors()
        }
        self.seconds: dict[str, float] = defaultdict(float)
        self.questions: set[str] = set()
        self._open: dict[str, tuple[str, float]] = {}
        if hasattr(program, "check"):
            inner = program.check

            def check(*args, **kwargs):
                start = time.perf_counter()
                try:
                    return inner(*args, **kwargs)
                finally:
                    self.seconds["answer validation"] += time.perf_counter() - start

            program.check = check

    def on_module_start(self, call_id, instance, inputs) -> None:
        if instance is self.program:  # a question it answers (not one resumed from disk)
            given = {**(inputs.get("kwargs") or {}), **inputs}
            self.questions.add(str(given.get("question")))
        step = STEP_OF.get(self.steps.get(id(instance), ""))
        if step:
            self._open[call_id] = (step, time.perf_counter())

    def on_module_end(self, call_id, outputs, exception=None) -> None:
        started = self._open.pop(call_id, None)
        if started:
            self.seconds[started[0]] += time.perf_counter() - started[1]


def per_iteration(result, max_iters: int):
    """EM/F1 if each question had stopped at iteration i (its last answer up to i)."""
    rows = []
    for i in range(1, max_iters + 1):
        em, f1 = [], []
        for r in result.rows:
            turns = r["trace"]["turns"]
            answer = turns[min(i, len(turns)) - 1]["answer"]
            em.append(exact_match(answer, r["answers"]))
            f1.append(f1_score(answer, r["answers"]))
        running = [r["trace"]["turns"][i - 1] for r in result.rows if len(r["trace"]["turns"]) >= i]
        rows.append(
            [
                i,
                mean(em),
                mean(f1),
                len(running),
                mean(len(t["new_keywords"]) for t in running) if running else "-",
                mean(len(t["new_docs"]) for t in running) if running else "-",
            ]
        )
    return rows


def verification(rows: list[dict]) -> dict[str, float]:
    """Table 9 from a run with ``stop_when_valid=False`` (every iteration in the trace)."""
    first, base, true, every, first_true = [], [], [], [], []
    for r in rows:
        turns = r["trace"]["turns"]
        right = [bool(exact_match(t["answer"], r["answers"])) for t in turns]
        judged_true = [ok for ok, t in zip(right, turns, strict=True) if t["valid"]]
        first.append(float(right[0]))
        base.append(r["scores"]["em"])
        true.append(float(any(judged_true)) if judged_true else r["scores"]["em"])
        every.append(float(any(right)))
        first_true.append(next((i for i, t in enumerate(turns, 1) if t["valid"]), len(turns)))
    return {
        "first": mean(first),
        "base": mean(base),
        "true": mean(true),
        "all": mean(every),
        "iterations": mean(len(r["trace"]["turns"]) for r in rows),
        "first_true": mean(first_true),
    }


def recall_at(rows: list[dict], retriever, ks: list[int]) -> tuple[list[float], float]:
    """(Top-K answer recall for each K, share of the retrieved documents with an answer),
    averaged over each question's searches, then over questions."""
    corpus = retriever.corpus
    at_k: list[list[float]] = [[] for _ in ks]
    share: list[float] = []
    for r in rows:
        searches = r["trace"].get("searches") or []
        if not searches:
            continue
        per_k: list[list[float]] = [[] for _ in ks]
        docs: list[float] = []
        for s in searches:
            ranked = retriever.search(s["query"], max(ks))
            passages = [format_passage(h.chunk.title, h.chunk.text) for h in ranked]
            for j, k in enumerate(ks):
                per_k[j].append(top_k_answer_recall(passages, r["answers"], k))
            got = [format_passage(corpus[i].title, corpus[i].text) for i in s["ids"]]
            if got:
                docs.append(mean(documents_with_answer(got, r["answers"])))
        for j in range(len(ks)):
            at_k[j].append(mean(per_k[j]))
        if docs:
            share.append(mean(docs))
    return [mean(v) if v else float("nan") for v in at_k], mean(share) if share else float("nan")


def use_lm(program, steps: tuple[str, ...], lm) -> None:
    """Run ``program``'s ``steps`` (predictor names) on ``lm`` (DSPy's per-predictor LM)."""
    for name, predictor in program.named_predictors():
        if name.split(".")[0] in steps:
            predictor.lm = lm


def main(argv: list[str] | None = None) -> None:
    arguments = parser(__doc__, questions=5)
    arguments.add_argument(
        "--top-k", default="1,2,3,4,5", help="Top-K values of the recall curve (default: 1-5)"
    )
    arguments.add_argument(
        "--retrievers",
        default="bm25,dense",
        help="retrievers for RAG and IterKey rows (default: %(default)s)",
    )
    arguments.add_argument(
        "--validation",
        default=None,
        choices=("logprobs", "text"),
        help="IterKey's validation mode (default: the program's, forced decoding)",
    )
    arguments.add_argument(
        "--keyword-model", default=None, help="model for keyword generation (Table 7)"
    )
    arguments.add_argument(
        "--validation-model", default=None, help="model for answer validation (Table 8)"
    )
    args = arguments.parse_args(argv)
    ks = sorted({int(k) for k in args.top_k.split(",") if k.strip()})
    kinds = [k.strip() for k in args.retrievers.split(",") if k.strip()]
    if not ks or min(ks) < 1 or not kinds or set(kinds) - {"bm25", "dense"}:
        raise SystemExit("--top-k takes positive integers, --retrievers bm25 and/or dense")
    lm = setup(args)
    data, bm25 = dev_questions("hotpotqa-sample", args.questions, lm)
    retrievers = {"bm25": bm25}
    if "dense" in kinds:
        retrievers["dense"] = open_retriever(data, kind="dense", counter=token_counter(lm))
    knobs = {"validation": args.validation} if args.validation else {}
    # a validation mode other than the default is in the label: its own run directory
    mode = f", {args.validation} validation" if args.validation else ""
    configs, searched_with = [], {}
    for kind in kinds:
        name = "BM25" if kind == "bm25" else "dense"
        configs.append((f"RAG ({name}, top-3)", BasicRAG(retrievers[kind], lm=lm, top_k=3)))
        configs.append((f"IterKey ({name}){mode}", IterKey(retrievers[kind], lm=lm, **knobs)))
        searched_with.update({label: retrievers[kind] for label, _ in configs[-2:]})
    every = f"IterKey (BM25){mode}, every iteration (Table 9)"
    configs.append((every, IterKey(bm25, lm=lm, stop_when_valid=False, **knobs)))
    searched_with[every] = bm25
    per_step = []
    for option, steps, what in (
        (args.keyword_model, KEYWORD_STEPS, "keywords"),
        (args.validation_model, VALIDATION_STEPS, "validation"),
    ):
        if option:
            program = IterKey(bm25, lm=lm, **knobs)
            use_lm(program, steps, make_model(option))
            label = f"IterKey (BM25){mode}, {what} by {option}"
            configs.append((label, program))
            searched_with[label] = bm25
            per_step.append(label)

    results, timers = [], {}
    for label, program in configs:
        timer = StepTimer(program)
        with context(callbacks=[*(settings.get("callbacks") or []), timer]):
            results += run_configs("iterkey", [(label, program)], data.examples, lm)
        timers[label] = timer

    header(
        f"IterKey: {len(data.examples)} HotpotQA dev questions, {model_label(lm)}, k=3, max 5 "
        f"iterations, validation: {args.validation or IterKey.knob_defaults()['validation']}",
        model_notes(args),
    )
    print("### Table 2 / Table 6: accuracy and cost\n")
    quality_cost_table(results)

    print("### Fig. 2 / Table 11: retrieval recall (% of questions with an answer in Top-K)\n")
    rows = []
    for label, result in results:
        curve, share = recall_at(result.rows, searched_with[label], ks)
        rows.append([label, *[f"{100 * v:.1f}" for v in curve], f"{100 * share:.1f}"])
    print_table(["method", *[f"Top{k} (%)" for k in ks], "retrieved docs with an answer (%)"], rows)

    if per_step:
        print("### Tables 7-8: per-step models (EM against IterKey on --model alone)\n")
        base = dict(results)[f"IterKey (BM25){mode}"].aggregate["em"]
        print_table(
            ["IterKey", "EM", "change"],
            [
                [label, dict(results)[label].aggregate["em"], _change(dict(results)[label], base)]
                for label in per_step
            ],
        )

    iterkeys = [
        (lab, res)
        for lab, res in results
        if lab.startswith("IterKey") and lab != every and res.rows
    ]
    for label, result in iterkeys:
        print(f"### {label}: per iteration (Tables 3-5)\n")
        print_table(
            [
                "iteration",
                "EM if stopped by here",
                "F1 if stopped by here",
                "questions still running",
                "new keywords",
                "new documents",
            ],
            per_iteration(result, 5),
        )
    print("### Table 13: average iterations\n")
    print_table(
        ["IterKey", "avg iterations"],
        [[lab, mean(len(r["trace"]["turns"]) for r in res.rows)] for lab, res in iterkeys],
    )

    full = dict(results)[every]
    print("### Table 9: validation over five iterations (the every-iteration run)\n")
    if not full.rows:
        print("no finished questions in the every-iteration run\n")
    else:
        table9(verification(full.rows))
    latency_table(results, timers, dict(configs))


def _change(result, base: float | None) -> str:
    em = result.aggregate["em"]
    return "-" if em is None or base is None else f"{em - base:+.3f}"


def table9(v: dict[str, float]) -> None:
    print_table(
        [
            "1st iteration EM",
            "Base EM (first True)",
            "VerifiedTrue EM",
            "VerifiedAll EM",
            "miss True",
            "miss False",
            "iterations to the first True",
        ],
        [
            [
                v["first"],
                v["base"],
                v["true"],
                v["all"],
                v["true"] - v["base"],
                v["all"] - v["true"],
                v["first_true"],
            ]
        ],
    )


def latency_table(results, timers, configs) -> None:
    print("### Table 12: latency per step (s per question, questions timed in this run)\n")
    rows = []
    for label, result in results:
        timer = timers[label]
        fresh = [r for r in result.rows if r["question"] in timer.questions]
        if not fresh:
            rows.append([label, 0, *["-"] * (len(STEPS) + 3)])
            continue
        n = len(fresh)
        retrieval = sum(s["seconds"] for r in fresh for s in r["trace"]["searches"]) / n
        per_step = {step: timer.seconds.get(step, 0.0) / n for step in STEPS}
        per_step["retrieval"] = retrieval
        cached = sum(r["trace"]["cached_calls"] for r in fresh) / n
        program = configs[label]
        has = {  # RAG has no query expansion or validation step (the paper's "-")
            "query expansion": hasattr(program, "generate"),
            "retrieval": True,
            "answer generation": True,
            "answer validation": hasattr(program, "check"),
        }
        rows.append(
            [
                label,
                n,
                *[per_step[step] if has[step] else "-" for step in STEPS],
                sum(per_step.values()),
                mean(r["trace"]["seconds"] for r in fresh),
                cached,
            ]
        )
    print_table(["method", "questions timed", *STEPS, "total", "wall s/q", "cached calls/q"], rows)


if __name__ == "__main__":
    main()
