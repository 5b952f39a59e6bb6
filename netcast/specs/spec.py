"""Reading a spec file and checking it before anything runs (:func:`read_spec`: a bad spec is
one line naming the file and the field), and running it, resuming (:func:`run_spec`: missing
artifacts are compiled with their declared options, then every row's missing questions run).
Relative paths in a spec are read from the working directory (the repository root for the
committed specs)."""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from netcast.errors import InputError
from netcast.specs.model import (
    ABLATION_ONLY,
    BENCH_ONLY,
    CompiledEntry,
    ConfigEntry,
    MakeLM,
    Spec,
    SpecFile,
    SpecRun,
    lm_kwargs,
    saved_rows,
)

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
    from netcast.specs.bench import parse_variant
    from netcast.specs.reference import reference_name

    name = path.name.removesuffix(".toml")
    if spec.dataset not in dataset_names() and not spec.dataset.endswith(".jsonl"):
        raise _Bad(
            "field 'dataset'",
            f"unknown dataset {spec.dataset!r}; choose one of {', '.join(dataset_names())} "
            "or a .jsonl file",
        )
    if spec.split not in ("train", "dev", "all"):
        raise _Bad("field 'split'", f"unknown split {spec.split!r}; choose train, dev or all")
    _check_served(spec.model, spec.n_ctx, spec.decoding, "")
    for i, entry in enumerate(spec.compiled):
        entry_name = f"[[compiled]] #{i + 1}"
        _check_served(entry.model or spec.model, entry.n_ctx, spec.decoding, entry_name)
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


def _check_served(model: str, n_ctx: int | None, decoding: str, entry: str) -> None:
    """An embedded model's settings (a window, free decoding) given for a model on a server,
    which has its server's window and decoding: refused, naming the field (of ``entry``, the
    compiled entry whose model it is, or of the spec where ``entry`` is "")."""
    from netcast.models import is_embedded

    if is_embedded(model):
        return
    if n_ctx:
        where = f"{entry}: field 'n_ctx'" if entry else "field 'n_ctx'"
        raise _Bad(where, f"an embedded model's window; {model} has its server's")
    if decoding == "free":
        whose = f"{entry}'s model" if entry else "model"
        raise _Bad(
            "field 'decoding'",
            f"'free' is for embedded models; the {whose} {model} decodes as its server does",
        )


def _program(name: str) -> None:
    from netcast.programs import get_program

    get_program(name)


def _knobs(program: str, knobs: dict[str, Any]) -> None:
    from netcast.programs import get_program
    from netcast.programs.knobs import validate

    validate(program, get_program(program).Knobs, knobs)


def _check_compiled(where: str, entry: CompiledEntry, spec: SpecFile) -> None:
    from netcast.optimize.compile import METRICS, SELECT_ON
    from netcast.optimize.race import is_race
    from netcast.optimize.registry import optimizer_names
    from netcast.optimize.settings import TIES
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
    if entry.finetune_set and entry.optimizer not in ("finetune", "better-together"):
        raise _Bad(
            f"{where}: field 'finetune_set'",
            "configures optimizer = 'finetune' or 'better-together' only",
        )


def _check_ablation(spec: SpecFile) -> dict[str, Any]:
    from netcast.specs.papers.registry import TABLES

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


def missing(spec: Spec, rows: Sequence[str]) -> list[str]:
    """The bench ``rows`` of ``spec`` that lack some of its questions."""
    from netcast.data import load_dataset

    f = spec.file
    wanted = {ex.id for ex in load_dataset(f.dataset, f.split, f.limit).examples}
    folder = spec.run_dir / spec.folder

    def saved(row: str) -> set[str]:
        return {x["id"] for x in saved_rows(folder / row / "predictions.jsonl")}

    return [r for r in rows if not wanted <= saved(r)]


def compile_entry(
    spec: Spec, entry: CompiledEntry, make: MakeLM, threads: int = 1, progress: bool = True
) -> Path | None:
    """Compile ``entry``'s artifact with its options unless it exists (a committed artifact is
    reused as it is); the path compiled, or None."""
    from netcast.optimize.registry import compile_optimizer, options_settings
    from netcast.optimize.workflow import compile_recipe, make_recipe, recompile

    out = Path(entry.artifact)
    if (out / "program.json").exists():
        return None
    model = entry.model or spec.file.model
    lm = make(model, **lm_kwargs(spec, entry.n_ctx, model))
    if entry.source is not None:
        recompile(entry.source, model, out, lm=lm, threads=threads, progress=progress)
        return out
    program = entry.program or ""
    optimizer = compile_optimizer(program, entry.optimizer, entry.teacher)
    settings = options_settings(optimizer, entry.budget, entry.grid, entry.ties, entry.finetune_set)
    recipe = make_recipe(
        program=program,
        knobs=dict(entry.knobs),
        dataset=entry.dataset or spec.file.dataset,
        train_split=entry.train_split,
        train_limit=entry.train_limit,
        dev_limit=entry.dev_limit,
        optimizer=entry.optimizer,
        optimizer_settings=settings,
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
    """Run ``spec``, resuming: each missing artifact is compiled and, before the next compile,
    the rows whose artifacts exist run their missing questions (finished questions are read
    back, not run again), so a long spec's rows come as their artifacts do; then every row
    that still lacks questions. ``make`` builds a model from its name (default
    ``netcast.make_lm``; the command line adds endpoints and retries)."""
    if make is None:
        from netcast.models import make_lm as make
    if spec.file.kind == "ablation":
        from netcast.specs.papers.ablation import run_ablation

        return run_ablation(spec, make, threads=threads, progress=progress)
    done = SpecRun(spec)
    results: dict[str, tuple[str, Any, Any]] = {}  # a row run again replaces its earlier result
    for entry in spec.file.compiled:
        if (path := compile_entry(spec, entry, make, threads, progress)) is not None:
            done.compiled.append(path)
            results.update(run_rows(spec, make, threads, progress))
    results.update(run_rows(spec, make, threads, progress))
    done.results = list(results.values())
    return done


def run_rows(
    spec: Spec, make: MakeLM, threads: int = 1, progress: bool = True
) -> dict[str, tuple[str, Any, Any]]:
    """The missing questions of ``spec``'s rows whose artifacts exist (a compiled artifact not
    made yet has no row); each row run, by name, with its result and model. Rows run with the
    spec's model settings, except artifacts compiled in their own window."""
    from netcast.specs.bench import run_bench

    groups: dict[int | None, list[CompiledEntry]] = {None: []}
    for entry in spec.file.compiled:
        if not (Path(entry.artifact) / "program.json").exists():
            continue
        own = entry.n_ctx if entry.n_ctx and entry.n_ctx != spec.file.n_ctx else None
        groups.setdefault(own, []).append(entry)
    done: dict[str, tuple[str, Any, Any]] = {}
    for n_ctx, entries in groups.items():
        main = n_ctx is None
        names = [e.name for e in entries]
        if main:
            names += [*spec.file.programs, *(v.label for v in spec.variants), *spec.references]
        if not missing(spec, names):
            continue  # every question of these rows is saved: no model is made
        lm = make(spec.file.model, **lm_kwargs(spec, n_ctx))
        _, ran = run_bench(
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
        done.update({name: (name, result, lm) for (_, name), result in ran.items()})
    return done
