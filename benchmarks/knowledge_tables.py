"""Knowledge-Aware Iterative Retrieval for Multi-Agent Systems, Tables 1-2 (MuSiQue and
2WikiMultiHopQA: steps, cost units and retrieval F1 per agent count) and the per-dataset
results of Figures 3-5 (retrieval F1, answer F1, steps to convergence): one-step retrieval
(naive RAG, BM25 top-10) against 1, 2 and 3 agents (competitive, the paper's experiments).

What each column measures (the paper's §4.1.4 and §4.2.5):

- retrieval P / R / F1: "Token-level overlap (F1 score) between retrieved and ground-truth
  supporting documents". Retrieved text: what the system hands the generator (the refined
  context for the agents, the top-10 passages for naive RAG); gold text: the question's
  supporting paragraphs (the records' ``is_supporting`` paragraphs, "title: text"). Both are
  compared as bags of SQuAD-normalized tokens (``netcast.evaluation.metrics.token_prf``); mean
  over questions.
- answer F1: "Token-level overlap (F1 score) between predicted and ground-truth answers"
  (SQuAD F1, best gold), from the separate generator's answer.
- steps: iterations until an agent had no open gap, or ``max_steps`` (Fig. 5; naive RAG: 1).
- cost units: steps x agents x price ratio, per question (§4.2.5: "based on an approximate 10:1
  cost ratio between GPT-4o and GPT-4o-mini API calls"). The price ratio of the model under
  test is ``--price-ratio`` (default 1; the paper's GPT-4o rows use 10).

Datasets (``--dataset``, comma-separated): Table 1 is MuSiQue (bundled: ``musique-sample``),
Table 2 is 2WikiMultiHopQA (hub only: ``2wikimultihopqa`` needs a network; offline the script
says it is unavailable and goes on); ``hotpotqa-sample`` is bundled too (Fig. 3-4). The
generator is a separate model in the paper (GPT-3.5-turbo): ``--aux-model`` names it (the
``generator_model`` knob; naive RAG's answer step uses it too); none given, the model under
test answers. ``--judge-model`` is accepted and ignored (the paper reports F1, no judge).
Document-level recall and precision of the gold documents and costs are printed beside.

    .venv/bin/python benchmarks/knowledge_tables.py --questions 3
    .venv/bin/python benchmarks/knowledge_tables.py --dataset musique-sample --price-ratio 10
"""

from __future__ import annotations

import sys
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).parent))

from _common import (
    aux_name,
    dev_questions,
    header,
    model_label,
    model_notes,
    parser,
    same_model,
    setup,
    table,
)
from _tables import run_configs
from dspy import Module, Prediction

from netcast.corpus import format_passage
from netcast.errors import InputError
from netcast.evaluation.metrics import token_prf
from netcast.programs import BasicRAG, KnowledgeAware

DATASETS = "musique-sample,2wikimultihopqa"


class WithContext(Module):
    """Runs ``program`` and keeps the text it hands the generator (the prediction's context)
    in the saved trace (a "context" stage), so retrieval F1 can be computed from saved rows."""

    def __init__(self, program: Module):
        super().__init__()
        self.program = program
        self.name = program.name
        self.knobs = program.knobs

    def forward(self, question: str) -> Prediction:
        prediction = self.program(question=question)
        prediction.trace["stages"].append(
            {"stage": "context", "passages": [str(p) for p in prediction.context or []]}
        )
        return prediction


def retrieved_text(row: dict) -> list[str] | None:
    for stage in row["trace"]["stages"]:
        if stage["stage"] == "context":
            return stage["passages"]
    return None  # a row saved by an older run, without its context


def steps(row: dict) -> int:
    values = [s["steps"] for s in row["trace"]["stages"] if s["stage"] == "result"]
    return values[-1] if values else 1  # one-step retrieval


def main(argv: list[str] | None = None) -> None:
    arguments = parser(
        __doc__,
        questions=3,
        aux="the separate generator that answers from the retrieved context; the paper: "
        "GPT-3.5-turbo",
    )
    arguments.add_argument(
        "--dataset", default=DATASETS, help="comma-separated datasets (default: %(default)s)"
    )
    arguments.add_argument(
        "--agents", default="1,2,3", help="agent counts to run (default: %(default)s)"
    )
    arguments.add_argument(
        "--mode", default="competitive", choices=("competitive", "collaborative")
    )
    arguments.add_argument(
        "--price-ratio",
        type=float,
        default=1.0,
        help="price of the model under test per call, in units of the cheapest model's "
        "(cost units = steps x agents x ratio; the paper: GPT-4o 10, GPT-4o-mini 1; "
        "default: %(default)s)",
    )
    args = arguments.parse_args(argv)
    agents = [int(n) for n in args.agents.split(",") if n.strip()]
    lm = setup(args)
    generator = aux_name(args)
    by = f" (generator {generator})" if generator else ""
    if generator and same_model(generator, args.model):
        generator = None  # the model under test, not loaded twice
    header(
        "Knowledge-aware iterative retrieval (Tables 1-2, Fig. 3-5)",
        [
            *model_notes(args),
            f"price ratio of the model under test: {args.price_ratio:g}",
            f"mode: {args.mode}, BM25 top-10, max 6 steps",
        ],
    )
    for name in [n.strip() for n in args.dataset.split(",") if n.strip()]:
        try:
            data, r = dev_questions(name, args.questions, lm)
        except InputError as err:
            print(f"### {name}: unavailable\n\n{err}\n")
            continue
        documents = {d.id: format_passage(d.title, d.text) for d in data.documents}
        programs = [
            KnowledgeAware(r, lm=lm, n_agents=n, mode=args.mode, generator_model=generator)
            for n in agents
        ]
        baseline = BasicRAG(r, lm=lm, top_k=10)
        if generator and programs:  # the same separate generator answers for naive RAG
            baseline.answer.lm = programs[0].generator_lm()
        configs = [
            (f"one-step retrieval (naive RAG, top-10){by}", WithContext(baseline)),
            *[
                (f"{n} agent{'s' if n > 1 else ''} ({args.mode}){by}", WithContext(p))
                for n, p in zip(agents, programs, strict=True)
            ],
        ]
        results = run_configs(f"knowledge-{name}", configs, data.examples, lm)
        gold = {
            ex.id: [documents[d] for d in ex.gold_ids if d in documents] for ex in data.examples
        }
        print(f"\n### {name}: {len(data.examples)} {data.split} questions, {model_label(lm)}\n")
        rows, missing = [], 0
        for (label, result), (_, program) in zip(results, configs, strict=True):
            a = result.aggregate
            prf = []
            for row in result.rows:
                text = retrieved_text(row)
                if text is None:
                    missing += 1
                    continue
                prf.append(token_prf(text, gold[row["id"]]))
            scored = [p for p in prf if p["f1"] is not None]
            n_agents = program.knobs.get("n_agents")
            step_mean = mean(steps(row) for row in result.rows) if result.rows else None
            rows.append(
                [
                    label,
                    a["n"],
                    n_agents or "-",
                    step_mean if step_mean is not None else "-",
                    step_mean * n_agents * args.price_ratio if n_agents and step_mean else "-",
                    mean(p["precision"] for p in scored) if scored else "-",
                    mean(p["recall"] for p in scored) if scored else "-",
                    mean(p["f1"] for p in scored) if scored else "-",
                    a["f1"],
                    a["em"],
                    a["recall"],
                    a["precision"],
                    a["lm_calls"],
                    a["tokens_in"] + a["tokens_out"],
                    a["seconds"],
                ]
            )
        table(
            [
                "retrieval",
                "n",
                "agents",
                "steps",
                "cost units",
                "retrieval P (tokens)",
                "retrieval R (tokens)",
                "retrieval F1 (tokens)",
                "answer F1",
                "EM",
                "gold-doc recall",
                "gold-doc precision",
                "LM calls/q",
                "tokens/q",
                "s/q",
            ],
            rows,
        )
        if missing:
            print(
                f"{missing} saved rows have no retrieved text (an older run): left out of the "
                "retrieval columns; delete their run directories under "
                "benchmarks/results/paper-tables to redo them\n"
            )


if __name__ == "__main__":
    main()
