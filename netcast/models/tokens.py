"""Token counting: the embedded model's own tokenizer, or a documented approximation."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Protocol, runtime_checkable


@runtime_checkable
class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int: ...


class LlamaTokenCounter:
    """Exact counts with a GGUF model's tokenizer (loads the vocabulary only, not the weights)."""

    def __init__(self, model_path: str):
        import llama_cpp
        from llama_cpp._internals import LlamaModel

        self.name = "llama:" + str(model_path).rsplit("/", 1)[-1]
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        # The model alone, no llama context: a vocabulary-only context only logs warnings.
        self._vocab = LlamaModel(path_model=str(model_path), params=params, verbose=False)

    def count(self, text: str) -> int:
        return len(self._vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False))


_WORDISH = re.compile(r"\w+|[^\w\s]")


class ApproxTokenCounter:
    """An approximation for models whose tokenizer netcast does not have.

    Uses tiktoken's ``cl100k_base`` (bundled with litellm, so it works offline) when it loads;
    otherwise counts words and punctuation marks times 1.3, a common rule of thumb for
    English BPE vocabularies. Either is within about 10-20% of most modern tokenizers.
    """

    def __init__(self) -> None:
        self._encoding = _cl100k()
        self.name = "tiktoken:cl100k_base" if self._encoding else "approx:words*1.3"

    def count(self, text: str) -> int:
        if self._encoding is not None:
            return len(self._encoding.encode(text, disallowed_special=()))
        return round(len(_WORDISH.findall(text)) * 1.3)


@lru_cache(maxsize=1)
def _cl100k():
    try:
        # litellm ships cl100k_base and points tiktoken at it, so this works offline.
        from litellm.litellm_core_utils.default_encoding import encoding

        return encoding
    except Exception:
        return None


_COUNTERS: dict[str, TokenCounter] = {}


def embedded_counter(model_name: str = "") -> TokenCounter:
    """The embedded model's own tokenizer (vocabulary only; loaded once per process)."""
    from netcast.models import embedded

    spec = embedded.spec(model_name)
    if spec.name not in _COUNTERS:
        _COUNTERS[spec.name] = LlamaTokenCounter(str(embedded.model_path(spec.name)))
    return _COUNTERS[spec.name]


def approx_counter() -> TokenCounter:
    if "approx" not in _COUNTERS:
        _COUNTERS["approx"] = ApproxTokenCounter()
    return _COUNTERS["approx"]


def counter_named(name: str) -> TokenCounter:
    """The counter a corpus recorded by name: an embedded model's tokenizer for
    ``llama:<its file>``, otherwise the approximation (also for unknown or empty names)."""
    from netcast.models import embedded

    for spec in embedded.MODELS.values():
        if name == "llama:" + spec.file_name:
            return embedded_counter(spec.name)
    return approx_counter()
