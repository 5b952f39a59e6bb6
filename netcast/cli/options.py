"""The options several commands share (typer annotations, their help written once), and the
model they name."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

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
