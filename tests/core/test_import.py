"""Importing netcast has no side effects; ``python -m netcast`` is the command line."""

import json
import os
import subprocess
import sys

from netcast.env import CLI_DEFAULTS

CHANGED = """
import json, os
before = dict(os.environ)
import netcast
after = dict(os.environ)
print(json.dumps({k: [before.get(k), after.get(k)] for k in before.keys() | after.keys()
                  if before.get(k) != after.get(k)}))
"""


def clean_env():
    """The environment without the variables netcast's command line would set (and no HF_*)."""
    return {
        k: v for k, v in os.environ.items() if not k.startswith("HF_") and k not in CLI_DEFAULTS
    }


def test_import_netcast_leaves_the_environment_unchanged():
    out = subprocess.run(
        [sys.executable, "-c", CHANGED], capture_output=True, text=True, env=clean_env()
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {}


def test_python_dash_m_netcast_is_the_command_line():
    out = subprocess.run(
        [sys.executable, "-m", "netcast", "--help"], capture_output=True, text=True, env=clean_env()
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "evaluate" in out.stdout and "compile" in out.stdout
