"""Compiled-program artifacts: a directory of JSON files, written atomically.

    program.json   the DSPy program state (instructions, demos) as DSPy saves it
    recipe.json    how to rebuild it: strategy and knobs, retriever, dataset and splits,
                   optimizer and settings, metric, model and LM settings, seed
    scores.json    dev scores before and after compiling (quality and cost)
    meta.json      format, versions (netcast, dspy, python), lineage (parent artifact)

Loading never unpickles unless the caller passes ``allow_pickle=True``.
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from pathlib import Path
from typing import Any

import dspy

from netcast.errors import InputError
from netcast.files import atomic_directory

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


def save_artifact(
    out: str | Path,
    program: dspy.Module,
    recipe: dict[str, Any],
    scores: dict[str, Any],
    parent: str | Path | None = None,
) -> Path:
    """Write the artifact into a temporary sibling directory, then rename it into place, so a
    killed compile never leaves a half-written artifact at ``out``."""
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
    with atomic_directory(out) as tmp:
        program.save(str(tmp / "program.json"))
        for name, data in (("recipe.json", recipe), ("scores.json", scores), ("meta.json", meta)):
            (tmp / name).write_text(json.dumps(data, indent=2, sort_keys=True))
    return out


def _read_json(path: Path, kind: type = dict) -> Any:
    """The JSON object in ``path``; anything else (not UTF-8 text, not JSON, not an object) is
    refused with one line naming the file."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError(
            f"{path}: not a JSON text file (binary content, e.g. a pickle); refusing to load it"
        ) from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: corrupted JSON (line {err.lineno}: {err.msg})") from None
    if not isinstance(value, kind):
        raise InputError(
            f"{path}: expected a JSON object, found a JSON {type(value).__name__}; not a "
            "netcast artifact file"
        )
    return value


def read_artifact(directory: str | Path) -> tuple[dict, dict, dict]:
    """(recipe, scores, meta), checked: every file present, valid JSON, a known format."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: no such artifact directory")
    for name in REQUIRED:
        if not (directory / name).exists():
            if name == "program.json" and (directory / "program.pkl").exists():
                continue
            raise InputError(f"{directory}: missing {name} (not a netcast artifact, or incomplete)")
    recipe = _read_json(directory / "recipe.json")
    scores = _read_json(directory / "scores.json")
    meta = _read_json(directory / "meta.json")
    if meta.get("format") != FORMAT:
        raise InputError(
            f"{directory}/meta.json: artifact format {meta.get('format')!r}, this netcast reads "
            f"{FORMAT}"
        )
    missing = [k for k in RECIPE_KEYS if k not in recipe]
    if missing:
        raise InputError(f"{directory}/recipe.json: missing field(s) {', '.join(missing)}")
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


def load_program_state(program: dspy.Module, directory: Path, allow_pickle: bool) -> None:
    json_path, pkl_path = directory / "program.json", directory / "program.pkl"
    if json_path.exists():
        state = _read_json(json_path)
        state.pop("metadata", None)
        align_signature_fields(program, state)
        try:
            program.load_state(state)
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(
                f"{json_path}: state does not fit program {type(program).__name__} ({err})"
            ) from None
        return
    if not allow_pickle:
        raise InputError(
            f"{pkl_path}: the program state is a pickle, which can run arbitrary code; "
            "refusing to load it (pass allow_pickle=True only for files you trust)"
        )
    program.load(str(pkl_path), allow_pickle=True)
