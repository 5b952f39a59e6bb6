"""The ``netcast`` command line: options in, a workflow function called, results rendered.
Every error ends in one line on stderr, never a traceback (``netcast.cli.errors``): exit 2 for
bad input, 1 for failed model calls (the same command resumes), 130 for an interrupt."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn, Optional

import typer
from rich.text import Text

from netcast.cli.errors import NetcastGroup
from netcast.cli.options import (
    ApiBaseOpt,
    ConstrainedOpt,
    IndexOpt,
    KnobOpt,
    LimitOpt,
    MergeAdapterOpt,
    ModelOpt,
    RetriesOpt,
    RetrieverOpt,
    SearchOpt,
    ServerCheckOpt,
    TimeoutOpt,
)
from netcast.cli.options import command_lm as _lm
from netcast.cli.rerank import rerank_check
from netcast.cli.serving import export_adapter, runtime
from netcast.errors import InputError, NetcastError
from netcast.render import (
    console,
    err_console,
    indexing_progress,
    print_table,
    results_table,
    score_table,
    study_table,
    trials_table,
)

app = typer.Typer(cls=NetcastGroup, add_completion=False, no_args_is_help=True, help=__doc__)


def main() -> None:
    """The ``netcast`` entry point (also ``python -m netcast``)."""
    from netcast.env import apply_cli_defaults

    apply_cli_defaults()
    app()


def _fail(message: str) -> NoReturn:
    """Stop the command with ``message`` as its one line (exit 2: bad input)."""
    raise InputError(message)


def _knobs(pairs: list[str] | None, program: str) -> dict[str, Any]:
    """``--set`` pairs, checked against the program's knobs before anything runs."""
    from netcast.programs import get_program
    from netcast.programs.knobs import parse_pairs, validate

    knobs = parse_pairs(pairs or [])
    cls = get_program(program)
    validate(program, cls.Knobs, knobs)
    return knobs


def _joint_settings(
    budget: int | None, pairs: list[str] | None, ties: str | None
) -> dict[str, Any]:
    """The joint optimizer's settings from ``--budget``, ``--grid`` (``demos=`` names the
    demonstration sources; the knobs' values are checked when the compile starts) and
    ``--ties``."""
    from netcast.programs.knobs import parse_grid
    from netcast.specs.spec import joint_settings

    return joint_settings(budget, parse_grid(pairs or []), ties)


def _failed_questions(result: Any, lm: Any) -> None:
    """One line: how many questions failed calling which endpoint, what is saved, resume."""
    from rich.markup import escape

    from netcast.optimize.workflow import endpoint

    agg = result.aggregate
    first_id, first = next(iter(result.errors.items()))
    if "timed out" in first:  # the library's own advice names its settings, not netcast's
        timeout = (getattr(lm, "kwargs", None) or {}).get("timeout")
        first = first.split(";")[0] + (f" (--timeout {timeout:g} s)" if timeout else "")
    not_run = agg.get("n_total", 0) - agg["n"] - len(result.errors)
    stopped = f", {not_run} not run" if not_run > 0 else ""
    err_console.print(
        f"[red]error:[/red] {len(result.errors)} question(s) failed calling "
        f"{escape(endpoint(lm))}{stopped} (first, {escape(first_id)}: {escape(first)}); "
        f"{agg['n']} of {agg.get('n_total', agg['n'])} finished question(s) are saved in "
        f"{escape(str(result.run_dir))}; run the same command again to resume",
        soft_wrap=True,
    )


@app.command()
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
    knobs = _knobs(knob, program)
    lm = _lm(model, api_base, retries, constrained, timeout)
    judge_lm = (
        (_other_lm(judge_model, api_base, retries, timeout) if judge_model else lm)
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
        _failed_questions(result, lm)
        raise typer.Exit(1)


@app.command()
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
    counter = token_counter(_lm(model) if model else None)
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


@app.command()
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
    knobs = _knobs(knob, program)
    lm = _lm(model, api_base, retries, timeout=timeout)
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


@app.command("list")
def list_things() -> None:
    """List the programs (with their knobs' defaults) and the datasets netcast knows."""
    from netcast.data import dataset_names
    from netcast.programs import PROGRAMS

    for name, cls in sorted(PROGRAMS.items()):
        console.print(f"program  {name:12s} knobs {cls.knob_defaults()}", markup=False)
    for name in dataset_names():
        console.print(f"dataset  {name}")


# the compile command's options
RaceProgramOpt = Annotated[
    str,
    typer.Option(
        help="strategy name; several (a,b,c) or auto (every strategy) race them on held-out "
        "training questions and compile the winner"
    ),
]
CompileDatasetOpt = Annotated[str, typer.Option(help="dataset name or .jsonl")]
TrainSplitOpt = Annotated[str, typer.Option(help="split to compile on")]
DevSplitOpt = Annotated[str, typer.Option(help="split to score on")]
TrainLimitOpt = Annotated[Optional[int], typer.Option(help="first N train questions")]  # noqa: UP045
DevLimitOpt = Annotated[Optional[int], typer.Option(help="first N dev questions")]  # noqa: UP045
SelectOnOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        help="dev | train: where bootstrap-rs, mipro and gepa score their candidates "
        "(train: the last 80% of the train questions, so the dev questions stay unseen); "
        "default dev, or with --from the artifact's"
    ),
]
OptimizerOpt = Annotated[
    str,
    typer.Option(
        help="bootstrap | bootstrap-rs | mipro | simba | gepa | joint (knobs not given with "
        "--set searched together with the demonstrations, on held-out training questions) | "
        "finetune (an embedded model's weights tuned on its passing traces: a LoRA adapter) | "
        "better-together (prompts, then weights, then prompts)"
    ),
]
MetricOpt = Annotated[str, typer.Option(help="em | f1 | judge")]
TeacherOpt = Annotated[
    str,
    typer.Option(
        help="model (demonstrations from successful traces) | annotations (from the "
        "data's gold passages, supporting sentences and sub-questions; no model calls)"
    ),
]
TeacherModelOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        help="teacher / proposal model (default: --model); with finetune, its traces train "
        "the model (distillation)"
    ),
]
JudgeModelOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(help="with --metric judge: the judge model (default: --model)"),
]
BudgetOpt = Annotated[
    Optional[int],  # noqa: UP045
    typer.Option(help="joint or race: model calls the search may spend (default: the whole grid)"),
]
GridOpt = Annotated[
    Optional[list[str]],  # noqa: UP045
    typer.Option(
        help="joint: the values tried for a knob, knob=v1,v2 (repeatable; default: the "
        "knob's declared range), or the demonstration sources, demos=none,annotations"
    ),
]
TiesOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        help="joint: among the trials that beat the defaults and that the validation questions "
        "cannot tell apart from the best, take the one nearest the defaults (nearest, the "
        "default) or the best score (best)"
    ),
]
FinetuneSetOpt = Annotated[
    Optional[list[str]],  # noqa: UP045
    typer.Option(
        "--finetune-set",
        help="finetune or better-together: a setting, name=value (repeatable): a training "
        "setting (epochs, learning_rate, rank, min_examples, threads, ...), metric_threshold, "
        "exclude_demos, or better-together's strategy and prompt",
    ),
]
SeedOpt = Annotated[int, typer.Option(help="optimizer seed")]
ThreadsOpt = Annotated[
    Optional[int],  # noqa: UP045
    typer.Option(
        help="parallel questions (default 1); finetune and better-together: also the CPU "
        "threads training runs on, unless --finetune-set threads= names them (default: every "
        "core)",
        min=1,
    ),
]
FromOpt = Annotated[
    Optional[Path], typer.Option("--from", help="recompile this artifact's recipe")  # noqa: UP045
]
RetuneOpt = Annotated[bool, typer.Option(help="with --from: re-tune knobs first")]
RetuneTrialsOpt = Annotated[int, typer.Option(help="with --retune: tuning trials", min=1)]


# what an artifact's recipe holds: refused beside --from, which reruns the recipe as it is
RECIPE_HOLDS = ("program", "dataset", "train_split", "dev_split", "train_limit", "dev_limit")
RECIPE_HOLDS += ("optimizer", "metric", "teacher", "teacher_model", "judge_model", "budget")
RECIPE_HOLDS += ("grid", "ties", "finetune_set", "retriever", "index", "knob", "seed")


def _given(ctx: typer.Context, names: tuple[str, ...]) -> list[str]:
    """The options among ``names`` given on the command line, as they are spelled there (a
    flag's off switch, ``--no-retune``, by its value)."""

    def spelled(p: Any) -> str:
        off = getattr(p, "secondary_opts", None)
        return off[0] if off and ctx.params.get(p.name) is False else p.opts[0]

    flags = {p.name: spelled(p) for p in ctx.command.params}
    return [
        flags[n]
        for n in names
        if getattr(ctx.get_parameter_source(n), "name", None) in ("COMMANDLINE", "ENVIRONMENT")
    ]


@app.command("compile")
def compile_cmd(
    ctx: typer.Context,
    out: Annotated[Path, typer.Option(help="artifact directory to write")],
    program: RaceProgramOpt = "basic",
    dataset: CompileDatasetOpt = "hotpotqa-sample",
    train_split: TrainSplitOpt = "train",
    dev_split: DevSplitOpt = "dev",
    train_limit: TrainLimitOpt = 20,
    dev_limit: DevLimitOpt = 20,
    select_on: SelectOnOpt = None,
    optimizer: OptimizerOpt = "bootstrap",
    metric: MetricOpt = "f1",
    model: ModelOpt = None,
    teacher: TeacherOpt = "model",
    teacher_model: TeacherModelOpt = None,
    judge_model: JudgeModelOpt = None,
    budget: BudgetOpt = None,
    grid: GridOpt = None,
    ties: TiesOpt = None,
    finetune_set: FinetuneSetOpt = None,
    retriever: SearchOpt = None,
    index: IndexOpt = None,
    knob: KnobOpt = None,
    seed: SeedOpt = 0,
    threads: ThreadsOpt = None,
    from_dir: FromOpt = None,
    retune: RetuneOpt = False,
    trials: RetuneTrialsOpt = 6,
    api_base: ApiBaseOpt = None,
    retries: RetriesOpt = None,
    timeout: TimeoutOpt = None,
) -> None:
    """Compile a program's prompts on a training split and save an artifact (or, with --from,
    recompile an artifact's recipe with another model)."""
    from netcast.files import check_output_directory
    from netcast.optimize.compile import SELECT_ON
    from netcast.retrievers.store import kind_for_index

    if from_dir is not None and (held := _given(ctx, RECIPE_HOLDS)):
        raise NetcastError(
            f"{held[0]}: --from reruns {from_dir}'s recipe as it holds it (--model, --select-on "
            "and --retune change it); to change the rest, compile without --from"
        )
    if from_dir is None and (rerun := _given(ctx, ("retune", "trials"))):
        raise NetcastError(f"{rerun[0]} re-tunes an artifact's knobs: add --from DIR")
    if _given(ctx, ("trials",)) and not retune:
        raise NetcastError("--trials counts --retune's tuning trials: add --retune")
    if select_on is not None and select_on not in SELECT_ON:
        raise NetcastError(
            f"unknown --select-on {select_on!r}; choose one of {', '.join(SELECT_ON)}"
        )
    _check_ignored(ctx, program, optimizer, teacher, from_dir is not None)
    if from_dir is not None and select_on is not None and not retune:
        _check_rerun_selects(from_dir, select_on)
    check_output_directory(out, "recipe.json", "artifact")  # not found out after the compile
    retriever = kind_for_index(retriever, index)
    if from_dir is not None:
        lm = _lm(model, api_base, retries, timeout=timeout)
        result, columns = _recompile(
            from_dir,
            out,
            (model, lm, lambda name: _other_lm(name, api_base, retries, timeout)),
            select_on,
            retune,
            trials,
            threads,
        )
    else:
        recipe = _compile_recipe_of(
            program,
            knob,
            optimizer,
            metric,
            (budget, grid, ties),
            finetune_set,
            dataset=dataset,
            train_split=train_split,
            dev_split=dev_split,
            train_limit=train_limit,
            dev_limit=dev_limit,
            model=model,
            teacher_model=teacher_model,
            judge_model=judge_model,
            retriever=retriever,
            index=index,
            seed=seed,
            select_on=select_on or "dev",
            teacher=teacher,
        )
        lm = _lm(model, api_base, retries, timeout=timeout)
        teacher_lm, judge_lm = (
            _other_lm(name, api_base, retries, timeout) if name else None
            for name in (teacher_model, judge_model)
        )
        result, columns = _compile(recipe, out, threads, lm, teacher_lm, judge_lm)
    _print_compiled(result, columns, out, teacher)


def _compile(
    recipe: Any, out: Path, threads: int | None, lm: Any, teacher_lm: Any, judge_lm: Any = None
):
    """``netcast compile``: the recipe run, its artifact loaded back and scored; the result
    and the scores before, after and loaded back. ``threads`` (``--threads``): questions at
    once (None: 1) and a finetune's training threads (None: its settings' or every core)."""
    from netcast.optimize.workflow import compile_recipe
    from netcast.render import race_progress

    result = compile_recipe(
        recipe,
        out,
        threads=threads or 1,
        train_threads=threads,
        reload=True,
        lm=lm,
        teacher_lm=teacher_lm,
        judge_lm=judge_lm,
        report=race_progress,  # a race shows its progress live
    )
    winner = result.race["choice"]["winner"] if result.race else recipe.program
    columns = {
        f"{winner} at its defaults" if result.race else "uncompiled": result.before,
        "compiled": result.after,
        "loaded from artifact": result.reloaded,
    }
    return result, columns


def _compile_recipe_of(
    program: str,
    pairs: list[str] | None,
    optimizer: str,
    metric: str,
    search: tuple[int | None, list[str] | None, str | None],
    tuning: list[str] | None,
    **fields: Any,
):
    """The recipe ``netcast compile`` runs: ``--optimizer`` and ``--metric`` checked, the
    ``--set`` knobs (a race's are split among its programs when it starts), for a search
    (the joint compile, a race) its settings from ``search``: ``--budget``, ``--grid`` and
    ``--ties``, and a finetune's from ``tuning`` (``--finetune-set``)."""
    from netcast.optimize.compile import METRICS
    from netcast.optimize.race import is_race
    from netcast.optimize.registry import get_optimizer, optimizer_names
    from netcast.optimize.workflow import make_recipe
    from netcast.programs.knobs import parse_pairs

    if optimizer not in optimizer_names():
        choices = ", ".join(optimizer_names())
        raise NetcastError(f"unknown optimizer {optimizer!r}; choose one of {choices}")
    if metric not in METRICS:
        raise NetcastError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    racing = is_race(program)
    searching = racing or get_optimizer(optimizer).searches
    budget, grid, ties = search
    if grid and not searching:
        raise NetcastError("--grid names the values a joint compile tries: add --optimizer joint")
    if (budget is not None or ties is not None) and not searching:
        option = "--budget" if budget is not None else "--ties"
        raise NetcastError(f"{option} configures a search: add --optimizer joint or --program auto")
    settings = _joint_settings(budget, grid, ties) if searching else None
    if tuning:
        if optimizer not in ("finetune", "better-together"):
            raise NetcastError("--finetune-set configures --optimizer finetune or better-together")
        from netcast.optimize.finetune import settings_from_pairs

        settings = settings_from_pairs(tuning)
    return make_recipe(
        program=program,
        knobs=parse_pairs(pairs or []) if racing else _knobs(pairs, program),
        optimizer=optimizer,
        optimizer_settings=settings,
        metric=metric,
        **fields,
    )


def _other_lm(name: str, api_base: list[str] | None, retries: int | None, timeout: Any):
    """A teacher or judge model beside ``--model``: built with the command's endpoint
    options, except that an embedded one runs in this process (no ``--api-base``)."""
    from netcast.models import is_embedded

    return _lm(name, None if is_embedded(name) else api_base, retries, timeout=timeout)


def _check_ignored(
    ctx: typer.Context, program: str, optimizer: str, teacher: str, rerun: bool = False
) -> None:
    """One line for a compile option its optimizer would ignore: ``--optimizer`` beside a race
    (which runs its own search), ``--seed`` to an optimizer that takes none, ``--select-on`` to
    one that scores no candidates on a valset (with ``--from`` the recipe's optimizer decides)."""
    from netcast.optimize.race import is_race

    if is_race(program) and _given(ctx, ("optimizer",)) and optimizer != "joint":
        raise NetcastError(
            f"--optimizer {optimizer}: --program {program} races the strategies, each with the "
            "joint search; drop --optimizer (compile the winner's recipe after)"
        )
    seeded = is_race(program) or teacher == "annotations" or optimizer not in UNSEEDED
    if _given(ctx, ("seed",)) and not seeded:
        raise NetcastError(
            f"--seed: DSPy's {optimizer} takes no seed (the same training questions give the same "
            "demonstrations); a seed changes mipro, simba, gepa, joint, the race and finetunes"
        )
    selecting = _selecting()
    if (
        not rerun
        and _given(ctx, ("select_on",))
        and (is_race(program) or optimizer not in selecting)
    ):
        what = f"--program {program}" if is_race(program) else f"--optimizer {optimizer}"
        raise NetcastError(
            f"--select-on: {what} scores no candidates on a valset (it selects on held-out "
            f"training questions or not at all); it applies to {', '.join(selecting)}"
        )


UNSEEDED = ("bootstrap", "bootstrap-rs")  # DSPy's optimizers that take no seed


def _selecting() -> tuple[str, ...]:
    """The optimizers that score candidates on a valset (``--select-on`` applies to them)."""
    from netcast.optimize.compile import SELECTING

    return (*SELECTING, "better-together")


def _check_rerun_selects(source: Path, select_on: str) -> None:
    """``compile --from DIR --select-on X`` without ``--retune``: one line where DIR's recipe
    runs an optimizer that scores no candidates on a valset (X would be recorded and change
    nothing)."""
    from netcast.artifacts import read_artifact

    name = (read_artifact(source)[0].get("optimizer") or {}).get("name")
    if name not in _selecting():
        raise NetcastError(
            f"--select-on {select_on}: {source}'s recipe runs {name}, which scores no "
            "candidates on a valset; drop --select-on (or add --retune, whose trials it sets)"
        )


def _recompile(
    source: Path,
    out: Path,
    models: tuple[str | None, Any, Any],
    select_on: str | None,
    retune: bool,
    trials: int,
    threads: int | None,
):
    """``netcast compile --from``: the artifact's recipe run again with ``models``: the
    ``--model`` name, its LM and how the recipe's teacher and judge models are built (with the
    command's endpoints and timeouts); its knobs re-tuned first with ``retune``. The result and
    the old and new scores."""
    from netcast.optimize.workflow import recompile, retune_knobs
    from netcast.render import race_progress

    model, lm, make = models
    knobs = retune_knobs(source, lm, trials, select_on) if retune else None
    result, old = recompile(
        source,
        model,
        out,
        knobs=knobs,
        threads=threads or 1,
        train_threads=threads,
        lm=lm,
        select_on=select_on,
        report=race_progress,  # a race run again shows its progress live
        make=make,
    )
    return result, {f"{source} (old)": old.get("after"), f"{out} (new model)": result.after}


def _print_compiled(result: Any, columns: dict[str, Any], out: Path, teacher: str) -> None:
    """What a compile found (a race's table and choice, or a joint compile's trials and its
    test against the defaults), its scores, demonstrations and artifact."""
    from netcast.artifacts import read_artifact
    from netcast.render import (
        adapter_line,
        better_together_line,
        race_line,
        race_table,
        verdict_lines,
        versus_defaults_line,
    )

    if result.race:
        print_table(race_table(result.race))
        console.print(race_line(result.race), markup=False)
    elif result.trials:
        print_table(trials_table(result.trials))
        if line := versus_defaults_line(result.versus_defaults):
            console.print(line, markup=False)
        console.print(f"chosen knobs: {result.knobs}", markup=False)
        if result.untried:
            console.print(
                f"the budget of model calls left {result.untried} grid point(s) untried; their "
                f"trials wait beside {out}: the same command with a larger --budget goes on",
                markup=False,
                soft_wrap=True,
            )
    print_table(score_table(columns))
    for step, counts in (result.demos or {}).items():
        console.print(
            f"demonstrations for {step}: {counts['bootstrapped']} bootstrapped from successful "
            f"traces, {counts['labeled']} labeled from the training set"
            + (" (its annotations)" if teacher == "annotations" else "")
        )
    saved = read_artifact(result.artifact)[0]
    for line in (better_together_line(saved), adapter_line(saved)):
        if line:
            console.print(line, markup=False, soft_wrap=True)
    console.print(f"compiled in {result.seconds:.1f} s -> {result.artifact}", soft_wrap=True)
    if result.dev_f1:  # what the dev scores show, and what would decide it
        before, after = result.dev_f1
        compared = "its defaults" if result.race else "uncompiled"
        searched = bool(result.race or result.trials)
        for line in verdict_lines(before, after, compared=compared, searched=searched):
            console.print(line, markup=False, soft_wrap=True)


@app.command()
def tune(
    program: Annotated[str, typer.Option(help="strategy name")] = "basic",
    dataset: Annotated[str, typer.Option(help="dataset name or .jsonl")] = "hotpotqa-sample",
    trials: Annotated[int, typer.Option(help="finished trials the study should hold", min=1)] = 6,
    objectives: Annotated[
        str, typer.Option(help="quality[,cost]: f1,cost | f1,calls | em")
    ] = "f1,cost",
    compile_each: Annotated[bool, typer.Option(help="compile every trial's program")] = False,
    optimizer: Annotated[str, typer.Option(help="with --compile-each")] = "bootstrap",
    train_split: Annotated[str, typer.Option()] = "train",
    dev_split: Annotated[str, typer.Option()] = "dev",
    train_limit: Annotated[Optional[int], typer.Option()] = 20,  # noqa: UP045
    dev_limit: Annotated[Optional[int], typer.Option()] = 20,  # noqa: UP045
    model: ModelOpt = None,
    retriever: SearchOpt = None,
    index: IndexOpt = None,
    storage: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            help="Optuna storage URL (default sqlite:///runs/tune.db); "
            "postgresql://... lets several workers share one study"
        ),
    ] = None,
    study: Annotated[Optional[str], typer.Option(help="study name")] = None,  # noqa: UP045
    pick_rule: Annotated[
        str, typer.Option("--pick", help="best-quality | knee | max-quality-under-cost=X")
    ] = "knee",
    out: Annotated[
        Optional[Path], typer.Option(help="export the picked trial as an artifact")  # noqa: UP045
    ] = None,
    seed: Annotated[int, typer.Option()] = 0,
    heartbeat: Annotated[int, typer.Option(help="seconds; stale trials are retried", min=1)] = 30,
    api_base: ApiBaseOpt = None,
    retries: RetriesOpt = None,
    timeout: TimeoutOpt = None,
) -> None:
    """Tune a program's knobs with Optuna (quality vs cost); resumable; distributable."""
    from netcast.files import check_output_directory
    from netcast.optimize.workflow import run_tuning
    from netcast.programs import get_program
    from netcast.retrievers.store import kind_for_index

    get_program(program)
    retriever = kind_for_index(retriever, index)
    if out is not None:
        check_output_directory(out, "recipe.json", "artifact")
    result = run_tuning(
        program,
        dataset,
        _lm(model, api_base, retries, timeout=timeout),
        trials=trials,
        objectives=objectives,
        compile_each=compile_each,
        optimizer=optimizer,
        train_split=train_split,
        dev_split=dev_split,
        train_limit=train_limit,
        dev_limit=dev_limit,
        retriever=retriever,
        index=index,
        storage=storage,
        study=study,
        pick_rule=pick_rule,
        out=out,
        seed=seed,
        heartbeat=heartbeat,
    )
    print_table(study_table(result))
    if result.artifact is not None:
        console.print(
            f"trial {result.chosen.number} ({pick_rule}) -> {result.artifact}", soft_wrap=True
        )


@app.command()
def show(directory: Annotated[Path, typer.Argument(help="an artifact directory")]) -> None:
    """Show an artifact's recipe, scores and lineage."""
    from netcast.artifacts import read_artifact
    from netcast.inputs import check_recipe
    from netcast.render import (
        adapter_line,
        artifact_table,
        better_together_line,
        race_line,
        race_table,
        versus_defaults_line,
    )

    recipe, scores, meta = read_artifact(directory)
    check_recipe(directory, recipe)
    print_table(artifact_table(str(directory), recipe, meta))
    joint = recipe.get("joint") or {}
    if recipe.get("race"):  # a strategy race, as `netcast compile` printed it
        print_table(race_table(recipe["race"]))
        console.print(race_line(recipe["race"]), markup=False)
    if joint.get("trials"):  # a joint compile's search, as `netcast compile` printed it
        print_table(trials_table(joint["trials"]))
        if line := versus_defaults_line(joint.get("versus_defaults")):
            console.print(line, markup=False)
        if joint.get("untried"):
            console.print(f"{joint['untried']} grid point(s) left untried by the budget")
    for line in (better_together_line(recipe), adapter_line(recipe)):
        if line:
            console.print(line, markup=False, soft_wrap=True)
    print_table(score_table({"before": scores.get("before"), "after": scores.get("after")}))


@app.command()
def bench(
    ctx: typer.Context,
    programs: Annotated[str, typer.Option(help="comma-separated strategies, or all")] = "all",
    datasets: Annotated[
        str, typer.Option(help="comma-separated dataset names or .jsonl files")
    ] = "hotpotqa-sample",
    split: Annotated[str, typer.Option()] = "dev",
    limit: LimitOpt = 20,
    model: ModelOpt = None,
    retriever: SearchOpt = None,
    index: IndexOpt = None,
    compiled: Annotated[
        Optional[list[Path]], typer.Option(help="compiled artifact to include (repeatable)")  # noqa: UP045
    ] = None,
    variant: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option(
            help="a strategy with knobs changed, program:knob=value[,knob=value] (repeatable), "
            "e.g. combined:notes=false; compared with the program as shipped"
        ),
    ] = None,
    reference: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option(
            help="a reference row (repeatable): gold (basic's answer step given only the gold "
            "passages) or closed (no passage); the report shows the share of the gap closed"
        ),
    ] = None,
    threads: Annotated[int, typer.Option(help="parallel questions", min=1)] = 1,
    run_dir: Annotated[
        Optional[Path], typer.Option(help="default: runs/bench-<settings hash>")  # noqa: UP045
    ] = None,
    api_base: ApiBaseOpt = None,
    retries: RetriesOpt = None,
    timeout: TimeoutOpt = None,
    constrained: ConstrainedOpt = True,
    merge_adapter: MergeAdapterOpt = False,
    server_check: ServerCheckOpt = True,
    spec: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            help="a benchmark spec (benchmarks/specs/*.toml): compile its missing artifacts and "
            "run its missing rows (finished ones are kept), then print its tables"
        ),
    ] = None,
) -> None:
    """Run strategies x datasets on the same questions and write a comparison report."""
    from netcast.specs.bench import resolve_programs, run_bench

    if spec is not None:
        if merge_adapter:  # a spec's rows are the ones it declares, every run alike
            _fail("--merge-adapter does not go with --spec: drop it")
        _bench_spec(ctx, spec, threads, api_base, retries, timeout)
        return
    from netcast.retrievers.store import kind_for_index

    retriever = kind_for_index(retriever, index)
    names = resolve_programs(programs)
    sets = [d.strip() for d in datasets.split(",") if d.strip()]
    merging = {"merge_adapter": True} if merge_adapter else {}
    lm = _lm(model, api_base, retries, constrained, timeout, **merging)
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
            _failed_questions(result, lm)
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
            _fail(f"{option} is the spec's to declare: drop it, or edit {path}")
    loaded = read_spec(path)
    done = run_spec(
        loaded,
        lambda model, **kwargs: _lm(model, api_base, retries, timeout=timeout, **kwargs),
        threads=threads,
    )
    tables = spec_report(loaded)
    console.print(tables, soft_wrap=True, markup=False)
    if done.failed:
        for _, result, lm in done.failed:
            _failed_questions(result, lm)
        raise typer.Exit(1)


@app.command()
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
    view: Annotated[str, typer.Option(help="with --markdown: rows | race | headline")] = "rows",
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
        _fail("--view and --write go with --markdown")
    if spec:
        from netcast.specs.spec import read_spec
        from netcast.specs.tables import spec_report

        if run_dirs or out:
            _fail("--spec names its run directory: give no directories or --out with it")
        if len(spec) > 1:
            _fail("one --spec at a time (several with --markdown)")
        tables = spec_report(read_spec(spec[0]))
        console.print(tables, soft_wrap=True, markup=False)
        return
    if not run_dirs:
        _fail("give bench run directories, or --spec FILE")
    if len(run_dirs) > 1 and out is None:
        _fail("several run directories combine into one report: give --out DIR")
    path = write_report(out or run_dirs[0], sources=run_dirs if out else ())
    console.print(path.read_text(), soft_wrap=True, markup=False)


def _docs_table(specs: list[Path], view: str, write: Path | None, dirs: bool) -> None:
    """``netcast report --markdown``: the docs' table of ``specs``, printed or written into a
    page between its markers."""
    from netcast.specs.docs import command, docs_table, write_blocks
    from netcast.specs.spec import read_spec

    if not specs or dirs:
        _fail("--markdown reads specs: give --spec FILE (repeatable), no directories or --out")
    table = docs_table([read_spec(s) for s in specs], view)
    if write is None:
        console.print(table, soft_wrap=True, markup=False, highlight=False)
        return
    n = write_blocks(write, command(specs, view), table)
    console.print(f"{write}: {n} table(s) written", soft_wrap=True, markup=False)


app.command("rerank-check")(rerank_check)
app.command("runtime")(runtime)
app.command("export-adapter")(export_adapter)
