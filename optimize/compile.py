"""DSPy's own optimizers as netcast runs them: each built from netcast's metric, teacher model,
seed and threads and its settings (``DSPY``: defaults sized for small training sets and slow
local models), given a valset where it selects among candidates (``DSPyCompile``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import dspy
from dspy.teleprompt import Teleprompter

from netcast.errors import InputError
from netcast.evaluation import metrics
from netcast.evaluation.evaluate import judge_match
from netcast.evaluation.metrics import ANSWER
from netcast.optimize.settings import DSPySettings

METRICS = ANSWER  # the measures a DSPy optimizer can optimize
SELECT_ON = ("dev", "train")


def make_metric(name: str, judge_lm: Any = None) -> Callable:
    """A DSPy metric ``(example, prediction, trace=None) -> float`` by name; ``judge`` asks
    ``judge_lm`` (None: the LM in DSPy's context, the model being compiled)."""
    if name == "em":
        return metrics.em_metric
    if name == "f1":
        return metrics.f1_metric
    if name == "judge":

        def judge_metric(example, prediction, trace=None):
            return judge_match(example, str(prediction.answer or ""), judge_lm or dspy.settings.lm)

        return judge_metric
    raise InputError(f"unknown metric {name!r}; choose one of {', '.join(METRICS)}")


def with_feedback(metric: Callable) -> Callable:
    """GEPA's metric shape: the score plus textual feedback for the reflection model."""

    def gepa_metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        score = float(metric(gold, pred))
        feedback = (
            f"Gold answers: {list(gold.answers)}. Predicted: {pred.answer!r}. Score {score:.2f}. "
            "Answers should be short spans (a name, date, number), taken from the passages."
        )
        return dspy.Prediction(score=score, feedback=feedback)

    return gepa_metric


# A trace becomes a bootstrapped demonstration only when its answer scores at least this
# (DSPy's ``metric_threshold``; without it any F1 above 0 passes, e.g. "Carl Philipp Emanuel
# Bach" for the gold "Georg Philipp Telemann", F1 0.29).
DEMO_PASS = 0.5
DEMOS = {"max_bootstrapped_demos": 2, "max_labeled_demos": 2, "metric_threshold": DEMO_PASS}


def _teacher(teacher_lm: Any) -> dict[str, Any] | None:
    return {"lm": teacher_lm} if teacher_lm is not None else None


def _bootstrap(metric, teacher_lm, seed, threads, **settings):
    return dspy.BootstrapFewShot(metric=metric, teacher_settings=_teacher(teacher_lm), **settings)


def _bootstrap_rs(metric, teacher_lm, seed, threads, **settings):
    return dspy.BootstrapFewShotWithRandomSearch(
        metric=metric, teacher_settings=_teacher(teacher_lm), num_threads=threads, **settings
    )


def _mipro(metric, teacher_lm, seed, threads, **settings):
    return dspy.MIPROv2(
        metric=metric,
        prompt_model=teacher_lm,
        teacher_settings=_teacher(teacher_lm),
        seed=seed,
        num_threads=threads,
        **settings,
    )


def _simba(metric, teacher_lm, seed, threads, **settings):
    return dspy.SIMBA(metric=metric, prompt_model=teacher_lm, num_threads=threads, **settings)


def _gepa(metric, teacher_lm, seed, threads, **settings):
    return dspy.GEPA(
        metric=with_feedback(metric),
        reflection_lm=teacher_lm or dspy.settings.lm,
        seed=seed,
        num_threads=threads,
        **settings,
    )


def _valset(valset: list | None, seed: int) -> dict[str, Any]:
    return {"valset": valset or None}


@dataclass(frozen=True)
class DSPyOptimizer:
    """How netcast builds one of DSPy's optimizers: ``make(metric, teacher_lm, seed, threads,
    **settings)``, its ``defaults``, whether it ``selects`` among candidates on a valset, and
    the keyword arguments its ``compile`` takes besides the trainset (``extra(valset, seed)``)."""

    make: Callable[..., Teleprompter]
    defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    selects: bool = False
    extra: Callable[[list | None, int], dict[str, Any]] = lambda valset, seed: {}


DSPY: dict[str, DSPyOptimizer] = {
    "bootstrap": DSPyOptimizer(_bootstrap, DEMOS),
    "bootstrap-rs": DSPyOptimizer(
        _bootstrap_rs,
        {**DEMOS, "num_candidate_programs": 4},
        selects=True,
        extra=lambda valset, seed: {"valset": valset} if valset else {},
    ),
    "mipro": DSPyOptimizer(
        _mipro,
        {"auto": "light", **DEMOS},
        selects=True,
        extra=lambda valset, seed: {**_valset(valset, seed), "requires_permission_to_run": False},
    ),
    "simba": DSPyOptimizer(
        _simba,
        {"max_steps": 4, "num_candidates": 4, "bsize": 8, "max_demos": 2},
        extra=lambda valset, seed: {"seed": seed},
    ),
    "gepa": DSPyOptimizer(_gepa, {"auto": "light"}, selects=True, extra=_valset),
}
SELECTING = tuple(n for n, o in DSPY.items() if o.selects)  # score candidates on a valset


def dspy_settings(name: str, given: Mapping[str, Any] | None = None) -> DSPySettings:
    """DSPy optimizer ``name``'s settings: its defaults, updated with ``given``."""
    return DSPySettings(MappingProxyType({**_known(name).defaults, **(given or {})}))


def _known(name: str) -> DSPyOptimizer:
    if name not in DSPY:
        raise InputError(f"unknown optimizer {name!r}; choose one of {', '.join(DSPY)}")
    return DSPY[name]


def make_optimizer(
    name: str,
    metric: Callable,
    teacher_lm: Any = None,
    seed: int = 0,
    threads: int = 1,
    **settings: Any,
) -> Teleprompter:
    """DSPy's optimizer ``name`` with these settings (not filled in with its defaults)."""
    return _known(name).make(metric, teacher_lm, seed, threads, **settings)


def hold_out(trainset: Sequence, share: float = 0.8, most: int = 1000) -> tuple[list, list]:
    """``(bootstrap, select)``: the first questions to bootstrap from and the last ``share``
    (at most ``most``) to score candidates on: MIPROv2's own split when it is given no valset."""
    items = list(trainset)
    if len(items) < 2:
        raise InputError(
            f"selecting on the training split needs at least 2 training questions, got {len(items)}"
        )
    cut = len(items) - max(1, min(most, int(len(items) * share)))
    return items[:cut], items[cut:]


def selection_sets(
    optimizer: str, trainset: Sequence, valset: Sequence | None, select_on: str = "dev"
) -> tuple[list, list | None]:
    """``(trainset, valset)`` as ``optimizer`` gets them: with ``select_on="dev"`` the given
    ones; with ``"train"`` an optimizer that selects among candidates (``SELECTING``) scores
    them on held-out training questions (``hold_out``) and ``valset`` stays unseen."""
    if select_on not in SELECT_ON:
        raise InputError(f"unknown select_on {select_on!r}; choose one of {', '.join(SELECT_ON)}")
    if select_on == "dev":
        return list(trainset), list(valset) if valset else None
    if optimizer in SELECTING:
        return hold_out(trainset)
    return list(trainset), None


class DSPyCompile(Teleprompter):
    """One of DSPy's optimizers (``DSPY``) as a netcast compile runs it: ``compile(student,
    trainset=..., valset=...)`` returns a compiled copy of ``student`` (the original is not
    changed). ``select_on`` is where an optimizer that selects among candidates (``SELECTING``)
    scores them: ``"dev"`` on ``valset``, ``"train"`` on a held-out part of ``trainset``
    (``selection_sets``), so ``valset`` stays unseen and can measure the result."""

    def __init__(
        self,
        name: str,
        settings: DSPySettings | None = None,
        *,
        metric: str = "f1",
        teacher_lm: Any = None,
        seed: int = 0,
        threads: int = 1,
        select_on: str = "dev",
        judge_lm: Any = None,
    ):
        super().__init__()
        self.name, self.settings = name, settings or dspy_settings(name)
        self.metric, self.teacher_lm, self.seed, self.threads = metric, teacher_lm, seed, threads
        self.select_on, self.judge_lm = select_on, judge_lm

    def compile(self, student, *, trainset, teacher=None, valset=None, **kwargs) -> dspy.Module:
        trainset, valset = selection_sets(self.name, trainset, valset, self.select_on)
        tele = make_optimizer(
            self.name,
            make_metric(self.metric, self.judge_lm),
            teacher_lm=self.teacher_lm,
            seed=self.seed,
            threads=self.threads,
            **self.settings.kwargs,
        )
        extra = DSPY[self.name].extra(list(valset) if valset else None, self.seed)
        return tele.compile(student.deepcopy(), trainset=list(trainset), **extra)


def compile_program(
    program: dspy.Module,
    trainset: Sequence[dspy.Example],
    *,
    optimizer: str = "bootstrap",
    metric: str = "f1",
    teacher_lm: Any = None,
    valset: Sequence[dspy.Example] | None = None,
    seed: int = 0,
    threads: int = 1,
    settings: dict[str, Any] | None = None,
    select_on: str = "dev",
    judge_lm: Any = None,
) -> dspy.Module:
    """A copy of ``program`` compiled by DSPy's ``optimizer`` (``DSPyCompile``), its defaults
    updated with ``settings``; ``metric="judge"`` is judged by ``judge_lm`` (None: the LM the
    program runs with)."""
    tele = DSPyCompile(
        optimizer,
        dspy_settings(optimizer, settings),
        metric=metric,
        teacher_lm=teacher_lm,
        seed=seed,
        threads=threads,
        select_on=select_on,
        judge_lm=judge_lm,
    )
    return tele.compile(program, trainset=trainset, valset=valset)


def demo_report(program: dspy.Module) -> dict[str, dict[str, int]]:
    """Per predictor (by its name in the program), how many demonstrations it holds and from
    where: ``bootstrapped`` from a successful trace of the program (the teacher's run), or
    ``labeled`` examples copied from the training set."""
    report = {}
    for name, predictor in program.named_predictors():
        demos = list(getattr(predictor, "demos", []) or [])
        boot = sum(1 for d in demos if getattr(d, "augmented", False) or d.get("augmented"))
        report[name.removesuffix(".predict")] = {"bootstrapped": boot, "labeled": len(demos) - boot}
    return report
