"""Each netcast optimizer's settings as a frozen typed object, its defaults written here once.

A recipe stores an optimizer's settings as a JSON object (``optimizer.settings``); ``read``
turns one into the settings object (missing keys take the defaults; an unknown key or a wrong
type is one ``InputError`` naming it) and ``to_dict`` writes it back."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

from pydantic import TypeAdapter, ValidationError

from netcast.errors import InputError
from netcast.formats import describe

DEMO_SOURCES = ("none", "annotations", "bootstrap")
TIES = ("nearest", "best")  # among trials the test cannot tell apart from the best
PER_STEP = 2  # annotation demonstrations per step (each holds a whole context: the window is small)
# the demonstration sources a search tries where its settings name none, by ``--teacher``: the
# model's own traces or the training data's annotations, each beside none at all
TEACHER_DEMOS = {"model": ("none", "bootstrap"), "annotations": ("none", "annotations")}
# a search or a tuning scores its trials without an LLM judge: metric judge is refused there
UNJUDGED = (
    "metric judge: {what} scores questions without an LLM judge (every one would score 0); "
    "give f1 or em"
)

S = TypeVar("S", bound="Settings")
SS = TypeVar("SS", bound="SearchSettings")


class Settings:
    """Base of the settings dataclasses: read from a recipe, written back."""

    @classmethod
    def read(cls: type[S], values: Mapping[str, Any], what: str = "optimizer settings") -> S:
        """``values`` (a recipe's ``optimizer.settings``) as these settings, defaults filled
        in; an unknown key or a wrong type is one ``InputError`` naming it."""
        known = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise InputError(
                f"{what}: unknown setting {unknown[0]!r}; settings are {', '.join(known)}"
            )
        try:
            settings = TypeAdapter(cls).validate_python(dict(values))
        except ValidationError as err:
            raise InputError(f"{what}: {describe(err)}") from None
        settings.check()
        return settings

    def check(self) -> None:
        """Values the types allow but the optimizer does not (``InputError``)."""

    def to_dict(self) -> dict[str, Any]:
        """These settings as a recipe stores them (JSON values)."""
        return TypeAdapter(type(self)).dump_python(self, mode="json")


@dataclass(frozen=True)
class AnnotationSettings(Settings):
    """The annotation teacher (``optimize.annotations``): demonstrations per step."""

    per_step: int = PER_STEP


@dataclass(frozen=True)
class SearchSettings(Settings):
    """What the joint compile and the strategy race share: the points they try are drawn and
    tested alike. ``budget``: model calls the search may spend (None: the whole grid);
    ``demos``: the demonstration sources searched; ``share``: the training questions that
    score the candidates (the validation fold; demonstrations come from the rest); ``alpha``:
    the paired test that tells a candidate from another; ``per_step``: demonstrations drawn
    per step. ``demos`` None stands for the compile's teacher's sources (``TEACHER_DEMOS``),
    which ``for_teacher`` fills in when the recipe is made: a recipe always names them."""

    budget: int | None = None
    demos: tuple[str, ...] | None = None
    share: float = 0.6
    alpha: float = 0.1
    per_step: int = PER_STEP

    @classmethod
    def of_search(
        cls: type[SS],
        budget: int | None = None,
        grid: Mapping[str, list[Any]] | None = None,
        ties: str | None = None,
    ) -> SS:
        """The settings a search's options give (``netcast compile``'s ``--budget``,
        ``--grid`` and ``--ties``, a spec's ``budget``, ``grid`` and ``ties``): the grid's
        ``demos`` are the demonstration sources, its other knobs the values tried (checked
        against the program when the compile starts); what this search does not read (a
        race's grid or ties) is refused in one line."""
        values = dict(grid or {})
        given: dict[str, Any] = {"budget": budget}
        if "demos" in values:
            given["demos"] = tuple(str(v) for v in values.pop("demos"))
        if values:
            given["grid"] = values
        if ties is not None:
            given["ties"] = ties
        return cls.read(given)

    def for_teacher(self: SS, teacher: str) -> SS:
        """These settings with ``demos`` named: as given, else the ``teacher``'s sources."""
        if self.demos is not None:
            return self
        return dataclasses.replace(self, demos=TEACHER_DEMOS[teacher])


@dataclass(frozen=True)
class JointSettings(SearchSettings):
    """The joint compile (``optimize.joint``): knobs and demonstration sources searched
    together on held-out training questions. Beside the search's settings: ``grid``, the
    values tried for a knob instead of its declared range; ``alpha``, the test a trial must
    pass to replace the defaults; ``ties``: among the trials that test cannot tell apart from
    the best, the one ``nearest`` the defaults or the ``best``; ``chunk``: questions scored
    between the pruner's looks."""

    grid: Mapping[str, list[Any]] = field(default_factory=dict)
    ties: str = "nearest"
    chunk: int = 10

    def check(self) -> None:
        """The rule among ties (the demonstration sources and the grid's values are checked
        against the program: ``optimize.joint.check_search``)."""
        if self.ties not in TIES:
            raise InputError(f"unknown ties rule {self.ties!r}; choose from {', '.join(TIES)}")


@dataclass(frozen=True)
class RaceSettings(SearchSettings):
    """The strategy race (``optimize.race``): one successive halving over every (strategy,
    grid point, demonstration source), its arms (``optimize.halving``), on held-out training
    questions. ``budget``: model calls the whole race may spend (checked before each chunk
    of questions); ``demos``, ``share``: as the joint compile's; ``first``: the questions of
    the first rung (each rung doubles them, up to the validation fold; a strategy whose first
    rung would cost more than its share of 1/``eta`` of the budget enters on fewer, at least
    the fewest on which ``drop_p`` can drop it); ``drop_p``: the p at
    which an arm trailing the leader by the paired test gets no more calls; ``eta``: a rung
    keeps the better 1/``eta`` of its newcomers (and the cheapest not told apart from the
    leader at ``alpha``); ``alpha``: the test that tells a cheaper arm from the best;
    ``margin``: in the final choice, the most a cheaper arm may trail the best score by and
    still tie with it (on few questions the test tells almost nothing apart; 0.05 F1 is the
    smallest gain netcast's targets count).

    The race searches each strategy's own grid, takes the cheapest among ties and scores
    ``optimize.halving.CHUNK`` questions between budget checks: ``grid``, ``ties`` and
    ``chunk`` are the joint compile's and refused here; recipes written before carry them at
    the values in ``RECORDED_BEFORE``, which the race never read, and still read."""

    RECORDED_BEFORE: ClassVar[dict[str, Any]] = {"grid": {}, "ties": "nearest", "chunk": 10}

    first: int = 10
    drop_p: float = 0.05
    eta: int = 3
    margin: float = 0.05

    @classmethod
    def read(cls, values: Mapping[str, Any], what: str = "race settings") -> RaceSettings:
        """As ``Settings.read``; the keys an earlier recipe recorded unread are passed over at
        their recorded values, and refused at any other (the race does not read them)."""
        values = dict(values)
        for key, recorded in cls.RECORDED_BEFORE.items():
            if key in values and values[key] == recorded:
                del values[key]
            elif key in values:
                raise InputError(
                    f"{what}: {key}={values[key]!r} is the joint compile's; a race searches "
                    "each strategy's own grid, takes the cheapest arm among ties and checks "
                    "its budget every few questions"
                )
        return super().read(values, what)

    def check(self) -> None:
        if self.first < 1:
            raise InputError(f"race settings: first must be >= 1, got {self.first}")
        if self.eta < 2:
            raise InputError(f"race settings: eta must be >= 2, got {self.eta}")
        if not 0 <= self.margin <= 1:
            raise InputError(f"race settings: margin must be 0 to 1, got {self.margin}")


@dataclass(frozen=True)
class DSPySettings(Settings):
    """A DSPy optimizer's keyword arguments (``optimize.compile.DSPY``), defaults filled in
    (``optimize.compile.dspy_settings``); a recipe stores them as they are."""

    kwargs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.kwargs)


@dataclass(frozen=True)
class TuneSettings(Settings):
    """``netcast tune`` (``optimize.study.KnobTuning``): an Optuna study over a program's knobs.

    ``trials``: the finished trials the study should hold; ``objectives``: quality[,cost]
    (``f1,cost``, ``f1,calls``, ``em``); ``compile_each``: every trial's program compiled with
    ``optimizer`` first; ``storage``: an Optuna storage URL (``postgresql://...`` lets several
    workers share one ``study``; None: in memory, nothing to resume); ``study``: its name
    (None: named after the recipe); ``pick_rule``: the trial taken (``best-quality``,
    ``knee``, ``max-quality-under-cost=X``); ``heartbeat``: seconds after which a silent trial
    is retried. Which questions, retriever and seed are the recipe's."""

    trials: int = 6
    objectives: str = "f1,cost"
    compile_each: bool = False
    optimizer: str = "bootstrap"
    storage: str | None = "sqlite:///runs/tune.db"
    study: str | None = None
    pick_rule: str = "knee"
    heartbeat: int = 30

    def check(self) -> None:
        if self.trials < 1 or self.heartbeat < 1:
            raise InputError(
                f"tune settings: trials and heartbeat must be 1 or more, got {self.trials} "
                f"and {self.heartbeat}"
            )
