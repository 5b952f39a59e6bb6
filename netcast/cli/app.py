"""The ``netcast`` command line: options in, a workflow function called, results rendered.
Every error ends in one line on stderr, never a traceback (``netcast.cli.errors``): exit 2 for
bad input, 1 for failed model calls (the same command resumes), 130 for an interrupt.

The commands live by group: ``running`` (evaluate, index, ask, list), ``compiling`` (compile,
tune, show), ``benching`` (bench, report), ``rerank`` and ``serving``; the options several of
them share, once, in ``options``."""

from __future__ import annotations

import typer

from netcast.cli.benching import bench, report
from netcast.cli.compiling import compile_cmd, show, tune
from netcast.cli.errors import NetcastGroup
from netcast.cli.rerank import rerank_check
from netcast.cli.running import ask, evaluate, index, list_things
from netcast.cli.serving import export_adapter, runtime

app = typer.Typer(cls=NetcastGroup, add_completion=False, no_args_is_help=True, help=__doc__)
for name, command in [
    ("evaluate", evaluate),
    ("index", index),
    ("ask", ask),
    ("list", list_things),
    ("compile", compile_cmd),
    ("tune", tune),
    ("show", show),
    ("bench", bench),
    ("report", report),
    ("rerank-check", rerank_check),
    ("runtime", runtime),
    ("export-adapter", export_adapter),
]:
    app.command(name)(command)


def main() -> None:
    """The ``netcast`` entry point (also ``python -m netcast``)."""
    from netcast.env import apply_cli_defaults

    apply_cli_defaults()
    app()
