"""Test-Time Strategies for More Efficient and Accurate Agentic RAG (Zhang et al.), Table 1 and
Fig. 2, on the bundled HotpotQA dev questions: the Search-R1-style baseline, + contextualization
(Cont, §3.1), + de-duplication (De-Dup, §3.2), + both (Hybrid, §3.3).

What each column measures (the paper's §4.1.5):

- Exact Match: SQuAD-normalized exact match with any gold answer ("just as in Search-R1").
- LLM Match: binary, from a separate judge model (``--judge-model``; the paper uses
  GPT-4.1-mini; refused if equal to ``--model`` unless ``--allow-same-judge``): "1 if the
  predicted answer is semantically equivalent to the ground truth, and 0 if it is incomplete or
  diverges in meaning" (``JudgeAnswer`` in netcast.signatures.judge, through
  ``netcast.evaluation.evaluate.judge_match``); mean over questions. Verdicts the judge's reply
  does not give are left out and counted.
- avg. # searches: retrievals per question (each search the agent issued).
- Fig. 2: Exact Match conditioned on the total number of searches a question took, with a 95%
  percentile-bootstrap confidence interval (``netcast.evaluation.report.bootstrap_ci``, 2,000
  resamples) for each strategy (the paper plots the baseline and Cont).

The contextualizer is "a separate, stronger model" in the paper (GPT-4.1-mini): ``--aux-model``
is passed to Cont and Hybrid as the ``aux_model`` knob (default: the second embedded model;
``--aux-model none`` lets the model under test contextualize). Tokens, LM calls and seconds per
question are printed beside the table.

    .venv/bin/python benchmarks/test_time_tables.py --questions 5
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import (
    DEFAULT_JUDGE,
    aux_name,
    dev_questions,
    header,
    judge_setup,
    model_label,
    model_notes,
    parser,
    same_model,
    setup,
    table,
)
from _tables import cell, judge_rows, mean_of, run_configs, unjudged

from netcast.evaluation.report import bootstrap_ci
from netcast.programs import SearchR1


def searches(row: dict) -> int:
    return len(row["trace"].get("searches") or [])


def em_by_searches(rows: list[dict]) -> dict[int, tuple[int, float, float, float]]:
    """{number of searches: (questions, EM mean, 95% CI low, high)}."""
    groups: dict[int, list[float]] = defaultdict(list)
    for row in rows:
        groups[searches(row)].append(row["scores"]["em"])
    out = {}
    for n, values in sorted(groups.items()):
        em, low, high = bootstrap_ci(values)
        out[n] = (len(values), em, low, high)
    return out


def main(argv: list[str] | None = None) -> None:
    arguments = parser(
        __doc__,
        questions=5,
        judge="the LLM Match judge; the paper: GPT-4.1-mini",
        aux="the contextualizer of Cont and Hybrid; the paper: GPT-4.1-mini",
        aux_default=DEFAULT_JUDGE,
    )
    args = arguments.parse_args(argv)
    lm = setup(args)
    judge = judge_setup(args)
    aux = aux_name(args)
    data, r = dev_questions("hotpotqa-sample", args.questions, lm)
    # the contextualizer is in the label, so each one runs into its own run directory; the
    # model under test named again is not loaded twice (the knob's None: the main model)
    by = f" (contextualizer {aux})" if aux else ""
    knob = None if aux and same_model(aux, args.model) else aux
    configs = [
        ("Search-R1 baseline", SearchR1(r, lm=lm)),
        (f"+ Cont{by}", SearchR1(r, lm=lm, contextualize=True, aux_model=knob)),
        ("+ De-Dup", SearchR1(r, lm=lm, dedup=True)),
        (f"+ Hybrid{by}", SearchR1(r, lm=lm, dedup=True, contextualize=True, aux_model=knob)),
    ]
    results = run_configs("test_time", configs, data.examples, lm)
    matches = judge_rows(results, data.examples, judge, "match")
    rows = []
    for label, result in results:
        a = result.aggregate
        judged = matches.get(label)
        rows.append(
            [
                label,
                a["n"],
                a["em"],
                cell(mean_of(judged), 3) if judged else "-",
                a["searches"],
                a["tokens_in"] + a["tokens_out"],
                a["lm_calls"],
                a["seconds"],
            ]
        )
    header(
        f"Search-R1 test-time modules (Test-Time Strategies, Table 1 and Fig. 2): "
        f"{len(data.examples)} HotpotQA dev questions, {model_label(lm)}, BM25, k=3, "
        "max 4 searches",
        model_notes(args),
    )
    if matches:
        print(f"judge replies that could not be read (left out): {unjudged(matches)}\n")
    print("### Table 1\n")
    table(
        [
            "variant",
            "n",
            "Exact Match",
            "LLM Match",
            "avg. # searches",
            "tokens/q",
            "LM calls/q",
            "s/q",
        ],
        rows,
    )
    print("### Fig. 2: Exact Match by number of searches (95% bootstrap CI)\n")
    curves = {label: em_by_searches(result.rows) for label, result in results}
    counts = sorted({n for curve in curves.values() for n in curve})
    fig = []
    for n in counts:
        row: list[object] = [n]
        for label in curves:
            point = curves[label].get(n)
            row.append(
                f"{point[1]:.3f} [{point[2]:.3f}, {point[3]:.3f}] (n={point[0]})" if point else "-"
            )
        fig.append(row)
    table(["searches", *[f"EM {label}" for label in curves]], fig)


if __name__ == "__main__":
    main()
