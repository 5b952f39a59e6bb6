"""Compile a program's prompts with a DSPy optimizer on a training split."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dspy

from netcast.errors import InputError
from netcast.evaluation import metrics
from netcast.evaluation.evaluate import judge_match
from netcast.evaluation.metrics import ANSWER

OPTIMIZERS = ("bootstrap", "bootstrap-rs", "mipro", "simba", "gepa", "joint")
METRICS = ANSWER  # the measures a DSPy optimizer can optimize
SELECTING = ("bootstrap-rs", "mipro", "gepa")  # optimizers that score candidates on a valset
SELECT_ON = ("dev", "train")


def make_metric(name: str, judge_lm: Any = None) -> Callable:
    """A DSPy metric ``(example, prediction, trace=None) -> float`` by name."""
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


def default_settings(name: str) -> dict[str, Any]:
    """Each optimizer's settings, sized for small training sets and slow local models."""
    demos = {"max_bootstrapped_demos": 2, "max_labeled_demos": 2, "metric_threshold": DEMO_PASS}
    return {
        "bootstrap": demos,
        "bootstrap-rs": {**demos, "num_candidate_programs": 4},
        "mipro": {"auto": "light", **demos},
        "simba": {"max_steps": 4, "num_candidates": 4, "bsize": 8, "max_demos": 2},
        "gepa": {"auto": "light"},
        # knobs and demonstrations searched together (optimize.joint): model calls to spend
        # (None: the whole grid) and the share of training questions that scores the trials
        "joint": {"budget": None, "share": 0.6},
        # strategies raced (optimize.race): the joint's settings, the first rung's questions
        # and the p at which a strategy trailing the leader leaves the race
        "race": {"budget": None, "share": 0.6, "first": 10, "drop_p": 0.05},
    }[name]


def make_optimizer(
    name: str,
    metric: Callable,
    teacher_lm: Any = None,
    seed: int = 0,
    threads: int = 1,
    **settings: Any,
):
    if name not in OPTIMIZERS:
        raise InputError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")
    if name == "joint":  # it searches knobs too: optimize.joint.joint_compile builds programs
        raise InputError("the joint optimizer runs through compile_recipe (joint_compile)")
    teacher = {"lm": teacher_lm} if teacher_lm is not None else None
    if name == "bootstrap":
        return dspy.BootstrapFewShot(metric=metric, teacher_settings=teacher, **settings)
    if name == "bootstrap-rs":
        return dspy.BootstrapFewShotWithRandomSearch(
            metric=metric, teacher_settings=teacher, num_threads=threads, **settings
        )
    if name == "mipro":
        return dspy.MIPROv2(
            metric=metric,
            prompt_model=teacher_lm,
            teacher_settings=teacher,
            seed=seed,
            num_threads=threads,
            **settings,
        )
    if name == "simba":
        return dspy.SIMBA(metric=metric, prompt_model=teacher_lm, num_threads=threads, **settings)
    return dspy.GEPA(
        metric=with_feedback(metric),
        reflection_lm=teacher_lm or dspy.settings.lm,
        seed=seed,
        num_threads=threads,
        **settings,
    )


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
) -> dspy.Module:
    """A compiled copy of ``program`` (the original is not changed).

    ``select_on`` is where an optimizer that selects among candidates (``SELECTING``) scores
    them: ``"dev"`` on ``valset``, ``"train"`` on a held-out part of ``trainset``
    (``selection_sets``), so ``valset`` stays unseen and can measure the result."""
    trainset, valset = selection_sets(optimizer, trainset, valset, select_on)
    settings = {**default_settings(optimizer), **(settings or {})}
    tele = make_optimizer(
        optimizer,
        make_metric(metric),
        teacher_lm=teacher_lm,
        seed=seed,
        threads=threads,
        **settings,
    )
    kwargs: dict[str, Any] = {"trainset": list(trainset)}
    if optimizer == "bootstrap-rs" and valset:
        kwargs["valset"] = list(valset)
    if optimizer == "mipro":
        kwargs.update(valset=list(valset) if valset else None, requires_permission_to_run=False)
    if optimizer == "simba":
        kwargs["seed"] = seed
    if optimizer == "gepa":
        kwargs["valset"] = list(valset) if valset else None
    return tele.compile(program.deepcopy(), **kwargs)


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
