"""Training a LoRA on CPU: the embedded model read from its GGUF by transformers, a peft LoRA over
its frozen weights (bf16 where the CPU computes it, else fp32: ``train_dtype``), the loss on the
reply tokens only, a checkpoint every few steps.

Examples are tokenized by llama.cpp itself (the GGUF's vocabulary and chat template, as the
served model formats a chat request), so the model trains on the very tokens it is prompted with
when served. The loop is a plain AdamW loop over one example at a time (or ``batch_size`` with
gradient accumulation), in an order fixed by the seed, so a checkpoint (the LoRA weights, the
optimizer and the learning-rate schedule after step N) resumes to the same result as an
uninterrupted run. Everything torch is imported here only; ``netcast.models.lora_provider``
holds the provider DSPy calls."""

from __future__ import annotations

import ctypes
import gc
import glob
import hashlib
import json
import os
import random
import resource
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netcast.errors import InputError, NetcastError
from netcast.machine import native_bf16


class TrainingInterrupted(NetcastError):
    """Training stopped by Ctrl-C (or a cancelled job) after saving a checkpoint: the same
    command resumes from it."""

    exit_code = 130


@dataclass(frozen=True)
class Encoded:
    """One training example as token ids: the prompt's ``n_prompt`` tokens, then the reply's
    (the reply ends with the model's end-of-turn token, so the model learns to stop)."""

    ids: tuple[int, ...]
    n_prompt: int

    @property
    def n_reply(self) -> int:
        return len(self.ids) - self.n_prompt


class ChatTokenizer:
    """A GGUF model's vocabulary and chat template through llama.cpp (vocabulary only, no
    weights): the prompt of a chat request as ``Llama.create_chat_completion`` renders and
    tokenizes it."""

    def __init__(self, model_path: str | Path):
        import llama_cpp
        from llama_cpp._internals import LlamaModel
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        from netcast.models.native import load_cpu_backends

        load_cpu_backends()
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        self._model = LlamaModel(path_model=str(model_path), params=params, verbose=False)
        metadata = self._model.metadata()
        eos = self._model.token_eos()
        bos = self._model.token_bos()
        self.eos = eos
        self._formatter = Jinja2ChatFormatter(
            template=metadata["tokenizer.chat_template"],
            eos_token=self._model.token_get_text(eos) if eos != -1 else "",
            bos_token=self._model.token_get_text(bos) if bos != -1 else "",
            stop_token_ids=[eos],
        )

    def prompt_ids(self, messages: Sequence[dict[str, str]]) -> list[int]:
        result = self._formatter(messages=list(messages))
        return self._model.tokenize(
            result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True
        )

    def encode(self, messages: Sequence[dict[str, str]]) -> Encoded:
        """A chat (its last message the assistant's reply) as prompt and reply tokens."""
        *prompt, reply = messages
        ids = self.prompt_ids(prompt)
        tail = self._model.tokenize(reply["content"].encode("utf-8"), add_bos=False, special=False)
        return Encoded(tuple(ids + tail + [self.eos]), len(ids))


def train_dtype() -> str:
    """The dtype a frozen base model trains in on this CPU: ``bfloat16`` where torch computes
    it natively (``netcast.machine.native_bf16``), else ``float32``: emulated bfloat16 products
    ran about 100x slower than float32's on an AVX2-only CPU (``benchmarks/train_dtype.py``).
    float32 holds twice the bytes per base weight."""
    return "bfloat16" if native_bf16() else "float32"


def load_base(model_path: str | Path, dtype: str | None = None):
    """The model of a GGUF file as a transformers model (dequantized to ``dtype``; None: this
    CPU's ``train_dtype``)."""
    import torch

    dtype = dtype or train_dtype()
    from transformers import AutoModelForCausalLM, GgufConfig
    from transformers.utils import logging as hf_logging

    path = Path(model_path)
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its note on packed GGUF weights: they are not kept here
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(path.parent),
            gguf_file=path.name,
            dtype=getattr(torch, dtype),
            # every weight unpacked into a dense model (transformers keeps GGUF blocks packed
            # where its optional kernels package is installed: not what a LoRA trains over)
            quantization_config=GgufConfig(dequantize=True),
        )
    finally:
        hf_logging.set_verbosity(level)
    model.config.use_cache = False
    return model


def checkpoint_activations(model) -> None:
    """Keep only each decoder block's input for the backward pass and recompute the block there
    (transformers' activation checkpointing, non-reentrant: the recompute replays the forward's
    random state, so dropout and the gradients are the same): memory for the longest example's
    activations traded for about one more forward pass a step."""
    model.activation_checkpointing_enable({"use_reentrant": False})


def with_lora(model, rank: int, alpha: float, dropout: float, targets: Sequence[str]):
    """``model`` with a fresh peft LoRA on ``targets`` (its base weights frozen)."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=list(targets),
        bias="none",
        task_type="CAUSAL_LM",
    )
    with warnings.catch_warnings():  # peft asks transformers a deprecated question
        warnings.simplefilter("ignore", FutureWarning)
        return get_peft_model(model, config)


def start_from(model, weights: dict[str, Any]) -> None:
    """Set peft ``model``'s LoRA to ``weights`` (state-dict name -> array, as ``lora_weights``
    names them): training continues from another adapter. Every LoRA weight of ``model`` must
    be given, in its shape (one line otherwise)."""
    import numpy as np
    import torch
    from peft import set_peft_model_state_dict

    mine = lora_weights(model)
    if sorted(weights) != sorted(mine):
        missing = sorted(set(mine) - set(weights)) or sorted(set(weights) - set(mine))
        raise InputError(
            f"finetune settings: init: the adapter's weights are not this LoRA's "
            f"({len(weights)} against {len(mine)}; first differing {missing[0]})"
        )
    state = {}
    for name, value in weights.items():
        tensor = torch.from_numpy(np.asarray(value, dtype=np.float32))
        if tuple(tensor.shape) != tuple(mine[name].shape):
            raise InputError(
                f"finetune settings: init: {name} is {tuple(tensor.shape)}, this LoRA's "
                f"{tuple(mine[name].shape)}"
            )
        state[name] = tensor.to(mine[name].dtype)
    result = set_peft_model_state_dict(model, state)
    if getattr(result, "unexpected_keys", None):
        raise InputError(f"finetune settings: init: {result.unexpected_keys[0]} not loaded")


def lora_weights(model) -> dict[str, Any]:
    """The LoRA weights of a peft model by their state-dict names (adapter name left out)."""
    from peft import get_peft_model_state_dict

    return get_peft_model_state_dict(model, save_embedding_layers=False)


def fingerprint(examples: Sequence[Encoded], settings: dict[str, Any], base_sha256: str) -> str:
    """What a checkpoint belongs to: the base model, the training settings that change the
    result, and the examples' tokens."""
    digest = hashlib.sha256()
    digest.update(json.dumps({"base": base_sha256, "settings": settings}, sort_keys=True).encode())
    for example in examples:
        digest.update(f"{example.n_prompt}:{','.join(map(str, example.ids))};".encode())
    return digest.hexdigest()


def schedule(n_examples: int, epochs: int, batch_size: int, seed: int) -> list[list[int]]:
    """The examples each optimizer step trains on: every epoch a new shuffle (seeded), cut into
    batches of ``batch_size`` (the last of an epoch may be shorter)."""
    steps = []
    for epoch in range(epochs):
        order = list(range(n_examples))
        random.Random(seed * 1000 + epoch).shuffle(order)
        steps += [order[i : i + batch_size] for i in range(0, n_examples, batch_size)]
    return steps


@dataclass
class Checkpoint:
    step: int
    losses: list[float]
    seconds: float
    # bytes: the highest process peak of the runs so far (``peak_memory``), as of each saved
    # checkpoint: a killed run's peak after its last checkpoint is not kept
    peak_memory: int = 0


def save_checkpoint(path: Path, model, optimizer, scheduler, state: Checkpoint, key: str) -> None:
    """Write the trainable weights, the optimizer and schedule, and ``state`` to ``path``
    atomically (a kill while writing leaves the previous checkpoint)."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "fingerprint": key,
        "step": state.step,
        "losses": list(state.losses),
        "seconds": state.seconds,
        "peak_memory": max(state.peak_memory, peak_memory()),
        "weights": {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad},
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
    }
    _remove_stale(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(data, tmp)
    tmp.replace(path)


STALE_AFTER = 600


def _remove_stale(path: Path) -> None:
    """Remove the temporary files of ``path`` whose writer is gone (a process killed, or left
    with ``os._exit``, while it saved): each is as large as the checkpoint. A file whose pid
    runs here, or written in the last ``STALE_AFTER`` seconds (a writer on another host of a
    shared disk), is left alone."""
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        pid = stale.name.removesuffix(".tmp").rsplit(".", 1)[-1]
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        try:
            if time.time() - stale.stat().st_mtime > STALE_AFTER:
                stale.unlink()
        except FileNotFoundError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def load_checkpoint(path: Path, model, optimizer, scheduler, key: str) -> Checkpoint | None:
    """Restore a checkpoint written for the same ``key`` (tensors and plain data only:
    ``weights_only``); None if there is none, or it belongs to other data or settings."""
    import torch

    if not path.exists():
        return None
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a damaged checkpoint: start over, but say so
        raise InputError(
            f"{path}: damaged training checkpoint ({type(err).__name__}); delete it to train "
            "from the start"
        ) from None
    if data.get("fingerprint") != key:
        return None
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, value in data["weights"].items():
            params[name].copy_(value)
    optimizer.load_state_dict(data["optimizer"])
    scheduler.load_state_dict(data["scheduler"])
    return Checkpoint(
        int(data["step"]),
        [float(x) for x in data["losses"]],
        data["seconds"],
        int(data.get("peak_memory", 0)),
    )


def release_memory() -> bool:
    """Give back to the system the memory a finished training freed: Python's collector, then
    the C library's ``malloc_trim`` (glibc keeps freed heap pages in the process otherwise, so
    a spec that trains and then runs its rows would hold the training's peak for hours). False
    where the C library has no ``malloc_trim`` (macOS, musl): nothing more to do there."""
    gc.collect()
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # TypeError: Windows' CDLL(None)
        return False
    trim(0)
    return True


def peak_memory() -> int:
    """This process's peak resident memory so far, in bytes."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reply_loss(model, example: Encoded):
    """The mean cross-entropy of ``example``'s reply tokens given everything before them. Only
    the positions that predict the reply go through the output layer (``logits_to_keep``): on a
    RAG prompt of 1,000 tokens and a short reply that is most of the vocabulary matmul saved."""
    import torch

    ids = torch.tensor([example.ids], dtype=torch.long)
    logits = model(input_ids=ids, logits_to_keep=example.n_reply + 1).logits[0, :-1]
    return torch.nn.functional.cross_entropy(logits.float(), ids[0, example.n_prompt :])


@contextmanager
def stop_on_sigint(stop: threading.Event, notice: Callable[[str], None]) -> Iterator[None]:
    """While training runs in the main thread, Ctrl-C sets ``stop`` (the loop saves and ends
    at the end of its step) instead of raising wherever it lands; a second Ctrl-C interrupts
    at once. In another thread nothing is installed (see ``finetune.CpuTrainingJob``)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame):
        stop.set()
        notice(
            "interrupt: saving a checkpoint at the end of this step "
            "(Ctrl-C or SIGTERM again: stop now)"
        )
        signal.signal(signal.SIGINT, previous)

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Torch's CPU threads (in the calling thread) set to ``threads``, and back to as many as
    before at the end."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@dataclass
class TrainResult:
    losses: list[float]
    seconds: float
    resumed_at: int  # the step a checkpoint let this run start from (0: from the start)
    peak_memory: int  # bytes: the highest process peak of this run and those it resumed


def train(
    model,
    examples: Sequence[Encoded],
    *,
    learning_rate: float,
    epochs: int,
    batch_size: int,
    warmup_ratio: float,
    seed: int,
    threads: int,
    checkpoint: Path,
    checkpoint_every: int,
    key: str,
    stop: threading.Event | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_step: Callable[[int, int, float], None] | None = None,
    notice: Callable[[str], None] = lambda text: None,
) -> TrainResult:
    """Train ``model``'s trainable parameters on ``examples`` (loss on reply tokens only),
    resuming from ``checkpoint`` if it holds a state for ``key``, saving one every
    ``checkpoint_every`` steps and when ``stop`` is set (then ``TrainingInterrupted``).
    ``on_start(step, total)`` before the first step this run takes (``step``: where it starts,
    0 or a checkpoint's), ``on_step(step, total, loss)`` after each step. The checkpoint is
    removed at the end. The steps run on ``threads`` torch CPU threads (``torch_threads``)."""
    import torch

    stop = stop or threading.Event()
    params = [p for p in model.parameters() if p.requires_grad]
    plan = schedule(len(examples), epochs, batch_size, seed)
    total = len(plan)
    optimizer, scheduler = _optimizer(params, learning_rate, total, warmup_ratio)
    state = load_checkpoint(checkpoint, model, optimizer, scheduler, key)
    resumed_at = state.step if state else 0
    if state is None:
        state = Checkpoint(0, [], 0.0)
    elif state.step:
        notice(f"resuming from the checkpoint at step {state.step} of {total}")
    model.train()
    if on_start is not None:
        on_start(state.step, total)
    with torch_threads(threads), stop_on_sigint(stop, notice):
        for step in range(state.step, total):
            if stop.is_set():
                save_checkpoint(checkpoint, model, optimizer, scheduler, state, key)
                raise TrainingInterrupted(
                    f"training interrupted after step {state.step} of {total}; checkpoint "
                    f"saved in {checkpoint}: run the same command again to resume"
                )
            started = time.perf_counter()
            torch.manual_seed(seed * 1_000_003 + step)  # dropout: the same on a resumed run
            optimizer.zero_grad(set_to_none=True)
            batch = plan[step]
            total_loss = _accumulate(model, [examples[i] for i in batch])
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            scheduler.step()
            state = Checkpoint(
                step + 1,
                [*state.losses, total_loss / len(batch)],
                state.seconds + time.perf_counter() - started,
                state.peak_memory,
            )
            if on_step is not None:
                on_step(state.step, total, state.losses[-1])
            if checkpoint_every and state.step % checkpoint_every == 0 and state.step < total:
                save_checkpoint(checkpoint, model, optimizer, scheduler, state, key)
    model.eval()
    checkpoint.unlink(missing_ok=True)
    return TrainResult(
        state.losses, state.seconds, resumed_at, max(state.peak_memory, peak_memory())
    )


def _optimizer(params: list, learning_rate: float, total: int, warmup_ratio: float):
    """AdamW over ``params`` and its schedule: a linear warm-up over ``warmup_ratio`` of the
    ``total`` steps, then a linear decay to zero."""
    import torch

    optimizer = torch.optim.AdamW(params, lr=learning_rate, weight_decay=0.0)
    warmup = max(1, round(total * warmup_ratio)) if warmup_ratio > 0 else 0

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / (warmup + 1)
        return max(0.0, (total - step) / max(1, total - warmup))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _accumulate(model, batch: Sequence[Encoded]) -> float:
    """The batch's gradients accumulated (each example's reply loss over the batch's size);
    returns the sum of the examples' losses."""
    total_loss = 0.0
    for example in batch:
        loss = reply_loss(model, example)
        (loss / len(batch)).backward()
        total_loss += float(loss.detach())
    return total_loss


# The steps whose pace the time left is estimated from: those of the last hour. rich's default
# (30 s) holds at most one step of a 1.5B training (about a minute each), so it showed no
# estimate at all.
PACE_WINDOW = 3600.0


class StepProgress:
    """A progress bar over training steps on stderr: the step, the last step's loss, elapsed
    time and the time left (rich's estimate from the steps' pace). Where stderr is not a
    terminal (a log file, a pipe), where a bar is drawn only when it stops, a plain line with
    the same fields is printed every ``lines`` steps (default: a twentieth of the run) and at
    the last. ``clock``: the time source (default rich's, monotonic)."""

    def __init__(self, description: str, console=None, lines: int = 0, clock=None):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console or Console(stderr=True),
            transient=False,
            speed_estimate_period=PACE_WINDOW,
            **({"get_time": clock} if clock else {}),
        )
        self._description = description
        self._task = None
        self.lines = lines

    def __enter__(self) -> StepProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def print(self, text: str) -> None:
        self._progress.console.print(text, soft_wrap=True, highlight=False)

    def start(self, step: int, total: int) -> None:
        """The run starts at ``step`` (0, or where a checkpoint left off): its clock starts
        now, so the elapsed time counts this run's first step too."""
        self._task = self._progress.add_task(
            self._description, total=total, completed=step, loss="-"
        )

    def __call__(self, step: int, total: int, loss: float) -> None:
        if self._task is None:  # not started: the clock starts at this step's end
            self.start(step - 1, total)
        self._progress.update(self._task, completed=step, loss=f"{loss:.3f}")
        every = self.lines or max(1, total // 20)
        if not self._progress.console.is_terminal and (step % every == 0 or step == total):
            self.print(self._line(step, total, loss))

    def _line(self, step: int, total: int, loss: float) -> str:
        task = next(t for t in self._progress.tasks if t.id == self._task)  # by id, not index
        left = task.time_remaining
        eta = _clock(left) if left is not None else "-"
        return (
            f"{self._description}: step {step}/{total}, loss {loss:.3f}, "
            f"{_clock(task.elapsed or 0)} elapsed, eta {eta}"
        )


def _clock(seconds: float) -> str:
    """``seconds`` as h:mm:ss, as rich's time columns show it."""
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
