"""The shape of every file netcast reads back, declared once, and the readers that check it.

A file that cannot be used is refused with one ``InputError`` naming the file and, where the
file parses, the field: missing, cut short, not the format (a pickle, a text file), or the right
syntax in the wrong shape (``{"knobs": "top_k=3"}``, a vocabulary that is a list, an array of
another length). Shapes are pydantic models validated strictly (no coercion: a string is never
taken for a number); extra keys are allowed, so a newer netcast's additions do not stop an older
reader.

Files and their readers:

- JSON objects (``read_json``): an index's ``index.json`` (``IndexInfo``) and its BM25 files
  (``BM25Params``, ``VOCAB``); an artifact's ``recipe.json`` (``Recipe``), ``scores.json``
  (``Scores``), ``meta.json`` (``Meta``) and ``program.json`` (``PROGRAM_STATE``);
- JSONL records (``check_shape`` per line, ``where`` = ``file:line``): an in-memory index's
  ``chunks.jsonl`` (``ChunkRecord``), a run's ``predictions.jsonl`` (``RunRow``) and ``run.json``
  (``netcast.evaluation.runlog``); documents and dataset records have their own field-by-field
  checks (``netcast.corpus.document_from_record``, ``netcast.data``);
- arrays (``read_array``): BM25's ``.npy`` files (precomputed embeddings, two-dimensional, are
  checked by ``netcast.retrievers.dense.import_embeddings``);
- a faiss index (``read_faiss``): ``dense.faiss``.

How the parts of one index must agree (a BM25 folder's arrays, the number of chunks) is checked
by the retriever that loads them (``netcast.retrievers``), with these readers naming the file.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from netcast.errors import InputError

# --- checking a value against a shape -------------------------------------------------------


@lru_cache(maxsize=64)
def _adapter(shape: Any) -> TypeAdapter:
    return TypeAdapter(shape)


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def _found(value: Any) -> str:
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    kinds |= {int: "a number", float: "a number", type(None): "null"}
    kind = kinds.get(type(value), type(value).__name__)
    if isinstance(value, (str, int, float, bool)):
        shown = json.dumps(value)
        return f"{kind} {shown if len(shown) <= 40 else shown[:37] + '...'}"
    return kind


EXPECTED = {  # pydantic's error types, in JSON's words
    "dict_type": "an object",
    "model_type": "an object",
    "list_type": "a list",
    "string_type": "a string",
    "int_type": "a whole number",
    "float_type": "a number",
    "bool_type": "true or false",
}


def describe(err: ValidationError) -> str:
    """A pydantic error as one line: the first problem's field path and what it should be."""
    problems = err.errors(include_url=False)
    first = problems[0]
    loc = ".".join(str(part) for part in first["loc"])
    if first["type"] == "missing":
        text = "missing"
    elif first["type"] in EXPECTED:
        text = f"should be {EXPECTED[first['type']]}, found {_found(first['input'])}"
    else:
        text = f"{first['msg'][:1].lower()}{first['msg'][1:]}, found {_found(first['input'])}"
    where = f"field '{loc}': " if loc else ""
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    return f"{where}{text}{more}"


def check_shape(value: Any, shape: Any, where: str) -> Any:
    """``value`` if it has ``shape`` (a pydantic model or a type), else ``InputError`` naming
    ``where`` (a file, or ``file:line``) and the first field that is wrong."""
    try:
        _adapter(shape).validate_python(value, strict=True)
    except ValidationError as err:
        raise InputError(f"{where}: {describe(err)}") from None
    return value


# --- readers ----------------------------------------------------------------------------------


def read_json(path: str | Path, shape: Any = dict, what: str = "JSON file") -> Any:
    """The JSON value in ``path``, checked against ``shape``; missing, unreadable, binary (a
    pickle), cut short or misshapen content is one ``InputError`` naming the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: missing (the {what} is gone)") from None
    except UnicodeDecodeError:
        raise InputError(
            f"{path}: not a JSON text file (binary content, e.g. a pickle); refusing to load it"
        ) from None
    except OSError as err:
        raise InputError(f"{path}: cannot read ({err.strerror})") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: corrupted JSON (line {err.lineno}: {err.msg})") from None
    if shape is dict and not isinstance(value, dict):
        raise InputError(f"{path}: expected a JSON object, found a JSON {_json_type(value)}")
    return check_shape(value, shape, str(path))


def read_array(path: str | Path, kind: str, mmap: bool = True) -> np.ndarray:
    """A one-dimensional ``.npy`` array of ``kind`` (numpy kind codes: ``"f"`` floating,
    ``"iu"`` integers), memory-mapped unless ``mmap`` is false."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: missing (a file of the index is gone)")
    try:
        array = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise InputError(f"{path}: not a readable .npy array ({err})") from None
    if array.ndim != 1 or array.dtype.kind not in kind:
        expected = "floating point" if kind == "f" else "integer"
        raise InputError(
            f"{path}: a {array.dtype} array of shape {array.shape}, expected a one-dimensional "
            f"{expected} array"
        )
    return array


def read_faiss(path: str | Path, dim: int, n: int):
    """A faiss index of ``n`` vectors of ``dim`` dimensions."""
    import faiss

    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: missing (the dense index file is gone)")
    try:
        index = faiss.read_index(str(path))
    except RuntimeError as err:
        reason = next((x.strip() for x in str(err).splitlines() if "Error" in x), "")
        raise InputError(f"{path}: not a readable faiss index ({reason or 'unreadable'})") from None
    if index.d != dim:
        raise InputError(f"{path}: vectors of {index.d} dimensions, expected {dim}")
    if index.ntotal != n:
        raise InputError(
            f"{path}: {index.ntotal} vectors for the index's {n} chunks (a dense index of "
            "another corpus?)"
        )
    return index


# --- shapes ---------------------------------------------------------------------------------


class Shape(BaseModel):
    """A JSON object's required fields and their types; other fields are allowed."""

    model_config = ConfigDict(extra="allow", strict=True)


# an index directory (netcast.retrievers.store)
class IndexInfo(Shape):
    kind: Literal["bm25", "dense", "hybrid"]
    format: int = 1
    corpus_hash: str | None = None
    n_chunks: int | None = Field(default=None, ge=1)
    token_counter: str = ""


class BM25Params(Shape):
    num_docs: int = Field(ge=1)
    k1: float = 1.5
    b: float = 0.75
    delta: float = 0.5
    method: str = "lucene"
    idf_method: str | None = None
    dtype: str = "float32"
    int_dtype: str = "int32"


VOCAB = dict[str, int]  # BM25's vocabulary: token -> column


class ChunkRecord(Shape):
    """A line of an in-memory index's ``chunks.jsonl`` (``netcast.corpus.Chunk``)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    id: str
    doc_id: str
    title: str
    text: str
    n_tokens: int
    meta: dict[str, Any] = {}


# a run directory (netcast.evaluation.runlog): run.json is any object
class RunRow(Shape):
    """A line of a run's ``predictions.jsonl`` (``netcast.evaluation.evaluate.question_row``)."""

    id: str | int
    scores: dict[str, Any]
    trace: dict[str, Any] | None = None


# an artifact directory (netcast.artifacts)
class ModelSpec(Shape):
    name: str
    lm_kwargs: dict[str, Any] = {}


class RetrieverSpec(Shape):
    kind: Literal["bm25", "dense", "hybrid"]
    index: str | None = None
    saved_index: str | None = None
    corpus_hash: str | None = None
    token_counter: str | None = None


class DatasetSpec(Shape):
    name: str
    train_split: str = "train"
    dev_split: str = "dev"
    train_limit: int | None = None
    dev_limit: int | None = None
    select_on: Literal["dev", "train"] = "dev"


class OptimizerSpec(Shape):
    name: str
    settings: dict[str, Any] = {}


class Recipe(Shape):
    """How an artifact was compiled (``recipe.json``), and in memory the recipe a compile runs
    (``netcast.optimize.workflow``): made with ``recipe_of``, written with ``to_dict`` (the
    keys it was given, no defaults added, so a recipe read back writes the same JSON)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)
    program: str
    knobs: dict[str, Any]
    retriever: RetrieverSpec
    dataset: DatasetSpec
    optimizer: OptimizerSpec
    metric: str
    model: ModelSpec
    seed: int
    teacher_model: str | None = None
    teacher: str = "model"
    judge_model: str | None = None  # --metric judge's judge (absent: the compiled model)
    joint: dict[str, Any] | None = None
    race: dict[str, Any] | None = None
    tuning: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The recipe as ``recipe.json`` holds it."""
        return self.model_dump(exclude_unset=True)

    def updated(self, **changes: Any) -> Recipe:
        """A copy with ``changes`` (fields as ``recipe.json`` holds them), checked."""
        return recipe_of({**self.to_dict(), **changes})


def recipe_of(value: Recipe | dict[str, Any], where: str = "recipe") -> Recipe:
    """``value`` as a ``Recipe``; a misshapen one is one ``InputError`` naming ``where`` and
    the first wrong field."""
    if isinstance(value, Recipe):
        return value
    try:
        return Recipe.model_validate(value)
    except ValidationError as err:
        raise InputError(f"{where}: {describe(err)}") from None


class Scores(Shape):
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None


class Lineage(Shape):
    parent: str
    parent_recipe_hash: str


class Meta(Shape):
    format: int
    versions: dict[str, Any] = {}
    lineage: Lineage | None = None
    recipe_hash: str | None = None


class FieldState(Shape):
    prefix: str
    description: str


class SignatureState(Shape):
    instructions: str
    fields: list[FieldState]


class PredictorState(Shape):
    """One predictor's saved state, as DSPy's ``Predict.dump_state`` writes it."""

    signature: SignatureState
    demos: list[dict[str, Any]] = []
    lm: dict[str, Any] | None  # DSPy reads it: null when the predictor has no LM of its own


PROGRAM_STATE = dict[str, PredictorState]  # program.json without its "metadata"
