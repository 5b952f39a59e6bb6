"""Where netcast keeps its files: the assembled model, DSPy's cache, built indexes."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """netcast's data directory: ``$NETCAST_HOME``, else ``~/.cache/netcast``."""
    root = os.environ.get("NETCAST_HOME") or Path.home() / ".cache" / "netcast"
    path = Path(root).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    """DSPy's disk cache for LM calls (project-controlled, not ``~/.dspy_cache``)."""
    return home() / "dspy_cache"


def models_dir() -> Path:
    """Where the assembled embedded model lives: ``$NETCAST_MODELS_DIR``, else under home."""
    override = os.environ.get("NETCAST_MODELS_DIR")
    return Path(override).expanduser() if override else home() / "models"


def runtime_dir() -> Path:
    """What netcast learned of this machine's model runtime (which llama.cpp CPU backend runs
    here): ``$NETCAST_RUNTIME_DIR``, else under home."""
    override = os.environ.get("NETCAST_RUNTIME_DIR")
    return Path(override).expanduser() if override else home() / "runtime"


def indexes_dir() -> Path:
    return home() / "indexes"
