"""Fine-tuning the embedded model on CPU as a DSPy provider: ``LlamaCppProvider`` trains a LoRA
(``netcast.models.training``) on the chat examples DSPy's ``BootstrapFinetune`` collects, writes
it as a GGUF adapter (``netcast.models.lora``) and answers with a new model id naming the base
and the adapter's sha256; the embedded LM's copy for that id serves the adapter through
llama.cpp (``attach``).

    lm = make_lm("embedded")              # its provider is LlamaCppProvider
    job = lm.finetune(train_data, "chat", {"epochs": 1})
    tuned = job.result()                  # an EmbeddedLM running base + adapter

Bad input is refused with one line before anything is loaded: a model served by an API (no
weights here), too few examples, a malformed example, not enough memory or disk, unknown
settings. Ctrl-C during training saves a checkpoint and stops (``TrainingInterrupted``, exit
130); the same call with the same examples resumes from it, as does one after a killed run."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy
from dspy.clients.provider import Provider, TrainingJob
from dspy.clients.utils_finetune import TrainDataFormat, TrainingStatus

from netcast import interrupts, settings
from netcast.errors import InputError, NetcastError
from netcast.models import embedded, lora

TARGETS = lora.PROJECTIONS


@dataclass(frozen=True)
class TrainSettings:
    """How a LoRA is trained; DSPy's ``train_kwargs`` name these fields. ``threads`` (torch's
    CPU threads; None: every core), ``checkpoint_every`` and ``gradient_checkpointing`` change
    the time and memory a run takes, and ``progress`` (a progress bar on stderr) what it shows,
    not its result."""

    rank: int = 16
    alpha: float = 32.0
    dropout: float = 0.05
    learning_rate: float = 2e-4
    epochs: int = 1
    batch_size: int = 1
    warmup_ratio: float = 0.03
    max_tokens: int = 4096  # prompt + reply tokens of one example; longer ones are refused
    min_examples: int = 8
    seed: int = 0
    threads: int | None = None
    checkpoint_every: int = 25
    # recompute each decoder block's activations in the backward pass: far less memory for long
    # examples, about one more forward pass a step; None: on only where the longest example
    # would not fit in memory without it
    gradient_checkpointing: bool | None = None
    progress: bool = True
    # an adapter to continue training from (a tuned artifact's folder, its lora.gguf, or a GGUF
    # LoRA file) with the same rank and alpha, on the same base; None: a fresh LoRA
    init: str | None = None

    @classmethod
    def of(cls, train_kwargs: dict[str, Any] | None) -> TrainSettings:
        """Settings from DSPy's ``train_kwargs``; an unknown name or a bad value is one line."""
        kwargs = dict(train_kwargs or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise InputError(
                f"finetune settings: unknown {', '.join(unknown)}; known: "
                + ", ".join(sorted(names))
            )
        made = cls(**kwargs)
        for name in ("rank", "epochs", "batch_size", "max_tokens", "min_examples"):
            value = getattr(made, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"finetune settings: {name}={value!r}; give a whole number >= 1")
        if made.threads is not None and (not isinstance(made.threads, int) or made.threads < 1):
            raise InputError(f"finetune settings: threads={made.threads!r}; give a number >= 1")
        if made.gradient_checkpointing is not None and not isinstance(
            made.gradient_checkpointing, bool
        ):
            raise InputError(
                f"finetune settings: gradient_checkpointing={made.gradient_checkpointing!r}; "
                "give true, false or leave it unset (on where memory needs it)"
            )
        if made.init is not None and not isinstance(made.init, str):
            raise InputError(
                f"finetune settings: init={made.init!r}; give a tuned artifact's folder or a "
                "GGUF LoRA file"
            )
        if not 0 < made.learning_rate < 1 or not 0 <= made.dropout < 1 or made.alpha <= 0:
            raise InputError(
                f"finetune settings: learning_rate={made.learning_rate}, dropout={made.dropout}, "
                f"alpha={made.alpha}; give 0 < learning_rate < 1, 0 <= dropout < 1, alpha > 0"
            )
        return made

    def result_settings(self, dtype: str = "bfloat16") -> dict[str, Any]:
        """The settings that change the trained weights (a checkpoint's and an adapter's), with
        the base's ``dtype`` where it is not bfloat16 (a float32 training is another result)."""
        data = dataclasses.asdict(self) | ({"dtype": dtype} if dtype != "bfloat16" else {})
        for name in (
            "threads",
            "checkpoint_every",
            "gradient_checkpointing",
            "min_examples",
            "progress",
            "init",
        ):
            data.pop(name)
        if self.init is not None:  # the adapter started from, by its content
            data["init_sha256"] = embedded.sha256_of(init_adapter_path(self.init))
        return data

    def thread_count(self) -> int:
        return self.threads or os.cpu_count() or 1


# Calibrated on the 0.5B model (630M parameters in its GGUF; bf16 base, r 16, 2 threads, sdpa
# attention, no gradient checkpointing): 3.0 GB resident once loaded, 3.3 GB peak training on
# 90-token examples, 10.5 GB on a 1,462-token one: about BYTES_PER_PARAM per base parameter
# plus BYTES_PER_TOKEN per token of the longest example (the activations kept for the backward
# pass), for the 0.5B's width; a wider model's activations scale with its width (WIDTH_05B).
# `python benchmarks/finetune_memory.py` measures a fresh training's peak against this
# (benchmarks/results/finetune/memory-*.md): 0.59-0.74x of it on the 0.5B (500-2,500 tokens;
# twelve steps of mixed lengths peak as the longest alone) and 0.50-0.60x on the 1.5B (200-900
# tokens), where the 0.5B's constant alone put the 1.5B's peak at 0.94x by 900 tokens
# (memory-1.5b-0.5b-constant.md, the script run before the width scaling). The
# attention's share grows with the square of the length, so the margin narrows past these.
# With gradient checkpointing only each block's input is kept and one block's activations at a
# time are rebuilt: the 0.5B's peak rose 1.3 MB a token from 500 to 1,500 tokens, then fell
# slightly at 2,500; the 1.5B's rose 1.1 then 1.9 MB a token (1,000-2,500-4,000: steeper with
# length), `finetune_memory.py --checkpointed`, memory-*-checkpointed.md. The width matters
# little here, so BYTES_PER_TOKEN_CHECKPOINTED is one constant above the steepest slope seen.
# A CPU without hardware bf16 trains a float32 base (training.train_dtype): 2 more bytes a
# weight; one 1,000-token step of the 0.5B peaked at 9.4 GB there, 0.82x of the estimate
# (benchmarks/results/finetune/dtype-avx2.md).
BYTES_PER_PARAM = 6
BYTES_PER_TOKEN = 6_500_000
BYTES_PER_TOKEN_CHECKPOINTED = 2_000_000
WIDTH_05B = 24 * (896 + 4_864)  # the 0.5B: blocks x (embedding + feed-forward width)
DISK_MARGIN = 64 << 20


def available_memory() -> int:
    """Bytes this process can still take: the kernel's MemAvailable, capped by a cgroup limit."""
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max":
            room = int(limit) - used
            available = room if available is None else min(available, room)
    except (OSError, ValueError):
        pass
    return available if available is not None else sys.maxsize


def memory_needed(
    shape: lora.BaseShape, longest: int, checkpointed: bool = False, dtype: str | None = None
) -> int:
    """Bytes a training of a model of ``shape`` is expected to take, its longest example
    ``longest`` tokens (the constants above), with activation checkpointing or without, its
    base in ``dtype`` (None: this CPU's, ``training.train_dtype``; float32 holds 2 more bytes a
    weight). The adapter's record keeps it beside the measured peak, so the estimate can be
    checked against every training."""
    from netcast.models import training

    per_token = BYTES_PER_TOKEN * shape.blocks * (shape.embedding + shape.feed_forward) / WIDTH_05B
    if checkpointed:  # measured alike on the 0.5B and the 1.5B: not scaled by width
        per_token = BYTES_PER_TOKEN_CHECKPOINTED
    per_param = BYTES_PER_PARAM + (2 if (dtype or training.train_dtype()) == "float32" else 0)
    return shape.parameters() * per_param + round(longest * per_token)


def free_disk(path: Path) -> int:
    path.mkdir(parents=True, exist_ok=True)
    return shutil.disk_usage(path).free


@dataclass(frozen=True)
class MemoryPlan:
    """What the memory check decided: the estimate (bytes) and whether activations are
    recomputed (gradient checkpointing) to get there."""

    estimate: int
    checkpointed: bool


def check_resources(
    spec: embedded.ModelSpec, model_path: Path, cfg: TrainSettings, longest: int
) -> MemoryPlan:
    """Refuse, with one line, a training this machine cannot hold: the base model, its LoRA and
    the longest example's activations in memory; the adapter and checkpoint on disk. With
    ``longest`` 0 (no example known yet) the model alone: a training needs at least that.
    Gradient checkpointing is on where the settings ask for it, or (unset) where the longest
    example would not fit without it."""
    shape = lora.base_shape(model_path)
    params, per_rank = shape.parameters(), shape.lora_per_rank()
    have = available_memory()
    checkpointed = cfg.gradient_checkpointing
    if checkpointed is None:
        checkpointed = memory_needed(shape, longest) > have
    need = memory_needed(shape, longest, checkpointed)
    if need > have:
        examples = f"longest example {longest:,} tokens" if longest else "before any example"
        way = " with gradient checkpointing" if checkpointed and longest else ""
        fix = "shorten the longest examples" if longest else "finetune a smaller model"
        if longest and not checkpointed and memory_needed(shape, longest, True) <= have:
            fix = "leave gradient_checkpointing unset or true"
        raise InputError(
            f"not enough memory to finetune {spec.name}{way}: about {need / 2**30:.1f} GB "
            f"needed ({params / 1e6:.0f}M parameters, {examples}), {have / 2**30:.1f} GB "
            f"available; free memory or {fix}"
        )
    lora_params = per_rank * cfg.rank
    disk_need = lora_params * (2 + 4 * 4) + DISK_MARGIN  # f16 adapter; weights+Adam+grads fp32
    for where in (lora.adapters_dir(), checkpoints_dir()):
        free = free_disk(where)
        if disk_need > free:
            raise InputError(
                f"not enough disk in {where} to finetune {spec.name}: about "
                f"{disk_need / 2**20:.0f} MB needed, {free / 2**20:.0f} MB free"
            )
    return MemoryPlan(need, checkpointed)


def preflight(model: str, cfg: TrainSettings) -> None:
    """One line, before any example is collected, if this machine cannot train embedded model
    ``model`` at all (``check_resources`` for the model alone: its examples add to it)."""
    spec, _ = lora.parse_model_id(model)
    check_resources(spec, embedded.model_path(spec.name), cfg, longest=0)


def init_adapter_path(init: str | Path) -> Path:
    """The GGUF LoRA file ``init`` names: a tuned artifact's folder (its ``lora.gguf``) or the
    file itself; one line if there is none."""
    path = Path(init)
    file = path / lora.adapter_file() if path.is_dir() else path
    if not file.is_file():
        where = f"{path} holds no {lora.adapter_file()}" if path.is_dir() else f"{path}: not found"
        raise InputError(
            f"finetune settings: init: {where} (give a tuned artifact's folder or a GGUF LoRA file)"
        )
    return file


def start_weights(init: str | Path, spec: embedded.ModelSpec, cfg: TrainSettings) -> dict:
    """The peft LoRA weights (state-dict name -> array) of adapter ``init`` to continue
    training from, after checking it is an adapter of ``spec`` with ``cfg``'s rank and alpha
    (anything else is one line)."""
    path = init_adapter_path(init)
    base = lora.adapter_base_sha256(path)
    if base != spec.sha256:
        raise InputError(
            f"finetune settings: init: {path} is an adapter of another base (sha256 "
            f"{str(base)[:12]}...), not of {spec.name}"
        )
    tensors, config = lora.peft_tensors(path)
    if (config["r"], config["lora_alpha"]) != (cfg.rank, cfg.alpha):
        raise InputError(
            f"finetune settings: init: {path} has rank {config['r']} and alpha "
            f"{config['lora_alpha']:g}; this training rank {cfg.rank} and alpha {cfg.alpha:g}"
        )
    if sorted(config["target_modules"]) != sorted(TARGETS):
        raise InputError(
            f"finetune settings: init: {path} adapts {', '.join(config['target_modules'])}, "
            f"not the projections netcast trains ({', '.join(TARGETS)})"
        )
    return tensors


def checkpoints_dir() -> Path:
    return settings.home() / "finetune"


def check_examples(train_data: Any, cfg: TrainSettings) -> list[list[dict[str, str]]]:
    """The chats of DSPy's chat-format fine-tuning data, each ending with the assistant's reply;
    one line naming the first malformed example, or too few of them."""
    if not isinstance(train_data, list):
        raise InputError(f"finetune data: a list of examples expected, got {type(train_data)}")
    chats = []
    for index, item in enumerate(train_data):
        messages = item.get("messages") if isinstance(item, dict) else None
        ok = isinstance(messages, list) and len(messages) >= 2
        ok = ok and all(
            isinstance(m, dict) and isinstance(m.get("content"), str) and m.get("role")
            for m in messages
        )
        if not ok or messages[-1]["role"] != "assistant":
            raise InputError(
                f"finetune data: example {index}: field messages must be a list of "
                "{role, content} messages ending with the assistant's reply"
            )
        if messages[-2]["role"] == "assistant" or not messages[-1]["content"].strip():
            raise InputError(f"finetune data: example {index}: empty or repeated reply")
        chats.append([{"role": m["role"], "content": m["content"]} for m in messages])
    if len(chats) < cfg.min_examples:
        raise InputError(
            f"only {len(chats)} finetune example(s) after filtering; at least "
            f"{cfg.min_examples} needed (more training questions, a teacher that passes the "
            "metric more often, or min_examples)"
        )
    return chats


def check_trainable(lm_or_model: Any) -> embedded.ModelSpec:
    """The embedded model an LM (or model id) runs; one line if it runs none (a model served by
    an API has no weights here)."""
    model = lm_or_model if isinstance(lm_or_model, str) else getattr(lm_or_model, "model", "")
    return lora.parse_model_id(model)[0]


class CpuTrainingJob(TrainingJob):
    """A training job in DSPy's thread. Made in the calling (main) thread, it takes over Ctrl-C
    while the job runs: the first sets ``stop`` (the training saves a checkpoint and ends with
    ``TrainingInterrupted``), a second, or one after the job ended, goes to the handler that was
    there before."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.stop = threading.Event()
        self._status = TrainingStatus.pending
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, self._on_sigint)

    def _on_sigint(self, signum, frame) -> None:
        if self.done() or self.stop.is_set():
            previous = self._previous
            self.restore_sigint()
            if callable(previous):
                previous(signum, frame)
            return
        self.stop.set()
        print(
            "interrupt: saving a checkpoint at the end of this training step "
            "(Ctrl-C or SIGTERM again: stop now)",
            file=sys.stderr,
        )

    def restore_sigint(self) -> None:
        if self._previous is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def result(self, timeout: float | None = None):
        try:
            return super().result(timeout)
        finally:
            if self.done():
                self.restore_sigint()

    def cancel(self) -> bool:
        """Stop the training at the end of its step (a checkpoint is saved; the job's result is
        then ``TrainingInterrupted``)."""
        self.stop.set()
        return True

    def status(self) -> TrainingStatus:
        return self._status


class LlamaCppProvider(Provider):
    """DSPy's training provider for the embedded models: LoRA on CPU, served by llama.cpp.
    ``progress``: a progress bar on stderr while training (where the training settings'
    ``progress`` does not turn it off)."""

    def __init__(self, progress: bool = True):
        super().__init__()
        self.finetunable = True
        self.TrainingJob = CpuTrainingJob
        self.progress = progress

    @staticmethod
    def is_provider_model(model: str) -> bool:
        try:
            lora.parse_model_id(model)
            return True
        except InputError:
            return False

    def finetune(
        self,
        job: TrainingJob,
        model: str,
        train_data: list[dict[str, Any]],
        train_data_format: TrainDataFormat | str | None,
        train_kwargs: dict[str, Any] | None = None,
    ) -> str:
        if train_data_format not in (None, TrainDataFormat.CHAT, "chat"):
            raise InputError(
                f"finetune data format {train_data_format!r}: the embedded models train on chats"
            )
        status = getattr(job, "_status", None)
        if status is not None:
            job._status = TrainingStatus.running
        try:
            with interrupts.running("training"):  # a second Ctrl-C leaves it at once
                model_id = finetune(
                    model,
                    train_data,
                    train_kwargs,
                    stop=getattr(job, "stop", None),
                    progress=self.progress,
                )
        except BaseException:
            if status is not None:
                job._status = TrainingStatus.failed
            raise
        if status is not None:
            job._status = TrainingStatus.succeeded
        return model_id


def finetune(
    model: str,
    train_data: list[dict[str, Any]],
    train_kwargs: dict[str, Any] | None = None,
    *,
    stop: threading.Event | None = None,
    progress: bool = False,
) -> str:
    """Train a LoRA of embedded model ``model`` (a model id or netcast name; a tuned id trains a
    new adapter of its base) on chat examples; return the tuned model's id. Checks everything
    it can before loading the model (see the module docstring). A progress bar shows with
    ``progress`` and the settings' ``progress`` both on."""
    spec, _ = lora.parse_model_id(model)
    lora.require_extra()
    from netcast.models import training

    cfg = TrainSettings.of(train_kwargs)
    chats = check_examples(train_data, cfg)
    model_path = embedded.model_path(spec.name)
    examples = _encoded(chats, model_path, cfg.max_tokens)
    longest = max(len(e.ids) for e in examples)
    dtype = training.train_dtype()
    settings = cfg.result_settings(dtype)  # with init, its adapter's sha256: read once
    key = training.fingerprint(examples, settings, spec.sha256)
    checkpoint = checkpoints_dir() / f"{key[:24]}.pt"
    finished = checkpoints_dir() / f"{key[:24]}.done.json"
    shown = progress and cfg.progress
    if (sha := trained_before(finished, spec, say=shown)) is not None:
        return lora.tuned_model_id(spec, sha)
    start = start_weights(cfg.init, spec, cfg) if cfg.init is not None else None
    plan = check_resources(spec, model_path, cfg, longest)
    display = training.StepProgress(f"finetune {spec.name}") if shown else None

    def notice(text: str) -> None:
        if display is not None:
            display.print(text)

    base = training.load_base(model_path, dtype)
    tuned = training.with_lora(base, cfg.rank, cfg.alpha, cfg.dropout, TARGETS)
    if start is not None:
        training.start_from(tuned, start)
    try:
        if plan.checkpointed:
            training.checkpoint_activations(tuned)
        with display if display is not None else contextlib.nullcontext():
            result = training.train(
                tuned,
                examples,
                learning_rate=cfg.learning_rate,
                epochs=cfg.epochs,
                batch_size=cfg.batch_size,
                warmup_ratio=cfg.warmup_ratio,
                seed=cfg.seed,
                threads=cfg.thread_count(),
                checkpoint=checkpoint,
                checkpoint_every=cfg.checkpoint_every,
                key=key,
                stop=stop,
                on_start=display.start if display is not None else None,
                on_step=display,
                notice=notice,
            )
        record = lora.write_adapter(
            training.lora_weights(tuned),
            spec,
            model_path,
            alpha=cfg.alpha,
            rank=cfg.rank,
            meta=adapter_meta(settings, len(examples), result, longest, plan),
        )
        lora.write_json(finished, {"sha256": record.sha256})
    finally:  # the model and its LoRA, trained or stopped: what follows needs the memory back
        del base, tuned
        training.release_memory()
    return lora.tuned_model_id(spec, record.sha256)


def adapter_meta(
    settings: dict[str, Any], examples: int, result: Any, longest: int, plan: MemoryPlan
) -> dict[str, Any]:
    """What a trained adapter's record keeps of its training (``lora.write_adapter``'s meta)."""
    return {
        "settings": settings,
        "examples": examples,
        "loss_curve": result.losses,
        "seconds": result.seconds,
        "peak_memory": result.peak_memory,
        "longest_tokens": longest,
        "memory_estimate": plan.estimate,
        "gradient_checkpointing": plan.checkpointed,
    }


def trained_before(finished: Path, spec: embedded.ModelSpec, say: bool = False) -> str | None:
    """The sha256 of the adapter a finished training with the same examples, settings and
    base left (its ``.done.json`` beside the checkpoints), if the adapter store still holds it
    intact (said on stderr with ``say``); else None (train). So a run that fails after its
    training (scoring the tuned program, one step's adapter of several) does not train again."""
    try:
        sha = json.loads(finished.read_text())["sha256"]
        lora.verified_adapter(sha, spec)
        lora.read_record(sha)
    except (OSError, ValueError, KeyError, TypeError, NetcastError):
        return None
    if say:
        print(f"finetune {spec.name}: trained before (adapter {sha[:12]}...)", file=sys.stderr)
    return sha


def _encoded(chats: list, model_path: Path, max_tokens: int) -> list:
    """The chats as the model's tokens (``training.ChatTokenizer``); an example longer than
    ``max_tokens`` is refused in one line naming it."""
    from netcast.models import training

    tokenizer = training.ChatTokenizer(model_path)
    examples = [tokenizer.encode(chat) for chat in chats]
    for index, example in enumerate(examples):
        if len(example.ids) > max_tokens:
            raise InputError(
                f"finetune data: example {index}: {len(example.ids):,} tokens, more than "
                f"max_tokens={max_tokens:,}; shorten its context or raise max_tokens"
            )
    return examples


def attach(lm: dspy.LM) -> dspy.LM:
    """A copy of embedded LM ``lm`` whose engine runs the model its id names: the base alone, or
    the base with the adapter the id's sha256 names, verified against the base
    (``lora.verified_adapter``). DSPy copies an LM with its engine, so without this a tuned
    model's LM would run the base model. An engine that runs no GGUF (a test's scripted one) is
    kept."""
    spec, sha = lora.parse_model_id(lm.model)
    engine = lm.engine
    state = engine.dump_state() if hasattr(engine, "dump_state") else {}
    if "model_path" not in state:
        return lm
    state["model_path"] = str(embedded.model_path(spec.name))
    state["lora_path"] = str(lora.verified_adapter(sha, spec)) if sha else None
    copied = lm.copy(engine=type(engine).load_state(state))
    copied.embedded_name = spec.name
    return copied


def merging(lm: dspy.LM) -> dspy.LM:
    """A copy of embedded LM ``lm`` whose engine serves its LoRA adapter merged into a cached
    copy of the model file (``netcast.models.merge``) rather than applied at run time; ``lm``
    itself is left as it is. An engine that already merges, or runs no GGUF (a test's scripted
    one), is kept."""
    engine = lm.engine
    state = engine.dump_state() if hasattr(engine, "dump_state") else {}
    if "merge_lora" not in state or state["merge_lora"]:
        return lm
    return lm.copy(engine=type(engine).load_state({**state, "merge_lora": True}))
