"""``netcast rerank-check``: which rerank signal keeps the gold documents, measured on data with
gold evidence. One pool per question from the retriever; every signal reranks the same pool;
recall@keep of the gold documents (at one or more keeps), with a 95% bootstrap interval, and
seconds per question. Each base signal scores a question's pool once; a fusion reuses those
scores and is charged their seconds."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from netcast.cli.app import (
    ApiBaseOpt,
    IndexOpt,
    LimitOpt,
    ModelOpt,
    RetriesOpt,
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
    keep: Annotated[str, typer.Option(help="passages kept (recall@keep), or several: 3,5")] = "3",
    signals: Annotated[
        str, typer.Option(help="comma-separated: retriever, dense, likelihood, verdict, rrf:a+b")
    ] = DEFAULT_SIGNALS,
    model: ModelOpt = None,
    retriever: RetrieverOpt = "bm25",
    index: IndexOpt = None,
    api_base: ApiBaseOpt = None,
    retries: RetriesOpt = None,
    seed: Annotated[int, typer.Option(help="bootstrap seed")] = 0,
) -> None:
    """Recall@keep of gold documents after reranking a retrieval pool with each signal."""
    try:
        table = measure(
            dataset,
            split,
            limit,
            pool,
            keep,
            signals,
            model,
            retriever,
            api_base,
            seed,
            index_dir=index,
            retries=retries,
        )
    except NetcastError as err:
        _fail(str(err))
    console.print(table)


def measure(
    dataset: str,
    split: str,
    limit: int | None,
    pool: int,
    keep: str,
    signals: str,
    model: str | None,
    retriever: str,
    api_base: list[str] | None,
    seed: int,
    index_dir: str | Path | None = None,
    retries: int | None = None,
) -> Table:
    from netcast.data import load_dataset
    from netcast.evaluation.metrics import retrieval_prf
    from netcast.evaluation.report import bootstrap_ci
    from netcast.models import token_counter
    from netcast.programs.shared.rerank import needs_model, order, parse_signal, rrf, score
    from netcast.session import open_retriever

    names = [s.strip() for s in signals.split(",") if s.strip()]
    if not names:
        raise InputError("--signals: give at least one signal")
    for name in names:
        parse_signal(name)
    keeps = _keeps(keep, pool)
    lm = _lm(model, api_base, retries) if model or any(needs_model(s) for s in names) else None
    data = load_dataset(dataset, split, limit, corpus_required=not index_dir)
    index = open_retriever(data, index_dir, kind=retriever, counter=token_counter(lm))
    examples = [e for e in data.examples if e.get("gold_ids")]
    if not examples:
        raise InputError(f"{dataset}/{split}: no question has gold evidence (gold_ids)")
    warm = index.search(examples[0].question, 1)
    bases = list(dict.fromkeys(p for name in names for p in parse_signal(name)))
    for base in bases:  # loads the encoder or model untimed; a model that cannot score a
        score(base, examples[0].question, warm, lm)  # signal stops here, with one line
    recall = {(name, k): [] for name in names for k in keeps}
    seconds = dict.fromkeys(names, 0.0)
    pool_recall, pool_seconds = [], 0.0
    for example in examples:
        start = time.perf_counter()
        hits = index.search(example.question, pool)
        pool_seconds += time.perf_counter() - start
        pool_recall.append(retrieval_prf([h.chunk.id for h in hits], example.gold_ids)["recall"])
        scores, spent = {}, {}
        for base in bases:  # each base signal once per question, whatever fuses it
            start = time.perf_counter()
            scores[base] = score(base, example.question, hits, lm)
            spent[base] = time.perf_counter() - start
        for name in names:
            parts = parse_signal(name)
            if name.startswith("rrf:"):
                values = rrf([order(p, scores[p]) for p in parts], len(hits))
            else:
                values = scores[name]
            seconds[name] += sum(spent[p] for p in parts)
            ranked = [hits[i].chunk.id for i in order(name, values)]
            for k in keeps:
                found = retrieval_prf(ranked[:k], example.gold_ids)["recall"]
                recall[(name, k)].append(found)
    n = len(examples)
    shown = ",".join(str(k) for k in keeps)
    table = Table(
        title=f"rerank-check: {dataset}/{split}, {retriever} pool of {pool}, keep {shown}, n = {n}",
        caption=f"recall@{pool} of the pool itself: {sum(pool_recall) / n:.3f} "
        f"(retrieval {pool_seconds / n:.3f} s/q); seconds: reranking only"
        + (f"; model {lm.model}" if lm is not None else ""),
    )
    table.add_column("signal", min_width=max(map(len, names)))  # names are never cut
    for k in keeps:
        table.add_column(f"recall@{k}", justify="right")
        table.add_column("95% CI", justify="right")
    table.add_column("s/q", justify="right")
    for name in names:
        cells = []
        for k in keeps:
            mean, low, high = bootstrap_ci(recall[(name, k)], seed=seed)
            cells += [f"{mean:.3f}", f"[{low:.3f}, {high:.3f}]"]
        table.add_row(name, *cells, f"{seconds[name] / n:.3f}")
    return table


def _keeps(keep: str, pool: int) -> list[int]:
    """``--keep``'s values (``"3,5"`` -> [3, 5]), each between 1 and the pool."""
    try:
        keeps = [int(k) for k in keep.split(",") if k.strip()]
    except ValueError:
        raise InputError(f"--keep expects numbers separated by commas, got {keep!r}") from None
    for k in keeps:
        if not 1 <= k <= pool:
            raise InputError(f"--keep {k} must be between 1 and --pool {pool}")
    if not keeps:
        raise InputError("--keep: give at least one number")
    return keeps
