"""The path most users take: an OpenAI-compatible model server, end to end, under faults.

The slow tests start llama-cpp-python's server (``helpers_server.LlamaServer``) on a free
loopback port with the embedded GGUF, once for the module, and run the command line against it
with ``--model openai/<name> --api-base http://127.0.0.1:PORT/v1`` (every command that calls a
model takes ``--api-base``; it reaches the judge and the teacher too).
The fault tests kill it (SIGKILL, as a crash) and start it again on the same port.

The fast tests cover the same checks without a model: the preflight before any question, the
forced-decoding request and reading its reply, a failed tuning trial being re-queued."""

from __future__ import annotations

import http.server
import json
import math
import threading
from pathlib import Path
from types import SimpleNamespace

import dspy
import pytest
from helpers_server import JUDGE, PREFILL, SMALL, TUNED, LlamaServer
from typer.testing import CliRunner

from helpers import ScriptedEngine
from netcast.cli.app import app
from netcast.errors import ModelCallError
from netcast.models.factory import make_lm, preflight

runner = CliRunner()
KEY = {"OPENAI_API_KEY": "sk-local"}
ROOT = Path(__file__).resolve().parents[2]
TUNED_ARTIFACT = ROOT / "benchmarks/results/artifacts/basic-tuned-wide-0.5b"  # the best 0.5B row


def cli(*args, env=None):
    return runner.invoke(app, [str(a) for a in args], env={**KEY, **(env or {})})


def error_lines(output: str) -> list[str]:
    """The ``error:`` lines (a progress bar on stderr may end without a newline before one)."""
    return [line[line.index("error: ") :] for line in output.splitlines() if "error: " in line]


def rows(run_dir: Path) -> list[dict]:
    lines = (run_dir / "predictions.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


# -- without a model ------------------------------------------------------------------------


def test_a_missing_api_key_fails_before_any_question(tmp_path):
    result = runner.invoke(
        app,
        [
            "evaluate",
            "--model",
            "openai/netcast-small",
            "--api-base",
            "http://127.0.0.1:9/v1",
            "--limit",
            "2",
            "--run-dir",
            str(tmp_path / "r"),
        ],
        env={"OPENAI_API_KEY": None, "OPENAI_API_BASE": None},
    )
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: openai/netcast-small at http://127.0.0.1:9/v1: no API key")
    assert "OPENAI_API_KEY" in line
    assert not (tmp_path / "r").exists()


def test_bench_with_failing_questions_says_so_in_one_line(tmp_path):
    base = "http://127.0.0.1:9/v1"  # nothing listens: the preflight leaves it to the run
    args = ["bench", "--programs", "basic", "--limit", "1", "--model", "openai/netcast-small"]
    result = cli(*args, "--api-base", base, "--run-dir", tmp_path / "b")
    assert result.exit_code == 1, result.output  # nothing finished: no report; resumable
    (line,) = error_lines(result.output)
    assert line.startswith(f"error: 1 question(s) failed calling {base} and none finished")
    assert line.endswith("run the same command again to resume")


class ModelsList(http.server.BaseHTTPRequestHandler):
    """``GET /v1/models``: 401 unless the key is ``sk-good``; serves ``served-model``."""

    def do_GET(self):
        if self.headers.get("Authorization") != "Bearer sk-good":
            self.send_response(401)
            self.end_headers()
            return
        body = json.dumps({"object": "list", "data": [{"id": "served-model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def models_list():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ModelsList)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_preflight_reads_the_servers_model_list(models_list):
    preflight(make_lm("openai/served-model", api_base=models_list, api_key="sk-good"))
    with pytest.raises(ModelCallError) as unknown:
        preflight(make_lm("openai/other-model", api_base=models_list, api_key="sk-good"))
    assert str(unknown.value) == (
        f"openai/other-model at {models_list}: unknown model 'other-model'; "
        "the server serves served-model"
    )
    with pytest.raises(ModelCallError, match=r"refused the API key \(HTTP 401\)"):
        preflight(make_lm("openai/served-model", api_base=models_list, api_key="sk-bad"))


def test_preflight_leaves_unreachable_endpoints_and_in_process_engines_to_the_run():
    preflight(make_lm("openai/x", api_base="http://127.0.0.1:9/v1", api_key="k", num_retries=0))
    engine = ScriptedEngine(lambda prompt: pytest.fail("preflight called a scripted engine"))
    preflight(dspy.LM("scripted/fake", engine=engine, cache=False))
    assert engine.prompts == []


def fake_reply(top: list[tuple[str, float]]):
    entries = [{"token": token, "logprob": math.log(p)} for token, p in top]
    choice = {"logprobs": {"content": [{"token": top[0][0], "top_logprobs": entries}]}}
    return SimpleNamespace(choices=[choice], usage=SimpleNamespace(prompt_tokens=321))


def test_forced_decoding_prefills_the_reply_and_reads_the_verdicts(monkeypatch):
    import litellm

    from netcast import trace
    from netcast.programs.iterkey.forced import p_true

    sent = []

    def completion(**kwargs):
        sent.append(kwargs)
        return fake_reply([("True", 0.6), (" true", 0.1), ("False", 0.2), ("[[", 0.05)])

    monkeypatch.setattr(litellm, "completion", completion)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    messages = [{"role": "system", "content": "Judge."}, {"role": "user", "content": "Q?"}]
    lm = make_lm("openai/m", api_base="http://127.0.0.1:1/v1", api_key="k")
    with trace.recording() as record:
        assert p_true(lm, messages, "[[ ## is_correct ## ]]\n") == pytest.approx(0.7 / 0.9)
    (request,) = sent
    # the verdict is the first token of the reply: the prefix is the start of the reply itself
    assert request["messages"] == [
        *messages,
        {"role": "assistant", "content": "[[ ## is_correct ## ]]\n"},
    ]
    assert request["extra_body"] == {"continue_final_message": True, "add_generation_prompt": False}
    assert request["max_tokens"] == 1 and request["logprobs"] and request["top_logprobs"] == 20
    assert request["api_base"] == "http://127.0.0.1:1/v1"
    assert record.lm_calls == 1 and record.tokens_in == 321
    # a hosted API (no api_base) is not sent the self-hosted servers' fields
    p_true(make_lm("openai/m", api_key="k"), messages, "x")
    assert "extra_body" not in sent[-1] and sent[-1]["messages"][-1]["role"] == "assistant"


def test_a_reply_without_a_verdict_validates_nothing(monkeypatch, bm25):
    import litellm

    from netcast import trace
    from netcast.programs import get_program

    monkeypatch.setattr(litellm, "completion", lambda **kw: fake_reply([("[[", 0.9), ("#", 0.1)]))
    lm = make_lm("openai/m", api_base="http://127.0.0.1:1/v1", api_key="k")
    program = get_program("iterkey")(bm25, lm=lm, validation="logprobs", threshold=0.0)
    program.set_lm(lm)
    with trace.recording() as record:
        assert program.check("capital of France?", "Paris", ["Paris: the capital"]) == (False, 0.0)
    assert record.steps["validate_next_token"]["fallbacks"] == 1


def test_a_failed_tuning_trial_is_recorded_and_requeued_with_the_same_knobs(tmp_path):
    from optuna.trial import TrialState

    from netcast.optimize.settings import TuneSettings
    from netcast.optimize.tune import run_tuning, tuning_recipe

    state = {"up": False}

    def server(prompt):
        if not state["up"]:
            raise ConnectionError("the model server died")
        return {"reasoning": "It says so.", "answer": "Paris"}

    lm = dspy.LM("scripted/fake", engine=ScriptedEngine(server), cache=False, num_retries=0)
    settings = TuneSettings(
        trials=1, objectives="f1", storage=f"sqlite:///{tmp_path / 'tune.db'}", study="dying"
    )
    recipe = tuning_recipe("basic", "hotpotqa-sample", lm, settings, train_limit=1, dev_limit=1)
    with pytest.raises(ModelCallError) as failed:
        run_tuning(recipe, lm)
    message = str(failed.value)
    assert "\n" not in message and "trial 0 failed calling scripted/fake" in message
    assert "recorded FAIL and re-queued with the same knobs" in message
    state["up"] = True
    result = run_tuning(recipe, lm)  # the same command again
    trials = result.study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.COMPLETE]
    assert trials[1].params == trials[0].params and trials[1].system_attrs["failed_trial"] == 0
    assert result.chosen.number == 1


# -- against a real server ------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pytest.importorskip("uvicorn", reason="the server extra: pip install -e '.[server]'")
    from netcast.models import embedded

    adapter = TUNED_ARTIFACT / "lora.gguf"
    started = LlamaServer(
        embedded.model_path(), tmp_path_factory.mktemp("llama_server"), lora=adapter
    )
    started.start()
    yield started
    started.stop()


@pytest.fixture
def live(server, monkeypatch):
    """The module's server, started again if a test killed it; a key for in-process calls."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY["OPENAI_API_KEY"])
    return server.start()


@pytest.mark.slow
def test_evaluate_counts_calls_and_tokens_and_judges_under_another_name(live, tmp_path):
    run_dir = tmp_path / "r"
    args = ["evaluate", "--program", "basic", "--limit", "2", "--threads", "2"]
    args += ["--model", f"openai/{SMALL}", "--api-base", live.base, "--run-dir", run_dir]
    args += ["--judge", "--judge-model", f"openai/{JUDGE}"]
    result = cli(*args, env={"OPENAI_API_BASE": None})  # --api-base reaches the judge too
    assert result.exit_code == 0, result.output
    assert f"basic on hotpotqa-sample/dev with openai/{SMALL}" in result.output
    saved = rows(run_dir)
    assert len(saved) == 2 and len({r["id"] for r in saved}) == 2
    for row in saved:
        assert row["answer"] and row["scores"]["lm_calls"] == 1
        assert row["scores"]["tokens_in"] > 300 and 0 < row["scores"]["tokens_out"] < 200
        assert row["scores"]["judge"] in (0.0, 1.0)
    assert json.loads((run_dir / "run.json").read_text())["judge_model"] == f"openai/{JUDGE}"
    # the judge ran under its own name: asked again under that name, DSPy's cache answers
    from netcast.evaluation.evaluate import judge_match

    before = live.settled()
    judge = make_lm(f"openai/{JUDGE}", api_base=live.base)
    example = dspy.Example(question=saved[0]["question"], answers=saved[0]["answers"])
    assert judge_match(example, saved[0]["answer"], judge) == saved[0]["scores"]["judge"]
    assert live.settled() == before


@pytest.mark.slow
def test_an_unknown_model_fails_before_any_question(live, tmp_path):
    before = live.settled()
    args = ["evaluate", "--model", "openai/netcast-typo", "--api-base", live.base]
    result = cli(*args, "--limit", "2", "--run-dir", tmp_path / "r")
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line == (
        f"error: openai/netcast-typo at {live.base}: unknown model 'netcast-typo'; the server "
        f"serves {SMALL}, {JUDGE}, {PREFILL}, {TUNED}"
    )
    assert live.settled() == before and not (tmp_path / "r").exists()


@pytest.mark.slow
def test_forced_decoding_through_the_api_reads_the_verdict_after_the_prefill(live):
    """The reply is prefilled, so the one generated token is the verdict: P(True) through the
    chat API equals P(True) read from the text-completion API given the same prompt rendered by
    hand. (llama-cpp-python's server with the GGUF's own template, ``netcast-small``, closes the
    prefill and opens a new reply: see helpers_server.)"""
    import httpx

    from netcast.programs.iterkey.forced import p_true
    from netcast.programs.iterkey.signatures import ValidateAnswer

    docs = ["Paris: Paris is the capital and largest city of France."]
    predictor = dspy.Predict(ValidateAnswer)
    inputs = {"question": "What is the capital of France?", "documents": docs, "answer": "Paris"}
    messages = dspy.ChatAdapter().format(predictor.signature, [], inputs)
    prefix = "[[ ## is_correct ## ]]\n"
    p_api = p_true(make_lm(f"openai/{PREFILL}", api_base=live.base), messages, prefix)
    chatml = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    raw = httpx.post(
        f"{live.base}/completions",
        json={
            "model": PREFILL,
            "prompt": chatml + "<|im_start|>assistant\n" + prefix,
            "max_tokens": 1,
            "logprobs": 20,
            "temperature": 0,
        },
        timeout=600,
    ).json()
    top = raw["choices"][0]["logprobs"]["top_logprobs"][0]
    mass = {
        v: sum(math.exp(lp) for t, lp in top.items() if t.strip().lower() == v)
        for v in ("true", "false")
    }
    assert mass["true"] + mass["false"] > 0.5  # the verdict is what comes next
    assert p_api == pytest.approx(mass["true"] / (mass["true"] + mass["false"]), abs=1e-6)


@pytest.mark.slow
def test_compile_then_load_gives_the_same_predictions(live, tmp_path, monkeypatch):
    import netcast
    from netcast.data import load_dataset

    out = tmp_path / "artifact"
    args = ["compile", "--program", "basic", "--set", "top_k=1", "--train-limit", "3"]
    args += ["--dev-limit", "2", "--model", f"openai/{SMALL}", "--out", out]
    result = cli(*args, "--api-base", live.base, env={"OPENAI_API_BASE": None})
    assert result.exit_code == 0, result.output
    assert "loaded from artifact" in result.output and (out / "program.json").exists()
    dev = load_dataset("hotpotqa-sample", "dev", 2).examples

    def answers(cache: bool):
        lm = make_lm(f"openai/{SMALL}", api_base=live.base, cache=cache)
        program = netcast.load(out, model=lm)
        predictions = [program(question=ex.question) for ex in dev]
        return [p.answer for p in predictions], [p.trace for p in predictions]

    # the loaded program asks exactly what the compiled one asked: every call is a cache hit
    cached, traces = answers(cache=True)
    assert all(t["cached_calls"] == t["lm_calls"] == 1 for t in traces)
    # and asked afresh, the server gives the same answers
    before = live.settled()
    fresh, traces = answers(cache=False)
    assert live.settled() == before + 2 and fresh == cached


def small_dataset(path: Path) -> Path:
    """Two easy questions over short passages (a dataset given as a file path)."""
    records = [
        ("q-capital", "What is the capital of France?", ["Paris"], "Paris"),
        ("q-river", "Which river flows through Paris?", ["Seine", "the Seine"], "Seine"),
    ]
    passages = {
        "Paris": "Paris is the capital and largest city of France.",
        "Seine": "The Seine is the river that flows through Paris.",
        "Berlin": "Berlin is the capital of Germany.",
        "Rhine": "The Rhine flows through Germany and the Netherlands.",
    }
    lines = []
    for qid, question, answers, gold in records:
        paragraphs = [
            {"title": title, "text": text, "is_supporting": title == gold}
            for title, text in passages.items()
        ]
        record = {"id": qid, "question": question, "answers": answers, "paragraphs": paragraphs}
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_bench_runs_two_strategies_through_the_server(live, tmp_path):
    """``iterkey`` validates by forced decoding (its default) through the API's logprobs. The
    dataset is a file given by its absolute path (short passages keep the run short)."""
    dataset = small_dataset(tmp_path / "small.jsonl")
    args = ["bench", "--programs", "basic,iterkey", "--datasets", dataset, "--split", "all"]
    args += ["--limit", "2", "--model", f"openai/{PREFILL}", "--run-dir", tmp_path / "b"]
    result = cli(*args, "--api-base", live.base, env={"OPENAI_API_BASE": None})
    assert result.exit_code == 0, result.output
    report = (tmp_path / "b" / "report.md").read_text()
    assert "| basic |" in report and "| iterkey |" in report
    for program in ("basic", "iterkey"):
        saved = rows(tmp_path / "b" / "small" / program)
        assert len(saved) == 2 and all(r["trace"]["lm_calls"] >= 1 for r in saved)
    saved = rows(tmp_path / "b" / "small" / "iterkey")
    turns = [turn for row in saved for turn in row["trace"]["turns"]]
    assert turns and all(0.0 < t["p_true"] < 1.0 for t in turns)  # read from the logprobs


@pytest.mark.slow
def test_a_server_with_the_tuned_adapter_gives_the_in_process_answers_and_one_without_is_refused(
    live, tmp_path
):
    """A tuned artifact served by llama.cpp's server with its adapter (``--lora_path``): bench
    --compiled through --api-base checks the server first (its answers on the first questions
    against the tuned model's in this process) and runs; its rows are the in-process answers.
    The same server's model without the adapter is refused in one line, before any row."""
    import netcast

    args = ["bench", "--programs", "", "--compiled", TUNED_ARTIFACT, "--datasets", "hotpotqa-wide"]
    args += ["--limit", "3", "--api-base", live.base]
    result = cli(*args, "--model", f"openai/{TUNED}", "--run-dir", tmp_path / "tuned")
    assert result.exit_code == 0, result.output
    served = {
        r["id"]: r["answer"] for r in rows(tmp_path / "tuned/hotpotqa-wide" / TUNED_ARTIFACT.name)
    }
    data = netcast.load_dataset("hotpotqa-wide", "dev", limit=3)
    here = netcast.load(TUNED_ARTIFACT)
    assert served == {e.id: here(question=e.question).answer for e in data.examples}

    result = cli(*args, "--model", f"openai/{SMALL}", "--run-dir", tmp_path / "base")
    assert result.exit_code == 2, result.output
    (line,) = error_lines(result.output)
    assert f"does not serve {TUNED_ARTIFACT}'s adapter" in line and "--lora_path" in line
    assert not (
        tmp_path / "base/hotpotqa-wide" / TUNED_ARTIFACT.name / "predictions.jsonl"
    ).exists()


@pytest.mark.slow
def test_a_killed_server_stops_the_run_and_the_rerun_does_only_the_missing_questions(
    live, tmp_path
):
    run_dir = tmp_path / "r"
    args = ["evaluate", "--program", "basic", "--set", "top_k=1", "--limit", "4"]
    args += ["--threads", "1", "--max-errors", "1", "--retries", "0", "--model", f"openai/{SMALL}"]
    args += ["--api-base", live.base, "--run-dir", run_dir]
    live.kill_after(1)  # the server dies once it has answered the first question
    first = cli(*args)
    assert first.exit_code == 1, first.output
    (line,) = error_lines(first.output)
    assert f"2 question(s) failed calling {live.base}, 1 not run" in line
    assert "1 of 4 finished question(s) are saved" in line and "run the same command" in line
    assert len(rows(run_dir)) == 1

    live.start()  # the same port again
    before = live.settled()
    again = cli(*args)
    assert again.exit_code == 0, again.output
    assert live.settled() - before == 3  # only the missing questions ran
    saved = rows(run_dir)
    assert len(saved) == 4 and len({r["id"] for r in saved}) == 4


@pytest.mark.slow
def test_a_compile_interrupted_by_the_server_dying_leaves_no_artifact(live, tmp_path):
    out = tmp_path / "artifact"
    args = ["compile", "--program", "basic", "--set", "top_k=1", "--train-limit", "3"]
    args += ["--dev-limit", "2", "--model", f"openai/{SMALL}", "--out", out]
    live.kill_after(3)  # scored before compiling (2 calls), then dies while bootstrapping
    result = cli(*args, "--api-base", live.base, env={"OPENAI_API_BASE": None})
    assert result.exit_code == 1, result.output  # a failed model call, not bad input
    (line,) = error_lines(result.output)
    assert f"failed calling {live.base}" in line and "no artifact was written" in line
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    """A second server with the same model: a replica of ``server``."""
    pytest.importorskip("uvicorn", reason="the server extra: pip install -e '.[server]'")
    from netcast.models import embedded

    started = LlamaServer(embedded.model_path(), tmp_path_factory.mktemp("llama_replica"))
    started.start()
    yield started
    started.stop()


@pytest.mark.slow
def test_two_servers_share_the_calls_and_one_dying_loses_no_question(live, replica, tmp_path):
    """--api-base twice: calls alternate between the two servers; when one is killed mid-run,
    the run finishes on the other with every question saved once."""
    run_dir = tmp_path / "r"
    args = ["evaluate", "--program", "basic", "--set", "top_k=1", "--threads", "1"]
    args += ["--retries", "0", "--model", f"openai/{SMALL}", "--run-dir", run_dir]
    args += ["--api-base", live.base, "--api-base", replica.base]
    before = live.settled(), replica.settled()
    first = cli(*args, "--limit", "4")
    assert first.exit_code == 0, first.output
    assert (live.settled() - before[0], replica.settled() - before[1]) == (2, 2)

    before = live.settled(), replica.settled()
    live.kill_after(1)  # answers question 5, then dies (SIGKILL) while question 6 is on the other
    second = cli(*args, "--limit", "8")
    assert second.exit_code == 0, second.output
    assert live.process.poll() is not None  # it did die
    assert live.completions - before[0] <= 2 and replica.settled() - before[1] >= 2
    saved = rows(run_dir)
    assert len(saved) == 8 and len({r["id"] for r in saved}) == 8
    assert all(r["answer"] for r in saved)
