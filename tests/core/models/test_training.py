"""The LoRA training loop (netcast.models.training) on a tiny random Qwen2 model: the loss is on
the reply only, checkpoints resume to the same weights as an uninterrupted run, Ctrl-C saves and
stops with exit code 130, the thread setting is honoured. The real 0.5B model:
tests/core/models/test_lora_provider_slow.py."""

import os
import signal
import threading
import time

import pytest
import torch

from netcast.models import training
from netcast.models.lora_provider import TARGETS

EXAMPLES = [
    training.Encoded(tuple((7 * i + j) % 60 + 2 for j in range(12 + i)), 8 + i % 3)
    for i in range(5)
]


def tiny_model():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
    )
    return training.with_lora(Qwen2ForCausalLM(config), 4, 8.0, 0.1, TARGETS)


def trained(checkpoint, **kwargs):
    model = tiny_model()
    if kwargs.pop("checkpointed", False):
        training.checkpoint_activations(model)
    kwargs.setdefault("every", 100)
    result = training.train(
        model,
        EXAMPLES,
        learning_rate=1e-2,
        epochs=2,
        batch_size=2,
        warmup_ratio=0.1,
        seed=3,
        threads=kwargs.pop("threads", 1),
        checkpoint=checkpoint,
        checkpoint_every=kwargs.pop("every"),
        key=kwargs.pop("key", "k"),
        **kwargs,
    )
    return result, training.lora_weights(model)


def same_weights(a, b):
    return a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_the_lora_covers_the_seven_projections_and_the_base_is_frozen():
    model = tiny_model()
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    assert {n.split(".")[-4] for n in names} == set(TARGETS)
    assert all(".lora_" in n for n in names)


def test_the_loss_is_on_the_reply_tokens_only(tmp_path):
    losses = []
    trained(tmp_path / "c.pt", on_step=lambda step, total, loss: losses.append(loss))
    model = tiny_model()  # LoRA's B starts at zero: step 1's loss is the base model's
    first = [EXAMPLES[i] for i in training.schedule(len(EXAMPLES), 2, 2, 3)[0]]
    expected = []
    with torch.no_grad():
        for example in first:
            ids = torch.tensor([example.ids])
            logits = model(input_ids=ids).logits[0, :-1]
            nll = torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="none")
            expected.append(float(nll[example.n_prompt - 1 :].mean()))  # predicting the reply
    assert losses[0] == pytest.approx(sum(expected) / len(expected), rel=1e-4)


def test_schedule_covers_every_example_once_an_epoch_in_a_seeded_order():
    plan = training.schedule(5, 2, 2, seed=3)
    assert [len(b) for b in plan] == [2, 2, 1, 2, 2, 1]
    first, second = [i for b in plan[:3] for i in b], [i for b in plan[3:] for i in b]
    assert sorted(first) == sorted(second) == list(range(5))
    assert plan == training.schedule(5, 2, 2, seed=3) != training.schedule(5, 2, 2, seed=4)


def test_a_stopped_training_saves_a_checkpoint_and_resumes_to_the_same_weights(tmp_path):
    full, full_weights = trained(tmp_path / "full.pt")
    assert len(full.losses) == 6 and full.resumed_at == 0
    assert full.losses[-1] < full.losses[0]

    checkpoint = tmp_path / "c.pt"
    stop = threading.Event()
    with pytest.raises(training.TrainingInterrupted, match="after step 2 of 6") as err:
        trained(checkpoint, stop=stop, on_step=lambda step, total, loss: step == 2 and stop.set())
    assert err.value.exit_code == 130
    assert checkpoint.exists()

    starts = []
    resumed, weights = trained(checkpoint, on_start=lambda step, total: starts.append(step))
    assert starts == [2]  # the run is told where it starts, before its first step
    assert resumed.resumed_at == 2
    assert resumed.losses == pytest.approx(full.losses, rel=1e-5)
    assert same_weights(weights, full_weights)
    assert not checkpoint.exists()  # finished: the checkpoint is gone


def test_a_save_removes_what_a_killed_writer_left_and_keeps_a_running_ones(tmp_path):
    import subprocess
    import sys

    checkpoint = tmp_path / "c.pt"
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    left = tmp_path / f".c.pt.{int(gone.stdout)}.tmp"  # a writer killed mid-save
    running = tmp_path / f".c.pt.{os.getppid()}.tmp"  # a writer still alive
    other = tmp_path / f".d.pt.{int(gone.stdout)}.tmp"  # another checkpoint's
    recent = tmp_path / ".c.pt.999999999.tmp"  # no such pid here, but written just now
    for path in (left, running, other, recent):
        path.write_bytes(b"partial")
    old = time.time() - training.STALE_AFTER - 60
    for path in (left, running, other):
        os.utime(path, (old, old))
    stop = threading.Event()
    with pytest.raises(training.TrainingInterrupted):
        trained(checkpoint, stop=stop, on_step=lambda step, total, loss: stop.set())
    assert checkpoint.exists()
    assert not left.exists() and running.exists() and other.exists() and recent.exists()


def test_checkpointed_activations_train_to_the_same_weights(tmp_path):
    plain, plain_weights = trained(tmp_path / "a.pt")
    model = tiny_model()
    training.checkpoint_activations(model)
    assert all(layer.gradient_checkpointing for layer in model.base_model.model.model.layers)
    recomputed, weights = trained(tmp_path / "b.pt", checkpointed=True)
    assert recomputed.losses == pytest.approx(plain.losses, rel=1e-5)  # dropout replayed
    assert same_weights(weights, plain_weights)


def test_a_killed_training_resumes_from_its_last_periodic_checkpoint(tmp_path):
    _, full_weights = trained(tmp_path / "full.pt")
    checkpoint = tmp_path / "c.pt"

    def killed(step, total, loss):
        if step == 5:
            raise SystemExit("killed")  # no checkpoint written at the end: as SIGKILL

    with pytest.raises(SystemExit):
        trained(checkpoint, every=2, on_step=killed)
    resumed, weights = trained(checkpoint, every=2)
    assert resumed.resumed_at == 4
    assert same_weights(weights, full_weights)


def test_a_resumed_training_reports_the_highest_peak_memory_of_its_runs(tmp_path, monkeypatch):
    checkpoint = tmp_path / "c.pt"
    stop = threading.Event()
    monkeypatch.setattr(training, "peak_memory", lambda: 9 * 2**30)  # the first run's process
    with pytest.raises(training.TrainingInterrupted):
        trained(checkpoint, stop=stop, on_step=lambda step, total, loss: step == 2 and stop.set())
    monkeypatch.setattr(training, "peak_memory", lambda: 2 * 2**30)  # the resumed run's, lower
    resumed, _ = trained(checkpoint)
    assert resumed.resumed_at == 2 and resumed.peak_memory == 9 * 2**30
    fresh, _ = trained(tmp_path / "fresh.pt")
    assert fresh.peak_memory == 2 * 2**30


def test_a_checkpoint_saved_before_peaks_were_kept_still_resumes(tmp_path, monkeypatch):
    checkpoint = tmp_path / "c.pt"
    stop = threading.Event()
    with pytest.raises(training.TrainingInterrupted):
        trained(checkpoint, stop=stop, on_step=lambda step, total, loss: step == 2 and stop.set())
    data = torch.load(checkpoint, weights_only=True)
    del data["peak_memory"]
    torch.save(data, checkpoint)
    monkeypatch.setattr(training, "peak_memory", lambda: 3 * 2**30)
    resumed, _ = trained(checkpoint)
    assert resumed.resumed_at == 2 and resumed.peak_memory == 3 * 2**30


def test_a_checkpoint_of_other_data_or_settings_is_not_resumed(tmp_path):
    checkpoint = tmp_path / "c.pt"
    stop = threading.Event()
    with pytest.raises(training.TrainingInterrupted):
        trained(checkpoint, stop=stop, on_step=lambda step, total, loss: stop.set())
    result, _ = trained(checkpoint, key="other")
    assert result.resumed_at == 0 and len(result.losses) == 6


def test_the_fingerprint_changes_with_the_data_the_settings_and_the_base():
    key = training.fingerprint(EXAMPLES, {"rank": 16}, "a")
    assert key == training.fingerprint(list(EXAMPLES), {"rank": 16}, "a")
    assert key != training.fingerprint(EXAMPLES[:-1], {"rank": 16}, "a")
    assert key != training.fingerprint(EXAMPLES, {"rank": 8}, "a")
    assert key != training.fingerprint(EXAMPLES, {"rank": 16}, "b")


def test_ctrl_c_saves_a_checkpoint_and_stops_with_exit_code_130(tmp_path):
    checkpoint = tmp_path / "c.pt"
    before = signal.getsignal(signal.SIGINT)

    def interrupt(step, total, loss):
        if step == 3:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(training.TrainingInterrupted, match="after step 3 of 6") as err:
        trained(checkpoint, on_step=interrupt)
    assert err.value.exit_code == 130
    assert checkpoint.exists()
    assert signal.getsignal(signal.SIGINT) is before
    resumed, _ = trained(checkpoint)
    assert resumed.resumed_at == 3


def test_the_thread_setting_is_honoured(tmp_path):
    seen = []
    before = torch.get_num_threads()
    try:
        trained(
            tmp_path / "c.pt", threads=1, on_step=lambda *a: seen.append(torch.get_num_threads())
        )
    finally:
        torch.set_num_threads(before)
    assert set(seen) == {1}


def test_training_gives_torch_back_the_threads_it_had(tmp_path):
    before = torch.get_num_threads()
    requested = 1 if before > 1 else 2
    seen = []
    try:
        trained(
            tmp_path / "c.pt",
            threads=requested,
            on_step=lambda *a: seen.append(torch.get_num_threads()),
        )
        after = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    assert set(seen) == {requested} and after == before


def test_progress_shows_step_loss_and_eta():
    from rich.console import Console

    console = Console(record=True, width=120, force_terminal=False)
    progress = training.StepProgress("finetune embedded", console=console)
    with progress:
        progress(1, 4, 2.5)
        progress(2, 4, 1.25)
    text = console.export_text()
    assert "finetune embedded" in text and "2/4" in text and "loss 1.250" in text
    assert "eta" in text


def test_the_time_left_is_estimated_from_steps_a_minute_apart():
    """A 1.5B training takes about a minute a step: the estimate must span several steps."""
    from rich.console import Console

    now = [0.0]
    console = Console(record=True, width=120, force_terminal=False)
    progress = training.StepProgress("finetune", console=console, lines=1, clock=lambda: now[0])
    with progress:
        for step in range(1, 4):
            now[0] += 60.0
            progress(step, 10, 1.0)
    lines = [x for x in console.export_text().splitlines() if x.startswith("finetune:")]
    assert lines[-1].endswith("eta 0:07:00"), lines  # 7 steps left, a minute each


def test_the_elapsed_time_counts_the_first_step():
    """Started before its first step, the clock counts it: three steps a minute apart are three
    minutes (the task added at the first step's end said two)."""
    from rich.console import Console

    now = [0.0]
    console = Console(record=True, width=120, force_terminal=False)
    progress = training.StepProgress("finetune", console=console, lines=1, clock=lambda: now[0])
    with progress:
        progress.start(4, 10)  # a run resumed at step 4
        for step in range(5, 8):
            now[0] += 60.0
            progress(step, 10, 1.0)
    lines = [x for x in console.export_text().splitlines() if x.startswith("finetune:")]
    assert lines[-1].startswith("finetune: step 7/10")
    assert "0:03:00 elapsed, eta 0:03:00" in lines[-1], lines


def test_progress_off_a_terminal_prints_a_line_every_few_steps():
    """A log file gets the bar only when it stops; plain lines keep a background run's log
    current: here every 2nd of 5 steps and the last, none between."""
    from rich.console import Console

    console = Console(record=True, width=120, force_terminal=False)
    progress = training.StepProgress("finetune embedded", console=console, lines=2)
    with progress:
        for step in range(1, 6):
            progress(step, 5, 1.0 / step)
            if step == 3:
                mid = console.export_text(clear=False)
    lines = [x for x in console.export_text().splitlines() if x.startswith("finetune embedded:")]
    assert [x.split(",")[0] for x in lines] == [
        "finetune embedded: step 2/5",
        "finetune embedded: step 4/5",
        "finetune embedded: step 5/5",
    ]
    assert "loss 0.500" in lines[0] and "elapsed, eta" in lines[0]
    assert "step 2/5" in mid and "step 3/5" not in mid


def test_progress_on_a_terminal_prints_no_plain_lines():
    from rich.console import Console

    console = Console(record=True, width=120, force_terminal=True)
    progress = training.StepProgress("finetune embedded", console=console)
    with progress:
        for step in range(1, 5):
            progress(step, 4, 1.0)
    assert "finetune embedded: step" not in console.export_text()


def _resident_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads Linux's /proc")
def test_a_finished_trainings_freed_memory_goes_back_to_the_system():
    """glibc keeps the heap pages a training freed; release_memory hands them back."""
    with training.torch_threads(1):
        model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(40)])
        optimizer = torch.optim.AdamW(model.parameters())
        for _ in range(3):
            model(torch.randn(64, 512)).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
    del model, optimizer
    before = _resident_mib()
    assert training.release_memory()
    assert before - _resident_mib() > 32


def test_without_malloc_trim_releasing_memory_is_a_no_op(monkeypatch):
    """A C library without malloc_trim (macOS, musl): only the collector runs, no error."""

    class NoTrim:
        def __init__(self, name):
            pass

    monkeypatch.setattr(training.ctypes, "CDLL", NoTrim)
    assert training.release_memory() is False
