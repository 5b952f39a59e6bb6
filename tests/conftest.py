"""Shared test fixtures: an isolated netcast home, a scripted LM, a tiny corpus."""

from __future__ import annotations

import os
from pathlib import Path

# Tests run offline: litellm (imported with DSPy) would otherwise fetch its price list and retry.
# Importing netcast itself sets nothing (tests/core/test_import.py); its command line does.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy
import pytest

from helpers import DOCS, ScriptedEngine, WordCounter
from netcast.corpus import Corpus
from netcast.models.factory import use_netcast_cache
from netcast.models.tokens import ApproxTokenCounter
from netcast.retrievers.bm25 import BM25Retriever


@pytest.fixture(autouse=True)
def netcast_home(tmp_path_factory, monkeypatch) -> Path:
    """Each test gets its own netcast home (index cache, DSPy cache), so none share state."""
    from netcast import settings

    models = settings.models_dir()  # the real one: the 491 MB model is assembled once
    runtime = settings.runtime_dir()  # the real one: llama.cpp's CPU backend is tried once
    home = tmp_path_factory.mktemp("netcast_home")
    monkeypatch.setenv("NETCAST_HOME", str(home))
    monkeypatch.setenv("NETCAST_MODELS_DIR", str(models))
    monkeypatch.setenv("NETCAST_RUNTIME_DIR", str(runtime))
    from netcast.models import factory

    monkeypatch.setitem(factory._cache_state, "dir", None)
    return home


@pytest.fixture
def scripted_lm():
    """``scripted_lm(script, cache=False)`` -> (plain ``dspy.LM``, engine), configured as
    DSPy's LM. Its calls are counted inside a program call (``NetcastProgram.__call__``)."""

    def make(script, cache: bool = False):
        use_netcast_cache()  # this test's own, empty DSPy cache
        engine = ScriptedEngine(script)
        lm = dspy.LM("scripted/fake", engine=engine, cache=cache, num_retries=0)
        dspy.configure(lm=lm, adapter=None)  # programs read replies with their own adapter
        return lm, engine

    yield make
    dspy.configure(lm=None, adapter=None)  # no test leaves its adapter to the next


@pytest.fixture
def tiny_corpus() -> Corpus:
    return Corpus.from_documents(DOCS, WordCounter())


@pytest.fixture
def bm25(tiny_corpus) -> BM25Retriever:
    return BM25Retriever(tiny_corpus)


@pytest.fixture
def word_counter() -> WordCounter:
    return WordCounter()


@pytest.fixture(scope="session")
def approx_counter() -> ApproxTokenCounter:
    return ApproxTokenCounter()
