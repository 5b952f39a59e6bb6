"""LM usage and step outcomes per prediction, for any ``dspy.BaseLM``, through DSPy's own
callbacks and history.

``UsageCallback`` is a DSPy callback: when an LM call ends it finds that call's history entry
(the entry DSPy recorded holds the very outputs object the call returned) and adds one call,
its tokens in and out, and whether DSPy's cache answered it, to the current netcast trace. A
cache hit is counted with the tokens the call took when it ran (DSPy's usage tracker reports 0
for it), so cost figures do not change when a run is repeated; ``cached_calls`` says how many
calls the cache answered. Programs switch it on for their own calls (``counting()``), so a
plain ``dspy.LM`` a user passes in is counted like the embedded model.

The same callback counts, per LLM step (the predictor's name in the program, e.g. ``decide``
or ``answer``), its calls, its parse failures (DSPy could not read any reply into the output
fields), its unreadable replies (the first adapter failed to read the reply; DSPy fell back
to its JSON adapter) and its truncated replies (the model hit its new-token limit). Programs
add their own fallbacks and rule checks (``trace.count``, ``trace.check``), so a strategy that
"works" by always falling back is visible as such.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import dspy
from dspy.utils.callback import BaseCallback
from dspy.utils.exceptions import AdapterParseError

from netcast import trace

_HISTORY_WINDOW = 64  # recent entries searched for a call's own entry (threads interleave)


def usage_tokens(response: Any) -> tuple[int, int]:
    """(input, output) tokens of one history entry's response: a native response, a litellm
    response or dict, or a list of them."""
    if isinstance(response, (list, tuple)):
        pairs = [usage_tokens(r) for r in response]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)
    usage = getattr(response, "usage", None)
    if usage is None and isinstance(response, dict):
        usage = response.get("usage")
    if usage is None:
        return 0, 0

    def get(*names: str) -> int:
        for name in names:
            value = usage.get(name) if isinstance(usage, dict) else getattr(usage, name, None)
            if value is not None:
                return int(value)
        return 0

    return get("input_tokens", "prompt_tokens"), get("output_tokens", "completion_tokens")


def finish_reasons(response: Any) -> list[str]:
    """The finish reasons of one history entry's response (``"length"`` = cut at the token
    limit): a native response's own, a litellm response's choices', or a list of them."""
    if isinstance(response, (list, tuple)):
        return [reason for r in response for reason in finish_reasons(r)]

    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)

    own = get(response, "finish_reason")
    if own:
        return [str(own)]
    return [str(r) for c in get(response, "choices") or [] if (r := get(c, "finish_reason"))]


# id(predictor) -> its name in the program being called; the step whose call is under way.
_names: ContextVar[dict[int, str] | None] = ContextVar("netcast_step_names", default=None)
_active_step: ContextVar[tuple[str, ...]] = ContextVar("netcast_active_step", default=())


def step_names(program: dspy.Module) -> dict[int, str]:
    """Each predictor of ``program`` by the name of its attribute (``decide`` for a
    ``ChainOfThought`` at ``self.decide``)."""
    return {id(p): name.removesuffix(".predict") for name, p in program.named_predictors()}


class UsageCallback(BaseCallback):
    """Adds every LM call, and every LLM step's outcome, made while a netcast trace is recording
    to that trace."""

    def __init__(self) -> None:
        self._started: dict[str, Any] = {}
        self._steps: dict[str, tuple[str, Any]] = {}
        self._lock = threading.Lock()

    def on_module_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        if not isinstance(instance, dspy.Predict):
            return
        name = (_names.get() or {}).get(id(instance)) or instance.signature.__name__
        token = _active_step.set((*_active_step.get(), name))
        with self._lock:
            self._steps[call_id] = (name, token)

    def on_module_end(self, call_id: str, outputs: Any, exception: BaseException | None = None):
        with self._lock:
            started = self._steps.pop(call_id, None)
        if started is None:
            return
        name, token = started
        _active_step.reset(token)
        trace.count(name, "calls")
        if isinstance(exception, AdapterParseError):
            trace.count(name, "parse_failures")

    def on_adapter_parse_end(
        self, call_id: str, outputs: Any, exception: BaseException | None = None
    ) -> None:
        active = _active_step.get()
        if exception is not None and active:
            trace.count(active[-1], "unreadable")

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        with self._lock:
            self._started[call_id] = instance

    def on_lm_end(self, call_id: str, outputs: Any, exception: BaseException | None = None):
        with self._lock:
            lm = self._started.pop(call_id, None)
        active = trace.current()
        if active is None or lm is None or exception is not None:
            return
        entry = next(
            (e for e in reversed(lm.history[-_HISTORY_WINDOW:]) if e.get("outputs") is outputs),
            None,
        )
        if entry is None:  # history switched off: the call is counted, its tokens are unknown
            active.add_lm_call(0, 0, cached=False)
            return
        tokens_in, tokens_out = usage_tokens(entry.get("response"))
        active.add_lm_call(tokens_in, tokens_out, cached=not entry.get("usage"))
        step = _active_step.get()
        if step and "length" in finish_reasons(entry.get("response")):
            active.count(step[-1], "truncated")


USAGE = UsageCallback()


@contextmanager
def counting(program: dspy.Module | None = None) -> Iterator[None]:
    """Count the LM calls and step outcomes inside (in this thread and in threads that copy
    DSPy's context); steps are named after ``program``'s predictors."""
    token = _names.set(step_names(program)) if program is not None else None
    try:
        callbacks = list(dspy.settings.get("callbacks") or [])
        if USAGE in callbacks:
            yield
            return
        with dspy.context(callbacks=[*callbacks, USAGE]):
            yield
    finally:
        if token is not None:
            _names.reset(token)
