"""Small file and naming helpers used across netcast: safe names, short content hashes, and
directories written atomically (so a killed process never leaves a half-written one)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def slug(text: str, limit: int = 60, empty: str = "x") -> str:
    """``text`` as a safe file or run name: runs of other characters become '-'."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-.")[:limit] or empty


def short_hash(value: Any, length: int = 8) -> str:
    """A short, stable hash of a JSON-serializable value (key order does not matter)."""
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


@contextmanager
def atomic_directory(target: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling of ``target`` to fill; on success it replaces ``target``
    (renamed into place), on any error it is removed and ``target`` is left as it was."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
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
