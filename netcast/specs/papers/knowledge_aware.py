"""Knowledge-Aware Iterative Retrieval, Tables 1-2 (``knowledge``): retrieval precision,
recall and F1 as token overlap between the context handed to the generator and the gold
supporting paragraphs (SQuAD-normalized bags of tokens), answer F1, steps until no open gap,
and cost units (steps x agents x the option ``price_ratio``: the paper's GPT-4o rows use 10).
The context is in the saved rows because the table's configurations run with
``records_context`` (``ablation.WithContext``)."""

from __future__ import annotations

from statistics import mean

from netcast.render import markdown_table
from netcast.specs.papers.common import Ablation


def retrieved_text(row: dict) -> list[str] | None:
    for stage in row["trace"].get("stages") or []:
        if stage["stage"] == "context":
            return stage["passages"]
    return None


def steps(row: dict) -> int:
    values = [s["steps"] for s in row["trace"].get("stages") or [] if s["stage"] == "result"]
    return values[-1] if values else 1  # one-step retrieval


def knowledge_tables(ab: Ablation) -> list[str]:
    from netcast.corpus import format_passage
    from netcast.data import load_dataset
    from netcast.evaluation.metrics import token_prf

    spec = ab.spec.file
    data = load_dataset(spec.dataset, spec.split, spec.limit)
    documents = {d.id: format_passage(d.title, d.text) for d in data.documents}
    gold = {ex.id: [documents[d] for d in ex.gold_ids if d in documents] for ex in data.examples}
    price = float(ab.options["price_ratio"])
    rows, missing = [], 0
    for run in ab.runs:
        a = run.summary
        prf = []
        for row in run.rows:
            text = retrieved_text(row)
            if text is None:
                missing += 1
                continue
            prf.append(token_prf(text, gold.get(row["id"], [])))
        scored = [p for p in prf if p["f1"] is not None]
        agents = run.knobs.get("n_agents") if run.program == "knowledge" else None
        step_mean = mean(steps(r) for r in run.rows) if run.rows else None
        rows.append(
            [
                run.label,
                a["n"],
                agents or "-",
                step_mean,
                step_mean * agents * price if agents and step_mean else "-",
                mean(p["precision"] for p in scored) if scored else "-",
                mean(p["recall"] for p in scored) if scored else "-",
                mean(p["f1"] for p in scored) if scored else "-",
                a["f1"],
                a["em"],
                a["recall"],
                a["precision"],
                a["lm_calls"],
                (a["tokens_in"] or 0) + (a["tokens_out"] or 0),
                a["seconds"],
            ]
        )
    lines = [
        f"Price ratio of the model under test: {price:g} (cost units = steps x agents x ratio).",
        "",
        "## Tables 1-2: retrieval and answer quality, steps and cost per agent count",
        "",
        *markdown_table(
            ["retrieval", "n", "agents", "steps", "cost units", "retrieval P (tokens)",
             "retrieval R (tokens)", "retrieval F1 (tokens)", "answer F1", "EM", "gold-doc recall",
             "gold-doc precision", "LM calls/q", "tokens/q", "s/q"],
            rows,
        ),
    ]  # fmt: skip
    if missing:
        lines += [
            f"{missing} saved rows hold no context text: left out of the retrieval columns.",
            "",
        ]
    return lines
