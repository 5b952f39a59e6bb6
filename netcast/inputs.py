"""Checks of inputs that parse but mislead, run before the first model call: an artifact whose
recipe names a program or knobs netcast does not have (``check_recipe``).

What cannot be used stops the command with one line naming the file and field (``InputError``,
exit 2)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from netcast.errors import InputError


def check_recipe(directory: str | Path, recipe: Mapping[str, Any]) -> None:
    """Refuse an artifact whose ``recipe.json`` names a program netcast does not have, or knobs
    that program does not take (what ``netcast.load`` would refuse), naming the file and
    field."""
    from netcast.programs import get_program
    from netcast.programs.knobs import validate

    where = Path(directory) / "recipe.json"
    try:
        cls = get_program(recipe["program"])
    except InputError as err:
        raise InputError(f"{where}: field 'program': {err}") from None
    try:
        validate(recipe["program"], cls.Knobs, dict(recipe["knobs"]))
    except InputError as err:
        raise InputError(f"{where}: field 'knobs': {err}") from None
