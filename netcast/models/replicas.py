"""One model served by several servers: calls spread over the replicas, and a replica that
stops answering is left for the others.

``--api-base`` given more than once (``netcast evaluate --model openai/qwen --api-base
http://a:8000/v1 --api-base http://b:8000/v1``) makes a DSPy LM whose engine is a
``ReplicaEngine``: each call goes to the replica with the fewest calls in flight (ties: the one
that has answered fewest), through DSPy's own LiteLLM engine for that server; a call that fails
because its server cannot be reached, timed out or answered 5xx is sent to the next replica,
and the failed one is skipped for ``cooldown`` seconds. DSPy's cache, retries, usage tracking
and callbacks stay in the LM around the engine, so a question is run once, whatever replica
answers each of its calls.

Why not litellm's ``Router``: it balances and fails over too, but only behind its own
``completion`` call, which would bypass DSPy's typed engine path (request conversion, usage,
error classes); what is written here is only the choice of replica.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from dspy import lm15
from dspy.clients.engines.litellm_engine import LiteLLMEngine

# a replica that raised one of these is unreachable or broken for now: try another
FAILOVER = (lm15.TransportError, lm15.TimeoutError, lm15.ServerError)


class ReplicaEngine:
    """A DSPy engine (``complete``, ``stream``, ``close``) over replicas of one model."""

    def __init__(self, bases: Sequence[str], cooldown: float = 30.0, **client_options: Any):
        if len(bases) < 2:
            raise ValueError("a ReplicaEngine needs at least two servers")
        self.bases = [str(b) for b in bases]
        self.cooldown = cooldown
        self._engines = [LiteLLMEngine(api_base=b, **client_options) for b in self.bases]
        self.in_flight = [0] * len(self.bases)
        self.answered = [0] * len(self.bases)  # calls each replica answered
        self.failed = [0] * len(self.bases)  # calls each replica failed (then sent elsewhere)
        self._down_until = [0.0] * len(self.bases)
        self._lock = threading.Lock()

    def _pick(self, tried: set[int]) -> int | None:
        """The replica for the next attempt (counted in flight), or None when every replica
        has been tried. Replicas cooling down after a failure come last, not never: when all
        are down, the one soonest back is tried."""
        with self._lock:
            now = time.monotonic()
            left = [i for i in range(len(self.bases)) if i not in tried]
            if not left:
                return None
            best = min(
                left,
                key=lambda i: (
                    self._down_until[i] > now,
                    self._down_until[i] if self._down_until[i] > now else 0.0,
                    self.in_flight[i],
                    self.answered[i],
                    i,
                ),
            )
            self.in_flight[best] += 1
            return best

    def _done(self, i: int, ok: bool) -> None:
        with self._lock:
            self.in_flight[i] -= 1
            if ok:
                self.answered[i] += 1
                self._down_until[i] = 0.0
            else:
                self.failed[i] += 1
                self._down_until[i] = time.monotonic() + self.cooldown

    def complete(self, request: lm15.Request) -> lm15.Response:
        tried: set[int] = set()
        last: Exception | None = None
        while True:
            i = self._pick(tried)
            if i is None:  # every replica failed this call: DSPy's retries take it from here
                assert last is not None
                raise last
            tried.add(i)
            try:
                response = self._engines[i].complete(request)
            except FAILOVER as err:
                self._done(i, ok=False)
                last = err
                continue
            except BaseException:
                self._done(i, ok=True)  # the server answered: the request itself failed
                raise
            self._done(i, ok=True)
            return response

    def stream(self, request: lm15.Request):
        """A stream goes to one replica (no failover once tokens flow)."""
        i = self._pick(set())
        try:
            yield from self._engines[i].stream(request)
        except FAILOVER:
            self._done(i, ok=False)
            raise
        except BaseException:
            self._done(i, ok=True)
            raise
        self._done(i, ok=True)

    def close(self) -> None:
        for engine in self._engines:
            engine.close()

    def __repr__(self) -> str:
        return f"ReplicaEngine({', '.join(self.bases)})"
