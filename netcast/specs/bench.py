"""``netcast bench``: run several strategies (and compiled artifacts) on the same questions,
with the same model, index and seeds, into one resumable run directory; then the report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import dspy

from netcast.artifacts import artifact_id
from netcast.data import load_dataset
from netcast.errors import InputError, ModelCallError
from netcast.evaluation.evaluate import EvalResult, evaluate
from netcast.files import short_hash, slug
from netcast.models import decoding_info, token_counter
from netcast.models.factory import check_questions, preflight
from netcast.programs import get_program, program_names
from netcast.programs.knobs import parse_pairs, validate
from netcast.session import build_program, check_served, load, open_retriever
from netcast.specs.reference import reference_name, reference_readers
from netcast.specs.report import bench_commands, write_report


def resolve_programs(spec: str | Sequence[str]) -> list[str]:
    """Program names from ``"a,b"`` or a list; ``all`` means every registered program.
    Unknown names are refused before anything runs."""
    names = list(spec) if not isinstance(spec, str) else [p.strip() for p in spec.split(",")]
    if names == ["all"]:
        return program_names()
    names = [n for n in names if n]
    for name in names:
        get_program(name)
    return names


class Variant(NamedTuple):
    """A bench row that runs ``program`` with ``knobs`` changed; with ``source``, a compiled
    artifact's prompts and adapter run by ``program`` (the artifact's knobs, then ``knobs``)."""

    label: str
    program: str
    knobs: dict[str, Any]
    source: str | None = None


def parse_variant(spec: str) -> Variant:
    """``"combined:notes=false,k=8"``: a strategy run with some knobs changed, beside the same
    strategy as shipped. Its label, ``combined-notes-false-k-8``, names its folder and its
    rows; the knobs are checked before anything runs. ``from=ARTIFACT`` among the pairs runs
    that artifact's prompts and tuned model with this strategy (one that has the artifact's
    steps: ``combined`` from an ``iterative`` compile, ``one_shot`` from a ``basic`` one), labelled
    ``combined-from-<artifact folder>``."""
    program, sep, pairs = spec.partition(":")
    program = program.strip()
    if not sep or not pairs.strip():
        raise InputError(f"--variant expects program:knob=value[,knob=value], got {spec!r}")
    knobs = parse_pairs([p for p in pairs.split(",") if p.strip()])
    source = knobs.pop("from", None)
    validate(program, get_program(program).Knobs, knobs)
    if source is None:
        return Variant(slug(f"{program}-{pairs}", limit=80), program, knobs)
    rest = ",".join(p for p in pairs.split(",") if p.strip() and not p.strip().startswith("from="))
    parts = [program, "from", Path(str(source)).name, *([rest] if rest else [])]
    label = slug("-".join(parts), limit=80)
    return Variant(label, program, knobs, str(source))


def bench_dir(settings: dict[str, Any]) -> Path:
    """The default run directory of a bench: ``runs/bench-<hash of its settings>``."""
    return Path("runs") / f"bench-{short_hash(settings)}"


def run_commands(run_dir: Path, command: str | None) -> list[str]:
    """Every distinct command that has filled ``run_dir`` (its ``bench.json``), ``command`` last:
    a run directory filled by several benches names each of them."""
    path = run_dir / "bench.json"
    commands = bench_commands(json.loads(path.read_text()) if path.exists() else {})
    if command and command not in commands:
        commands.append(command)
    return commands


def run_bench(
    run_dir: str | Path | None,
    programs: Sequence[str],
    datasets: Sequence[str],
    *,
    lm: dspy.BaseLM,
    split: str = "dev",
    limit: int | None = None,
    retriever: str = "bm25",
    compiled: Sequence[str | Path] = (),
    variants: Sequence[str] = (),
    references: Sequence[str] = (),
    threads: int = 1,
    progress: bool = True,
    max_errors: int = 3,
    info: dict[str, Any] | None = None,
    index: str | Path | None = None,
    server_check: bool = True,
) -> tuple[Path, dict[tuple[str, str], EvalResult]]:
    """Evaluate every program on every dataset into ``run_dir/<dataset>/<program>/`` (a dataset
    given as a path is named by a slug of it); finished questions are kept and skipped when the
    same bench is run again. ``variants`` (:func:`parse_variant`) add strategies with changed
    knobs, each compared in the report with its program as shipped. Returns the run directory
    and the results. A tuned compiled artifact run through a server is first checked to be
    served with its adapter (``netcast.session.check_served``) unless ``server_check`` is off."""
    changed = [parse_variant(v) for v in variants]
    reference_rows = [reference_name(r) for r in references]  # refused before anything runs
    _check_folders([*programs, *(v.label for v in changed), *map(str, compiled)], reference_rows)
    meta = {
        **(info or {}),
        "model": lm.model,
        **decoding_info(lm),
        "retriever": retriever,
        **({"index": str(index)} if index else {}),
        "split": split,
        "limit": limit,
        "programs": list(programs),
        "datasets": list(datasets),
        "compiled": [str(c) for c in compiled],
        **({"variants": list(variants)} if variants else {}),
        **({"references": reference_rows} if references else {}),
    }
    run_dir = Path(run_dir) if run_dir else bench_dir({k: meta[k] for k in meta if k != "command"})
    loaded = {
        dataset: load_dataset(dataset, split, limit, corpus_required=not index)
        for dataset in datasets
    }
    for data in loaded.values():  # a question too long for the model stops here too
        check_questions(data.questions(), lm)
    preflight(lm)  # a missing key or an unknown model stops here, before any question
    run_dir.mkdir(parents=True, exist_ok=True)
    meta["commands"] = run_commands(run_dir, meta.get("command"))
    (run_dir / "bench.json").write_text(json.dumps(meta, indent=2))
    results = {}
    for dataset in datasets:
        data = loaded[dataset]
        searcher = open_retriever(data, index, kind=retriever, counter=token_counter(lm))
        sources = [v.source for v in changed if v.source]
        checked = [*compiled, *sources] if server_check else ()
        entries = _entries(data, dataset, searcher, lm, programs, changed, compiled, references)
        for artifact in checked:  # a tuned one on a server: the server must serve its adapter
            check_served(artifact, lm, [ex.question for ex in data.examples], retriever=searcher)
        folder = slug(Path(dataset).stem if dataset.endswith(".jsonl") else dataset)
        for name, program, artifact in entries:
            if progress:
                print(f"{dataset} / {name}: {len(data.examples)} questions", flush=True)
            with dspy.context(lm=lm):
                results[(dataset, name)] = evaluate(
                    program,
                    data.examples,
                    run_dir=run_dir / folder / name,
                    run_info=_run_info(program, artifact, dataset, split, lm, retriever),
                    threads=threads,
                    progress=progress,
                    max_errors=max_errors,
                )
    _stop_if_none_finished(results, lm)
    write_report(run_dir)
    return run_dir, results


def _check_folders(rows: Sequence[str], references: Sequence[str]) -> None:
    """One line, before any question, when two of a bench's rows would fill one folder (two
    artifacts of the same folder name, two variants of one label)."""
    folders = [Path(row).name for row in rows] + list(references)
    twice = sorted({folder for folder in folders if folders.count(folder) > 1})
    if twice:
        raise InputError(
            f"two rows of this bench would fill one folder, {twice[0]!r}: drop one, or give "
            "the artifacts folders of their own"
        )


def _run_info(program, artifact, dataset: str, split: str, lm, retriever: str) -> dict:
    """What a row's run directory records, so that it resumes only the same run."""
    return {
        "program": program.name,
        "knobs": program.knobs.model_dump(),
        **({"artifact": artifact_id(artifact)} if artifact else {}),
        "dataset": dataset,
        "split": split,
        "model": lm.model,
        **decoding_info(lm),
        "retriever": retriever,
    }


def _entries(data, dataset, searcher, lm, programs, changed, compiled, references) -> list:
    """A bench's (name, program, artifact) triples on one dataset: the programs as shipped,
    the variants with changed knobs, the compiled artifacts (with their folder; the others
    None) and the reference readers."""
    entries = [(name, build_program(name, searcher, lm=lm), None) for name in programs]
    for label, program, knobs, source in changed:
        if source is None:
            entries.append((label, build_program(program, searcher, knobs, lm=lm), None))
        else:
            ran = load(source, model=lm, retriever=searcher, program=program, knobs=knobs)
            entries.append((label, ran, source))
    entries += [(Path(c).name, load(c, model=lm, retriever=searcher), c) for c in compiled]
    return entries + reference_readers(
        references,
        data.examples,
        dataset,
        lm=lm,
        load_artifact=lambda path: load(path, model=lm, retriever=searcher),
    )


def _stop_if_none_finished(results: dict[tuple[str, str], EvalResult], lm: Any) -> None:
    """With no question finished anywhere, nothing to report on: one line saying why."""
    if any(result.rows for result in results.values()):
        return
    failed = [r for r in results.values() if r.errors]
    if failed:
        from netcast.models.factory import endpoint

        first_id, first = next(iter(failed[0].errors.items()))
        n = sum(len(r.errors) for r in failed)
        raise ModelCallError(
            f"{n} question(s) failed calling {endpoint(lm)} and none finished (first, "
            f"{first_id}: {first}); run the same command again to resume"
        )
