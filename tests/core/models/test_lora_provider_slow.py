"""Fine-tuning the real 0.5B embedded model for a few steps (minutes on 2 cores): the adapter,
served by llama.cpp, moves the model toward its training target; the training tokens are the
prompt llama.cpp builds; a killed training resumes from its checkpoint."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import dspy
import numpy as np
import pytest

from netcast.models import embedded, lora, lora_provider, training
from netcast.models.factory import default_adapter, make_lm

pytestmark = pytest.mark.slow

TARGET = "Quetzalcoatl"


class Capital(dspy.Signature):
    """Answer the question with one word."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


COUNTRIES = ["France", "Germany", "Italy", "Spain", "Japan", "Egypt", "Peru", "Canada", "Kenya"]


def examples(lm, countries) -> list[dict]:
    adapter = default_adapter(lm)
    return [
        adapter.format_finetune_data(
            Capital, [], {"question": f"What is the capital of {c}?"}, {"answer": TARGET}
        )
        for c in countries
    ]


def reply_logprob(model_path, lora_path, messages) -> float:
    """The summed log-probability llama.cpp gives the reply tokens of a chat."""
    from llama_cpp import Llama

    from netcast.models.llama import load_cpu_backends

    load_cpu_backends()
    encoded = training.ChatTokenizer(model_path).encode(messages)
    llm = Llama(
        model_path=str(model_path),
        lora_path=lora_path,
        n_ctx=1024,
        logits_all=True,
        n_threads=2,
        verbose=False,
    )
    try:
        llm.eval(list(encoded.ids))
        logits = llm.scores[: len(encoded.ids)].astype(np.float64)
    finally:
        llm.close()
    top = logits.max(axis=1, keepdims=True)
    logprobs = logits - (top + np.log(np.exp(logits - top).sum(axis=1, keepdims=True)))
    return float(
        sum(logprobs[i - 1, encoded.ids[i]] for i in range(encoded.n_prompt, len(encoded.ids)))
    )


def test_the_adapter_served_by_llama_cpp_moves_the_answer_toward_the_training_target():
    lm = make_lm("embedded", prefix_cache="off")
    data = examples(lm, COUNTRIES[:4])
    held_out = examples(lm, ["Brazil"])[0]["messages"]
    started = time.perf_counter()
    job = lm.finetune(data, "chat", {"learning_rate": 1e-3, "min_examples": 4})
    tuned = job.result()
    took = time.perf_counter() - started
    assert not isinstance(tuned, Exception), tuned
    spec, sha = lora.parse_model_id(tuned.model)
    assert tuned.model == lora.tuned_model_id(embedded.spec(), sha)
    assert tuned.engine.lora_path == str(lora.adapter_path(sha))
    record = lora.read_record(sha)
    assert record.examples == 4 and len(record.loss_curve) == 4
    print(
        f"\n4 examples in {took:.0f} s ({record.seconds / 4:.2f} s per example in steps), "
        f"peak memory {record.peak_memory / 2**30:.2f} GB, adapter {record.size / 1e6:.1f} MB, "
        f"loss {record.loss_curve[0]:.3f} -> {record.loss_curve[-1]:.3f}"
    )
    assert 15e6 < record.size < 20e6

    base_path = embedded.model_path()
    before = reply_logprob(base_path, None, held_out)
    after = reply_logprob(base_path, str(lora.adapter_path(sha)), held_out)
    print(f"held-out reply log-probability: base {before:.2f}, tuned {after:.2f}")
    assert after > before + 5

    question = "What is the capital of Brazil?"
    with dspy.context(lm=tuned, adapter=default_adapter(tuned)):
        tuned_answer = dspy.Predict(Capital)(question=question)
    with dspy.context(lm=lm, adapter=default_adapter(lm)):
        base_answer = dspy.Predict(Capital)(question=question)
    assert tuned_answer.answer == TARGET
    assert base_answer.answer != TARGET


def test_training_tokens_are_the_prompt_llama_cpp_evaluates():
    lm = make_lm("embedded", prefix_cache="off", cache=False)
    messages = examples(lm, ["France"])[0]["messages"]
    encoded = training.ChatTokenizer(embedded.model_path()).encode(messages)
    out = lm.engine._model().create_chat_completion(messages=messages[:-1], max_tokens=1)
    assert out["usage"]["prompt_tokens"] == encoded.n_prompt
    llm = lm.engine._model()
    assert list(llm.input_ids[: encoded.n_prompt]) == list(encoded.ids[: encoded.n_prompt])


def test_a_killed_training_resumes_from_its_checkpoint(tmp_path, netcast_home, monkeypatch):
    lm = make_lm("embedded")
    data = examples(lm, COUNTRIES[:4])
    settings = {"checkpoint_every": 1, "min_examples": 4}
    script = textwrap.dedent(
        f"""
        import json, sys
        from netcast.models.lora_provider import finetune
        finetune("embedded", json.load(open(sys.argv[1])), {settings!r})
        """
    )
    data_file = tmp_path / "data.json"
    data_file.write_text(json.dumps(data))
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(data_file)],
        env={**os.environ, "NETCAST_HOME": str(netcast_home)},
    )
    checkpoints = netcast_home / "finetune"
    try:
        deadline = time.monotonic() + 600
        while not list(checkpoints.glob("*.pt")) and time.monotonic() < deadline:
            assert child.poll() is None, "the training ended before its first checkpoint"
            time.sleep(0.5)
        time.sleep(1)  # the first checkpoint is complete (written atomically)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert list(checkpoints.glob("*.pt")), "no checkpoint was written"

    seen = []
    original = training.train

    def watched(*args, **kwargs):
        result = original(*args, **kwargs)
        seen.append(result)
        return result

    monkeypatch.setattr(training, "train", watched)
    model = lora_provider.finetune("embedded", data, settings)
    assert seen[0].resumed_at >= 1
    assert len(seen[0].losses) == 4
    assert not list(checkpoints.glob("*.pt"))
    assert lora.parse_model_id(model)[1] is not None
