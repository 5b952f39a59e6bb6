"""The workflows behind the command line, as functions the Python API calls too: evaluate a
program on a dataset into a resumable run directory; compile a recipe (score on dev, compile on
train, score again, save an artifact, load it back); recompile an artifact with another model
(optionally re-tuning its knobs first); tune knobs with Optuna and export the picked trial.

Every function takes the LM it runs with; it runs under ``dspy.context(lm=...)`` and never
changes DSPy's global settings."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy

from netcast.artifacts import read_artifact, save_artifact
from netcast.data import load_dataset
from netcast.files import short_hash, slug
from netcast.models import make_lm, model_name, token_counter
from netcast.optimize import tune as tuning
from netcast.optimize.compile import compile_program, default_settings
from netcast.optimize.evaluate import EvalResult, evaluate
from netcast.session import build_program, load, open_retriever, retriever_recipe


@dataclass
class CompileResult:
    artifact: Path
    before: dict[str, Any]
    after: dict[str, Any]
    seconds: float
    reloaded: dict[str, Any] | None = None


def run_evaluation(
    program: str,
    dataset: str,
    lm: dspy.BaseLM,
    *,
    split: str = "dev",
    limit: int | None = None,
    retriever: str = "bm25",
    index: str | Path | None = None,
    corpus: str | Path | None = None,
    knobs: dict[str, Any] | None = None,
    threads: int = 1,
    judge_lm: dspy.BaseLM | None = None,
    run_dir: str | Path | None = None,
    max_errors: int = 3,
    progress: bool = True,
) -> EvalResult:
    """Evaluate ``program`` on ``dataset``/``split`` with ``lm`` into ``run_dir`` (default:
    ``runs/<program>-<dataset>-<split>-<retriever>-<model>-<hash of the settings>``);
    rerunning the same evaluation resumes it."""
    data = load_dataset(dataset, split, limit, corpus)
    index_obj = open_retriever(data, index, retriever, token_counter(lm))
    prog = build_program(program, index_obj, knobs, lm=lm)
    info = {
        "program": program,
        "knobs": prog.knobs,
        "dataset": dataset,
        "split": split,
        "model": lm.model,
        "retriever": index_obj.kind,
        "corpus_hash": index_obj.corpus.content_hash(),
        "judge_model": getattr(judge_lm, "model", None),
    }
    name = "-".join(
        [program, slug(dataset), split, index_obj.kind, slug(lm.model), short_hash(info)]
    )
    with dspy.context(lm=lm):
        return evaluate(
            prog,
            data.examples,
            run_dir=Path(run_dir) if run_dir else Path("runs") / name,
            run_info=info,
            threads=threads,
            judge_lm=judge_lm,
            max_errors=max_errors,
            progress=progress,
        )


def make_recipe(
    *,
    program: str,
    knobs: dict[str, Any],
    dataset: str,
    train_split: str = "train",
    dev_split: str = "dev",
    train_limit: int | None = None,
    dev_limit: int | None = None,
    optimizer: str = "bootstrap",
    optimizer_settings: dict[str, Any] | None = None,
    metric: str = "f1",
    model: str | None = None,
    teacher_model: str | None = None,
    retriever: str = "bm25",
    seed: int = 0,
) -> dict[str, Any]:
    return {
        "program": program,
        "knobs": knobs,
        "retriever": {"kind": retriever},
        "dataset": {
            "name": dataset,
            "train_split": train_split,
            "dev_split": dev_split,
            "train_limit": train_limit,
            "dev_limit": dev_limit,
        },
        "optimizer": {
            "name": optimizer,
            "settings": {**default_settings(optimizer), **(optimizer_settings or {})},
        },
        "metric": metric,
        "model": {"name": model_name(model), "lm_kwargs": {}},
        "teacher_model": teacher_model,
        "seed": seed,
    }


def recipe_lm(recipe: dict[str, Any]) -> dspy.BaseLM:
    """The LM a recipe names."""
    spec = recipe["model"]
    return make_lm(model_name(spec["name"]), **(spec.get("lm_kwargs") or {}))


def compile_recipe(
    recipe: dict[str, Any],
    out: str | Path,
    *,
    parent: str | Path | None = None,
    threads: int = 1,
    progress: bool = True,
    lm: dspy.BaseLM | None = None,
    reload: bool = False,
) -> CompileResult:
    """Run a recipe (program, knobs, dataset and splits, optimizer, metric, model, seed) and
    save the artifact to ``out``. ``lm`` replaces the model the recipe names (an LM object the
    caller built). With ``reload``, the saved artifact is loaded back as a user would and
    scored on the same dev questions."""
    lm = lm or recipe_lm(recipe)
    teacher = recipe.get("teacher_model")
    teacher_lm = make_lm(teacher) if teacher else None
    data = recipe["dataset"]
    train = load_dataset(data["name"], data["train_split"], data.get("train_limit"))
    dev = load_dataset(data["name"], data["dev_split"], data.get("dev_limit"))
    retriever = open_retriever(train, kind=recipe["retriever"]["kind"], counter=token_counter(lm))
    program = build_program(recipe["program"], retriever, recipe["knobs"], lm=lm)

    with dspy.context(lm=lm):
        before = evaluate(program, dev.examples, threads=threads, progress=progress).aggregate
        start = time.perf_counter()
        compiled = compile_program(
            program,
            train.examples,
            optimizer=recipe["optimizer"]["name"],
            metric=recipe["metric"],
            teacher_lm=teacher_lm,
            valset=dev.examples,
            seed=recipe["seed"],
            threads=threads,
            settings=recipe["optimizer"].get("settings"),
        )
        seconds = time.perf_counter() - start
        after = evaluate(compiled, dev.examples, threads=threads, progress=progress).aggregate

    full_recipe = {
        **recipe,
        "knobs": program.knobs,
        "retriever": retriever_recipe(retriever, train),
        "model": {**recipe["model"], "resolved": lm.model},
    }
    scores = {"before": before, "after": after, "compile_seconds": seconds}
    artifact = save_artifact(out, compiled, full_recipe, scores, parent=parent)
    reloaded = None
    if reload:
        loaded = load(artifact, model=lm)
        reloaded = evaluate(loaded, dev.examples, threads=threads, progress=False).aggregate
    return CompileResult(artifact, before, after, seconds, reloaded)


def recompile(
    source: str | Path,
    model: str | None,
    out: str | Path,
    *,
    knobs: dict[str, Any] | None = None,
    threads: int = 1,
    progress: bool = True,
    lm: dspy.BaseLM | None = None,
) -> tuple[CompileResult, dict[str, Any]]:
    """Rerun ``source``'s recipe with ``model`` (and optionally re-tuned ``knobs``); the new
    artifact's lineage names ``source``. Returns the result and the old scores."""
    recipe, old_scores, _ = read_artifact(source)
    new_recipe = {**recipe, "model": {"name": model_name(model), "lm_kwargs": {}}}
    if knobs is not None:
        new_recipe["knobs"] = knobs
    new_recipe["retriever"] = {"kind": recipe["retriever"]["kind"]}
    result = compile_recipe(
        new_recipe, out, parent=source, threads=threads, progress=progress, lm=lm
    )
    return result, old_scores


def retune_knobs(source: str | Path, lm: dspy.BaseLM, trials: int) -> dict[str, Any]:
    """Re-tune ``source``'s knobs for ``lm`` (in-memory study, by the recipe's metric)."""
    recipe, _, _ = read_artifact(source)
    data = recipe["dataset"]
    train = load_dataset(data["name"], data["train_split"], data.get("train_limit"))
    dev = load_dataset(data["name"], data["dev_split"], data.get("dev_limit"))
    study = tuning.open_study(f"retune-{Path(source).name}", None, [recipe["metric"]])
    with dspy.context(lm=lm):
        tuning.tune(
            study,
            trials,
            program_name=recipe["program"],
            retriever=open_retriever(
                train, kind=recipe["retriever"]["kind"], counter=token_counter(lm)
            ),
            trainset=train.examples,
            devset=dev.examples,
            objectives=[recipe["metric"]],
            lm=lm,
        )
    return tuning.pick(study, "best-quality").user_attrs["knobs"]


@dataclass
class TuneResult:
    study: Any
    name: str
    storage: str
    objectives: list[str]
    chosen: Any
    artifact: Path | None = None


def run_tuning(
    program: str,
    dataset: str,
    lm: dspy.BaseLM,
    *,
    trials: int = 6,
    objectives: str = "f1,cost",
    compile_each: bool = False,
    optimizer: str = "bootstrap",
    train_split: str = "train",
    dev_split: str = "dev",
    train_limit: int | None = 20,
    dev_limit: int | None = 20,
    retriever: str = "bm25",
    storage: str | None = None,
    study: str | None = None,
    pick_rule: str = "knee",
    out: str | Path | None = None,
    seed: int = 0,
    heartbeat: int = 30,
) -> TuneResult:
    """Tune ``program``'s knobs (a resumable, distributable Optuna study) and, with ``out``,
    export the trial ``pick_rule`` chooses as an artifact."""
    names = tuning.parse_objectives(objectives)
    tuning.check_pick_rule(pick_rule)
    train = load_dataset(dataset, train_split, train_limit)
    dev = load_dataset(dataset, dev_split, dev_limit)
    index = open_retriever(train, kind=retriever, counter=token_counter(lm))
    storage = storage or "sqlite:///runs/tune.db"
    if storage.startswith("sqlite:///") and not storage.endswith(":memory:"):
        Path(storage.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    name = study or f"{program}-{slug(dataset)}-{slug(lm.model)}-{objectives}"
    the_study = tuning.open_study(name, storage, names, seed=seed, heartbeat=heartbeat)
    with dspy.context(lm=lm):
        tuning.tune(
            the_study,
            trials,
            program_name=program,
            retriever=index,
            trainset=train.examples,
            devset=dev.examples,
            objectives=names,
            compile_each=compile_each,
            optimizer=optimizer,
            metric=names[0],
            seed=seed,
            lm=lm,
        )
    chosen = tuning.pick(the_study, pick_rule)
    result = TuneResult(the_study, name, storage, names, chosen)
    if out is None:
        return result
    knobs = chosen.user_attrs["knobs"]
    prog = build_program(program, index, knobs, lm=lm)
    if compile_each:
        with dspy.context(lm=lm):
            prog = compile_program(
                prog, train.examples, optimizer=optimizer, metric=names[0], seed=seed
            )
    recipe = make_recipe(
        program=program,
        knobs=knobs,
        dataset=dataset,
        train_split=train_split,
        dev_split=dev_split,
        train_limit=train_limit,
        dev_limit=dev_limit,
        optimizer=optimizer if compile_each else "bootstrap",
        metric=names[0],
        model=getattr(lm, "embedded_name", None) or lm.model,
        retriever=retriever,
        seed=seed,
    )
    recipe["retriever"] = retriever_recipe(index, train)
    recipe["compiled"] = compile_each
    recipe["tuning"] = {
        "study": name,
        "storage": storage,
        "trial": chosen.number,
        "pick": pick_rule,
        "objectives": names,
    }
    scores = {"before": None, "after": chosen.user_attrs.get("aggregate")}
    result.artifact = save_artifact(out, prog, recipe, scores)
    return result
