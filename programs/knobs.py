"""Knobs: each strategy's settings as a typed pydantic model, checked when a program is built.

A strategy declares ``class Knobs(netcast.programs.knobs.Knobs)`` with one field per knob (its
default is the paper's setting; ``Literal`` where a knob has choices) and, through ``knob(...,
search=...)``, the range Optuna tunes it over. One generic ``search_space`` then serves every
strategy, and a wrong type (``top_k="abc"``) or an unknown knob fails before anything runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from netcast.errors import InputError
from netcast.programs.shared.budget import budget_range
from netcast.programs.shared.rerank import valid_signal


class Knobs(BaseModel):
    """Base of every strategy's knobs: unknown names and wrong types are refused (strict, so
    ``True`` is not an int and ``"3"`` is not a number). A program holds its checked knobs as
    this model (``program.knobs.top_k``), fixed once it is built (frozen: the steps it built
    depend on them); ``program.knobs.model_dump()`` is the dict recipes and run logs store."""

    model_config = ConfigDict(extra="forbid", strict=True, validate_default=True, frozen=True)


K = TypeVar("K", bound=Knobs)


def knob(default: Any, search: Any = None, **field: Any) -> Any:
    """A knob with its default and, optionally, the range ``search_space`` tunes it over."""
    return Field(default, json_schema_extra={"search": search} if search else None, **field)


# Knobs several strategies share, declared once as field types (``rerank_pool: knobs.RerankPool
# = 0``); a strategy adds a search range where it has measured one (``knobs.knob(0, search=...)``).

Signal = Annotated[str, AfterValidator(valid_signal)]
"""A ``programs.shared.rerank`` signal: retriever, dense, likelihood, verdict, or rrf:a+b of
them. Model signals cost a call per candidate, so no signal knob has a search range."""

OptionalSignal = Annotated[
    str | None, AfterValidator(lambda value: value if value is None else valid_signal(value))
]
"""A ``Signal``, or ``None`` for none."""

RerankPool = Annotated[int, Field(ge=0)]
"""The precision step in front of a search's results (``programs.shared.search``): fetch this
many candidates and keep the k that the ``rerank_signal`` knob scores best (0: none, the top
k are fetched)."""

Links = Annotated[int, Field(ge=0)]
"""The link hop after a search (``programs.shared.links``): up to this many passages that its
results name by title join them (0: none)."""


@dataclass(frozen=True)
class IntRange:
    low: int
    high: int
    log: bool = False

    def suggest(self, trial, name: str, context_window: int) -> int:
        return trial.suggest_int(name, self.low, self.high, log=self.log)


@dataclass(frozen=True)
class FloatRange:
    low: float
    high: float

    def suggest(self, trial, name: str, context_window: int) -> float:
        return trial.suggest_float(name, self.low, self.high)


@dataclass(frozen=True)
class Choice:
    options: tuple

    def suggest(self, trial, name: str, context_window: int) -> Any:
        return trial.suggest_categorical(name, list(self.options))


@dataclass(frozen=True)
class BudgetRange:
    """Token budgets from 256 to half the model's context window (log scale)."""

    def suggest(self, trial, name: str, context_window: int) -> int:
        low, high = budget_range(context_window)
        return trial.suggest_int(name, low, high, log=True)


def check(program: str, schema: type[K], values: dict[str, Any]) -> K:
    """``values`` as ``schema``'s model (defaults filled in), or ``InputError`` naming the
    first bad knob."""
    try:
        return schema.model_validate(values)
    except ValidationError as err:
        first = err.errors()[0]
        name = ".".join(str(part) for part in first["loc"]) or "?"
        if first["type"] == "extra_forbidden":
            valid = ", ".join(schema.model_fields)
            raise InputError(f"{program}: unknown knob {name!r}; knobs are {valid}") from None
        raise InputError(
            f"{program}: knob {name!r} = {first.get('input')!r}: {first['msg']}"
        ) from None


def validate(program: str, schema: type[Knobs], values: dict[str, Any]) -> dict[str, Any]:
    """The full knob dict (defaults filled in), or ``InputError`` naming the first bad knob."""
    return check(program, schema, values).model_dump()


def defaults(schema: type[Knobs]) -> dict[str, Any]:
    return schema().model_dump()


def search_space(schema: type[Knobs], trial, context_window: int) -> dict[str, Any]:
    """Knob values suggested by an Optuna ``trial`` for every knob that declares a range."""
    suggested = {}
    for name, field in schema.model_fields.items():
        search = (field.json_schema_extra or {}).get("search")
        if search is not None:
            suggested[name] = search.suggest(trial, name, context_window)
    return suggested


def parse_pairs(pairs: list[str]) -> dict[str, Any]:
    """``["top_k=3", "mode=exact"]`` -> ``{"top_k": 3, "mode": "exact"}``: values read as JSON
    when they parse, else kept as strings (types are checked when the program is built)."""
    knobs = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set expects knob=value, got {pair!r}")
        try:
            knobs[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            knobs[key.strip()] = value
    return knobs


def parse_grid(pairs: list[str]) -> dict[str, list[Any]]:
    """``["top_k=3,4,5", "demos=none"]`` -> ``{"top_k": [3, 4, 5], "demos": ["none"]}``: the
    values a joint compile tries for each knob named (each read as in ``parse_pairs``)."""
    grid: dict[str, list[Any]] = {}
    for pair in pairs:
        key, sep, values = pair.partition("=")
        items = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not key.strip() or not items:
            raise InputError(f"--grid expects knob=value[,value...], got {pair!r}")
        grid[key.strip()] = [parse_pairs([f"value={v}"])["value"] for v in items]
    return grid
