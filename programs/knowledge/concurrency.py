"""Run a few callables concurrently, each seeing the caller's DSPy settings overrides and
netcast trace (threads do not inherit either by themselves)."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from dspy.dsp.utils.settings import thread_local_overrides

T = TypeVar("T")


def run_concurrently(tasks: Sequence[Callable[[], T]], workers: int) -> list[T]:
    if workers <= 1 or len(tasks) <= 1:
        return [task() for task in tasks]
    overrides = thread_local_overrides.get().copy()

    def call(task: Callable[[], Any]) -> Any:
        token = thread_local_overrides.set(overrides)
        try:
            return task()
        finally:
            thread_local_overrides.reset(token)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(contextvars.copy_context().run, call, task) for task in tasks]
        return [f.result() for f in futures]
