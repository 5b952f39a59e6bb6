"""``netcast rerank-check``: which rerank signal keeps the gold documents, measured on data with
gold evidence. One pool per question from the retriever; every signal reranks the same pool;
recall@keep of the gold documents, with a 95% bootstrap interval, and seconds per question."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.table import Table

from netcast.cli.app import (
    ApiBaseOpt,
    LimitOpt,
    ModelOpt,
    RetrieverOpt,
    _fail,
    _lm,
    app,
    console,
)
from netcast.errors import InputError, NetcastError

DEFAULT_SIGNALS = "retriever,dense,likelihood,verdict,rrf:retriever+dense"


@app.command("rerank-check")
def rerank_check(
    dataset: Annotated[str, typer.Option(help="dataset name or a .jsonl file (with gold ids)")],
    split: Annotated[str, typer.Option(help="train | dev | all")] = "dev",
    limit: LimitOpt = None,
    pool: Annotated[int, typer.Option(help="candidates fetched per question", min=1)] = 15,
    keep: Annotated[int, typer.Option(help="passages kept (recall@keep)", min=1)] = 3,
    signals: Annotated[
        str, typer.Option(help="comma-separated: retriever, dense, likelihood, verdict, rrf:a+b")
    ] = DEFAULT_SIGNALS,
    model: ModelOpt = None,
    retriever: RetrieverOpt = "bm25",
    api_base: ApiBaseOpt = None,
    seed: Annotated[int, typer.Option(help="bootstrap seed")] = 0,
) -> None:
    """Recall@keep of gold documents after reranking a retrieval pool with each signal."""
    try:
        table = measure(
            dataset, split, limit, pool, keep, signals, model, retriever, api_base, seed
        )
    except NetcastError as err:
        _fail(str(err))
    console.print(table)


def measure(
    dataset: str,
    split: str,
    limit: int | None,
    pool: int,
    keep: int,
    signals: str,
    model: str | None,
    retriever: str,
    api_base: str | None,
    seed: int,
) -> Table:
    from netcast.data import load_dataset
    from netcast.models import token_counter
    from netcast.optimize.metrics import retrieval_prf
    from netcast.optimize.report import bootstrap_ci
    from netcast.programs.shared.rerank import needs_model, parse_signal, rerank
    from netcast.session import open_retriever

    names = [s.strip() for s in signals.split(",") if s.strip()]
    if not names:
        raise InputError("--signals: give at least one signal")
    for name in names:
        parse_signal(name)
    if not 1 <= keep <= pool:
        raise InputError(f"--keep {keep} must be between 1 and --pool {pool}")
    lm = _lm(model, api_base) if model or any(needs_model(s) for s in names) else None
    data = load_dataset(dataset, split, limit)
    examples = [e for e in data.examples if e.get("gold_ids")]
    if not examples:
        raise InputError(f"{dataset}/{split}: no question has gold evidence (gold_ids)")
    index = open_retriever(data, kind=retriever, counter=token_counter(lm))
    warm = index.search(examples[0].question, 1)
    for name in names:  # loads the encoder or model untimed; a model that cannot score a
        rerank(examples[0].question, warm, name, 1, lm)  # signal stops here, with one line
    recall: dict[str, list[float]] = {name: [] for name in names}
    seconds = dict.fromkeys(names, 0.0)
    pool_recall, pool_seconds = [], 0.0
    for example in examples:
        start = time.perf_counter()
        hits = index.search(example.question, pool)
        pool_seconds += time.perf_counter() - start
        pool_recall.append(retrieval_prf([h.chunk.id for h in hits], example.gold_ids)["recall"])
        for name in names:
            start = time.perf_counter()
            kept = rerank(example.question, hits, name, keep, lm)
            seconds[name] += time.perf_counter() - start
            ids = [h.chunk.id for h in kept]
            recall[name].append(retrieval_prf(ids, example.gold_ids)["recall"])
    n = len(examples)
    table = Table(
        title=f"rerank-check: {dataset}/{split}, {retriever} pool of {pool}, keep {keep}, n = {n}",
        caption=f"recall@{pool} of the pool itself: {sum(pool_recall) / n:.3f} "
        f"(retrieval {pool_seconds / n:.3f} s/q); seconds: reranking only"
        + (f"; model {lm.model}" if lm is not None else ""),
    )
    for header in ("signal", f"recall@{keep}", "95% CI", "s/q"):
        table.add_column(header, justify="left" if header == "signal" else "right")
    for name in names:
        mean, low, high = bootstrap_ci(recall[name], seed=seed)
        table.add_row(name, f"{mean:.3f}", f"[{low:.3f}, {high:.3f}]", f"{seconds[name] / n:.3f}")
    return table
