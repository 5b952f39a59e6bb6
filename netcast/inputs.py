"""Checks of inputs that parse but mislead, run before the first model call: an artifact whose
recipe names a program or knobs netcast does not have (``check_recipe``), training and dev
questions that are the same questions (``check_split_overlap``), and a validation fold too
small for a race's or a joint compile's test to tell anything apart (``check_validation_fold``).

What cannot be used stops the command with one line naming the file and field (``InputError``,
exit 2); what can be used but would give a result that means less than it seems is one
``warning:`` line (``NetcastWarning``)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from netcast.errors import InputError, NetcastWarning


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


def check_split_overlap(train: Any, dev: Any) -> int:
    """Warn when the training and dev questions (two ``QADataset``\\ s) share question ids: a
    program compiled or tuned on them and scored on dev is scored on questions it was fitted
    to. Returns how many ids they share."""
    dev_ids = [str(ex.id) for ex in dev.examples]
    shared = set(dev_ids) & {str(ex.id) for ex in train.examples}
    if shared:
        first = next(i for i in dev_ids if i in shared)
        warnings.warn(
            NetcastWarning(
                f"{dev.name}: the training split ({train.split}) and the dev split "
                f"({dev.split}) share {len(shared)} of {len(dev_ids)} dev question id(s) (the "
                f"first: {first!r}); dev scores of a program fitted to them are not held-out "
                "scores: give splits that do not overlap (e.g. --train-split train --dev-split "
                "dev)"
            ),
            stacklevel=2,
        )
    return len(shared)


def fewest_telling(level: float) -> int:
    """The fewest paired questions on which the two-sided sign-flip test
    (``netcast.evaluation.stats.paired_p_value``) can reach p < ``level``: its smallest p on
    ``n`` questions, every difference of one sign, is ``2 / 2**n``."""
    n = 2
    while 2.0 / 2**n >= level:
        n += 1
    return n


def check_validation_fold(what: str, fold: Sequence[Any], of: int, level: float) -> bool:
    """Warn when ``fold`` (the held-out training questions a race or a joint compile scores its
    candidates on, of ``of`` training questions) is too small for its paired test at ``level``
    to tell any two candidates apart: what it picks is then a guess. Returns whether it is
    large enough."""
    need = fewest_telling(level)
    if len(fold) >= need:
        return True
    warnings.warn(
        NetcastWarning(
            f"the {what} scores its candidates on {len(fold)} held-out training question(s) "
            f"(of {of}): its paired test cannot tell two apart (p < {level:g}) on fewer than "
            f"{need}, so what it picks is not a measured best; give more training questions "
            "(--train-limit)"
        ),
        stacklevel=2,
    )
    return False
