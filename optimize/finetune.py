"""Tuning the embedded model's weights as a compile step (``--optimizer finetune`` and
``--optimizer better-together``): DSPy's own ``BootstrapFinetune`` and ``BetterTogether``, the
training done by netcast's CPU provider (``netcast.models.lora_provider``: a LoRA written as a GGUF
adapter that llama.cpp serves).

The training examples are the program's successful traces on the training questions (its own,
or a teacher model's with ``--teacher-model``: distillation): every call a predictor made in a
trace that passes the metric is one example, formatted by netcast's JSON adapter as exactly the
chat that predictor is shown at inference, then its reply. So every step of a multi-step program
trains on its own calls; the steps share one adapter (DSPy's ``multitask``), as they share the
model. ``FinetuneSettings``: which traces pass, whether demonstrations stay in the trained
prompt, and the training itself (``TrainSettings``). With ``--teacher annotations`` the
examples are the strategy's annotation demonstrations instead (``optimize.annotation_finetune``:
RAFT-style for ``basic``'s answer step). The compiled program's adapter, its provenance and loss
curve go into the artifact (``optimize.registry``)."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import monotonic
from typing import Any

import dspy
from dspy.clients.utils_finetune import infer_data_format
from dspy.teleprompt import Teleprompter
from dspy.teleprompt.bootstrap_trace import FailedPrediction

from netcast.errors import InputError
from netcast.models import lora
from netcast.models import lora_provider as provider
from netcast.models.factory import default_adapter
from netcast.optimize.compile import DEMO_PASS, DSPY, dspy_settings, hold_out, make_optimizer
from netcast.optimize.settings import Settings
from netcast.programs import get_program
from netcast.programs import knobs as knobs_mod

STEPS = ("p", "w")  # BetterTogether's steps: prompt optimization, weight optimization
STRATEGY = "p -> w -> p"  # BetterTogether's default sequence of them, either teacher's


@dataclass(frozen=True)
class TrainingSettings(Settings):
    """Settings of an optimizer that tunes the model's weights: ``train``, the LoRA's training
    (``netcast.models.lora_provider.TrainSettings``), next to the optimizer's own settings. An
    unknown name at either level is one line naming it and the known ones."""

    train: provider.TrainSettings = field(default_factory=provider.TrainSettings)

    @classmethod
    def read(cls, values: Mapping[str, Any], what: str = "optimizer settings"):
        known = [f.name for f in dataclasses.fields(cls) if f.name != "train"]
        unknown = sorted(set(values) - {*known, "train"})
        if unknown:
            training = ", ".join(f.name for f in dataclasses.fields(provider.TrainSettings))
            raise InputError(
                f"{what}: unknown setting {unknown[0]!r}; settings are {', '.join(known)}, and "
                f"the training settings {training}"
            )
        train = values.get("train")
        if isinstance(train, Mapping):  # unknown training settings named, not dropped
            provider.TrainSettings.of(dict(train))
        return super().read(values, what)

    @classmethod
    def of_flat(cls, values: Mapping[str, Any]):
        """Flat settings (``--finetune-set``'s pairs, a spec's ``finetune_set``) as these: a
        training setting (``TrainSettings``) goes to ``train``, the others are the
        optimizer's own; an unknown name is one line naming the known ones."""
        names = {f.name for f in dataclasses.fields(provider.TrainSettings)}
        train = {k: v for k, v in values.items() if k in names}
        own = {k: v for k, v in values.items() if k not in names}
        return cls.read({**own, **({"train": train} if train else {})})

    def check(self) -> None:
        provider.TrainSettings.of(dataclasses.asdict(self.train))

    def train_kwargs(self, threads: int | None = None, progress: bool = True) -> dict[str, Any]:
        """DSPy's ``train_kwargs`` for a run: the training settings, on ``threads`` CPU threads
        (the command's ``--threads``) where they name none (None: every core), the progress
        bar off where the run shows no ``progress``."""
        train = self.train
        run = dataclasses.replace(
            train, threads=train.threads or threads, progress=train.progress and progress
        )
        return dataclasses.asdict(run)

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        data["train"] = data.pop("train")  # after the optimizer's own settings, as written
        return data


@dataclass(frozen=True)
class FinetuneSettings(TrainingSettings):
    """``--optimizer finetune``: a trace trains the model when its answer scores at least
    ``metric_threshold``; ``exclude_demos`` trains (and then runs) the steps without their
    demonstrations; ``train``: the LoRA's training
    (``netcast.models.lora_provider.TrainSettings``)."""

    metric_threshold: float = DEMO_PASS
    exclude_demos: bool = False

    def check(self) -> None:
        super().check()
        if not 0 <= self.metric_threshold <= 1:
            raise InputError(
                f"finetune settings: metric_threshold={self.metric_threshold}; give 0 to 1"
            )


@dataclass(frozen=True)
class BetterTogetherSettings(FinetuneSettings):
    """``--optimizer better-together``: DSPy's ``BetterTogether`` running ``strategy``, a
    sequence of ``p`` (DSPy optimizer ``prompt`` at netcast's defaults for it) and ``w`` (the
    finetune above), keeping the step that scores best on the selection questions."""

    strategy: str = STRATEGY
    prompt: str = "bootstrap"

    def check(self) -> None:
        super().check()
        check_strategy(self.strategy)
        if self.prompt not in DSPY:
            raise InputError(
                f"better-together prompt optimizer {self.prompt!r}; choose one of {', '.join(DSPY)}"
            )


def check_strategy(strategy: str) -> None:
    """One line unless ``strategy`` is BetterTogether's: steps p and w joined by ' -> '."""
    steps = strategy.split(" -> ")
    if any(step not in STEPS for step in steps) or "w" not in steps:
        raise InputError(
            f"better-together strategy {strategy!r}: steps p (prompts) and w (weights) "
            "joined by ' -> ', with at least one w (e.g. 'p -> w -> p')"
        )


def check_model(lm: Any, settings: TrainingSettings | None = None) -> None:
    """One line, before any model call, if ``lm`` has no weights here to train (a model served
    by an API) or the ``finetune`` extra is missing; with ``settings``, if this machine has not
    the memory or disk to train it at all (``provider.preflight``)."""
    provider.check_trainable(lm)
    lora.require_extra()
    if settings is not None:
        provider.preflight(lm.model, settings.train)


@dataclass
class Trained:
    """One finetune: the tuned model id and where its examples came from."""

    model: str
    examples: int
    per_step: dict[str, int]
    questions: int
    passing: int | None  # training questions whose traces passed (None: no traces)
    teacher: str | None
    retrieved: int | None = None  # annotation examples whose context retrieval built without gold
    trace_seconds: float | None = None  # wall time of the traces the examples came from


def passing_metric(metric: Callable, threshold: float) -> Callable:
    """A trace trains the model when ``metric`` scores it at least ``threshold``."""

    def passes(example, prediction, trace=None) -> bool:
        return float(metric(example, prediction)) >= threshold

    return passes


def call_data(
    program: Any, step: str, call: tuple, adapter: dspy.Adapter, exclude_demos: bool
) -> dict[str, Any]:
    """A traced call of ``program``'s ``step`` as the chat the step was shown, then its reply:
    DSPy's ``build_call_data_from_trace``, by the adapter and under the signature the step ran
    with (the program's ``step_adapter`` and ``step_signature``: neither is in the trace)."""
    predictor, inputs, outputs = call
    formats = program.step_adapter(step, adapter)
    signature = program.step_signature(step, predictor.signature, dspy.Example(**inputs), formats)
    return formats.format_finetune_data(
        signature=signature,
        demos=[] if exclude_demos else predictor.demos,
        inputs=inputs,
        outputs=outputs,
    )


class NetcastFinetune(dspy.BootstrapFinetune):
    """DSPy's ``BootstrapFinetune`` as netcast runs it: examples formatted by the adapter the
    program runs each model with (``default_adapter``), a teacher model's program built from
    the student (``teacher_lm``), the examples' count checked before any training, and what
    was trained recorded (``trained``). ``threads``: questions traced at once;
    ``train_threads``: training's CPU threads where the settings name none; ``progress``:
    training shows its progress bar."""

    def __init__(
        self,
        metric: Callable,
        settings: FinetuneSettings,
        *,
        teacher_lm: Any = None,
        threads: int = 1,
        train_threads: int | None = None,
        progress: bool = True,
    ):
        super().__init__(
            metric=passing_metric(metric, settings.metric_threshold),
            multitask=True,
            train_kwargs=settings.train_kwargs(train_threads, progress),
            exclude_demos=settings.exclude_demos,
            num_threads=threads,
        )
        self.settings, self.teacher_lm = settings, teacher_lm
        self.trained: list[Trained] = []
        self._names: dict[int, str] = {}
        self._questions, self._started = 0, 0.0
        self._program: Any = None

    def compile(self, student, trainset, teacher=None):
        for _, predictor in student.named_predictors():
            check_model(predictor.lm)
        if teacher is None and self.teacher_lm is not None:
            teacher = student.deepcopy()
            teacher.set_lm(self.teacher_lm)
        programs = [student, *(teacher if isinstance(teacher, list) else [teacher])]
        self._names = {  # a traced call names its predictor, the student's or the teacher's
            id(predictor): name.removesuffix(".predict")
            for program in programs
            if program is not None
            for name, predictor in program.named_predictors()
        }
        self._questions, self._started = len(trainset), monotonic()
        self._program = student  # its ``step_adapter``/``step_signature`` format traced calls
        compiled = super().compile(student, trainset=trainset, teacher=teacher)
        if self.trained:  # the tuned model's id, which the compiled program now runs
            self.trained[-1].model = compiled.predictors()[0].lm.model
        return compiled

    def _prepare_finetune_data(self, trace_data, lm, pred_ind=None):
        # a trace whose reply could not be read scores a negative "format reward" in DSPy, which
        # its own filter (``if score``) would let through
        traced = round(monotonic() - self._started, 1)  # DSPy traced every question first
        passing = [
            d
            for d in trace_data
            if not isinstance(d["prediction"], FailedPrediction) and (d.get("score") or 0) > 0
        ]
        if self.adapter[lm] is None:
            self.adapter[lm] = default_adapter(lm)
        adapter = self.adapter[lm]
        data = [
            call_data(
                self._program, self._names.get(id(call[0]), "?"), call, adapter, self.exclude_demos
            )
            for d in passing
            for i, call in enumerate(d["trace"])
            if pred_ind is None or i == pred_ind
        ]
        random.Random(0).shuffle(data)  # as DSPy's own
        data_format = infer_data_format(adapter)
        settings = provider.TrainSettings.of(self.train_kwargs[lm])
        provider.check_examples(data, settings)  # too few: one line, before any training
        steps = Counter(self._names.get(id(call[0]), "?") for d in passing for call in d["trace"])
        teacher = getattr(self.teacher_lm, "model", None)
        self.trained.append(
            Trained(
                lm.model,
                len(data),
                dict(steps),
                self._questions,
                len(passing),
                teacher,
                trace_seconds=traced,
            )
        )
        return data, data_format


class RecordingBetterTogether(dspy.BetterTogether):
    """DSPy's ``BetterTogether``, which logs a failed step and returns the best program so far;
    here the failure is kept (``error``) so the compile reports it (a training interrupted with
    Ctrl-C, too few examples) instead of saving a program that silently skipped the step."""

    error: BaseException | None = None

    def _run_and_evaluate_step(self, *args, **kwargs):
        try:
            return super()._run_and_evaluate_step(*args, **kwargs)
        except Exception as err:
            self.error = self.error or err
            raise


@dataclass
class TunedResult:
    """What a finetune compile leaves for the artifact: the program, its finetunes and (for
    better-together) each candidate's strategy and score."""

    program: dspy.Module | None = None
    trained: list[Trained] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    shared: bool = True  # its steps share one adapter (False: each tuned step has its own)

    def adapters(self) -> dict[str | None, tuple[str, Trained | None]]:
        """The adapters the compiled program runs: ``{None: (sha256, its finetune)}`` where its
        steps share one, else each tuned step's, by the step's name."""
        found: dict[str, tuple[str, Trained | None]] = {}
        for name, predictor in self.program.named_predictors() if self.program else []:
            model = getattr(predictor.lm, "model", "")
            try:
                sha = lora.parse_model_id(model)[1]
            except InputError:
                continue
            if sha:
                trained = next((t for t in reversed(self.trained) if t.model == model), None)
                found[name.removesuffix(".predict")] = (sha, trained)
        if self.shared and found:
            return {None: next(iter(found.values()))}
        return dict(found)


class FinetuneCompile(Teleprompter):
    """``--optimizer finetune`` and ``--optimizer better-together``: ``compile(student,
    trainset=..., valset=...)`` returns a tuned copy of ``student`` (the original is not
    changed). Better-together scores its candidates on ``valset`` (``select_on="dev"``) or on
    held-out training questions (``"train"``). ``threads``: questions run at once;
    ``train_threads``: training's CPU threads where the settings name none (None: every
    core); ``progress``: training shows its progress bar."""

    def __init__(
        self,
        settings: FinetuneSettings,
        *,
        metric: Callable,
        teacher_lm: Any = None,
        seed: int = 0,
        threads: int = 1,
        select_on: str = "dev",
        train_threads: int | None = None,
        progress: bool = True,
    ):
        super().__init__()
        self.settings, self.metric, self.teacher_lm = settings, metric, teacher_lm
        self.seed, self.threads, self.select_on = seed, threads, select_on
        self.train_threads, self.progress = train_threads, progress
        self.result = TunedResult()

    def finetuner(self) -> NetcastFinetune:
        return NetcastFinetune(
            self.metric,
            self.settings,
            teacher_lm=self.teacher_lm,
            threads=self.threads,
            train_threads=self.train_threads,
            progress=self.progress,
        )

    def compile(self, student, *, trainset, teacher=None, valset=None, **kwargs) -> dspy.Module:
        student = student.deepcopy()
        if isinstance(self.settings, BetterTogetherSettings):
            program = self._better_together(student, list(trainset), valset)
        else:
            tuner = self.finetuner()
            program = tuner.compile(student, trainset=list(trainset))
            self.result.trained = tuner.trained
        self.result.program = program
        return program

    def _better_together(self, student, trainset: list, valset) -> dspy.Module:
        settings = self.settings
        if self.select_on == "train":
            trainset, valset = selection_split(settings, trainset)
        tuner = self.finetuner()
        prompt = make_optimizer(
            settings.prompt,
            self.metric,
            teacher_lm=self.teacher_lm,
            seed=self.seed,
            threads=self.threads,
            **dspy_settings(settings.prompt).kwargs,
        )
        extra = DSPY[settings.prompt].extra(list(valset) if valset else None, self.seed)
        together = RecordingBetterTogether(metric=self.metric, p=prompt, w=tuner)
        program = together.compile(
            student,
            trainset=trainset,
            valset=list(valset) if valset else None,
            num_threads=self.threads,
            seed=self.seed,
            strategy=settings.strategy,
            optimizer_compile_args={"p": {k: v for k, v in extra.items() if k != "valset"}},
        )
        if together.error is not None:
            raise together.error
        self.result.trained = tuner.trained
        self.result.candidates = candidates(program)
        return program


def candidates(program: dspy.Module) -> list[dict[str, Any]]:
    """The candidates BetterTogether scored (each strategy, its score, whether it is the one
    returned), taken off ``program`` so that it saves as any compiled program."""
    found = [
        {
            "strategy": c["strategy"] or "none",
            "score": c["score"],
            "chosen": c["program"] is program,
        }
        for c in program.candidate_programs
    ]
    del program.candidate_programs, program.flag_compilation_error_occurred
    return found


def selection_split(settings: TrainingSettings, trainset: Sequence) -> tuple[list, list]:
    """Better-together's ``(train, select)`` with ``--select-on train``: the annotation
    teacher's holds out its ``held_out`` share, the model teacher's the share DSPy's prompt
    optimizers select on (``hold_out``)."""
    held = getattr(settings, "held_out", None)  # the annotation teacher's
    return hold_out(trainset, held) if held is not None else hold_out(trainset)


def adapter_files(tele: FinetuneCompile) -> dict[str, Path]:
    """The files the artifact holds beside the program: the adapters the program runs
    (``lora.gguf``, or ``lora-<step>.gguf`` per step)."""
    return {
        lora.adapter_file(step): lora.adapter_path(sha)
        for step, (sha, _) in tele.result.adapters().items()
    }


def record(recipe: Any, tele: FinetuneCompile) -> dict[str, Any]:
    """What the recipe gains: the adapter (``finetune``: the base model's and the adapter's
    sha256, the training settings, the examples' provenance, the loss curve; with one adapter
    per step, that entry per step under ``finetune.steps``) and, for better-together, its
    candidates."""
    entry: dict[str, Any] = {}
    if tele.result.candidates:
        entry["better_together"] = {"candidates": tele.result.candidates}
    found = tele.result.adapters()
    if None in found:
        entry["finetune"] = adapter_entry(recipe, None, *found[None])
    elif found:
        steps = {step: adapter_entry(recipe, step, *f) for step, f in found.items()}
        entry["finetune"] = {"steps": steps}
    return entry


def adapter_entry(recipe: Any, step: str | None, sha: str, trained: Trained | None) -> dict:
    """One adapter's ``finetune`` entry (see ``record``), its file ``lora.adapter_file(step)``."""
    saved = lora.read_record(sha)
    data = recipe.dataset
    provenance = {
        "count": saved.examples,
        "per_step": trained.per_step if trained else {},
        "questions": trained.questions if trained else None,
        "passing": trained.passing if trained else None,
        "teacher": trained.teacher if trained else None,
        **({"retrieved": trained.retrieved} if trained and trained.retrieved is not None else {}),
        **(
            {"trace_seconds": trained.trace_seconds}
            if trained and trained.trace_seconds is not None
            else {}
        ),
        "split": data.train_split,
        "limit": data.train_limit,
    }
    return {
        "adapter": {"file": lora.adapter_file(step), "sha256": sha, "size": saved.size},
        "base": {
            "name": saved.base,
            "sha256": saved.base_sha256,
            "file": lora.parse_model_id(saved.base)[0].file_name,
        },
        "rank": saved.rank,
        "alpha": saved.alpha,
        "settings": saved.settings,
        "examples": provenance,
        "loss_curve": saved.loss_curve,
        "seconds": round(saved.seconds, 1),
        "peak_memory": saved.peak_memory,
        "longest_tokens": saved.longest_tokens,
        "memory_estimate": saved.memory_estimate,
        "gradient_checkpointing": saved.gradient_checkpointing,
    }


def check(settings: TrainingSettings, recipe: Any, trainset: Sequence) -> None:
    """Refused before any model call: settings out of range; better-together selecting on
    held-out training questions with fewer than 2 of them; too few training questions for
    ``min_examples`` where the program bounds the examples a question gives
    (``most_calls``). Examples that fail the metric are only known once collected
    (``provider.check_examples``, before training)."""
    settings.check()
    questions, held = list(trainset), ""
    # better-together (either teacher's: its settings name a strategy) selecting on train
    if recipe.dataset.select_on == "train" and hasattr(settings, "strategy"):
        questions = selection_split(settings, trainset)[0]
        held = f" (of {len(trainset)}; the others select with --select-on train)"
    program = get_program(recipe.program)
    most = program.most_calls(knobs_mod.check(program.name, program.Knobs, recipe.knobs))
    needed = settings.train.min_examples
    if most is not None and len(questions) * most < needed:
        raise InputError(
            f"finetune: {len(questions)} training question(s){held} give {recipe.program} at "
            f"most {len(questions) * most} example(s), fewer than min_examples={needed}; give "
            "more (--train-limit, --train-split) or lower --finetune-set min_examples=N"
        )
