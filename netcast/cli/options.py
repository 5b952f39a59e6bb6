"""The options several commands share (typer annotations, their help written once), the
model they name, and the helpers every command group uses (knobs checked, a failure's line)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn, Optional

import typer

from netcast.errors import InputError
from netcast.render import err_console

ModelOpt = Annotated[
    Optional[str],  # noqa: UP045  (typer needs Optional here)
    typer.Option(
        "--model",
        help="an embedded model (embedded, embedded-1.5b) or a litellm "
        "model string; default: embedded",
    ),
]
RetrieverOpt = Annotated[str, typer.Option("--retriever", help="bm25 | dense | hybrid")]
SearchOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--retriever", help="bm25 | dense | hybrid; default: the --index's, else bm25"),
]
IndexOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--index",
        help="a saved index directory (netcast index); default: built "
        "from the dataset's corpus and cached",
    ),
]
KnobOpt = Annotated[
    Optional[list[str]],  # noqa: UP045
    typer.Option("--set", help="program knob, key=value (repeatable), e.g. --set top_k=3"),
]
LimitOpt = Annotated[Optional[int], typer.Option(help="first N questions")]  # noqa: UP045
ApiBaseOpt = Annotated[
    Optional[list[str]],  # noqa: UP045
    typer.Option(
        "--api-base",
        help="model endpoint URL for every model of the command (e.g. http://127.0.0.1:8000/v1);"
        " repeat it for replicas of the model on several servers: calls are spread over them",
    ),
]
ConstrainedOpt = Annotated[
    bool,
    typer.Option(
        "--constrained/--free-decoding",
        help="embedded models: decode each step under its JSON schema (default) or freely",
    ),
]
MergeAdapterOpt = Annotated[
    bool,
    typer.Option(
        "--merge-adapter",
        help="a tuned artifact (lora.gguf): serve its adapter merged into a cached copy of the "
        "model file, near the base model's speed, instead of applied at run time (a few greedy "
        "tokens differ: docs/finetuning.md)",
    ),
]
ServerCheckOpt = Annotated[
    bool,
    typer.Option(
        help="a tuned --compiled artifact through --api-base: check first that the server "
        "serves its adapter (its answers on 3 questions are the in-process tuned model's)"
    ),
]
RetriesOpt = Annotated[
    Optional[int],  # noqa: UP045
    typer.Option("--retries", help="retries per model call", min=0),
]
TimeoutOpt = Annotated[
    Optional[float],  # noqa: UP045
    typer.Option(
        "--timeout",
        help="seconds a model server may take to reply before the call fails (default 300); "
        "a question whose calls all fail is counted failed, and the run resumes later",
        min=0.001,
    ),
]


def command_lm(
    model: str | None,
    api_base: list[str] | str | None = None,
    retries: int | None = None,
    constrained: bool = True,
    timeout: float | None = None,
    **lm_kwargs: Any,
):
    """The model the command's options name (``netcast.make_lm``): ``--api-base`` (one server,
    or several replicas), ``--retries``, ``--timeout``, ``--free-decoding``. The two options
    only an embedded model has (``--free-decoding``, ``--merge-adapter``) are one
    ``InputError`` for a model on a server."""
    from netcast.errors import InputError
    from netcast.models import is_embedded, make_lm

    remote = not is_embedded(model)
    if remote and not constrained:
        raise InputError(
            f"--free-decoding: embedded models only; {model} decodes as its server "
            "does: drop --free-decoding"
        )
    if remote and lm_kwargs.get("merge_adapter"):
        raise InputError(
            f"--merge-adapter: embedded models only; {model} serves no netcast "
            "adapter: drop --merge-adapter"
        )
    kwargs: dict[str, Any] = {**lm_kwargs, **({} if constrained else {"constrained": False})}
    if timeout is not None:
        kwargs["timeout"] = timeout
    if api_base:  # one server, or several replicas (netcast.models.replicas)
        bases = [api_base] if isinstance(api_base, str) else list(api_base)
        kwargs["api_base"] = bases[0] if len(bases) == 1 else bases
    if retries is not None:
        kwargs["num_retries"] = retries
    return make_lm(model, **kwargs)


# the compile command's options
RaceProgramOpt = Annotated[
    str,
    typer.Option(
        help="strategy name; several (a,b,c) or auto (every strategy) race them on held-out "
        "training questions and compile the winner"
    ),
]


CompileDatasetOpt = Annotated[str, typer.Option(help="dataset name or .jsonl")]


TrainSplitOpt = Annotated[
    str, typer.Option(help="split to compile on, or a part of it: train[100:300]")
]


DevSplitOpt = Annotated[str, typer.Option(help="split to score on")]


TrainLimitOpt = Annotated[Optional[int], typer.Option(help="first N train questions")]  # noqa: UP045


DevLimitOpt = Annotated[Optional[int], typer.Option(help="first N dev questions")]  # noqa: UP045


SelectOnOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        help="dev | train: where bootstrap-rs, mipro, gepa and better-together score their "
        "candidates "
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
        "data's gold passages, supporting sentences and sub-questions; no model calls), with "
        "bootstrap, joint, finetune or better-together"
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
        "exclude_demos, better-together's strategy and prompt; with --teacher annotations "
        "retrieved_share, multitask, and better-together's per_step and held_out",
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


def fail(message: str) -> NoReturn:
    """Stop the command with ``message`` as its one line (exit 2: bad input)."""
    raise InputError(message)


def knob_values(pairs: list[str] | None, program: str) -> dict[str, Any]:
    """``--set`` pairs, checked against the program's knobs before anything runs."""
    from netcast.programs import get_program
    from netcast.programs.knobs import parse_pairs, validate

    knobs = parse_pairs(pairs or [])
    cls = get_program(program)
    validate(program, cls.Knobs, knobs)
    return knobs


def print_failed(result: Any, lm: Any) -> None:
    """One line: how many questions failed calling which endpoint, what is saved, resume."""
    from rich.markup import escape

    from netcast.models.factory import endpoint

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


def given(ctx: typer.Context, names: tuple[str, ...]) -> list[str]:
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


def other_lm(name: str, api_base: list[str] | None, retries: int | None, timeout: Any):
    """A teacher or judge model beside ``--model``: built with the command's endpoint
    options, except that an embedded one runs in this process (no ``--api-base``)."""
    from netcast.models import is_embedded

    return command_lm(name, None if is_embedded(name) else api_base, retries, timeout=timeout)
