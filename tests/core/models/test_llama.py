"""Smoke tests of the embedded model through DSPy (real llama.cpp, a few short prompts)."""

import math
import threading

import dspy
import pytest
from dspy.utils.exceptions import ContextWindowExceededError

from netcast.models import embedded
from netcast.models.factory import use_netcast_cache
from netcast.models.llama import LlamaCppEngine

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engine():
    engine = LlamaCppEngine(str(embedded.model_path()), n_ctx=2048, max_tokens=32)
    yield engine
    engine.close()


def make_lm(engine, cache=False):
    use_netcast_cache()
    return dspy.LM(
        "netcast/test-embedded",
        engine=engine,
        cache=cache,
        temperature=0.0,
        max_tokens=32,
        num_retries=0,
    )


def test_answers_through_dspy_and_reports_usage_to_dspy_tracking(engine):
    lm = make_lm(engine)
    with dspy.context(lm=lm, track_usage=True):
        prediction = dspy.Predict("question -> answer")(question="What is the capital of France?")
    assert "paris" in prediction.answer.lower()
    usage = prediction.get_lm_usage()["netcast/test-embedded"]
    assert usage["prompt_tokens"] > 50 and usage["completion_tokens"] > 0


def test_threads_are_serialized_and_deterministic(engine):
    lm = make_lm(engine)
    questions = ["Name a primary colour.", "What is 2 + 3?", "Capital of Italy?"]
    sequential = [lm(q)[0] for q in questions]
    results = {}

    def ask(i, q):
        results[i] = lm(q)[0]

    threads = [threading.Thread(target=ask, args=(i, q)) for i, q in enumerate(questions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[i] for i in range(3)] == sequential


def test_prefix_cache_modes_give_the_same_text(engine):
    path = str(embedded.model_path())
    prompt = "Reply with one word: the colour of the sky on a clear day."
    outputs = []
    for mode in ("off", "last"):
        other = LlamaCppEngine(path, n_ctx=1024, max_tokens=8, prefix_cache=mode)
        lm = make_lm(other)
        outputs += [lm(prompt)[0], lm("Say hi.")[0], lm(prompt)[0]]  # the repeat reuses state
        other.close()
    assert outputs[:3] * 2 == outputs


def test_predictor_prefix_cache_restores_each_predictors_state_with_the_same_text(engine):
    path = str(embedded.model_path())
    sky = dspy.Predict(dspy.Signature("question -> answer", "Answer in one word."))
    sums = dspy.Predict(dspy.Signature("numbers -> total", "Add the numbers."))
    outputs, evaluated = {}, {}
    for mode in ("off", "predictor"):
        other = LlamaCppEngine(path, n_ctx=2048, max_tokens=16, prefix_cache=mode)
        with dspy.context(lm=make_lm(other)):
            outputs[mode] = [  # two predictors, alternating
                sky(question="Colour of the sky?").answer,
                sums(numbers="2 3").total,
                sky(question="Colour of grass?").answer,
                sums(numbers="4 5").total,
            ]
        if mode == "predictor":
            assert len(other._saved) == 2  # one saved state per system prompt
        evaluated[mode] = other.prompt_evaluation()[0]
        other.close()
    assert outputs["off"] == outputs["predictor"]
    # the third and fourth prompts evaluate only what follows their predictor's saved prefix
    assert 0 < evaluated["predictor"] < evaluated["off"]


def test_context_overflow_is_a_clear_error(engine):
    small = LlamaCppEngine(str(embedded.model_path()), n_ctx=128, max_tokens=8)
    lm = make_lm(small)
    with pytest.raises(ContextWindowExceededError, match="runs with n_ctx=256; raise it"):
        lm("word " * 400)
    small.close()


def test_forced_decoding_counts_each_first_token_once(engine):
    messages = [{"role": "user", "content": "Is Paris the capital of France? Reply True or False."}]
    logprobs, n_prompt = engine.next_token_logprobs(
        messages, "", ("True", "True", " True", "False")
    )
    assert set(logprobs) == {"True", " True", "False"}  # the repeated spelling is one event
    assert n_prompt > 10 and all(lp <= 0.0 for lp in logprobs.values())
    assert math.fsum(math.exp(lp) for lp in logprobs.values()) <= 1.0 + 1e-9


@pytest.mark.slow
def test_an_error_exit_after_the_model_loaded_prints_no_teardown_traceback(tmp_path):
    """A run that stops on failed questions (passages too long for the window: three of ~1,700
    tokens, each kept whole, in a 2,048-token window) exits with its one line, not followed by
    llama.cpp's "Exception ignored in Llama.__del__" traceback (the failed question's traceback
    kept the model alive until the interpreter tore down)."""
    import json
    import os
    import subprocess
    import sys

    big = " ".join(f"word{i} alpha beta" for i in range(300))  # under the paragraph cap
    records = [
        {"id": str(i), "question": "What is alpha beta?", "answers": ["a"],
         "paragraphs": [{"title": f"T{i}", "text": f"{big} {i}"}]}
        for i in range(3)
    ]  # fmt: skip
    data = tmp_path / "big.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    args = ["evaluate", "--dataset", str(data), "--split", "all", "--set", "top_k=3"]
    args += ["--max-errors", "0", "--run-dir", str(tmp_path / "run")]
    done = subprocess.run(
        [sys.executable, "-m", "netcast", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "NETCAST_N_CTX": "2048"},
        timeout=600,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "run the same command again to resume" in done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr


class FakeGgml:
    """libggml as ctypes sees it: ``registered`` backends, and the libraries asked to load."""

    def __init__(self, registered: int):
        self.registered, self.loaded = registered, []
        outer = self

        class Count:
            restype = None

            def __call__(self):
                return outer.registered

        class Load:
            restype = None

            def __call__(self, path: bytes):
                outer.loaded.append(path.decode())
                outer.registered += 1
                return 1

        self.ggml_backend_reg_count = Count()
        self.ggml_backend_load = Load()


@pytest.mark.parametrize("registered, variants, loads", [(0, True, True), (1, True, False)])
def test_a_runtime_dispatch_build_gets_its_cpu_backend_loaded(
    monkeypatch, tmp_path, registered, variants, loads
):
    """A GGML_BACKEND_DL build registers no backend and llama-cpp-python loads none: the
    variant this machine runs (netcast.models.backends.verdict) is loaded from site-packages/bin
    into the libggml libllama links against; a build with its CPU backend linked in is left
    alone."""
    import llama_cpp

    from netcast.models import backends
    from netcast.models import llama as module

    package = tmp_path / "site-packages" / "llama_cpp"
    (package / "lib").mkdir(parents=True)
    folder = tmp_path / "site-packages" / "bin"
    folder.mkdir()
    if variants:
        for name in ("sapphirerapids", "zen4"):
            (folder / f"libggml-cpu-{name}.so").write_bytes(b"")
    fake, opened, asked = FakeGgml(registered), [], []
    monkeypatch.setattr(llama_cpp, "__file__", str(package / "__init__.py"))
    monkeypatch.setattr(module.ctypes, "CDLL", lambda path: opened.append(path) or fake)
    chosen = backends.Verdict("zen4", str(folder / "libggml-cpu-zen4.so"), "sapphirerapids died")
    monkeypatch.setattr(backends, "verdict", lambda d, model: asked.append(d) or chosen)
    assert module.load_cpu_backends() == 1
    assert opened == [str(package / "lib" / "libggml.so.0")]  # not libggml.so: another copy
    assert fake.loaded == ([chosen.path] if loads else [])
    assert asked == ([folder] if loads else [])


def test_the_installed_build_has_a_cpu_backend():
    from netcast.models.llama import load_cpu_backends

    assert load_cpu_backends() >= 1
