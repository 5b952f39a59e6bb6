"""``netcast rerank-check`` (registered by ``netcast.cli.app``): which rerank signal keeps the
gold documents, measured on data with gold evidence (``netcast.specs.rerank``, callable
from Python) and rendered by ``netcast.render.rerank_table``: recall@keep of the gold documents
at one or more keeps, with a 95% bootstrap interval, and seconds per question."""

from __future__ import annotations

from typing import Annotated

import typer

from netcast.cli.options import (
    ApiBaseOpt,
    IndexOpt,
    LimitOpt,
    ModelOpt,
    RetriesOpt,
    SearchOpt,
    TimeoutOpt,
    command_lm,
)
from netcast.errors import InputError
from netcast.render import console, rerank_table

DEFAULT_SIGNALS = "retriever,dense,likelihood,verdict,rrf:retriever+dense"


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
    retriever: SearchOpt = None,
    index: IndexOpt = None,
    api_base: ApiBaseOpt = None,
    retries: RetriesOpt = None,
    timeout: TimeoutOpt = None,
    seed: Annotated[int, typer.Option(help="bootstrap seed")] = 0,
) -> None:
    """Recall@keep of gold documents after reranking a retrieval pool with each signal."""
    from netcast.data import load_dataset
    from netcast.models import token_counter
    from netcast.programs.shared.rerank import needs_model
    from netcast.retrievers.store import kind_for_index
    from netcast.session import open_retriever
    from netcast.specs.rerank import check_keeps, check_signals, rerank_check

    retriever = kind_for_index(retriever, index)
    names = check_signals(signals.split(","))
    keeps = check_keeps(_keeps(keep), pool)
    wants_model = model or any(needs_model(s) for s in names)
    lm = command_lm(model, api_base, retries, timeout=timeout) if wants_model else None
    data = load_dataset(dataset, split, limit, corpus_required=not index)
    searcher = open_retriever(data, index, kind=retriever, counter=token_counter(lm))
    if not any(e.get("gold_ids") for e in data.examples):
        raise InputError(f"{dataset}/{split}: no question has gold evidence (gold_ids)")
    check = rerank_check(data.examples, searcher, names, pool, keeps, lm=lm)
    console.print(rerank_table(check, f"{dataset}/{split}", retriever, lm, seed))


def _keeps(keep: str) -> list[int]:
    """``--keep``'s values (``"3,5"`` -> [3, 5])."""
    try:
        return [int(k) for k in keep.split(",") if k.strip()]
    except ValueError:
        raise InputError(f"--keep expects numbers separated by commas, got {keep!r}") from None
