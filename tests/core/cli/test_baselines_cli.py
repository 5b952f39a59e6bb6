"""The baselines (multihop, ircot) through every command, on a scripted model: evaluate, compile
with the annotation teacher, tune, bench, and loading the compiled artifact."""

import json
import re

import dspy
import pytest
from typer.testing import CliRunner

from helpers import ScriptedEngine
from netcast.cli.app import app
from netcast.models.factory import use_netcast_cache

REPLIES = {
    "query": "capital of France",
    "reasoning": "The context names it.",
    "answer": "Paris",
    "next_sentence": "Paris is named in the context.",  # never "answer is": all steps run
}


def reply(prompt: str) -> dict[str, str]:
    """Each output field a ChatAdapter prompt asks for, with a plausible value."""
    section = prompt.split("Your output fields are:", 1)[-1].split("All interactions", 1)[0]
    return {f: REPLIES[f] for f in re.findall(r"^\d+\. `(\w+)`", section, re.M)}


@pytest.fixture
def scripted(monkeypatch):
    """Every model a command makes is one scripted model; its prompts are kept."""
    use_netcast_cache()
    engine = ScriptedEngine(reply)
    lm = dspy.LM("scripted/fake", engine=engine, cache=False, num_retries=0)

    def make(*args, **kwargs):
        return lm

    for where in ("netcast.models", "netcast.session", "netcast.optimize.workflow"):
        monkeypatch.setattr(f"{where}.make_lm", make)
    yield engine
    dspy.configure(lm=None, adapter=None)


def run(*args):
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("program", ["multihop", "ircot"])
def test_a_baseline_runs_through_every_command(scripted, tmp_path, program):
    data = ["--dataset", "hotpotqa-sample"]
    run("evaluate", "--program", program, *data, "--limit", 2, "--run-dir", tmp_path / "e")
    evaluated = rows(tmp_path / "e" / "predictions.jsonl")
    assert len(evaluated) == 2 and all(r["answer"] == "Paris" for r in evaluated)
    assert all(len(r["trace"]["searches"]) >= 2 for r in evaluated)  # more than one retrieval

    art = tmp_path / "art"
    run(
        "compile", "--program", program, *data, "--teacher", "annotations",
        "--train-limit", 3, "--dev-limit", 2, "--out", art,
    )  # fmt: skip
    state = json.loads((art / "program.json").read_text())
    taught = {name: len(p.get("demos", [])) for name, p in state.items() if "demos" in p}
    assert taught and all(n > 0 for n in taught.values()), taught  # every step taught

    run(
        "tune", "--program", program, *data, "--trials", 1, "--train-limit", 2,
        "--dev-limit", 2, "--storage", f"sqlite:///{tmp_path / 'tune.db'}",
    )  # fmt: skip

    run(
        "bench", "--programs", program, "--compiled", art, "--datasets", "hotpotqa-sample",
        "--limit", 2,
        "--run-dir", tmp_path / "b",
    )  # fmt: skip
    benched = tmp_path / "b" / "hotpotqa-sample"
    assert len(rows(benched / program / "predictions.jsonl")) == 2
    assert len(rows(benched / "art" / "predictions.jsonl")) == 2

    import netcast

    loaded = netcast.load(art)
    assert loaded.name == program
    demos = [len(p.demos) for _, p in loaded.named_predictors()]
    assert sum(demos) == sum(taught.values())  # the taught demonstrations came back
    prompts = len(scripted.prompts)
    assert loaded(question="What is the capital of France?").answer == "Paris"
    assert len(scripted.prompts) > prompts  # the loaded program called the model
