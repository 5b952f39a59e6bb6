"""Shared bits of the benchmark scripts: command-line model setup (the model under test, and the
paper-table scripts' separate judge and auxiliary models), the questions and index a benchmark
runs on and fields of their records, machine description and markdown tables.

Scripts import this module before DSPy (``from _common import ...`` sorts before
``from dspy import ...``), so the environment defaults below are in place when litellm is
imported. netcast and DSPy are imported inside the functions that need them, so scripts that
time pure code (selection.py) do not pay for importing them."""

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


# The judge the paper-table scripts use unless told otherwise: a second embedded model, so the
# model under test (by default the 0.5B embedded model) does not grade its own answers.
DEFAULT_JUDGE = "embedded-1.5b"
NONE = ("", "none")  # --judge-model none / --aux-model none: leave it out


def parser(
    doc: str | None,
    questions: int,
    models: list[str] | None = None,
    *,
    judge: str | None = None,
    aux: str | None = None,
    aux_default: str | None = None,
) -> argparse.ArgumentParser:
    """A benchmark's parser with ``--questions`` (defaulting to ``questions``) and ``--model``
    (one of ``models`` when given), and the paper-table scripts' ``--judge-model`` (with
    ``--allow-same-judge``) and ``--aux-model``. ``judge`` and ``aux`` say what those options
    do in this script; ``None`` means the script's measures need no such model: the option is
    accepted, ignored, and the output says so (``header``)."""
    made = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    made.add_argument("--questions", type=int, default=questions)
    model_args(made, models)
    made.add_argument(
        "--judge-model",
        default=DEFAULT_JUDGE if judge else None,
        help=(judge or "not used by this script (accepted and ignored)")
        + " ('none' leaves the judge out; default: %(default)s)",
    )
    made.add_argument(
        "--allow-same-judge",
        action="store_true",
        help="let the model under test judge its own answers (refused by default)",
    )
    made.add_argument(
        "--aux-model",
        default=aux_default if aux else None,
        help=(aux or "not used by this script (accepted and ignored)") + " (default: %(default)s)",
    )
    made.set_defaults(judge_use=judge, aux_use=aux)
    return made


def make_model(name: str | None, **lm_kwargs: Any):
    """A DSPy LM for a model name (``netcast.make_lm``: an embedded model or a litellm
    string)."""
    import netcast

    return netcast.make_lm(name, **lm_kwargs)


def setup(args: argparse.Namespace, **lm_kwargs: Any):
    """The LM ``--model`` names (``lm_kwargs`` passed to ``netcast.make_lm``)."""
    return make_model(args.model, **lm_kwargs)


def given(name: str | None) -> bool:
    """Whether a model option names a model (not absent, empty or ``none``)."""
    return name is not None and name.strip().lower() not in NONE


def same_model(a: str | None, b: str | None) -> bool:
    from netcast.models import model_name

    return model_name(a) == model_name(b)


def judge_setup(args: argparse.Namespace):
    """The judge LM ``--judge-model`` names, or None (no judge, or the script uses none).
    A judge that is the model under test is refused unless ``--allow-same-judge``: the
    papers grade answers with a separate model."""
    if not getattr(args, "judge_use", None) or not given(args.judge_model):
        return None
    if same_model(args.judge_model, args.model) and not args.allow_same_judge:
        raise SystemExit(
            f"--judge-model {args.judge_model} is the model under test (--model {args.model}); "
            "the papers judge answers with a separate model: give another --judge-model, "
            "--judge-model none to leave the judge out, or --allow-same-judge"
        )
    return make_model(args.judge_model)


def aux_name(args: argparse.Namespace) -> str | None:
    """The model name ``--aux-model`` gives, or None (none given, or the script uses none)."""
    if not getattr(args, "aux_use", None) or not given(args.aux_model):
        return None
    return args.aux_model


def model_notes(args: argparse.Namespace) -> list[str]:
    """Lines that say which model did what in this run, and which options were ignored."""
    notes = [f"model under test: {args.model}"]
    judge = args.judge_model if given(getattr(args, "judge_model", None)) else None
    if getattr(args, "judge_use", None):
        if judge is None:
            notes.append("judge: none (--judge-model none), so the judge columns are left out")
        else:
            own = (
                " (the model under test: --allow-same-judge)"
                if same_model(judge, args.model)
                else ""
            )
            notes.append(f"judge: {judge}{own}")
    elif judge is not None:
        notes.append(f"--judge-model {judge}: ignored, this script's measures need no judge")
    aux = args.aux_model if given(getattr(args, "aux_model", None)) else None
    if getattr(args, "aux_use", None):
        notes.append(f"auxiliary model: {aux or 'none, the model under test'} ({args.aux_use})")
    elif aux is not None:
        notes.append(f"--aux-model {aux}: ignored, this script uses no auxiliary model")
    return notes


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


def record_field(name: str, field: str) -> dict[str, Any]:
    """``{question id: record[field]}`` for the records of dataset ``name`` that have the
    field (a bundled sample's files or a local JSONL file; hub datasets are loaded without
    extra fields, so they give none)."""
    from pathlib import Path

    from netcast.data import read_records
    from netcast.data.registry import SAMPLES, sample_path

    if name in SAMPLES:
        records = [
            r for fs in SAMPLES[name].values() for f in fs for r in read_records(sample_path(f))
        ]
    elif name.endswith(".jsonl") and Path(name).exists():
        records = read_records(name)
    else:
        return {}
    return {str(r["id"]): r[field] for r in records if r.get(field) not in (None, "")}


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
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---" for _ in columns) + "|")
    for row in rows:
        print("| " + " | ".join(_cell(v) for v in row) + " |")
    print()


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[int(q) - 1]
