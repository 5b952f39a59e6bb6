"""Constrained decoding for the embedded model: xgrammar's token bitmask as a llama-cpp-python
logits processor.

A JSON-schema ``response_format`` (what DSPy's JSONAdapter sends) is compiled by xgrammar into a
grammar over the model's own vocabulary; at each step the processor sets the logit of every
token the grammar does not allow next to -inf, so the reply always parses and enum (``Literal``)
fields take only their allowed values. llama.cpp's own grammar sampler does the same but ran
4-7x slower per token on 2 cores; xgrammar's precomputed masks keep full speed
(benchmarks/constrained.py).
"""

from __future__ import annotations

import ctypes
import json
from typing import Any

import numpy as np

# Whitespace allowed between JSON elements: enough for the indented JSON the model writes
# unconstrained (and DSPy's demos show), bounded so a small model cannot loop on blank space.
MAX_WHITESPACE = 16


def vocabulary(llm: Any) -> tuple[list[bytes], list[int]]:
    """The raw bytes of every token of a ``llama_cpp.Llama`` (control tokens are empty, which
    xgrammar never allows) and its end-of-generation tokens (the grammar's stop tokens: the
    only ones allowed once the JSON is complete, and the ones llama.cpp stops on)."""
    import llama_cpp

    vocab = llm._model.vocab
    buffer = ctypes.create_string_buffer(256)
    pieces, stops = [], []
    for token in range(llm.n_vocab()):
        n = llama_cpp.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, False)
        if n < 0:  # longer than the buffer: -n is the size it needs
            buffer = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, False)
        pieces.append(buffer.raw[:n])
        if llama_cpp.llama_vocab_is_eog(vocab, token):
            stops.append(token)
    return pieces, stops


def schema_of(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """The JSON schema a canonical (lm15) ``response_format`` asks for: ``{"type":
    "json_schema", "schema": {...}}`` gives its schema, ``{"type": "json_object"}`` gives ``{}``
    (any JSON object); no response_format gives None (free decoding)."""
    if not response_format:
        return None
    if response_format.get("type") == "json_schema":
        return response_format["schema"]
    if response_format.get("type") == "json_object":
        return {}
    raise ValueError(f"unsupported response_format {response_format!r}")


class Grammars:
    """One model's vocabulary as xgrammar tokenizer info (built once: about 1 s for Qwen's
    152k tokens) and the JSON-schema grammars compiled for it, cached by the schema's JSON."""

    def __init__(self, pieces: list[bytes], stop_tokens: list[int], vocab_size: int | None = None):
        import xgrammar as xgr

        self.vocab_size = vocab_size or len(pieces)
        info = xgr.TokenizerInfo(
            pieces, xgr.VocabType.RAW, vocab_size=self.vocab_size, stop_token_ids=stop_tokens
        )
        self._compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self._compiled: dict[str, Any] = {}

    @classmethod
    def for_model(cls, llm: Any) -> Grammars:
        pieces, stops = vocabulary(llm)
        return cls(pieces, stops, llm.n_vocab())

    def compile(self, schema: dict[str, Any]) -> Any:
        """The compiled grammar of ``schema`` (``{}``: any JSON object)."""
        key = json.dumps(schema)  # not sorted: the grammar keeps the schema's property order
        if key not in self._compiled:
            self._compiled[key] = self._compiler.compile_json_schema(
                key if schema else '{"type": "object"}',
                any_whitespace=True,
                max_whitespace_cnt=MAX_WHITESPACE,
                strict_mode=bool(schema),  # strict: no properties the schema does not name
            )
        return self._compiled[key]

    def processor(self, schema: dict[str, Any]) -> GrammarLogitsProcessor:
        """A fresh processor (one per generation: it holds the matcher's state)."""
        return GrammarLogitsProcessor(self.compile(schema), self.vocab_size)


class GrammarLogitsProcessor:
    """A llama-cpp-python logits processor that masks every token the grammar does not allow.

    llama-cpp-python calls it before sampling each token with all token ids evaluated so far:
    the prompt on the first call, then the prompt plus every token sampled since. So the
    tokens past those seen on the previous call are the ones sampled since, and the matcher
    advances by them before it fills the next mask. Generation ends by itself: once the JSON is
    complete the mask allows only the end-of-generation tokens, on which llama.cpp stops.
    """

    def __init__(self, compiled_grammar: Any, vocab_size: int):
        import xgrammar as xgr

        self.matcher = xgr.GrammarMatcher(compiled_grammar)
        self.bitmask = np.full(xgr.get_bitmask_shape(1, vocab_size), -1, dtype=np.int32)
        self.vocab_size = vocab_size
        self._seen: int | None = None
        self.failed = False  # the matcher rejected a sampled token

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        if self.failed:
            return scores
        if self._seen is not None:
            # Cannot fail while the mask is applied; if it does, decode freely from here
            # (an exception would not get through llama.cpp's C callback anyway).
            self.failed = not all(
                self.matcher.accept_token(int(t)) for t in input_ids[self._seen :]
            )
        self._seen = len(input_ids)
        if not self.failed and self.matcher.fill_next_token_bitmask(self.bitmask):
            scores[~self.allowed()] = -np.inf
        return scores

    def allowed(self) -> np.ndarray:
        """The current mask as one bool per token id."""
        bits = np.unpackbits(self.bitmask.view(np.uint8), bitorder="little")
        return bits[: self.vocab_size].view(bool)
