"""The embedded model as a DSPy engine: llama.cpp in-process, one call at a time.

``dspy.LM(..., engine=LlamaCppEngine(path))`` keeps DSPy's own cache, retries, history, callbacks
and usage tracking; the engine only turns one canonical request into one response.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import hashlib
import os
import threading
import weakref
from collections import OrderedDict
from typing import Any

import llama_cpp
import numpy as np
from dspy.clients.engines.base import validate_request
from dspy.lm15 import ContextLengthError, Message, Response, TextPart, Usage, response_to_events

from netcast.models.embedded import DEFAULT_N_CTX
from netcast.models.native import load_cpu_backends, quiet_native_stderr

# Engines with a model loaded, closed before the interpreter tears its modules down: a Llama
# still alive then (kept by a failed question's traceback, say) would be freed by its __del__
# after llama_cpp's functions are gone, printing "Exception ignored in Llama.__del__ ...
# 'NoneType' object is not callable" under an error exit's one line.
_LOADED: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_loaded() -> None:
    for engine in list(_LOADED):
        engine.close()


PREFIX_CACHE_MODES = ("off", "last", "predictor")
SAVED_PREFIXES = 8  # "predictor" mode: KV states kept, least recently used dropped first


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(getattr(part, "text", "") or "" for part in content)


def chat_messages(request) -> list[dict[str, str]]:
    """A canonical request as llama.cpp chat messages (text parts only)."""
    messages = []
    if request.system is not None:
        messages.append({"role": "system", "content": _text(request.system)})
    for message in request.messages:
        messages.append({"role": message.role, "content": _text(message.parts)})
    return messages


class LlamaCppEngine:
    """Runs a GGUF model with llama-cpp-python.

    Calls are serialized with a lock (DSPy evaluates in threads; one llama context is not
    thread-safe). ``prefix_cache="last"`` reuses the KV cache of the prefix a prompt shares with
    the previous one (llama.cpp's own mechanism; 1.1-1.2x faster on repeated DSPy prompts,
    benchmarks/embedded_model.py); ``"off"`` evaluates every prompt from scratch.
    ``"predictor"`` (the default: on ``iterative`` it evaluated 1.44x fewer prompt tokens than
    ``"last"``, benchmarks/prefix_cache.py) also keeps, per system prompt (one per DSPy
    predictor: its instructions; its demonstrations follow in the first messages), the KV state
    its last call left, and restores it when that predictor is called again after another one,
    so a multi-step program that alternates predictors still reuses each predictor's long shared
    prefix. Only llama.cpp's own context state and the token ids are kept (about 12 KB a token
    for the 0.5B model, 30 ms to save or restore 2,000 tokens), not llama-cpp-python's
    ``LlamaState``, whose copy of the logits buffer made its RAM cache no faster than re-
    evaluating.

    ``lora_path``: a GGUF LoRA adapter llama.cpp applies over the model (a tuned model,
    ``netcast.models.lora_provider``; checked against the model before it gets here).
    ``merge_lora``: the adapter is merged into a cached copy of the model at load instead
    (``netcast.models.merge``, built once per model and adapter), which runs at the base
    model's speed.

    ``constrained=True`` decodes under the JSON schema of a request's ``response_format`` (what
    DSPy's JSONAdapter sends once the engine declares it takes one) with xgrammar's token mask
    (``netcast.models.grammar``), so JSON replies always parse and ``Literal`` fields take only
    allowed values; ``False`` declares no ``response_format`` support and decodes freely.
    """

    def __init__(
        self,
        model_path: str,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        max_tokens: int = 384,
        seed: int = 0,
        prefix_cache: str = "predictor",
        constrained: bool = True,
        lora_path: str | None = None,
        merge_lora: bool = False,
    ):
        if prefix_cache not in PREFIX_CACHE_MODES:
            raise ValueError(f"prefix_cache must be one of {PREFIX_CACHE_MODES}")
        self.model_path = str(model_path)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self.max_tokens = max_tokens
        self.seed = seed
        self.prefix_cache = prefix_cache
        self.constrained = constrained
        self.lora_path = str(lora_path) if lora_path else None
        self.merge_lora = bool(merge_lora)
        self._llm = None
        self._grammars = None
        self._lock = threading.Lock()
        self._saved: OrderedDict[str, tuple[np.ndarray, int, bytes]] = OrderedDict()
        self._last_key: str | None = None  # the system prompt the context now holds

    def _model(self):
        if self._llm is None:
            from llama_cpp import Llama

            load_cpu_backends()
            model_path, lora_path = self.model_path, self.lora_path
            if lora_path and self.merge_lora:
                from netcast.models.merge import merged_model_of

                model_path, lora_path = str(merged_model_of(model_path, lora_path)), None
            # an adapter's load logs a line per tensor on stderr: held back
            with quiet_native_stderr() if lora_path else contextlib.nullcontext():
                self._llm = Llama(
                    model_path=model_path,
                    n_ctx=self.n_ctx,
                    n_threads=self.n_threads,
                    n_threads_batch=self.n_threads,
                    seed=self.seed,
                    lora_path=lora_path,
                    verbose=False,
                )
            _LOADED.add(self)
        return self._llm

    @property
    def supports_response_schema(self) -> bool:
        """DSPy reads this (and ``supported_params``) from a custom engine to decide whether its
        JSONAdapter sends a JSON-schema ``response_format``."""
        return self.constrained

    @property
    def supported_params(self) -> frozenset[str]:
        params = {"temperature", "max_tokens", "top_p", "stop", "seed"}
        return frozenset(params | {"response_format"} if self.constrained else params)

    def _grammar(self, llm, response_format: dict[str, Any] | None):
        """The logits processors that decode under ``response_format``; None decodes freely."""
        from netcast.models.grammar import Grammars, schema_of

        schema = schema_of(response_format) if self.constrained else None
        if schema is None:
            return None
        from llama_cpp import LogitsProcessorList

        if self._grammars is None:
            self._grammars = Grammars.for_model(llm)
        return LogitsProcessorList([self._grammars.processor(schema)])

    def tokenize(self, text: str) -> list[int]:
        with self._lock:
            return self._model().tokenize(text.encode("utf-8"), add_bos=False, special=False)

    @staticmethod
    def _prefix_key(request) -> str | None:
        """The predictor a request comes from, by its system prompt."""
        if request.system is None:
            return None
        return hashlib.sha1(_text(request.system).encode()).hexdigest()

    def _save(self, llm, key: str | None) -> None:
        """Keep the context's KV state and token ids for ``key`` (llama.cpp state only)."""
        if key is None or llm.n_tokens == 0:
            return
        size = llama_cpp.llama_state_get_size(llm._ctx.ctx)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_get_data(llm._ctx.ctx, buffer, size)
        ids = np.array(llm.input_ids[: llm.n_tokens], copy=True)
        self._saved[key] = (ids, int(llm.n_tokens), bytes(buffer[:written]))
        self._saved.move_to_end(key)
        while len(self._saved) > SAVED_PREFIXES:
            self._saved.popitem(last=False)

    def _restore(self, llm, key: str | None) -> None:
        """Put back the state ``key``'s last call left; llama-cpp-python's own prefix matching
        then evaluates only what the new prompt adds to it. With nothing saved for ``key`` (a
        predictor's first call, or a request with no system prompt) the prompt is evaluated
        from scratch: reusing whatever the call before left would make the reply depend on that
        call (llama.cpp's logits differ slightly with where evaluation resumes, enough to flip
        a greedy token: a prompt's reply differed after another prompt than after a fresh start)."""
        saved = self._saved.get(key) if key is not None else None
        if saved is None:
            llm.reset()
            return
        ids, n_tokens, data = saved
        state = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if llama_cpp.llama_state_set_data(llm._ctx.ctx, state, len(data)) != len(data):
            llm.reset()  # could not restore: evaluate from scratch
            return
        llm.input_ids[:n_tokens] = ids
        llm.n_tokens = n_tokens
        llm._requires_eval = True  # the logits are not those of this state: decode a suffix
        self._saved.move_to_end(key)

    def complete(self, request) -> Response:
        validate_request(request)
        config = request.config
        max_tokens = config.max_tokens or self.max_tokens
        with self._lock:
            llm = self._model()
            if self.prefix_cache == "off":
                llm.reset()
            key = self._prefix_key(request)
            if self.prefix_cache == "predictor" and (key is None or key != self._last_key):
                self._restore(llm, key)
            processors = self._grammar(llm, config.response_format)
            try:
                out = llm.create_chat_completion(
                    messages=chat_messages(request),
                    temperature=config.temperature or 0.0,
                    top_p=config.top_p if config.top_p is not None else 1.0,
                    max_tokens=max_tokens,
                    stop=list(config.stop) or None,
                    seed=config.seed if config.seed is not None else self.seed,
                    logits_processor=processors,
                )
            except ValueError as err:
                self._last_key = None
                if "context window" in str(err):
                    raise ContextLengthError(
                        f"{err} (the embedded model runs with n_ctx={llm.n_ctx()}; raise it with "
                        "NETCAST_N_CTX or shorten the context)"
                    ) from err
                raise
            if self.prefix_cache == "predictor":
                self._save(llm, key)
            self._last_key = key
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return Response(
            id=out.get("id"),
            model=out.get("model", "embedded"),
            message=Message.assistant([TextPart(choice["message"].get("content") or "")]),
            finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
            usage=Usage(
                input_tokens=usage.get("prompt_tokens"),
                output_tokens=usage.get("completion_tokens"),
                total_tokens=usage.get("total_tokens"),
            ),
        )

    def prompt_evaluation(self) -> tuple[int, float]:
        """(prompt tokens llama.cpp has evaluated, seconds it took), counted since the model
        loaded (llama.cpp's own performance counters): tokens a reused prefix covered are not
        evaluated, so this measures what prefix reuse saves."""
        with self._lock:
            data = llama_cpp.llama_perf_context(self._model()._ctx.ctx)
        return int(data.n_p_eval), float(data.t_p_eval_ms) / 1000

    def next_token_logprobs(
        self, messages: list[dict[str, str]], prefix: str, candidates: tuple[str, ...]
    ) -> tuple[dict[str, float], int]:
        """Forced decoding: log-probabilities of each candidate's first token as the next token
        after the chat prompt plus the start of the assistant reply ``prefix``; and the number
        of prompt tokens. A candidate whose first token is an earlier candidate's is left out
        (the same event: ``"True"`` and ``" True"`` are one token for some tokenizers). Reuses
        the KV cache of a shared prompt prefix."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        with self._lock:
            llm = self._model()
            formatter = Jinja2ChatFormatter(
                template=llm.metadata["tokenizer.chat_template"],
                eos_token=llm.detokenize([llm.token_eos()]).decode(errors="ignore"),
                bos_token="",
            )
            prompt = formatter(messages=messages).prompt + prefix
            tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
            if len(tokens) >= llm.n_ctx():
                raise ContextLengthError(f"{len(tokens)} prompt tokens exceed n_ctx={llm.n_ctx()}")
            common = 0
            if self.prefix_cache != "off":
                for a, b in zip(llm.input_ids[: llm.n_tokens], tokens[:-1], strict=False):
                    if a != b:
                        break
                    common += 1
            llm.n_tokens = common
            self._last_key = None  # the context now holds a forced-decoding prompt
            llm.eval(tokens[common:])
            logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
            logits = logits.astype(np.float64)
            logprobs = logits - (logits.max() + np.log(np.exp(logits - logits.max()).sum()))
            first: dict[int, str] = {}
            for c in candidates:
                first.setdefault(llm.tokenize(c.encode(), add_bos=False, special=False)[0], c)
            return {c: float(logprobs[t]) for t, c in first.items()}, len(tokens)

    def continuation_logprobs(self, context: str, continuation: str) -> tuple[list[float], int]:
        """The log-probability of each token of ``continuation`` after the raw text ``context``
        (no chat template), and the number of tokens: one forward pass in which llama.cpp
        computes logits only at the positions that predict ``continuation`` (a batch flag per
        token; ``logits_all`` would keep n_ctx x vocabulary floats). Reuses the KV cache of a
        shared prefix of ``context``."""
        with self._lock:
            llm = self._model()
            head = llm.tokenize(context.encode("utf-8"), add_bos=True, special=False)
            tail = llm.tokenize(continuation.encode("utf-8"), add_bos=False, special=False)
            tokens = head + tail
            if not head or not tail:
                raise ValueError("context and continuation must both have tokens")
            if len(tokens) >= llm.n_ctx():
                raise ContextLengthError(f"{len(tokens)} tokens exceed n_ctx={llm.n_ctx()}")
            first = len(head) - 1  # the position whose logits predict tail[0]
            common = 0
            if self.prefix_cache != "off":
                for a, b in zip(llm.input_ids[: llm.n_tokens], tokens[:first], strict=False):
                    if a != b:
                        break
                    common += 1
            self._last_key = None  # the context now holds this prompt
            llm.n_tokens = common
            llm._ctx.kv_cache_seq_rm(-1, common, -1)
            logprobs = []
            for start in range(common, len(tokens), llm.n_batch):
                batch = tokens[start : start + llm.n_batch]
                llm._batch.set_batch(batch=batch, n_past=start, logits_all=False)
                for i in range(len(batch)):  # the batch's last token stays flagged
                    llm._batch.batch.logits[i] |= start + i >= first
                llm._ctx.decode(llm._batch)
                llm.input_ids[start : start + len(batch)] = batch
                llm.n_tokens = start + len(batch)
                for i in range(max(first - start, 0), len(batch)):
                    if start + i + 1 < len(tokens):
                        row = np.ctypeslib.as_array(
                            llm._ctx.get_logits_ith(i), shape=(llm.n_vocab(),)
                        ).astype(np.float64)
                        top = row.max()
                        norm = top + np.log(np.exp(row - top).sum())
                        logprobs.append(float(row[tokens[start + i + 1]] - norm))
            llm._requires_eval = False  # the last token's logits are live
            return logprobs, len(tokens)

    def stream(self, request):
        return response_to_events(self.complete(request))

    def close(self) -> None:
        with self._lock:
            if self._llm is not None:
                self._llm.close()
                self._llm = None
                self._grammars = None

    def dump_state(self) -> dict[str, Any]:
        return {
            "model_path": self.model_path,
            "n_ctx": self.n_ctx,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "prefix_cache": self.prefix_cache,
            "constrained": self.constrained,
            "lora_path": self.lora_path,
            "merge_lora": self.merge_lora,
        }

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> LlamaCppEngine:
        return cls(**state)
