"""The commands that measure: ``bench`` (programs, variants, artifacts and references on
datasets, or a spec) and ``report`` (tables rebuilt from saved rows)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from netcast.cli import options
from netcast.cli.options import (
    ApiBaseOpt,
    ConstrainedOpt,
    IndexOpt,
    LimitOpt,
    MergeAdapterOpt,
    ModelOpt,
    RetriesOpt,
    SearchOpt,
    ServerCheckOpt,
    TimeoutOpt,
    fail,
    print_failed,
)
from netcast.render import (
    console,
)

# the bench command's own options
ProgramsOpt = Annotated[str, typer.Option(help="comma-separated strategies, or all")]
DatasetsOpt = Annotated[str, typer.Option(help="comma-separated dataset names or .jsonl files")]
CompiledOpt = Annotated[
    Optional[list[Path]],  # noqa: UP045
    typer.Option(help="compiled artifact to include (repeatable)"),
]
VariantOpt = Annotated[
    Optional[list[str]],  # noqa: UP045
    typer.Option(
        help="a strategy with knobs changed, program:knob=value[,knob=value] (repeatable), "
        "e.g. combined:notes=false; from=ARTIFACT runs that compile's prompts and tuned model "
        "with the strategy (combined:from=an iterative artifact, one_shot:from=a basic one: "
        "the steps it compiled); compared with the program "
        "as shipped"
    ),
]
ReferenceOpt = Annotated[
    Optional[list[str]],  # noqa: UP045
    typer.Option(
        help="a reference row (repeatable): gold (basic's answer step given only the gold "
        "passages), gold:ARTIFACT (that compiled artifact's answer step over them) or closed "
        "(no passage); the report shows the share of the gap closed"
    ),
]
RunDirOpt = Annotated[
    Optional[Path], typer.Option(help="default: runs/bench-<settings hash>")  # noqa: UP045
]
SpecOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        help="a benchmark spec (benchmarks/specs/*.toml): compile its missing artifacts and "
        "run its missing rows (finished ones are kept), then print its tables"
    ),
]


def bench(
    ctx: typer.Context,
    programs: ProgramsOpt = "all",
    datasets: DatasetsOpt = "hotpotqa-sample",
    split: Annotated[str, typer.Option()] = "dev",
    limit: LimitOpt = 20,
    model: ModelOpt = None,
    retriever: SearchOpt = None,
    index: IndexOpt = None,
    compiled: CompiledOpt = None,
    variant: VariantOpt = None,
    reference: ReferenceOpt = None,
    threads: Annotated[int, typer.Option(help="parallel questions", min=1)] = 1,
    run_dir: RunDirOpt = None,
    api_base: ApiBaseOpt = None,
    retries: RetriesOpt = None,
    timeout: TimeoutOpt = None,
    constrained: ConstrainedOpt = True,
    merge_adapter: MergeAdapterOpt = False,
    server_check: ServerCheckOpt = True,
    spec: SpecOpt = None,
) -> None:
    """Run strategies x datasets on the same questions and write a comparison report."""
    from netcast.specs.bench import resolve_programs, run_bench

    if spec is not None:
        if merge_adapter:  # a spec's rows are the ones it declares, every run alike
            fail("--merge-adapter does not go with --spec: drop it")
        _bench_spec(ctx, spec, threads, api_base, retries, timeout)
        return
    from netcast.retrievers.store import kind_for_index

    retriever = kind_for_index(retriever, index)
    names = resolve_programs(programs)
    sets = [d.strip() for d in datasets.split(",") if d.strip()]
    merging = {"merge_adapter": True} if merge_adapter else {}
    lm = options.command_lm(model, api_base, retries, constrained, timeout, **merging)
    done_dir, results = run_bench(
        run_dir,
        names,
        sets,
        lm=lm,
        split=split,
        limit=limit,
        retriever=retriever,
        index=index,
        compiled=compiled or [],
        variants=variant or [],
        references=reference or [],
        threads=threads,
        info={"command": " ".join(["netcast", *sys.argv[1:]])},
        server_check=server_check,
    )
    console.print(f"report: {done_dir}/report.md, {done_dir}/report.html", soft_wrap=True)
    failed = [r for r in results.values() if r.errors]
    if failed:
        for result in failed:
            print_failed(result, lm)
        raise typer.Exit(1)


# what a spec declares: refused beside --spec
SPEC_DECLARES = ("programs", "datasets", "split", "limit", "model", "retriever", "index")
SPEC_DECLARES += ("compiled", "variant", "reference", "run_dir", "constrained")


def _bench_spec(
    ctx: typer.Context,
    path: Path,
    threads: int,
    api_base: list[str] | None,
    retries: int | None,
    timeout: float | None = None,
) -> None:
    """``netcast bench --spec FILE``: the spec run (resumed), then its tables."""
    from netcast.specs.spec import read_spec, run_spec
    from netcast.specs.tables import spec_report

    for name in SPEC_DECLARES:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name == "COMMANDLINE":
            option = "--" + name.replace("_", "-")
            fail(f"{option} is the spec's to declare: drop it, or edit {path}")
    loaded = read_spec(path)
    done = run_spec(
        loaded,
        lambda model, **kwargs: options.command_lm(
            model, api_base, retries, timeout=timeout, **kwargs
        ),
        threads=threads,
    )
    tables = spec_report(loaded)
    console.print(tables, soft_wrap=True, markup=False)
    if done.failed:
        for _, result, lm in done.failed:
            print_failed(result, lm)
        raise typer.Exit(1)


def report(
    run_dirs: Annotated[
        Optional[list[Path]],  # noqa: UP045
        typer.Argument(help="netcast bench run directories (one per model)"),
    ] = None,
    out: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(help="write the combined report here (required with several directories)"),
    ] = None,
    spec: Annotated[
        Optional[list[Path]],  # noqa: UP045
        typer.Option(
            help="a benchmark spec: print its tables, rebuilt from its saved rows (no model "
            "call); several with --markdown"
        ),
    ] = None,
    markdown: Annotated[
        bool,
        typer.Option(
            "--markdown", help="with --spec: the docs' table of the specs (--view), in markdown"
        ),
    ] = False,
    view: Annotated[
        str, typer.Option(help="with --markdown: rows | race | headline | paper | agent")
    ] = "rows",
    write: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            help="with --markdown: write the table into this page, between the markers that "
            "name this command, instead of printing it"
        ),
    ] = None,
) -> None:
    """Rebuild a bench report from saved results (no model calls); several run directories
    (e.g. one per model) combine into one report written to --out. With --spec, a spec's
    tables in markdown; with --markdown, the docs' table of one or more specs."""
    from netcast.specs.report import write_report

    if markdown:
        _docs_table(spec or [], view, write, bool(run_dirs or out))
        return
    if write is not None or view != "rows":
        fail("--view and --write go with --markdown")
    if spec:
        from netcast.specs.spec import read_spec
        from netcast.specs.tables import spec_report

        if run_dirs or out:
            fail("--spec names its run directory: give no directories or --out with it")
        if len(spec) > 1:
            fail("one --spec at a time (several with --markdown)")
        tables = spec_report(read_spec(spec[0]))
        console.print(tables, soft_wrap=True, markup=False)
        return
    if not run_dirs:
        fail("give bench run directories, or --spec FILE")
    if len(run_dirs) > 1 and out is None:
        fail("several run directories combine into one report: give --out DIR")
    path = write_report(out or run_dirs[0], sources=run_dirs if out else ())
    console.print(path.read_text(), soft_wrap=True, markup=False)


def _docs_table(specs: list[Path], view: str, write: Path | None, dirs: bool) -> None:
    """``netcast report --markdown``: the docs' table of ``specs``, printed or written into a
    page between its markers."""
    from netcast.specs.docs import command, docs_table, write_blocks
    from netcast.specs.spec import read_spec

    if not specs or dirs:
        fail("--markdown reads specs: give --spec FILE (repeatable), no directories or --out")
    table = docs_table([read_spec(s) for s in specs], view)
    if write is None:
        console.print(table, soft_wrap=True, markup=False, highlight=False)
        return
    n = write_blocks(write, command(specs, view), table)
    console.print(f"{write}: {n} table(s) written", soft_wrap=True, markup=False)
