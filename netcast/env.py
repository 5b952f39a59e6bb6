"""Environment defaults for the command line (never applied on ``import netcast``).

Each is a ``setdefault``: a user who sets the variable keeps their own value. None of them
makes a data decision: they keep litellm from downloading its price list at import (it prints
retries offline) and switch off telemetry. Hub datasets stay reachable; the embedded models and
the packaged embedding model load from local files by themselves.
"""

from __future__ import annotations

import os

CLI_DEFAULTS: dict[str, str] = {
    # litellm (and DSPy through it) would otherwise fetch a price list and retry noisily.
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",
}


def apply_cli_defaults() -> None:
    """Set the command line's defaults that the user has not set already."""
    for key, value in CLI_DEFAULTS.items():
        os.environ.setdefault(key, value)
    # the command line prints its own lines for trials and races; Optuna's per-trial INFO log
    # repeated them (a user's own script keeps Optuna's logging as it set it)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
