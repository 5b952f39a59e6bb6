"""What a spec is: the fields of a spec file (``SpecFile``, its ``[[compiled]]`` and
``[[config]]`` entries), the checked ``Spec`` with its rows and run directory, what a run did
(``SpecRun``), the saved rows it reads back, and the header its tables start with. Reading and
checking a file is ``netcast.specs.spec.read_spec``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from netcast.errors import InputError
from netcast.files import slug
from netcast.optimize.settings import JointSettings

RESULTS = Path("benchmarks/results")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class CompiledEntry(_Strict):
    """A compiled artifact and the ``netcast compile`` options that made it (their defaults are
    the command's); ``from`` recompiles another artifact's recipe with ``model`` instead."""

    artifact: str
    program: str | None = None
    source: str | None = Field(None, alias="from")
    dataset: str | None = None  # default: the spec's
    model: str | None = None  # default: the spec's
    n_ctx: PositiveInt | None = None  # an embedded model's window for this compile and its rows
    optimizer: str = "bootstrap"
    teacher: str = "model"
    teacher_model: str | None = None
    train_split: str = "train"  # or a part of it, train[100:300] (``load_dataset``)
    train_limit: PositiveInt | None = 20
    dev_limit: PositiveInt | None = 20
    select_on: str | None = None
    metric: str = "f1"
    seed: int = 0
    knobs: dict[str, Any] = Field(default_factory=dict, alias="set")
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    ties: str = JointSettings.ties  # the joint compile's own default
    budget: PositiveInt | None = None
    finetune_set: dict[str, Any] = Field(default_factory=dict)  # as --finetune-set's pairs

    @property
    def name(self) -> str:
        """The row the artifact's answers fill: its folder's name."""
        return Path(self.artifact).name


class ConfigEntry(_Strict):
    """One configuration of a paper's ablation: its label (the paper's row), program and knobs;
    ``retriever`` the index it searches, ``step_models`` the model of some of its predictors
    (by name: ``{generate = "embedded-1.5b"}``)."""

    label: str
    program: str
    knobs: dict[str, Any] = Field(default_factory=dict)
    retriever: Literal["bm25", "dense", "hybrid"] = "bm25"
    step_models: dict[str, str] = Field(default_factory=dict)

    @property
    def folder(self) -> str:
        return slug(self.label).lower()


class SpecFile(_Strict):
    """A spec file's fields (benchmarks/README.md describes them); a bench spec names rows
    (programs, variants, references, compiled, kept), an ablation spec configurations."""

    title: str
    about: str = ""
    kind: Literal["bench", "ablation"] = "bench"
    dataset: str
    split: str = "dev"
    limit: PositiveInt | None = None
    model: str = "embedded"
    n_ctx: PositiveInt | None = None
    decoding: Literal["constrained", "free"] = "constrained"
    retriever: Literal["bm25", "dense", "hybrid"] = "bm25"
    run_dir: str | None = None
    # bench
    programs: list[str] = Field(default_factory=list)
    variants: list[str] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)
    compiled: list[CompiledEntry] = Field(default_factory=list)
    kept: list[str] = Field(default_factory=list)
    pairs: list[tuple[str, str]] = Field(default_factory=list)
    across: list[str] = Field(default_factory=list)
    # ablation
    table: str | None = None
    configs: list[ConfigEntry] = Field(default_factory=list, alias="config")
    judge: str | None = None
    allow_same_judge: bool = False
    options: dict[str, Any] = Field(default_factory=dict)


BENCH_ONLY = ("programs", "variants", "references", "compiled", "kept", "pairs", "across")


ABLATION_ONLY = ("table", "config", "judge", "allow_same_judge", "options")


@dataclass(frozen=True)
class Spec:
    """A spec file read and checked (:func:`read_spec`)."""

    path: Path
    name: str
    file: SpecFile
    variants: tuple[Any, ...] = ()  # specs.bench.Variant: (row, program, knobs, source)
    references: tuple[str, ...] = ()  # full names: reference-gold, reference-closed
    options: dict[str, Any] = field(default_factory=dict)  # an ablation table's, defaults filled

    @property
    def run_dir(self) -> Path:
        return Path(self.file.run_dir) if self.file.run_dir else RESULTS / self.name

    @property
    def folder(self) -> str:
        """The dataset's folder in a bench run directory (as ``netcast bench`` names it)."""
        dataset = self.file.dataset
        return slug(Path(dataset).stem if dataset.endswith(".jsonl") else dataset)

    def rows(self) -> list[str]:
        """A bench spec's rows, in its order: programs, variants, compiled artifacts, reference
        rows, then the kept rows of earlier code."""
        return [
            *self.file.programs,
            *(variant.label for variant in self.variants),
            *(c.name for c in self.file.compiled),
            *self.references,
            *self.file.kept,
        ]

    def command(self, verb: str) -> str:
        return f"netcast {verb} --spec {self.path}"


def saved_rows(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a run's file (``predictions.jsonl``, ``judge.jsonl``); none when it does
    not exist; a last line cut by a kill is left out, any other bad line is one ``InputError``
    naming the file and line."""
    if not path.exists():
        return []
    rows = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines, start=1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if n < len(lines):
                raise InputError(f"{path}:{n}: corrupted row") from None
    return rows


MakeLM = Callable[..., Any]  # (model name, **lm_kwargs) -> dspy.BaseLM, netcast.make_lm's shape


@dataclass
class SpecRun:
    """What :func:`run_spec` did: the artifacts it compiled, and each row's result (run now or
    resumed from its saved questions) with the model that ran it."""

    spec: Spec
    compiled: list[Path] = field(default_factory=list)
    results: list[tuple[str, Any, Any]] = field(default_factory=list)  # (row, EvalResult, lm)

    @property
    def failed(self) -> list[tuple[str, Any, Any]]:
        return [r for r in self.results if r[1].errors]


def lm_kwargs(spec: Spec, n_ctx: int | None = None, model: str | None = None) -> dict[str, Any]:
    """The model settings a spec's rows run with, on ``model`` (default the spec's): free
    decoding, an embedded model's window (``n_ctx``, else the spec's). The spec's window is its
    embedded model's, so a compiled entry's model on a server does not take it (the spec check
    refuses a window or free decoding given for a served model itself)."""
    from netcast.models import is_embedded

    kwargs: dict[str, Any] = {}
    if spec.file.decoding == "free":
        kwargs["constrained"] = False
    window = n_ctx or (spec.file.n_ctx if is_embedded(model or spec.file.model) else None)
    if window:
        kwargs["n_ctx"] = window
    return kwargs


def header_lines(spec: Spec) -> list[str]:
    f = spec.file
    first = f"first {f.limit} questions" if f.limit else "every question"
    model = f.model + (", free decoding" if f.decoding == "free" else "")
    window = f", {f.n_ctx}-token window" if f.n_ctx else ""
    lines = [f"# {f.title}", ""]
    if f.about:
        lines += [" ".join(f.about.split()), ""]
    return [
        *lines,
        f"Rows: `{spec.run_dir}` ({f.dataset}, {f.split} split, {first}; model {model}{window}; "
        f"{f.retriever}). Run or resume: `{spec.command('bench')}`; these tables: "
        f"`{spec.command('report')}` (from the saved rows, no model call).",
        "",
    ]
