"""Ctrl-C while questions still run in worker threads (netcast.cli.errors): the command says so
and waits for them, so their rows are saved; a second Ctrl-C stops at once, without a
traceback. Each case runs in a process of its own, since it sends real signals."""

import os
import signal
import subprocess
import sys
import time

SCRIPT = """
import signal, sys, threading, time, typer
from netcast.cli.errors import one_line_errors

# Ctrl-C as on a terminal (a process started in the background inherits it ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)

def question():  # a question in progress: saves its row when it ends
    time.sleep(float(sys.argv[2]))
    open(sys.argv[1], "w").write("row")

threading.Thread(target=question).start()
try:
    with one_line_errors():
        raise KeyboardInterrupt
except typer.Exit as done:
    sys.exit(done.exit_code)
"""


def start(tmp_path, seconds: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "row"), str(seconds)],
        stderr=subprocess.PIPE,
        text=True,
    )


def test_ctrl_c_waits_for_the_question_in_progress_and_saves_it(tmp_path):
    process = start(tmp_path, 1.0)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    assert (tmp_path / "row").read_text() == "row"
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted: what finished is saved")
    assert "waiting for the 1 question(s) in progress" in lines[0]


def test_a_second_ctrl_c_stops_at_once_without_a_traceback(tmp_path):
    process = start(tmp_path, 60.0)
    line = process.stderr.readline()
    assert "Ctrl-C again stops at once" in line
    started = time.monotonic()
    os.kill(process.pid, signal.SIGINT)
    _, rest = process.communicate(timeout=30)
    assert process.returncode == 130 and time.monotonic() - started < 20
    assert "Traceback" not in rest
    assert not (tmp_path / "row").exists()  # stopped mid-question: nothing half-saved
