"""Shared bits of the benchmark scripts: command-line model setup, the questions and index a
benchmark runs on, the machine's description, and printing a markdown table.

Scripts run as files (``python benchmarks/NAME.py``), so Python puts this folder on the path
and they import this module by name; they import it before DSPy (``from _common import ...``
sorts before ``from dspy import ...``), so the environment defaults below are in place when
litellm is imported. netcast and DSPy are imported inside the functions that need them, so
scripts that time pure code (selection.py) do not pay for importing them."""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from typing import Any

# The command line's environment defaults (netcast.env.CLI_DEFAULTS) that matter here, set
# before DSPy imports litellm: litellm's bundled price list instead of a download at import
# (offline it retries noisily). Scripts import this module before dspy for that.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def model_args(parser: argparse.ArgumentParser, choices: list[str] | None = None) -> None:
    """``--model``: an embedded model name (the default, ``embedded``) or a litellm string;
    one of ``choices`` when given."""
    what = "model" if choices else "embedded model name or litellm model string"
    parser.add_argument(
        "--model", default="embedded", choices=choices, help=f"{what} (default: %(default)s)"
    )


def parser(
    doc: str | None, questions: int, models: list[str] | None = None
) -> argparse.ArgumentParser:
    """A benchmark's parser with ``--questions`` (defaulting to ``questions``) and ``--model``
    (one of ``models`` when given)."""
    made = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    made.add_argument("--questions", type=int, default=questions)
    model_args(made, models)
    return made


def make_model(name: str | None, **lm_kwargs: Any):
    """A DSPy LM for a model name (``netcast.make_lm``: an embedded model or a litellm
    string)."""
    import netcast

    return netcast.make_lm(name, **lm_kwargs)


def setup(args: argparse.Namespace, **lm_kwargs: Any):
    """The LM ``--model`` names (``lm_kwargs`` passed to ``netcast.make_lm``)."""
    return make_model(args.model, **lm_kwargs)


def model_label(lm: Any) -> str:
    """How a table header names the model: "embedded model", else its name."""
    from netcast.models import embedded_name

    name = embedded_name(lm)
    if name == "embedded":
        return "embedded model"
    return f"embedded model {name}" if name else f"model {lm.model}"


def dev_questions(name: str, limit: int, lm: Any, kind: str = "bm25", split: str = "dev"):
    """(``limit`` questions of dataset ``name``'s ``split`` (dev by default), the index of its
    corpus with chunk tokens counted by ``lm``'s tokenizer)."""
    from netcast.data import load_dataset
    from netcast.models import token_counter
    from netcast.session import open_retriever

    data = load_dataset(name, split, limit=limit)
    return data, open_retriever(data, kind=kind, counter=token_counter(lm))


def machine() -> str:
    cpu = platform.processor() or "cpu"
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        mem = f", {pages / 2**30:.0f} GiB"
    except (ValueError, OSError):
        pass
    return f"{cpu}, {os.cpu_count()} cores{mem}, Python {platform.python_version()}"


def header(title: str, notes: list[str] | tuple[str, ...] = ()) -> None:
    """The table's title, the machine, the exact command, and ``notes`` (one line each)."""
    print(f"## {title}\n")
    print(f"machine: {machine()}")
    print(f"command: {' '.join([os.path.relpath(sys.argv[0]), *sys.argv[1:]])}")
    for note in notes:
        print(note)
    print()


def table(columns: list[str], rows: list[list[object]]) -> None:
    """Print a markdown table (``netcast.render.markdown_table``) and a blank line."""
    from netcast.render import markdown_table

    print("\n".join(markdown_table(columns, rows)))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[int(q) - 1]
