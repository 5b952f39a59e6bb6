"""Tuning the embedded model's weights from the training data's annotations (``--teacher
annotations`` with ``--optimizer finetune`` or ``better-together``): no model call makes the
examples. ``AnnotationFinetune`` trains every step on the demonstrations its strategy reads from
the annotations (RAFT-style for ``basic``'s answer step: the gold passages swapped into the
retrieved context, and for a share of the questions a context without them);
``AnnotationBetterTogether`` runs DSPy's ``BetterTogether`` with the annotation teacher as its
prompt step and that finetune as its weight step. The training, the adapter and what the
artifact records are ``optimize.finetune``'s."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import dspy
from dspy.teleprompt import Teleprompter

from netcast.errors import InputError
from netcast.models import lora_provider as provider
from netcast.models.factory import default_adapter
from netcast.optimize.annotations import AnnotationTeacher
from netcast.optimize.finetune import (
    STRATEGY,
    RecordingBetterTogether,
    Trained,
    TrainingSettings,
    TunedResult,
    candidates,
    check_model,
    check_strategy,
    selection_split,
)
from netcast.optimize.settings import PER_STEP, AnnotationSettings


@dataclass(frozen=True)
class AnnotationFinetuneSettings(TrainingSettings):
    """``--teacher annotations --optimizer finetune``: every step trains on the demonstrations
    the strategy reads from the training data's annotations (``annotated_demos``: for
    ``basic``'s answer step, RAFT-style, the retrieved context with the gold passages swapped
    in and the gold answer); for ``retrieved_share`` of the questions, a context retrieval
    builds without any gold passage, the next passages it ranks in their place
    (``retrieved_demos``, where the strategy has them; RAFT's examples without the golden
    document), so the model also learns to answer, or not, without the evidence. No model is
    called to make the examples. ``multitask``: every step trains one shared adapter (DSPy's
    ``multitask``); False: each step trains its own, on its own examples only, one after the
    other, and runs it (the artifact holds ``lora-<step>.gguf`` per step)."""

    retrieved_share: float = 0.2
    multitask: bool = True

    def check(self) -> None:
        super().check()
        if not 0 <= self.retrieved_share <= 1:
            raise InputError(
                f"finetune settings: retrieved_share={self.retrieved_share}; give 0 to 1"
            )


@dataclass(frozen=True)
class AnnotationBetterTogetherSettings(AnnotationFinetuneSettings):
    """``--teacher annotations --optimizer better-together``: DSPy's ``BetterTogether`` running
    ``strategy``, a sequence of ``p`` (``per_step`` annotation demonstrations on every step,
    the annotation teacher's) and ``w`` (the annotation finetune above, on the prompts the
    steps hold then), keeping the candidate that scores best on the selection questions: the
    compile's dev questions, or with ``--select-on train`` the last ``held_out`` share of the
    training questions (the others teach and train)."""

    strategy: str = STRATEGY
    per_step: int = PER_STEP
    held_out: float = 0.2

    def check(self) -> None:
        super().check()
        check_strategy(self.strategy)
        if self.per_step < 1 or not 0 < self.held_out < 1:
            raise InputError(
                f"better-together settings: per_step={self.per_step}, "
                f"held_out={self.held_out}; give per_step >= 1 and 0 < held_out < 1"
            )


class AnnotationFinetune(Teleprompter):
    """``--teacher annotations --optimizer finetune`` (``AnnotationFinetuneSettings``):
    ``compile(student, trainset=...)`` returns a copy of ``student`` running its model tuned on
    every step's annotation demonstrations, each formatted as the chat that step is shown at
    inference (its own demonstrations included), then the demonstration's outputs. A
    demonstration that lacks one of its step's outputs (a reasoning the annotations do not
    give) is left out. ``train_threads``: training's CPU threads where the settings name none;
    ``progress``: training shows its progress bar."""

    def __init__(
        self,
        settings: AnnotationFinetuneSettings,
        *,
        seed: int = 0,
        train_threads: int | None = None,
        progress: bool = True,
    ):
        super().__init__()
        self.settings, self.seed = settings, seed
        self.train_threads, self.progress = train_threads, progress
        self.result = TunedResult()

    def compile(self, student, *, trainset, teacher=None, valset=None, **kwargs) -> dspy.Module:
        student = student.deepcopy()
        predictors = {n.removesuffix(".predict"): p for n, p in student.named_predictors()}
        lm = next(iter(predictors.values())).lm
        check_model(lm)
        data, steps, retrieved = self._examples(student, predictors, default_adapter(lm), trainset)
        # the examples each adapter trains on, in the order they were made: one adapter for
        # every step, or one per step that has examples
        jobs: dict[str | None, list[int]] = {None: list(range(len(data)))}
        if not self.settings.multitask and data:
            jobs = {
                step: [i for i, s in enumerate(steps) if s == step] for step in dict.fromkeys(steps)
            }
        train_kwargs = self.settings.train_kwargs(self.train_threads, self.progress)
        for indices in jobs.values():  # too few for any adapter: one line before any training
            provider.check_examples(
                [data[i] for i in indices], provider.TrainSettings.of(train_kwargs)
            )
        trained = []
        for step, indices in jobs.items():  # one at a time: each takes every core
            tuned = lm.finetune([data[i] for i in indices], "chat", train_kwargs).result()
            if isinstance(tuned, BaseException):
                raise tuned
            for name in [step] if step is not None else list(predictors):
                predictors[name].lm = tuned
            counts = dict(Counter(steps[i] for i in indices))
            # questions whose examples here came from a context without gold
            without_gold = len({retrieved[i] for i in indices if retrieved[i] is not None})
            count = len(indices)
            trained.append(
                Trained(
                    tuned.model, count, counts, len(trainset), None, "annotations", without_gold
                )
            )
        # a second training (better-together's 'w -> p -> w') adds to the first's record
        earlier = self.result.trained
        self.result = TunedResult(student, [*earlier, *trained], shared=self.settings.multitask)
        student._compiled = True
        return student

    def _examples(self, student, predictors: dict, adapter, trainset) -> tuple[list, list, list]:
        """Every step's annotation examples, each formatted as the chat that step is shown, with
        the step it trains and (for a context retrieved without gold, RAFT's share) the index
        of its question, else None."""
        rng = random.Random(self.seed)
        data, steps, retrieved = [], [], []
        for number, example in enumerate(trainset):
            demos = {}
            if rng.random() < self.settings.retrieved_share:
                demos = student.retrieved_demos(example)
            for step, items in (demos or student.annotated_demos(example)).items():
                predictor = predictors.get(step)
                for demo in items if predictor is not None else []:
                    outputs = predictor.signature.output_fields
                    if any(name not in demo for name in outputs):
                        continue
                    formats = student.step_adapter(step, adapter)
                    signature = student.step_signature(step, predictor.signature, demo, formats)
                    data.append(
                        formats.format_finetune_data(
                            signature=signature,
                            demos=list(predictor.demos),
                            inputs={k: demo[k] for k in predictor.signature.input_fields},
                            outputs={k: demo[k] for k in outputs},
                        )
                    )
                    steps.append(step)
                    retrieved.append(number if demos else None)
        return data, steps, retrieved


class AnnotationBetterTogether(Teleprompter):
    """``--teacher annotations --optimizer better-together``
    (``AnnotationBetterTogetherSettings``): ``compile(student, trainset=..., valset=...)``
    runs DSPy's ``BetterTogether`` with the annotation teacher as its prompt step (``p``: the
    steps' demonstrations read from the annotations) and the annotation finetune as its weight
    step (``w``), and returns the candidate that scores best on ``valset`` (``select_on="dev"``)
    or on the held-out training questions (``"train"``). No model is called to make the
    demonstrations or the training examples; the candidates are scored with ``metric``."""

    def __init__(
        self,
        settings: AnnotationBetterTogetherSettings,
        *,
        metric: Callable,
        seed: int = 0,
        threads: int = 1,
        select_on: str = "dev",
        train_threads: int | None = None,
        progress: bool = True,
    ):
        super().__init__()
        self.settings, self.metric, self.seed = settings, metric, seed
        self.threads, self.select_on = threads, select_on
        self.train_threads, self.progress = train_threads, progress
        self.result = TunedResult()

    def compile(self, student, *, trainset, teacher=None, valset=None, **kwargs) -> dspy.Module:
        settings, trainset = self.settings, list(trainset)
        if self.select_on == "train":
            trainset, valset = selection_split(settings, trainset)
        prompts = AnnotationTeacher(AnnotationSettings(per_step=settings.per_step), seed=self.seed)
        weights = AnnotationFinetune(
            settings, seed=self.seed, train_threads=self.train_threads, progress=self.progress
        )
        together = RecordingBetterTogether(metric=self.metric, p=prompts, w=weights)
        program = together.compile(
            student.deepcopy(),
            trainset=trainset,
            valset=list(valset) if valset else None,
            num_threads=self.threads,
            seed=self.seed,
            strategy=settings.strategy,
        )
        if together.error is not None:
            raise together.error
        shared = settings.multitask
        self.result = TunedResult(program, weights.result.trained, candidates(program), shared)
        return program
