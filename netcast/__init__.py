"""netcast: retrieval strategies for RAG question answering as compiled DSPy programs.

One import gives the whole Python surface::

    import netcast

    lm = netcast.make_lm()  # the embedded model; or a litellm string
    data = netcast.load_dataset("hotpotqa-sample", "dev", limit=20)
    program = netcast.BasicRAG(netcast.open_retriever(data), lm=lm)
    result = netcast.evaluate(program, data.examples, run_dir="runs/demo")
    compiled = netcast.load("artifacts/basic")

Importing netcast is cheap and changes nothing in the process: every name below is imported on
first use (PEP 562), and offline defaults are applied only where they belong (the embedded
model's own loading, the command line when no model is given)."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

__version__ = "0.1.0"

# public name -> the module it lives in, imported on first access
_EXPORTS: dict[str, str] = {
    # models
    "configure": "netcast.models",
    "make_lm": "netcast.models",
    "token_counter": "netcast.models",
    # data, retrieval, artifacts, evaluation
    "load_dataset": "netcast.data",
    "open_retriever": "netcast.session",
    "load": "netcast.session",
    "evaluate": "netcast.evaluation.evaluate",
    # the strategies (netcast list prints their knobs)
    "BasicRAG": "netcast.programs",
    "OneShot": "netcast.programs",
    "Iterative": "netcast.programs",
    "Combined": "netcast.programs",
    "SearchR1": "netcast.programs",
    "KnowledgeAware": "netcast.programs",
    "IterKey": "netcast.programs",
    "MultiHop": "netcast.programs",
    "IRCoT": "netcast.programs",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")  # netcast.models, ... on access
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
