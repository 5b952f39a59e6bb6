"""A scripted fake model for testing programs without an LLM (DSPy's ChatAdapter format).

engine = ScriptedEngine(lambda prompt: {"answer": "Paris"})
dspy.configure(lm=dspy.LM("scripted/fake", engine=engine, cache=False))
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events


def chat_output(fields: dict[str, Any]) -> str:
    """Output fields formatted the way DSPy's ChatAdapter parses them."""
    parts = [f"[[ ## {name} ## ]]\n{value}" for name, value in fields.items()]
    return "\n\n".join([*parts, "[[ ## completed ## ]]"])


class ScriptedEngine:
    """``script(prompt_text) -> output fields``, or a list of field dicts served in order.
    Records every prompt; usage is counted in words (in and out)."""

    def __init__(self, script: Callable[[str], dict[str, Any]] | list[dict[str, Any]]):
        self._next = script if callable(script) else _served_in_order(script)
        self.prompts: list[str] = []
        self._lock = threading.Lock()

    def complete(self, request) -> Response:
        system = request.system if isinstance(request.system, str) else ""
        prompt = system + "\n" + "\n".join(m.text or "" for m in request.messages)
        with self._lock:
            self.prompts.append(prompt)
            fields = self._next(prompt)
        text = self.render(fields)
        return Response(
            id=None,
            model="scripted",
            message=Message.assistant([TextPart(text)]),
            finish_reason="stop",
            usage=Usage(input_tokens=len(prompt.split()), output_tokens=len(text.split())),
        )

    def render(self, fields: dict[str, Any]) -> str:
        return chat_output(fields)

    def stream(self, request):
        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass


def _served_in_order(items: list[dict[str, Any]]) -> Callable[[str], dict[str, Any]]:
    remaining = iter(items)

    def next_fields(prompt: str) -> dict[str, Any]:
        try:
            return next(remaining)
        except StopIteration:
            raise RuntimeError("the scripted model ran out of answers") from None

    return next_fields


class SchemaEngine(ScriptedEngine):
    """A scripted model that takes a JSON-schema ``response_format`` (as a constrained engine
    does, so DSPy's JSONAdapter sends one), records each request's, and replies in JSON."""

    supports_response_schema = True
    supported_params = frozenset({"temperature", "max_tokens", "response_format"})

    def __init__(self, script):
        super().__init__(script)
        self.formats: list[dict[str, Any] | None] = []

    def complete(self, request) -> Response:
        self.formats.append(request.config.response_format)
        return super().complete(request)

    def render(self, fields: dict[str, Any]) -> str:
        import json

        return json.dumps(fields)
