"""Benchmarks as specs: one TOML file declares a committed result (the dataset and its first N
questions, the model, the run directory, the programs, knob variants and reference rows, the
compiled artifacts with the compile options that made them, or a paper's ablation
configurations), one command runs it and resumes (:func:`run_spec`: artifacts that are missing
are compiled, rows that are missing are run, finished ones are kept), and one rebuilds its
tables from the saved per-question rows without any model call (:func:`spec_report`).

Two kinds:

- ``bench`` (the default): the rows of ``netcast bench`` in ``<run_dir>/<dataset>/<row>/``,
  reported with 95% bootstrap intervals, the paired difference against ``basic`` and against
  a row's own program, the share of the gap to the gold-passage reference closed, the answer
  in the context and the tokens a question.
- ``ablation``: a paper's configurations (``[[config]]``: a label, a program and its knobs) in
  ``<run_dir>/<configuration>/``, reported as the paper's tables (``netcast.evaluation.ablation``),
  with an LLM judge's verdicts kept beside the rows when the table has a judge column.

Relative paths in a spec are read from the working directory (the repository root for the
committed specs). A bad spec is one line naming the file and the field."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError

from netcast.errors import InputError
from netcast.files import slug

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
    train_limit: PositiveInt | None = 20
    dev_limit: PositiveInt | None = 20
    select_on: str | None = None
    metric: str = "f1"
    seed: int = 0
    knobs: dict[str, Any] = Field(default_factory=dict, alias="set")
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    ties: str = "nearest"
    budget: PositiveInt | None = None

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
    variants: tuple[tuple[str, str, dict[str, Any]], ...] = ()  # (row, program, knobs)
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
            *(label for label, _, _ in self.variants),
            *(c.name for c in self.file.compiled),
            *self.references,
            *self.file.kept,
        ]

    def command(self, verb: str) -> str:
        return f"netcast {verb} --spec {self.path}"


# --- reading and checking ---------------------------------------------------------------------


def _where(loc: Sequence[Any]) -> str:
    """A pydantic error location as the spec's field: ``[[compiled]] #2: field 'optimizer'``
    (entries counted from 1, as they appear in the file)."""
    parts = list(loc)
    if len(parts) >= 2 and parts[0] in ("compiled", "config") and isinstance(parts[1], int):
        rest = ".".join(str(p) for p in parts[2:])
        entry = f"[[{parts[0]}]] #{parts[1] + 1}"
        return f"{entry}: field '{rest}'" if rest else entry
    return "field '" + ".".join(str(p) for p in parts) + "'"


def _message(error: dict[str, Any], model: type[BaseModel]) -> str:
    if error["type"] == "extra_forbidden":
        fields = sorted(f.alias or n for n, f in model.model_fields.items())
        return f"unknown field; fields are {', '.join(fields)}"
    if error["type"] == "missing":
        return "missing (required)"
    return str(error["msg"])


def read_spec(path: str | Path) -> Spec:
    """The spec at ``path``, checked before anything runs: its fields and their types, the
    programs, knobs, variants, references, compile options and table it names. A bad spec is
    one ``InputError`` line naming the file and the field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such spec file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read the spec ({err})") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"{path}: not valid TOML: {err}") from None
    try:
        parsed = SpecFile.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        owner: type[BaseModel] = SpecFile
        if first["loc"][:1] == ("compiled",):
            owner = CompiledEntry
        elif first["loc"][:1] == ("config",):
            owner = ConfigEntry
        raise InputError(f"{path}: {_where(first['loc'])}: {_message(first, owner)}") from None
    try:
        return _checked(path, parsed, raw)
    except _Bad as bad:
        raise InputError(f"{path}: {bad.where}: {bad.message}") from None


class _Bad(Exception):
    def __init__(self, where: str, message: str):
        super().__init__(message)
        self.where, self.message = where, message


def _check(where: str, call: Callable[[], Any]) -> Any:
    """``call()``, its ``InputError`` (or ``ValueError``) reported at ``where``."""
    try:
        return call()
    except (InputError, ValueError) as err:
        raise _Bad(where, str(err)) from None


def _checked(path: Path, spec: SpecFile, raw: dict[str, Any]) -> Spec:
    from netcast.data.registry import dataset_names
    from netcast.evaluation.bench import parse_variant
    from netcast.evaluation.reference import reference_name

    name = path.name.removesuffix(".toml")
    if spec.dataset not in dataset_names() and not spec.dataset.endswith(".jsonl"):
        raise _Bad(
            "field 'dataset'",
            f"unknown dataset {spec.dataset!r}; choose one of {', '.join(dataset_names())} "
            "or a .jsonl file",
        )
    if spec.split not in ("train", "dev", "all"):
        raise _Bad("field 'split'", f"unknown split {spec.split!r}; choose train, dev or all")
    wrong = ABLATION_ONLY if spec.kind == "bench" else BENCH_ONLY
    for key in wrong:
        if key in raw:
            raise _Bad(f"field '{key}'", f"not a field of {spec.kind} specs (kind = {spec.kind!r})")
    if spec.kind == "ablation":
        return Spec(path, name, spec, options=_check_ablation(spec))
    for i, program in enumerate(spec.programs):
        _check(f"field 'programs' #{i + 1}", lambda p=program: _program(p))
    variants = tuple(
        _check(f"field 'variants' #{i + 1}", lambda v=v: parse_variant(v))
        for i, v in enumerate(spec.variants)
    )
    references = tuple(
        _check(f"field 'references' #{i + 1}", lambda r=r: reference_name(r))
        for i, r in enumerate(spec.references)
    )
    for i, entry in enumerate(spec.compiled):
        _check_compiled(f"[[compiled]] #{i + 1}", entry, spec)
    checked = Spec(path, name, spec, variants, references)
    rows = checked.rows()
    for row in rows:
        if rows.count(row) > 1:
            raise _Bad("rows", f"{row!r} is named twice (programs, variants, artifacts, kept)")
    for i, pair in enumerate(spec.pairs):
        for row in pair:
            if row not in rows:
                raise _Bad(f"field 'pairs' #{i + 1}", f"{row!r} is not one of the spec's rows")
    for i, other in enumerate(spec.across):
        sibling = path.parent / f"{other}.toml"
        if other == name or not sibling.exists():
            raise _Bad(f"field 'across' #{i + 1}", f"no other spec {sibling}")
    if not rows:
        raise _Bad("field 'programs'", "the spec names no row (programs, variants, compiled)")
    return checked


def _program(name: str) -> None:
    from netcast.programs import get_program

    get_program(name)


def _knobs(program: str, knobs: dict[str, Any]) -> None:
    from netcast.programs import get_program
    from netcast.programs.knobs import validate

    validate(program, get_program(program).Knobs, knobs)


def _check_compiled(where: str, entry: CompiledEntry, spec: SpecFile) -> None:
    from netcast.optimize.compile import METRICS, SELECT_ON
    from netcast.optimize.joint import TIES
    from netcast.optimize.race import is_race
    from netcast.optimize.registry import optimizer_names
    from netcast.optimize.workflow import TEACHERS

    if (entry.program is None) == (entry.source is None):
        raise _Bad(where, "give exactly one of 'program' (compile) or 'from' (recompile)")
    if entry.source is not None:
        return
    program = entry.program or ""
    choices = {
        "optimizer": (entry.optimizer, optimizer_names()),
        "teacher": (entry.teacher, TEACHERS),
        "metric": (entry.metric, METRICS),
        "ties": (entry.ties, TIES),
        "select_on": (entry.select_on, (None, *SELECT_ON)),
    }
    for key, (value, allowed) in choices.items():
        if value not in allowed:
            shown = ", ".join(str(a) for a in allowed if a is not None)
            raise _Bad(f"{where}: field '{key}'", f"unknown {key} {value!r}; choose one of {shown}")
    if not is_race(program):
        _check(f"{where}: field 'program'", lambda: _program(program))
        _check(f"{where}: field 'set'", lambda: _knobs(program, entry.knobs))
    if entry.grid and entry.optimizer != "joint" and not is_race(program):
        raise _Bad(f"{where}: field 'grid'", "a grid is searched by optimizer = 'joint' only")


def _check_ablation(spec: SpecFile) -> dict[str, Any]:
    from netcast.evaluation.ablation import TABLES

    if spec.table not in TABLES:
        raise _Bad(
            "field 'table'", f"unknown table {spec.table!r}; choose one of {', '.join(TABLES)}"
        )
    table = TABLES[spec.table]
    if not spec.configs:
        raise _Bad("[[config]]", "an ablation spec names at least one configuration")
    folders = [c.folder for c in spec.configs]
    for i, config in enumerate(spec.configs):
        where = f"[[config]] #{i + 1}"
        if config.folder in folders[:i]:
            raise _Bad(where, f"label {config.label!r} names the same folder as an earlier one")
        _check(f"{where}: field 'program'", lambda c=config: _program(c.program))
        _check(f"{where}: field 'knobs'", lambda c=config: _knobs(c.program, c.knobs))
    unknown = sorted(set(spec.options) - set(table.options))
    if unknown:
        allowed = ", ".join(table.options) or "none"
        raise _Bad(
            f"field 'options.{unknown[0]}'", f"not an option of table {table.name} ({allowed})"
        )
    options = {**table.options, **spec.options}
    for key, default in table.options.items():
        if not isinstance(options[key], type(default)) and not (
            isinstance(default, float) and isinstance(options[key], int)
        ):
            raise _Bad(f"field 'options.{key}'", f"expected {type(default).__name__}")
    if spec.judge is not None and table.judge is None:
        raise _Bad("field 'judge'", f"table {table.name} has no judge column")
    return options


def spec_paths(directory: str | Path = "benchmarks/specs") -> list[Path]:
    """Every spec file in ``directory``, sorted."""
    return sorted(Path(directory).glob("*.toml"))


# --- running ----------------------------------------------------------------------------------


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


def missing(spec: Spec, rows: Sequence[str]) -> list[str]:
    """The bench ``rows`` of ``spec`` that lack some of its questions."""
    from netcast.data import load_dataset

    f = spec.file
    wanted = {ex.id for ex in load_dataset(f.dataset, f.split, f.limit).examples}
    folder = spec.run_dir / spec.folder

    def saved(row: str) -> set[str]:
        return {x["id"] for x in saved_rows(folder / row / "predictions.jsonl")}

    return [r for r in rows if not wanted <= saved(r)]


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


def joint_settings(
    budget: int | None, grid: dict[str, list[Any]], ties: str | None = None
) -> dict[str, Any]:
    """A joint compile's (or a race's) optimizer settings: its budget of model calls, the rule
    among ties (None: the optimizer's default), the demonstration sources (the grid's
    ``demos``) and the values tried for each other knob the grid names (checked when the
    compile starts)."""
    from netcast.optimize.joint import TIES

    if ties is not None and ties not in TIES:
        raise InputError(f"unknown --ties {ties!r}; choose one of {', '.join(TIES)}")
    values = dict(grid)
    settings: dict[str, Any] = {"budget": budget} | ({"ties": ties} if ties else {})
    if "demos" in values:
        settings["demos"] = [str(v) for v in values.pop("demos")]
    if values:
        settings["grid"] = values
    return settings


def lm_kwargs(spec: Spec, n_ctx: int | None = None) -> dict[str, Any]:
    """The model settings a spec's rows run with: free decoding, an embedded model's window."""
    kwargs: dict[str, Any] = {}
    if spec.file.decoding == "free":
        kwargs["constrained"] = False
    if n_ctx or spec.file.n_ctx:
        kwargs["n_ctx"] = n_ctx or spec.file.n_ctx
    return kwargs


def compile_entry(
    spec: Spec, entry: CompiledEntry, make: MakeLM, threads: int = 1, progress: bool = True
) -> Path | None:
    """Compile ``entry``'s artifact with its options unless it exists (a committed artifact is
    reused as it is); the path compiled, or None."""
    from netcast.optimize.race import is_race
    from netcast.optimize.workflow import compile_recipe, make_recipe, recompile

    out = Path(entry.artifact)
    if (out / "program.json").exists():
        return None
    model = entry.model or spec.file.model
    lm = make(model, **lm_kwargs(spec, entry.n_ctx))
    if entry.source is not None:
        recompile(entry.source, model, out, lm=lm, threads=threads, progress=progress)
        return out
    program = entry.program or ""
    searched = entry.optimizer == "joint" or is_race(program)
    recipe = make_recipe(
        program=program,
        knobs=dict(entry.knobs),
        dataset=entry.dataset or spec.file.dataset,
        train_limit=entry.train_limit,
        dev_limit=entry.dev_limit,
        optimizer=entry.optimizer,
        optimizer_settings=joint_settings(entry.budget, entry.grid, entry.ties)
        if searched
        else None,
        metric=entry.metric,
        model=model,
        teacher_model=entry.teacher_model,
        retriever=spec.file.retriever,
        seed=entry.seed,
        select_on=entry.select_on or "dev",
        teacher=entry.teacher,
    )
    teacher_lm = make(entry.teacher_model) if entry.teacher_model else None
    compile_recipe(recipe, out, threads=threads, progress=progress, lm=lm, teacher_lm=teacher_lm)
    return out


def run_spec(
    spec: Spec, make: MakeLM | None = None, threads: int = 1, progress: bool = True
) -> SpecRun:
    """Run ``spec``, resuming: its missing artifacts are compiled, then every row's missing
    questions run (finished questions are read back, not run again). ``make`` builds a model
    from its name (default ``netcast.make_lm``; the command line adds endpoints and retries)."""
    if make is None:
        from netcast.models import make_lm as make
    if spec.file.kind == "ablation":
        from netcast.evaluation.ablation import run_ablation

        return run_ablation(spec, make, threads=threads, progress=progress)
    from netcast.evaluation.bench import run_bench

    done = SpecRun(spec)
    for entry in spec.file.compiled:
        if (path := compile_entry(spec, entry, make, threads, progress)) is not None:
            done.compiled.append(path)
    # rows run with the spec's model settings, except artifacts compiled in their own window
    groups: dict[int | None, list[CompiledEntry]] = {None: []}
    for entry in spec.file.compiled:
        own = entry.n_ctx if entry.n_ctx and entry.n_ctx != spec.file.n_ctx else None
        groups.setdefault(own, []).append(entry)
    for n_ctx, entries in groups.items():
        main = n_ctx is None
        names = [e.name for e in entries]
        if main:
            names += [*spec.file.programs, *(v for v, _, _ in spec.variants), *spec.references]
        if not missing(spec, names):
            continue  # every question of these rows is saved: no model is made
        lm = make(spec.file.model, **lm_kwargs(spec, n_ctx))
        _, results = run_bench(
            spec.run_dir,
            spec.file.programs if main else [],
            [spec.file.dataset],
            lm=lm,
            split=spec.file.split,
            limit=spec.file.limit,
            retriever=spec.file.retriever,
            compiled=[e.artifact for e in entries],
            variants=spec.file.variants if main else [],
            references=spec.file.references if main else [],
            threads=threads,
            progress=progress,
            info={"command": spec.command("bench")},
        )
        done.results += [(name, result, lm) for (_, name), result in results.items()]
    return done


# --- the tables -------------------------------------------------------------------------------


def spec_report(spec: Spec) -> str:
    """The spec's tables in markdown, from its saved per-question rows (no model call)."""
    if spec.file.kind == "ablation":
        from netcast.evaluation.ablation import ablation_report

        return ablation_report(spec)
    return "\n".join(bench_report(spec)) + "\n"


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


def spec_results(spec: Spec) -> list[Any]:
    """The saved rows (``report.Results``) of a bench spec's rows, in the spec's order."""
    from netcast.evaluation.report import read_results

    if not (spec.run_dir / spec.folder).is_dir():
        return []
    wanted = spec.rows()
    found = [
        r
        for r in read_results(spec.run_dir)
        if r.dataset == spec.folder and r.program in wanted and r.rows
    ]
    return sorted(found, key=lambda r: wanted.index(r.program))


BENCH_COLUMNS = [
    "row",
    "n",
    "F1 [95% CI]",
    "EM",
    "vs basic [95% CI]",
    "p",
    "vs its program [95% CI]",
    "p",
    "gap closed",
    "gold recall",
    "answer in context",
    "prompt tokens/q",
    "tokens/q",
    "s/q",
]


def bench_cells(row: dict[str, Any], kept: Sequence[str] = ()) -> list[str]:
    """One row of the spec's main table from ``report.summary_rows``' row."""
    from netcast.evaluation.report import _fmt, _fmt_ci, _fmt_diff, _fmt_p

    name = row["program"]
    if row.get("reference"):
        name += " (reference)"
    elif row["program"] in kept:
        name += " (earlier code, kept)"
    gap = row.get("gap_closed")

    def mean(metric: str, digits: int) -> str:
        return _fmt(row[metric][0], digits)

    def count(value: float | None) -> str:
        return "-" if value is None else f"{value:,.0f}"

    return [
        name,
        str(row["n"]),
        _fmt_ci(row["f1"]),
        mean("em", 3),
        _fmt_diff(row["diff_vs_basic"]),
        _fmt_p(row["p_vs_basic"]),
        _fmt_diff(row["diff_vs_uncompiled"]),
        _fmt_p(row["p_vs_uncompiled"]),
        "-" if gap is None else f"{100 * gap:.0f}%",
        mean("recall", 3),
        mean("answer_in_context", 2),
        count(row["tokens_in"]),
        count(row["tokens"]),
        _fmt(row["seconds"], 1),
    ]


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
    ]


def bench_report(spec: Spec) -> list[str]:
    """A bench spec's tables: one row per spec row (intervals, paired differences against
    ``basic`` and against the row's own program, gap closed, cost), its named pairs, the same
    strategy across the models of the specs it names in ``across``, the cost line and the
    per-step outcomes (``netcast.evaluation.report``'s)."""
    from netcast.evaluation.report import (
        _fmt_diff,
        _fmt_p,
        compare,
        cost_lines,
        model_lines,
        read_results,
        step_lines,
        summary_rows,
    )

    lines = header_lines(spec)
    results = spec_results(spec)
    missing = [r for r in spec.rows() if r not in {res.program for res in results}]
    rows = summary_rows(results) if results else []
    lines += [
        "F1 and EM: SQuAD answer scores; F1 with its 95% bootstrap interval over questions. vs "
        "basic: the paired F1 difference against `basic` on the same questions (95% bootstrap "
        "interval, sign-flip p); vs its program: the same for a compiled artifact or a knob "
        "variant against its program as shipped. Gap closed: (F1 - basic) / (reference-gold - "
        "basic). Gold recall: the gold passages among those retrieved; answer in context: the "
        "share of questions whose gold answer is in the passages read. Cost: means per "
        "question.",
        "",
        *markdown_table(BENCH_COLUMNS, [bench_cells(r, spec.file.kept) for r in rows]),
    ]
    if missing:
        lines += [f"Not run yet: {', '.join(missing)} (`{spec.command('bench')}`).", ""]
    by_name = {r.program: r for r in results}
    pairs = [(a, b) for a, b in spec.file.pairs if a in by_name and b in by_name]
    if pairs:
        cells = []
        for a, b in pairs:
            test = compare(by_name[a], by_name[b])
            cells.append([a, b, str(test["n"]), _fmt_diff(test["diff"]), _fmt_p(test["p"])])
        lines += ["## Pairs", "", "F1 of A - B on the questions both answered.", ""]
        lines += markdown_table(["A", "B", "n", "A - B [95% CI]", "p"], cells)
    for other_name in spec.file.across:
        other = read_spec(spec.path.parent / f"{other_name}.toml")
        mine, theirs = spec_results(spec), spec_results(other)
        if not mine or not theirs:
            continue
        both = read_results(other.run_dir, spec.run_dir)  # B - A: this spec's model - other's
        keep = {(r.source, r.dataset, r.program) for r in both if _in(r, spec) or _in(r, other)}
        lines += model_lines([r for r in both if (r.source, r.dataset, r.program) in keep])
    lines += compile_lines(spec)
    if rows:
        lines += cost_lines(rows)
        lines += step_lines(rows)
    return lines


def compile_lines(spec: Spec) -> list[str]:
    """Each compiled artifact's search as its recipe keeps it: the knobs it chose and, for a
    joint compile, every trial on held-out training questions and its test against the
    defaults (a race: the race's choice)."""
    from netcast.optimize.joint import searched_knobs, trial_cells, versus_defaults_line
    from netcast.optimize.race import RACE_COLUMNS, changed_knobs, race_cells, race_line, race_title

    lines: list[str] = []
    for entry in spec.file.compiled:
        path = Path(entry.artifact) / "recipe.json"
        if not path.exists():
            continue
        recipe = json.loads(path.read_text())
        joint = recipe.get("joint") or {}
        trials = joint.get("trials") or []
        searched = searched_knobs(trials)
        race = recipe.get("race")
        if race:
            won = [r for r in race["table"] if r["program"] == recipe["program"]]
            demos = next((r["demos"] for r in won if r["reason"] == "chosen"), "none")
            knobs = f"the winner {recipe['program']}, " + changed_knobs(
                recipe["program"], recipe["knobs"]
            )
            knobs += f", demonstrations {demos}"
        elif searched:
            knobs = "chose " + json.dumps({k: recipe["knobs"].get(k) for k in searched})
            knobs += f" with demonstrations {joint.get('chosen_demos', '-')}"
        else:
            knobs = "knobs " + (json.dumps(entry.knobs) if entry.knobs else "at their defaults")
        lines += [f"## Compile: {entry.name}", ""]
        lines += [f"Optimizer {recipe['optimizer']['name']}; {knobs}.", ""]
        if race:
            lines += [race_line(race).replace("\n", "\n\n"), "", race_title(race) + ":", ""]
            lines += markdown_table(list(RACE_COLUMNS), race_cells(race))
        if trials:
            cells = [
                trial_cells(
                    t,
                    ", ".join(f"{n} {json.dumps(t['knobs'].get(n))}" for n in searched) or "-",
                )
                for t in trials
            ]
            columns = ["trial", "knobs", "demos", "validation F1", "questions", "tokens/q"]
            lines += markdown_table([*columns, "calls", "state"], cells)
            if line := versus_defaults_line(joint.get("versus_defaults")):
                lines += [line, ""]
            if joint.get("untried"):
                lines += [f"{joint['untried']} grid point(s) left untried by the budget.", ""]
    return lines


def _in(result: Any, spec: Spec) -> bool:
    return (
        result.source == spec.run_dir.name
        and result.dataset == spec.folder
        and result.program in spec.rows()
    )
