"""Knobs: each strategy's settings as a typed pydantic model, checked when a program is built.

A strategy declares ``class Knobs(netcast.programs.knobs.Knobs)`` with one field per knob (its
default is the paper's setting; ``Literal`` where a knob has choices) and, through ``knob(...,
search=...)``, the range Optuna tunes it over. One generic ``search_space`` then serves every
strategy, and a wrong type (``k="abc"``) or an unknown knob fails before anything runs.

One concept has one name in every strategy: ``k`` is the retrieval depth (passages a search
returns) and ``max_steps`` the loop limit (turns, iterations, hops or reasoning steps). Where a
paper or tutorial names the knob otherwise, that name is an alias (``knob(..., aliases=
("top_k",))``): accepted wherever knobs are given (constructor keywords, ``--set``, stored
recipes and run directories) and read as the knob's own name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from netcast.errors import InputError
from netcast.programs.shared.budget import budget_range
from netcast.programs.shared.rerank import valid_signal


class Knobs(BaseModel):
    """Base of every strategy's knobs: unknown names and wrong types are refused (strict, so
    ``True`` is not an int and ``"3"`` is not a number). A program holds its checked knobs as
    this model (``program.knobs.k``), fixed once it is built (frozen: the steps it built
    depend on them); ``program.knobs.model_dump()`` is the dict recipes and run logs store."""

    model_config = ConfigDict(extra="forbid", strict=True, validate_default=True, frozen=True)

    @classmethod
    def aliases(cls) -> dict[str, str]:
        """Each alias of a knob (a paper's own name for it) -> the knob's name."""
        return {
            alias: name
            for name, field in cls.model_fields.items()
            for alias in (field.json_schema_extra or {}).get("aliases", ())
        }

    @model_validator(mode="before")
    @classmethod
    def _named(cls, values: Any) -> Any:
        """Aliases read as their knob's name (a knob given under both is refused)."""
        return renamed(cls, values, strict=True) if isinstance(values, dict) else values


K = TypeVar("K", bound=Knobs)


def knob(default: Any, search: Any = None, aliases: tuple[str, ...] = (), **field: Any) -> Any:
    """A knob with its default and, optionally, the range ``search_space`` tunes it over and
    the other names it is accepted under (``aliases``: a paper's own name for it)."""
    extra = {"search": search} if search else {}
    extra |= {"aliases": aliases} if aliases else {}
    return Field(default, json_schema_extra=extra or None, **field)


def renamed(schema: type[Knobs], values: dict[str, Any], strict: bool = False) -> dict[str, Any]:
    """``values`` with each alias replaced by its knob's name, in the same order; names that
    are neither are kept as they are. A knob given under two names is an ``InputError`` with
    ``strict``, else the knob's own name wins (a stored dict is read, never refused)."""
    aliases = schema.aliases()
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = aliases.get(key, key)
        if name in values and name != key:  # given under its own name too
            if strict:
                raise InputError(f"knob {name!r} is given twice, as {name!r} and as {key!r}")
            continue
        out[name] = value
    return out


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


def renamed_for(program: str, schema: type[Knobs], values: dict[str, Any]) -> dict[str, Any]:
    """``renamed`` for knobs a caller gave: a knob given under two names is an ``InputError``
    naming ``program``."""
    try:
        return renamed(schema, values, strict=True)
    except InputError as err:
        raise InputError(f"{program}: {err}") from None


def check(program: str, schema: type[K], values: dict[str, Any]) -> K:
    """``values`` as ``schema``'s model (defaults filled in; an alias read as its knob), or
    ``InputError`` naming the first bad knob as it was given."""
    named = renamed_for(program, schema, values)
    given = {schema.aliases().get(key, key): key for key in values}  # the caller's spelling
    try:
        return schema.model_validate(named)
    except ValidationError as err:
        first = err.errors()[0]
        name = ".".join(str(part) for part in first["loc"]) or "?"
        name = given.get(name, name)
        if first["type"] == "extra_forbidden":
            raise InputError(
                f"{program}: unknown knob {name!r}; knobs are {names(schema)}"
            ) from None
        raise InputError(
            f"{program}: knob {name!r} = {first.get('input')!r}: {first['msg']}"
        ) from None


def names(schema: type[Knobs]) -> str:
    """The knobs' names for a message, each alias after its knob: ``k (or top_k), links``."""
    aliases: dict[str, list[str]] = {}
    for alias, name in schema.aliases().items():
        aliases.setdefault(name, []).append(alias)
    return ", ".join(
        name + (f" (or {', '.join(aliases[name])})" if name in aliases else "")
        for name in schema.model_fields
    )


def holds(schema: type[Knobs], name: str) -> bool:
    """Whether ``name`` is one of ``schema``'s knobs or an alias of one."""
    return name in schema.model_fields or name in schema.aliases()


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
    """``["k=3", "mode=exact"]`` -> ``{"k": 3, "mode": "exact"}``: values read as JSON
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
    """``["k=3,4,5", "demos=none"]`` -> ``{"k": [3, 4, 5], "demos": ["none"]}``: the
    values a joint compile tries for each knob named (each read as in ``parse_pairs``)."""
    grid: dict[str, list[Any]] = {}
    for pair in pairs:
        key, sep, values = pair.partition("=")
        items = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not key.strip() or not items:
            raise InputError(f"--grid expects knob=value[,value...], got {pair!r}")
        grid[key.strip()] = [parse_pairs([f"value={v}"])["value"] for v in items]
    return grid
