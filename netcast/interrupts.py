"""Work running in threads that a Ctrl-C must know about. DSPy runs questions in its parallel
executor's threads and trainings in a thread of their own, and cannot stop either mid-call; at
exit the interpreter would wait for them, silently. Such work marks its thread here, and the
command line (``netcast.cli.errors``) decides on Ctrl-C: a question is waited for (its row is
saved when it ends), a training is left at once (its checkpoint is on disk)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

Kind = Literal["question", "training"]
"""The kinds of work: a "question" is worth waiting for at Ctrl-C; a "training" is left at a
second Ctrl-C."""

_lock = threading.Lock()
_running: dict[threading.Thread, Kind] = {}


@contextmanager
def running(kind: Kind) -> Iterator[None]:
    """Mark the calling thread as running work of ``kind`` while the block runs."""
    thread = threading.current_thread()
    with _lock:
        _running[thread] = kind
    try:
        yield
    finally:
        with _lock:
            _running.pop(thread, None)


def in_progress(kind: Kind) -> list[threading.Thread]:
    """Threads other than the main one running work of ``kind`` now."""
    main = threading.main_thread()
    with _lock:
        return [t for t, k in _running.items() if k == kind and t is not main and t.is_alive()]
