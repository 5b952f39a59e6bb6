"""Small file and naming helpers used across netcast: safe names, short content hashes, and
directories written atomically (so a killed process never leaves a half-written one)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


@contextmanager
def atomic_directory(
    target: str | Path, marker: str = "", what: str = "output", shared: bool = False
) -> Iterator[Path]:
    """Yield a temporary sibling of ``target`` to fill; on success it replaces ``target``
    (renamed into place), on any error it is removed and ``target`` is left as it was.
    ``target`` is checked first (``check_output_directory``): an existing ``target`` must be a
    ``what`` directory (holding ``marker``) or empty, never a file or someone's folder.

    ``shared``: ``target`` is named by its content (a cached index), so processes that build
    it at once build the same thing: one that finds it written by another while it built
    keeps that one (which the other may be reading) and drops its own copy."""
    target = check_output_directory(target, marker, what) if marker else Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"{target}: cannot be created ({err.strerror})") from None
    existed = target.exists()
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    tmp.chmod(0o755)  # mkdtemp's 0700 would keep other users (workers) out of the result
    try:
        yield tmp
        if target.exists() and (existed or not shared):  # not another process's, meanwhile
            shutil.rmtree(target)
        try:
            tmp.rename(target)
        except OSError:  # another process renamed its copy into place while this one built
            if not (shared and target.exists()):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
