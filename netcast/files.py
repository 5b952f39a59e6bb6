"""Small file and naming helpers used across netcast: safe names, short content hashes, and
directories written atomically (so a killed process never leaves a half-written one), with a
file lock per content-named directory (a cache key) for the processes that share it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from filelock import FileLock

from netcast.errors import InputError


def slug(text: str, limit: int = 60, empty: str = "x") -> str:
    """``text`` as a safe file or run name: runs of other characters become '-'."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-.")[:limit] or empty


def short_hash(value: Any, length: int = 8) -> str:
    """A short, stable hash of a JSON-serializable value (key order does not matter)."""
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def check_output_directory(target: str | Path, marker: str, what: str) -> Path:
    """``target`` if netcast may write a ``what`` directory there (replacing it when it holds
    one already: a directory with ``marker`` in it, or an empty one); anything else (an
    existing file, a folder of other things, a path under a file, no permission) is one
    ``InputError``. Nothing is written."""
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise InputError(f"{target}: exists and is not a directory; give a new path for the {what}")
    if target.is_dir() and any(target.iterdir()) and not (target / marker).exists():
        raise InputError(
            f"{target}: a folder that is not a netcast {what} (no {marker}); netcast replaces "
            f"the {what} it writes, so give a new path or an existing {what}"
        )
    for parent in target.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"{target}: cannot be created, {parent} is a file")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise InputError(f"{target}: cannot be created, {parent} is not writable")
            break
    return target


LOCKS = ".locks"  # beside content-named directories: one lock file per key


def key_lock(target: str | Path) -> FileLock:
    """The lock of a content-named directory ``target`` (a cache key), ``.locks/<name>.lock``
    beside it: processes that build the same key hold it in turn. Within a process it is one
    object per path and reentrant, so a caller may hold it around ``atomic_directory(shared=
    True)``, which takes it too."""
    target = Path(target)
    folder = target.parent / LOCKS
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"{target}: cannot be created ({err.strerror})") from None
    return FileLock(folder / f"{target.name}.lock", is_singleton=True)


@contextmanager
def atomic_directory(
    target: str | Path, marker: str = "", what: str = "output", shared: bool = False
) -> Iterator[Path]:
    """Yield a temporary sibling of ``target`` to fill; on success it replaces ``target``
    (renamed into place), on any error it is removed and ``target`` is left as it was.
    ``target`` is checked first (``check_output_directory``): an existing ``target`` must be a
    ``what`` directory (holding ``marker``) or empty, never a file or someone's folder.

    ``shared``: ``target`` is named by its content (a cached index) and other processes may
    build it too: the build and the rename hold the key's lock (``key_lock``), so they take
    turns instead of racing renames. A caller that looks for ``target`` under the same lock
    before building (``netcast.indexing.cached_index``) reuses what another process built."""
    target = check_output_directory(target, marker, what) if marker else Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"{target}: cannot be created ({err.strerror})") from None
    lock: AbstractContextManager[Any] = key_lock(target) if shared else nullcontext()
    with lock:
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        tmp.chmod(0o755)  # mkdtemp's 0700 would keep other users (workers) out of the result
        try:
            yield tmp
            if target.exists():
                shutil.rmtree(target)
            tmp.rename(target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
