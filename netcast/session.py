"""Wiring shared by the command line and the Python API: a dataset's retriever, a program built
for a model, and a compiled program loaded from its artifact, bound to its own model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from netcast.corpus import Corpus, doc_id_of_chunk
from netcast.data import QADataset, load_corpus
from netcast.data.registry import no_passages
from netcast.errors import InputError
from netcast.indexing import cached_index
from netcast.models import make_lm, model_name, token_counter
from netcast.models.tokens import TokenCounter as TokenCounterLike
from netcast.programs import get_program
from netcast.retrievers import Retriever, load_index


def open_retriever(
    dataset: QADataset | None = None,
    index: str | Path | None = None,
    kind: str = "bm25",
    counter: TokenCounterLike | None = None,
) -> Retriever:
    """A saved index when ``index`` is given, else the (cached) index of the dataset's corpus,
    its chunks' tokens counted with ``counter`` (give the counter of the model that will read
    them: ``netcast.token_counter(lm)``; default: the embedded model's tokenizer)."""
    if index is not None:
        retriever = load_index(index)
        if dataset is not None:
            gold_by_title(dataset.examples, retriever.corpus)
        return retriever
    if dataset is None:
        raise InputError("give a dataset or an index directory")
    if not dataset.documents:
        raise no_passages(dataset.name)
    return cached_index(dataset.corpus_name, dataset.documents, counter or token_counter(), kind)


def gold_by_title(examples: list, corpus: Corpus) -> int:
    """Give the examples that name their gold evidence only by title (``gold_titles``, no
    ``gold_ids``: a QA file without paragraphs) the ids of the corpus documents with exactly
    those titles, so retrieval recall is measured against a saved index. Returns how many
    examples got gold ids."""
    wanted = {t for ex in examples if not ex.get("gold_ids") for t in ex.get("gold_titles") or []}
    if not wanted:
        return 0
    docs: dict[str, list[str]] = {}
    for chunk_id, title in corpus.titles():
        if title in wanted:
            doc_id = doc_id_of_chunk(chunk_id)
            if doc_id not in docs.setdefault(title, []):
                docs[title].append(doc_id)
    linked = 0
    for ex in examples:
        if not ex.get("gold_ids") and ex.get("gold_titles"):
            ex["gold_ids"] = [d for t in ex["gold_titles"] for d in docs.get(t, [])]
            linked += bool(ex["gold_ids"])
    return linked


def retriever_recipe(retriever: Retriever, dataset: QADataset | str | None) -> dict[str, Any]:
    """Where a program's index lives and what it must contain (for artifacts)."""
    name = dataset.name if isinstance(dataset, QADataset) else dataset
    return {
        "kind": retriever.kind,
        "index": retriever.location,
        "dataset": name,
        "corpus": getattr(dataset, "corpus_name", name),
        "corpus_hash": retriever.corpus.content_hash(),
        "token_counter": retriever.corpus.token_counter,
    }


def retriever_from_recipe(spec: dict[str, Any]) -> Retriever:
    """Re-open the index named in a recipe, or rebuild it from the recipe's dataset corpus when
    the directory is gone (another machine); either way the corpus content hash must match."""
    from netcast.models.tokens import counter_named

    wanted = spec.get("corpus_hash")
    location = spec.get("index")
    if location and (Path(location) / "index.json").exists():
        return load_index(location, expected_hash=wanted)
    if not spec.get("dataset"):
        raise InputError(
            f"index {location} is gone and the recipe names no dataset to rebuild it from; "
            "pass retriever=... (or --index)"
        )
    corpus_name, documents = load_corpus(spec["dataset"])
    counter = counter_named(spec.get("token_counter") or "")
    rebuilt = cached_index(corpus_name, documents, counter, spec["kind"])
    if wanted and rebuilt.corpus.content_hash() != wanted:
        raise InputError(
            f"rebuilt index of {spec['dataset']!r} has corpus hash "
            f"{rebuilt.corpus.content_hash()[:12]}, the artifact expects {wanted[:12]}"
        )
    return rebuilt


def build_program(
    name: str, retriever: Retriever, knobs: dict[str, Any] | None = None, lm: Any = None
):
    """Program ``name`` over ``retriever``, its knobs checked, sized for ``lm``."""
    return get_program(name)(retriever, lm=lm, **(knobs or {}))


def load(
    directory: str | Path,
    model: Any = None,
    retriever: Retriever | None = None,
    allow_pickle: bool = False,
    merge_adapter: bool = False,
    program: str | None = None,
    knobs: dict[str, Any] | None = None,
):
    """A ready compiled program from an artifact directory: knobs and prompts restored, index
    re-opened (content hash checked), and the program bound to its model (``program.set_lm``):
    the recipe's model, with the LM settings it was compiled with (an embedded model's context
    window), unless ``model`` (a model name or a ``dspy.BaseLM``) overrides it. An artifact
    whose model was tuned (``lora.gguf``) serves its adapter over that model, which must be the
    adapter's base (``netcast.models.lora.serve_artifact_adapter``); one tuned with an adapter
    per step (``lora-<step>.gguf``) runs each step on its own. ``merge_adapter=True``
    serves it merged into a cached copy of the model file instead (``netcast.models.merge``:
    near the base model's speed, a few greedy tokens apart from the runtime adapter's); an LM
    given as ``model`` that already merges (``make_lm(..., merge_adapter=True)``) keeps doing
    so. DSPy's global settings are left alone, so two loaded programs keep their own models.
    ``program`` runs the artifact's prompts and model with another strategy that has every
    step the artifact compiled (``combined`` from an ``iterative`` compile: the same steps;
    ``one_shot`` from a ``basic`` one: its answer step), at the artifact's knobs that strategy
    has (``_knobs_for``) updated with ``knobs``. Its other steps keep their own prompts and
    run on ``model`` untuned. A strategy without one of the artifact's steps is one line."""
    import dspy

    from netcast.artifacts import load_program_state, read_artifact

    recipe, _, _ = read_artifact(directory)
    if isinstance(model, dspy.BaseLM):
        lm = model
    else:
        spec = recipe["model"]
        if model is None or model_name(model) == model_name(spec.get("name")):
            lm = make_lm(model_name(spec.get("name")), **(spec.get("lm_kwargs") or {}))
        else:  # another model: the recipe's settings were for its own
            lm = make_lm(model_name(model))
    trained_on, step_lms, untuned = None, {}, lm
    if recipe.get("finetune"):  # a tuned model: its adapters, checked against lm's weights
        from netcast.models.lora import served_from

        step_lms = _tuned_lms(lm, Path(directory), recipe["finetune"], merge_adapter)
        lm = step_lms.pop(None, lm)
        if served_from(lm):  # the adapter on a server: prompted as the tuned model was trained
            spec = recipe["model"]
            trained_on = make_lm(model_name(spec.get("name")), **(spec.get("lm_kwargs") or {}))
    retriever = retriever or retriever_from_recipe(recipe["retriever"])
    name = program or recipe["program"]
    if name != recipe["program"]:  # each of the artifact's steps, whatever the knobs
        mine, theirs = (
            sorted(n for n, _ in build_program(p, retriever, lm=lm).named_predictors())
            for p in (name, recipe["program"])
        )
        if not set(theirs) <= set(mine):
            raise InputError(
                f"{directory}: {name} cannot run {recipe['program']}'s compiled steps (its "
                f"steps are {', '.join(mine)})"
            )
    settings = _knobs_for(name, recipe, knobs or {})
    built = build_program(name, retriever, settings, lm=trained_on or lm)
    restored = load_program_state(
        built, Path(directory), allow_pickle, partial=name != recipe["program"]
    )
    built.set_lm(lm)
    for step, predictor in built.named_parameters():
        if step not in restored:  # another strategy's own step: its prompt, the untuned model
            predictor.lm = untuned
    steps = {n.removesuffix(".predict"): p for n, p in built.named_predictors()}
    if unknown := sorted(set(step_lms) - set(steps)):
        raise InputError(
            f"{directory / 'recipe.json'}: field 'finetune': an adapter for step {unknown[0]!r}, "
            f"which {name} has not (its steps: {', '.join(steps)})"
        )
    for step, step_lm in step_lms.items():  # a step with its own adapter runs it
        steps[step].lm = step_lm
    return built


def _tuned_lms(lm: Any, directory: Path, entry: dict[str, Any], merge: bool) -> dict[Any, Any]:
    """``lm`` serving each adapter a tuned artifact holds, by the step it serves (None: the
    one its steps share; ``netcast.models.lora.artifact_adapters``), merged into a cached copy
    of the model file where ``merge``. A server serves one adapter: one per step is refused."""
    from netcast.models.lora import (
        adapter_file,
        artifact_adapters,
        parse_model_id,
        serve_artifact_adapter,
    )

    adapters = artifact_adapters(entry)
    if None not in adapters:  # one adapter per step: this process serves them all
        try:
            parse_model_id(str(getattr(lm, "model", lm)))
        except InputError:
            files = ", ".join(adapter_file(step) for step in adapters)
            raise InputError(
                f"{directory}: its steps run adapters of their own ({files}), which only the "
                f"embedded model they were tuned on serves here, not {getattr(lm, 'model', lm)} "
                "(a server serves one adapter)"
            ) from None
    served = {step: serve_artifact_adapter(lm, directory, e) for step, e in adapters.items()}
    if merge:
        from netcast.models.lora_provider import merging

        served = {step: merging(step_lm) for step, step_lm in served.items()}
    return served


def _knobs_for(name: str, recipe: dict[str, Any], knobs: dict[str, Any]) -> dict[str, Any]:
    """The knobs ``load`` builds program ``name`` with: the recipe's (its own program), or
    (another strategy) only those the recipe set away from its program's defaults that the
    other strategy has, so it keeps its own defaults (``combined``'s budgeted first round) and
    its own retrieval (``one_shot`` has no ``links``); then ``knobs``. Aliases are read as
    their knobs' names first."""
    own = get_program(recipe["program"])
    recorded = own.stored_knobs(recipe["knobs"])
    if name != recipe["program"]:
        defaults, theirs = own.knob_defaults(), get_program(name).knob_defaults()
        recorded = {
            k: v
            for k, v in recorded.items()
            if k in theirs and (k not in defaults or defaults[k] != v)
        }
    return {**recorded, **get_program(name).stored_knobs(knobs)}


SERVED_CHECK = 3  # questions on which a served tuned model must answer as it does here


def check_served(directory: str | Path, lm: Any, questions: list[str], retriever=None) -> None:
    """One ``InputError`` line unless the server behind ``lm`` serves tuned artifact
    ``directory``'s adapter: on the first ``SERVED_CHECK`` of ``questions`` its answers must be
    the ones the tuned model gives in this process (greedy decoding: the same weights give the
    same answers). Its replies are not taken from DSPy's cache, which does not key on the
    server. Nothing to check for an artifact with no adapter or a model in this process."""
    from netcast.models.lora import served_from

    if not (Path(directory) / "lora.gguf").exists() or not served_from(lm):
        return
    here = load(directory, retriever=retriever)
    there = load(directory, model=lm.copy(cache=False), retriever=retriever)
    differ = []
    for question in questions[:SERVED_CHECK]:
        mine, theirs = here(question=question).answer, there(question=question).answer
        if mine.strip() != theirs.strip():
            differ.append(f"{question!r}: {theirs!r}, here {mine!r}")
    if differ:
        from netcast.artifacts import read_artifact
        from netcast.models.embedded import model_path

        base = model_path(model_name(read_artifact(directory)[0]["model"].get("name")))
        raise InputError(
            f"{', '.join(served_from(lm))} ({lm.model}) does not serve {directory}'s adapter: "
            f"{len(differ)} of {min(len(questions), SERVED_CHECK)} answers differ from the tuned "
            f"model's here ({differ[0]}); serve it with python -m netcast.models.serve --model "
            f"{base} --lora_path {Path(directory) / 'lora.gguf'}"
        )


__all__ = [
    "build_program",
    "check_served",
    "load",
    "open_retriever",
    "retriever_from_recipe",
    "retriever_recipe",
]
