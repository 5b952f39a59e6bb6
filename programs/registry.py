"""Strategy registry: ``@register`` on a program class makes it available by name."""

from __future__ import annotations

from typing import Any

from netcast.errors import InputError

PROGRAMS: dict[str, type] = {}


def register(cls: type) -> type:
    PROGRAMS[cls.name] = cls
    return cls


def get_program(name: str) -> type:
    try:
        return PROGRAMS[name]
    except KeyError:
        raise InputError(
            f"unknown program {name!r}; choose one of {', '.join(sorted(PROGRAMS))}"
        ) from None


def program_names() -> list[str]:
    return sorted(PROGRAMS)


def stored_knobs(name: str, knobs: dict[str, Any]) -> dict[str, Any]:
    """A stored knob dict (a recipe's, a run directory's) with each alias read as its knob's
    name (``top_k`` saved before basic's retrieval depth became ``k``); a program that is not
    registered keeps its dict as it is."""
    from netcast.programs.knobs import renamed

    cls = PROGRAMS.get(name)
    return renamed(cls.Knobs, knobs) if cls is not None else dict(knobs)
