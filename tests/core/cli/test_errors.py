"""Ctrl-C while work still runs in threads (netcast.cli.errors, netcast.interrupts): questions
are waited for, so their rows are saved, and a second Ctrl-C stops at once without a traceback;
a training is left at once; a thread netcast did not mark (an idle library pool) is not waited
for. SIGTERM does what a first Ctrl-C does, also where Ctrl-C is ignored. Each case runs in a
process of its own, since it sends real signals."""

import os
import signal
import subprocess
import sys
import time

SCRIPT = """
import signal, sys, threading, time, typer
from concurrent.futures import ThreadPoolExecutor
from netcast import interrupts
from netcast.cli.errors import one_line_errors

# Ctrl-C as on a terminal (a process started in the background inherits it ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
row, seconds, kind = sys.argv[1], float(sys.argv[2]), sys.argv[3]
started = threading.Event()

def work():  # a question (or training) in progress: saves its row when it ends
    with interrupts.running(kind):
        started.set()
        time.sleep(seconds)
        open(row, "w").write("row")

ThreadPoolExecutor(1).submit(lambda: None)  # an idle pool's thread, as litellm's logging keeps
if kind == "none":  # no work in progress: only the idle pool
    open(row, "w").write("row")
else:
    threading.Thread(target=work).start()
    started.wait()
try:
    with one_line_errors():
        raise KeyboardInterrupt
except typer.Exit as done:
    import os
    sys.exit(done.exit_code if os.path.exists(row) else 3)  # 3: the row was not waited for
"""


def start(tmp_path, seconds: float, kind: str = "question") -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "row"), str(seconds), kind],
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(process: subprocess.Popen, limit: float = 60) -> tuple[int, str, float]:
    started = time.monotonic()
    try:
        _, stderr = process.communicate(timeout=limit)
    finally:
        process.kill()
    return process.returncode, stderr, time.monotonic() - started


def test_ctrl_c_waits_for_the_question_in_progress_and_saves_it(tmp_path):
    code, stderr, _ = finished(start(tmp_path, 1.0))
    assert code == 130, stderr  # not 3: the row was saved before the command ended
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted: what finished is saved")
    assert "waiting for the 1 question(s) in progress" in lines[0]


def test_a_second_ctrl_c_stops_at_once_without_a_traceback(tmp_path):
    process = start(tmp_path, 60.0)
    try:
        line = process.stderr.readline()
        assert "Ctrl-C again stops at once" in line
        os.kill(process.pid, signal.SIGINT)
    finally:
        code, rest, took = finished(process, 30)
    assert code == 130 and took < 20
    assert "Traceback" not in rest
    assert not (tmp_path / "row").exists()  # stopped mid-question: nothing half-saved


def test_a_training_in_progress_is_left_at_once(tmp_path):
    code, stderr, took = finished(start(tmp_path, 60.0, "training"), 30)
    assert code == 130 and took < 20, stderr
    assert "the training is left at its last checkpoint" in stderr and "Traceback" not in stderr


def test_threads_netcast_did_not_mark_are_not_waited_for(tmp_path):
    code, stderr, took = finished(start(tmp_path, 0.0, "none"), 30)
    assert code == 130 and took < 20, stderr
    assert "waiting" not in stderr


TERM_SCRIPT = """
import os, signal, sys, threading, time, typer
from netcast import interrupts
from netcast.cli.errors import one_line_errors

signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a script's background job starts: no Ctrl-C
row, kind = sys.argv[1], sys.argv[2]
started = threading.Event()

def work():  # a question in progress: saves its row when it ends
    with interrupts.running("question"):
        started.set()
        time.sleep(2.0)
        open(row, "w").write("row")

try:
    with one_line_errors():
        if kind == "training":  # a training's handler, as CpuTrainingJob installs for Ctrl-C
            stop = threading.Event()
            signal.signal(signal.SIGINT, lambda *_: stop.set())
            print("ready", flush=True)
            stop.wait(30)
            sys.exit(0 if stop.is_set() else 4)  # 4: the training was not asked to stop
        threading.Thread(target=work).start()
        started.wait()
        print("ready", flush=True)
        time.sleep(60)
except typer.Exit as done:
    sys.exit(done.exit_code if os.path.exists(row) else 3)  # 3: the row was not waited for
"""


def terminated(tmp_path, kind: str, times: int = 1) -> tuple[int, str, float]:
    process = subprocess.Popen(
        [sys.executable, "-c", TERM_SCRIPT, str(tmp_path / "row"), kind],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout.readline().strip() == "ready"
        for _ in range(times):
            os.kill(process.pid, signal.SIGTERM)
            time.sleep(0.2)
    finally:
        code, stderr, took = finished(process, 30)
    return code, stderr, took


def test_sigterm_is_a_ctrl_c_even_where_ctrl_c_is_ignored(tmp_path):
    code, stderr, _ = terminated(tmp_path, "question")
    assert code == 130, stderr  # not -15 (killed) nor 3: the question was waited for and saved
    assert "interrupted: what finished is saved" in stderr and "waiting for the 1" in stderr
    assert "Traceback" not in stderr


def test_sigterm_asks_a_training_to_save_as_its_ctrl_c_does(tmp_path):
    code, stderr, _ = terminated(tmp_path, "training")
    assert code == 0, stderr  # the training's own Ctrl-C handler ran


def test_a_second_sigterm_ends_the_process_at_once(tmp_path):
    code, _, took = terminated(tmp_path, "question", times=2)
    assert code == -signal.SIGTERM and took < 20
    assert not (tmp_path / "row").exists()
