"""The commands that run a program: ``evaluate`` a strategy on a dataset, ``ask`` one
question, ``index`` a corpus, ``list`` what netcast knows."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.text import Text

from netcast.cli import options
from netcast.cli.options import (
    ApiBaseOpt,
    ConstrainedOpt,
    IndexOpt,
    KnobOpt,
    LimitOpt,
    ModelOpt,
    RetriesOpt,
    RetrieverOpt,
    SearchOpt,
    TimeoutOpt,
    knob_values,
    other_lm,
    print_failed,
)
from netcast.errors import NetcastError
from netcast.render import (
    console,
    indexing_progress,
    results_table,
)


def evaluate(
    program: Annotated[str, typer.Option(help="strategy name (netcast list)")] = "basic",
    dataset: Annotated[str, typer.Option(help="dataset name or a .jsonl file")] = "hotpotqa-sample",
    split: Annotated[str, typer.Option(help="train | dev | all")] = "dev",
    limit: LimitOpt = None,
    model: ModelOpt = None,
    retriever: SearchOpt = None,
    index: IndexOpt = None,
    corpus: Annotated[
        Optional[Path], typer.Option(help="documents JSONL for datasets without passages")  # noqa: UP045
    ] = None,
    knob: KnobOpt = None,
    threads: Annotated[int, typer.Option(help="parallel questions", min=1)] = 1,
    judge: Annotated[bool, typer.Option(help="also score answers with an LLM judge")] = False,
    judge_model: Annotated[
        Optional[str], typer.Option(help="judge model (default: --model)")  # noqa: UP045
    ] = None,
    run_dir: Annotated[
        Optional[Path], typer.Option(help="where results go (default: runs/<run name>)")  # noqa: UP045
    ] = None,
    api_base: ApiBaseOpt = None,
    retries: RetriesOpt = None,
    timeout: TimeoutOpt = None,
    constrained: ConstrainedOpt = True,
    max_errors: Annotated[int, typer.Option(help="failed questions tolerated", min=0)] = 3,
) -> None:
    """Run a program on a dataset split; print quality and cost; save per-question results."""
    from netcast.optimize.workflow import check_passages, run_evaluation
    from netcast.retrievers.store import kind_for_index

    if judge_model and not judge:
        raise NetcastError("--judge-model names the judge of --judge: add --judge")
    check_passages(index, corpus)
    retriever = kind_for_index(retriever, index)
    knobs = knob_values(knob, program)
    lm = options.command_lm(model, api_base, retries, constrained, timeout)
    judge_lm = (
        (other_lm(judge_model, api_base, retries, timeout) if judge_model else lm)
        if judge
        else None
    )
    result = run_evaluation(
        program,
        dataset,
        lm,
        split=split,
        limit=limit,
        retriever=retriever,
        index=index,
        corpus=corpus,
        knobs=knobs,
        threads=threads,
        judge_lm=judge_lm,
        run_dir=run_dir,
        max_errors=max_errors,
    )
    if result.aggregate.get("n") or not result.errors:  # none finished: no table, no file
        console.print(
            results_table(f"{program} on {dataset}/{split} with {lm.model}", result.aggregate)
        )
        console.print(f"per-question results: {result.run_dir}/predictions.jsonl", soft_wrap=True)
    if result.errors:
        print_failed(result, lm)
        raise typer.Exit(1)


def index(
    out: Annotated[Path, typer.Option(help="index directory to write")],
    dataset: Annotated[
        Optional[str], typer.Option(help="index this dataset's pooled passages")  # noqa: UP045
    ] = None,
    corpus: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            help="documents: a JSONL file (title, text, meta; optionally .jsonl.gz) or a folder "
            "of .txt / .md files, streamed; chunks stay on disk (any size)"
        ),
    ] = None,
    retriever: RetrieverOpt = "bm25",
    chunking: Annotated[str, typer.Option(help="paragraph | window")] = "paragraph",
    window: Annotated[int, typer.Option(help="window size in tokens", min=1)] = 200,
    overlap: Annotated[int, typer.Option(help="window overlap in tokens", min=0)] = 40,
    model: ModelOpt = None,
    dense_index: Annotated[
        str,
        typer.Option(help="dense: auto (flat below 50k chunks, else ivfpq) | flat | ivfpq | hnsw"),
    ] = "auto",
    embeddings: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(help="dense: a .npy of precomputed embeddings (chunks x 384, chunk order)"),
    ] = None,
    bm25_language: Annotated[
        str,
        typer.Option(
            help="bm25, hybrid: how words are split, stopped and stemmed: auto (cjk for mostly "
            "Chinese or Japanese text, else english) | english | cjk | none | a Snowball "
            "language (german, french, ...)"
        ),
    ] = "auto",
) -> None:
    """Chunk documents, build a BM25, dense or hybrid index and save it."""
    from netcast.data import load_corpus
    from netcast.files import check_output_directory
    from netcast.indexing import build_index, build_stored_index
    from netcast.models import token_counter

    if (dataset is None) == (corpus is None):
        raise NetcastError("give exactly one of --dataset or --corpus")
    check_output_directory(out, "index.json", "index")
    counter = token_counter(options.command_lm(model) if model else None)
    settings = {"mode": chunking, "window": window, "overlap": overlap}
    if corpus is not None:
        with indexing_progress() as progress:
            built, n_docs = build_stored_index(
                corpus,
                out,
                counter,
                retriever,
                settings,
                progress,
                dense_index=dense_index,
                embeddings=embeddings,
                language=bm25_language,
                source=str(corpus),
            )
    else:
        _, docs = load_corpus(dataset or "")
        built = build_index(
            docs,
            counter,
            retriever,
            out,
            settings,
            language=bm25_language,
            dense_index=dense_index,
            embeddings=embeddings,
            source=dataset,
        )
        n_docs = len(docs)
    console.print(
        f"{built.kind} index of {len(built.corpus)} chunks ({n_docs} documents, "
        f"tokens by {counter.name}) -> {out}"
    )


def ask(
    question: Annotated[str, typer.Argument(help="the question")],
    program: Annotated[str, typer.Option(help="strategy name")] = "basic",
    dataset: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="whose corpus to search (default hotpotqa-sample; not with --index)"),
    ] = None,
    model: ModelOpt = None,
    retriever: SearchOpt = None,
    index: IndexOpt = None,
    knob: KnobOpt = None,
    api_base: ApiBaseOpt = None,
    retries: RetriesOpt = None,
    timeout: TimeoutOpt = None,
) -> None:
    """Answer one question and show the evidence and the trace."""
    import dspy

    from netcast.data import QADataset, load_corpus
    from netcast.data.records import check_blank
    from netcast.models import token_counter
    from netcast.models.factory import check_questions, preflight
    from netcast.retrievers.store import kind_for_index
    from netcast.session import build_program, open_retriever

    check_blank(question, "the question")
    if index is not None and dataset is not None:
        raise NetcastError(
            f"--dataset {dataset} and --index {index} both name the passages searched: drop one"
        )
    retriever = kind_for_index(retriever, index)
    knobs = knob_values(knob, program)
    lm = options.command_lm(model, api_base, retries, timeout=timeout)
    check_questions([("question", question)], lm)
    preflight(lm)
    data = None
    if index is None:
        dataset = dataset or "hotpotqa-sample"
        corpus_name, docs = load_corpus(dataset)
        data = QADataset(dataset, "all", [], docs, corpus_name)
    prog = build_program(
        program, open_retriever(data, index, retriever, token_counter(lm)), knobs, lm=lm
    )
    with dspy.context(lm=lm):
        prediction = prog(question=question)
    console.print(f"[bold]answer:[/bold] {prediction.answer}")
    for chunk_id, passage in zip(prediction.evidence, prediction.context, strict=False):
        # a Text, not markup: a passage's own brackets are printed as they are
        console.print(Text.assemble("  ", (chunk_id, "dim"), " ", passage[:110]))
    t = prediction.trace
    console.print(
        f"[dim]{t['lm_calls']} LM call(s), {t['tokens_in']} tokens in, {t['tokens_out']} out, "
        f"{len(t['searches'])} search(es), {t['seconds']:.2f} s[/dim]"
    )


def list_things() -> None:
    """List the programs (with their knobs' defaults) and the datasets netcast knows."""
    from netcast.data import dataset_names
    from netcast.programs import PROGRAMS

    for name, cls in sorted(PROGRAMS.items()):
        console.print(f"program  {name:12s} knobs {cls.knob_defaults()}", markup=False)
    for name in dataset_names():
        console.print(f"dataset  {name}")
