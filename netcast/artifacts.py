"""Compiled-program artifacts: a directory of JSON files, written atomically.

    program.json   the DSPy program state (instructions, demos) as DSPy saves it
    recipe.json    how to rebuild it: strategy and knobs, retriever, dataset and splits,
                   optimizer and settings, metric, model and LM settings, seed
    scores.json    dev scores before and after compiling (quality and cost)
    meta.json      format, versions (netcast, dspy, python), lineage (parent artifact)
    lora.gguf      a tuned model's LoRA adapter (``--optimizer finetune``), when the program
                   runs one; the recipe's ``finetune`` entry holds its and its base's sha256
    lora-<step>.gguf  instead, each step's own adapter (``multitask=false``); the entry holds
                   each under ``finetune.steps``

Loading never unpickles unless the caller passes ``allow_pickle=True``.
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import time
from pathlib import Path
from typing import Any

import dspy

from netcast.errors import InputError
from netcast.files import atomic_directory
from netcast.formats import PROGRAM_STATE, Meta, Recipe, Scores, check_shape, read_json

FORMAT = 1
REQUIRED = ("program.json", "recipe.json", "scores.json", "meta.json")
RECIPE_KEYS = ("program", "knobs", "retriever", "dataset", "optimizer", "metric", "model", "seed")


def versions() -> dict[str, str]:
    import netcast

    return {
        "netcast": netcast.__version__,
        "dspy": dspy.__version__,
        "python": platform.python_version(),
    }


def recipe_hash(recipe: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()


def artifact_id(directory: str | Path) -> str:
    """What a run records of the artifact it ran: one sha256 over its program state and its
    recipe (which names a tuned model's adapter by the adapter's sha256), so the rows of an
    artifact compiled again into the same folder are never resumed as the new one's."""
    digest = hashlib.sha256()
    for name in ("program.json", "program.pkl", "recipe.json"):
        path = Path(directory) / name
        if path.is_file():
            digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def save_artifact(
    out: str | Path,
    program: dspy.Module,
    recipe: dict[str, Any] | Recipe,
    scores: dict[str, Any],
    parent: str | Path | None = None,
    files: dict[str, Path] | None = None,
) -> Path:
    """Write the artifact into a temporary sibling directory, then rename it into place, so a
    killed compile never leaves a half-written artifact at ``out``. ``recipe`` may be the typed
    one (``netcast.formats.Recipe``): it is written as ``recipe.json`` holds it. ``files``: more
    files to copy in, by their name in the artifact (a tuned model's ``lora.gguf``)."""
    if not isinstance(recipe, dict):
        recipe = recipe.to_dict()
    missing = [k for k in RECIPE_KEYS if k not in recipe]
    if missing:
        raise ValueError(f"recipe lacks {missing}")
    out = Path(out)
    lineage = None
    if parent is not None:
        parent_recipe, _, _ = read_artifact(parent)
        lineage = {
            "parent": str(Path(parent).resolve()),
            "parent_recipe_hash": recipe_hash(parent_recipe),
        }
    meta = {
        "format": FORMAT,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": versions(),
        "lineage": lineage,
        "recipe_hash": recipe_hash(recipe),
    }
    with atomic_directory(out, "recipe.json", "artifact") as tmp:
        program.save(str(tmp / "program.json"))
        for name, source in (files or {}).items():
            shutil.copyfile(source, tmp / name)
        for name, data in (("recipe.json", recipe), ("scores.json", scores), ("meta.json", meta)):
            (tmp / name).write_text(json.dumps(data, indent=2, sort_keys=True))
    return out


def read_artifact(directory: str | Path) -> tuple[dict, dict, dict]:
    """(recipe, scores, meta), checked: every file present, valid JSON of its shape
    (``netcast.formats``), a known format."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: no such artifact directory")
    for name in REQUIRED:
        if not (directory / name).exists():
            if name == "program.json" and (directory / "program.pkl").exists():
                continue
            raise InputError(f"{directory}: missing {name} (not a netcast artifact, or incomplete)")
    meta = read_json(directory / "meta.json", dict, "artifact's meta file")
    if meta.get("format") != FORMAT:
        raise InputError(
            f"{directory}/meta.json: artifact format {meta.get('format')!r}, this netcast reads "
            f"{FORMAT}"
        )
    check_shape(meta, Meta, str(directory / "meta.json"))
    recipe = read_json(directory / "recipe.json", Recipe, "artifact's recipe")
    scores = read_json(directory / "scores.json", Scores, "artifact's scores")
    return recipe, scores, meta


def align_signature_fields(program: dspy.Module, state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with each predictor's saved signature fields in the program's field order.
    DSPy restores a field's prefix and description by position, so a signature whose fields
    were reordered since the save would get its neighbours' descriptions; saved fields are
    matched to the current ones by prefix (``Question:`` is ``question``), and left as saved
    when their prefixes are not the current ones in another order."""
    for name, predictor in program.named_predictors():
        saved = (state.get(name) or {}).get("signature") or {}
        fields = saved.get("fields")
        current = [f.json_schema_extra.get("prefix") for f in predictor.signature.fields.values()]
        if not isinstance(fields, list) or not all(isinstance(f, dict) for f in fields):
            continue
        prefixes = [f.get("prefix") for f in fields]
        if prefixes == current or not all(isinstance(p, str) for p in [*prefixes, *current]):
            continue
        if len(set(prefixes)) == len(prefixes) and sorted(prefixes) == sorted(current):
            by_prefix = dict(zip(prefixes, fields, strict=True))
            saved["fields"] = [by_prefix[prefix] for prefix in current]
    return state


def load_program_state(
    program: dspy.Module, directory: Path, allow_pickle: bool, partial: bool = False
) -> list[str]:
    """Restore ``program``'s steps from the artifact's state; returns the steps restored.
    Every step must have a state, unless ``partial``: then the steps the state holds are
    restored and the others keep their own (another strategy running an artifact's steps)."""
    json_path, pkl_path = directory / "program.json", directory / "program.pkl"
    if json_path.exists():
        state = read_json(json_path, dict, "artifact's program state")
        state.pop("metadata", None)
        names = [name for name, _ in program.named_parameters()]
        missing = [name for name in names if name not in state]
        if partial and len(missing) < len(names):
            state, missing = {name: state[name] for name in names if name in state}, []
        if missing:
            raise InputError(
                f"{json_path}: state does not fit program {type(program).__name__} (no state "
                f"for its {', '.join(missing)}; the file holds {', '.join(state) or 'none'})"
            )
        check_shape(state, PROGRAM_STATE, str(json_path))
        align_signature_fields(program, state)
        try:
            _load_steps(program, state)
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(
                f"{json_path}: state does not fit program {type(program).__name__} ({err})"
            ) from None
        return list(state)
    if not allow_pickle:
        raise InputError(
            f"{pkl_path}: the program state is a pickle, which can run arbitrary code; "
            "refusing to load it (pass allow_pickle=True only for files you trust)"
        )
    program.load(str(pkl_path), allow_pickle=True)
    return [name for name, _ in program.named_parameters()]


def _load_steps(program: dspy.Module, state: dict[str, Any]) -> None:
    """DSPy's ``load_state`` for the steps ``state`` holds (a trial run on a copy first, so a
    state that does not fit leaves ``program`` untouched)."""

    def apply(module: dspy.Module) -> None:
        for name, param in module.named_parameters():
            if name in state:
                param.load_state(state[name])

    apply(program.deepcopy())
    apply(program)
