"""Per-prediction traces: searches, turns, LM calls, tokens and wall time.

A program opens a ``recording()`` around one prediction; retrieval and LM calls made in the same
thread while it is open are added to it. Nested recordings fold their counts into the outer one.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass
class Trace:
    searches: list[dict[str, Any]] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    # per LLM step (the predictor's name in the program): calls, parse_failures (no usable
    # reply), unreadable (a reply the first adapter could not read: DSPy fell back to JSON),
    # truncated (a reply cut at the model's new-token limit),
    # fallbacks (the program went on without the step's output), accepted / rejected (rule
    # checks on the step's output, e.g. a crop that must be verbatim), and rejection reasons
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    lm_calls: int = 0
    cached_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add_search(self, query: str, k: int, ids: Sequence[str], seconds: float, **extra) -> None:
        self.searches.append(
            {"query": query, "k": k, "ids": list(ids), "seconds": round(seconds, 6), **extra}
        )

    def add_turn(self, **fields: Any) -> None:
        self.turns.append(fields)

    def add_stage(self, stage: str, **fields: Any) -> None:
        self.stages.append({"stage": stage, **fields})

    def step(self, name: str) -> dict[str, Any]:
        return self.steps.setdefault(
            name,
            {
                "calls": 0,
                "parse_failures": 0,
                "unreadable": 0,
                "truncated": 0,
                "fallbacks": 0,
                "accepted": 0,
                "rejected": 0,
                "reasons": Counter(),
            },
        )

    def count(self, name: str, what: str, n: int = 1) -> None:
        """Add ``n`` to step ``name``'s counter ``what``."""
        with self._lock:
            self.step(name)[what] += n

    def check(self, name: str, accepted: bool, reason: str = "") -> None:
        """A rule check on step ``name``'s output: accepted, or rejected for ``reason``."""
        with self._lock:
            counts = self.step(name)
            counts["accepted" if accepted else "rejected"] += 1
            if not accepted and reason:
                counts["reasons"][reason] += 1

    def add_lm_call(self, tokens_in: int, tokens_out: int, cached: bool) -> None:
        with self._lock:  # agents may call the model from several threads
            self.lm_calls += 1
            self.cached_calls += int(cached)
            self.tokens_in += tokens_in
            self.tokens_out += tokens_out

    def merge(self, other: Trace) -> None:
        self.searches += other.searches
        self.turns += other.turns
        self.stages += other.stages
        for name, counts in other.steps.items():
            mine = self.step(name)
            for key, value in counts.items():
                if key == "reasons":
                    mine["reasons"].update(value)
                else:
                    mine[key] = mine.get(key, 0) + value
        self.lm_calls += other.lm_calls
        self.cached_calls += other.cached_calls
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out

    def to_dict(self) -> dict[str, Any]:
        return {
            f.name: copy.deepcopy(getattr(self, f.name))
            for f in fields(self)
            if not f.name.startswith("_")
        }


_current: ContextVar[Trace | None] = ContextVar("netcast_trace", default=None)


def current() -> Trace | None:
    return _current.get()


def count(step: str, what: str, n: int = 1) -> None:
    """Count ``what`` for ``step`` in the current trace, if one is recording."""
    active = _current.get()
    if active is not None:
        active.count(step, what, n)


def check(step: str, accepted: bool, reason: str = "") -> None:
    """Record a rule check on ``step``'s output in the current trace, if one is recording."""
    active = _current.get()
    if active is not None:
        active.check(step, accepted, reason)


def withhold_demo(predictor: Any) -> None:
    """Drop ``predictor``'s latest call from DSPy's trace (``dspy.settings.trace``, kept while
    an optimizer bootstraps demonstrations): an output the program's own rule rejected and
    discarded is not an example of the step done right, and must not become one."""
    import dspy

    calls = dspy.settings.trace
    if not calls:
        return
    for i in range(len(calls) - 1, -1, -1):
        if calls[i][0] is predictor:
            del calls[i]
            return


@contextmanager
def recording() -> Iterator[Trace]:
    """Collect a trace for the enclosed work; wall time is set on exit."""
    parent = _current.get()
    trace = Trace()
    token = _current.set(trace)
    start = time.perf_counter()
    try:
        yield trace
    finally:
        trace.seconds = round(time.perf_counter() - start, 6)
        _current.reset(token)
        if parent is not None:
            parent.merge(trace)
