"""Fixtures for the benchmark specs and scripts: every model name a spec or script asks for
becomes a scripted fake model (one per name, so a test can tell which model did what), runs go
to a temporary directory, and the scripts (run as files, ``python benchmarks/NAME.py``) import
as modules from the benchmarks folder."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import dspy
import pytest

from netcast.testing import ScriptedEngine

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

# a plausible value for each output field a netcast step declares
REPLIES = {
    "answer": "Paris",
    "match": "True",
    "score": "75",
    "reasoning": "The context names it.",
    "action": "answer",
    "query": "capital of France",
    "delete_ids": "[]",
    "relevant_sentences": "NONE",
    "new_notes": '["Paris is the capital of France."]',
    "keywords": '["Paris", "capital"]',
    "is_correct": "True",
    "known_facts": "[]",
    "still_required": "[]",
    "segments": "[]",
}


def output_fields(prompt: str) -> list[str]:
    """The output field names a ChatAdapter prompt asks for."""
    section = prompt.split("Your output fields are:", 1)[-1].split("All interactions", 1)[0]
    return re.findall(r"^\d+\. `(\w+)`", section, re.M)


class LogprobEngine(ScriptedEngine):
    """A scripted engine that also answers forced decoding (IterKey's logprobs validation)
    with a fixed P(True)."""

    def __init__(self, script, p_true: float = 0.9):
        super().__init__(script)
        self.p_true = p_true
        self.forced: list[object] = []

    def next_token_logprobs(self, messages, prefix, candidates):
        import math

        self.forced.append(messages)
        verdict = {"true": math.log(self.p_true), "false": math.log(1 - self.p_true)}
        return {c: verdict[c.strip().lower()] for c in candidates}, 100


class FakeModels:
    """Scripted LMs by model name; ``replies[name]`` overrides field values for one model."""

    def __init__(self) -> None:
        self.lms: dict[str, dspy.LM] = {}
        self.engines: dict[str, LogprobEngine] = {}
        self.replies: dict[str, dict[str, object]] = {}

    def make(self, name: str | None = None, **_: object) -> dspy.LM:
        name = name or "embedded"
        if name not in self.lms:

            def respond(prompt: str, name: str = name) -> dict[str, object]:
                mine = {**REPLIES, **self.replies.get(name, {})}
                return {
                    f: (mine[f](prompt) if callable(mine[f]) else mine[f])
                    for f in output_fields(prompt)
                }

            engine = LogprobEngine(respond)
            self.engines[name] = engine
            self.lms[name] = dspy.LM(f"scripted/{name}", engine=engine, cache=False, num_retries=0)
        return self.lms[name]

    def prompts(self, name: str) -> list[str]:
        return self.engines[name].prompts if name in self.engines else []


@pytest.fixture
def fake_models(monkeypatch, tmp_path) -> FakeModels:
    import netcast
    import netcast.models
    import netcast.programs.base

    models = FakeModels()
    monkeypatch.setattr(netcast, "make_lm", models.make)
    monkeypatch.setattr(netcast.models, "make_lm", models.make)
    monkeypatch.setattr(netcast.programs.base, "make_lm", models.make)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    dspy.configure(adapter=dspy.ChatAdapter())
    yield models
    dspy.configure(lm=None, adapter=None)


@pytest.fixture
def script(monkeypatch):
    """Import a benchmark script by module name (fresh, so its options parse anew)."""
    import importlib

    monkeypatch.syspath_prepend(str(BENCHMARKS))

    def load(name: str):
        sys.modules.pop(name, None)
        return importlib.import_module(name)

    return load
