"""IterKey (Hayashi et al.), Tables 2, 3-5, 9, 11 and 13 (``iterkey``): accuracy and cost; the
share of each question's searches with a gold answer in the top K documents (retrieved again,
no model call); EM if every question had stopped by iteration i; Table 9's Base, VerifiedTrue
and VerifiedAll EM from a configuration with ``stop_when_valid = false``; and a
configuration's per-step models (``step_models``: Tables 7-8) against the same IterKey.
Table 12 (latency per step) is measured live and has no rows to rebuild from: the seconds a
question are in the accuracy and cost table."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import mean
from typing import Any

from netcast.errors import InputError
from netcast.render import markdown_table
from netcast.specs.papers.common import Ablation, Run, quality_cost


def per_iteration(run: Run, max_iters: int = 5) -> list[list[object]]:
    """EM and F1 if each question had stopped at iteration i (its last answer up to i), the
    questions still running, and their new keywords and documents."""
    from netcast.evaluation.metrics import exact_match, f1_score

    rows = []
    for i in range(1, max_iters + 1):
        em, f1 = [], []
        for r in run.rows:
            turns = r["trace"]["turns"]
            answer = turns[min(i, len(turns)) - 1]["answer"]
            em.append(exact_match(answer, r["answers"]))
            f1.append(f1_score(answer, r["answers"]))
        running = [r["trace"]["turns"][i - 1] for r in run.rows if len(r["trace"]["turns"]) >= i]
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


def verification(rows: Sequence[dict]) -> dict[str, float]:
    """Table 9 from rows of a run with ``stop_when_valid=False`` (every iteration in the trace):
    the first iteration's EM, Base (the answer IterKey returns), VerifiedTrue (any iteration the
    validation judged True holds a right answer; Base where none was True), VerifiedAll (any
    iteration's answer is right), and the iterations to the first True."""
    from netcast.evaluation.metrics import exact_match

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


def recall_at(rows: Sequence[dict], retriever: Any, ks: Sequence[int]) -> tuple[list[float], float]:
    """(Top-K answer recall for each K, share of the retrieved documents with an answer),
    averaged over each question's searches, then over questions: each saved query is searched
    again for the top max(K) (no model call)."""
    from netcast.corpus import format_passage
    from netcast.evaluation.metrics import documents_with_answer, top_k_answer_recall

    corpus = retriever.corpus
    at_k: list[list[float]] = [[] for _ in ks]
    share: list[float] = []
    for r in rows:
        found = r["trace"].get("searches") or []
        if not found:
            continue
        per_k: list[list[float]] = [[] for _ in ks]
        docs: list[float] = []
        for s in found:
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


def iterkey_tables(ab: Ablation) -> list[str]:
    from netcast.data import load_dataset
    from netcast.session import open_retriever

    spec = ab.spec.file
    ks = sorted({int(k) for k in ab.options["top_k"]})
    if not ks or ks[0] < 1:
        raise InputError(f"{ab.spec.path}: field 'options.top_k': positive integers")
    lines = quality_cost(ab.runs, title="Table 2 / Table 6: accuracy and cost")
    data = load_dataset(spec.dataset, spec.split, spec.limit)
    opened: dict[str, Any] = {}
    rows = []
    for run in ab.runs:
        if not run.rows:
            continue
        if run.retriever not in opened:
            opened[run.retriever] = open_retriever(data, kind=run.retriever)
        curve, share = recall_at(run.rows, opened[run.retriever], ks)
        rows.append([run.label, *[f"{100 * v:.1f}" for v in curve], f"{100 * share:.1f}"])
    lines += ["## Fig. 2 / Table 11: retrieval recall (% of searches with an answer in Top-K)", ""]
    lines += markdown_table(
        ["method", *[f"Top{k} (%)" for k in ks], "retrieved docs with an answer (%)"], rows
    )
    iterkeys = [r for r in ab.runs if r.program == "iterkey" and r.rows]
    stopping = [r for r in iterkeys if r.knobs.get("stop_when_valid", True)]
    plain = [r for r in stopping if not r.step_models]
    per_step = [r for r in stopping if r.step_models]
    if per_step:
        rows = []
        for run in per_step:
            base = next(
                (b for b in plain if (b.retriever, b.knobs) == (run.retriever, run.knobs)), None
            )
            em, base_em = run.summary["em"], base.summary["em"] if base else None
            change = "-" if em is None or base_em is None else f"{em - base_em:+.3f}"
            rows.append(
                [run.label, ", ".join(f"{k}: {v}" for k, v in run.step_models.items()), em, change]
            )
        lines += ["## Tables 7-8: per-step models (EM against the same IterKey on one model)", ""]
        lines += markdown_table(["IterKey", "step models", "EM", "change"], rows)
    for run in stopping:
        lines += [f"## {run.label}: per iteration (Tables 3-5)", ""]
        lines += markdown_table(
            ["iteration", "EM if stopped by here", "F1 if stopped by here",
             "questions still running", "new keywords", "new documents"],
            per_iteration(run),
        )  # fmt: skip
    lines += ["## Table 13: average iterations", ""]
    lines += markdown_table(
        ["IterKey", "avg iterations"],
        [[r.label, mean(len(x["trace"]["turns"]) for x in r.rows)] for r in stopping],
    )
    for run in (r for r in iterkeys if not r.knobs.get("stop_when_valid", True)):
        v = verification(run.rows)
        lines += [f"## Table 9: validation over every iteration ({run.label})", ""]
        lines += markdown_table(
            ["1st iteration EM", "Base EM (first True)", "VerifiedTrue EM", "VerifiedAll EM",
             "miss True", "miss False", "iterations to the first True"],
            [[v["first"], v["base"], v["true"], v["all"], v["true"] - v["base"],
              v["all"] - v["true"], v["first_true"]]],
        )  # fmt: skip
    lines += [
        "Table 12 (latency per step) is measured live, not kept in the rows: the seconds a "
        "question are in the accuracy and cost table.",
        "",
    ]
    return lines
