import argparse
import json
import subprocess


def test_the_mixed_rows_run_plain_trimmed_and_with_a_fixed_mmap_threshold(script, monkeypatch):
    memory = script("finetune_memory")
    calls = []

    def run(command, capture_output, text, env):
        calls.append((command, env))
        got = {"loaded": 2**30, "peak": 3 * 2**30, "estimate": 2 * 2**30, "seconds": 4.0}
        return subprocess.CompletedProcess(command, 0, stdout=json.dumps(got) + "\n")

    monkeypatch.setattr(memory.subprocess, "run", run)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    args = argparse.Namespace(models=["embedded"], threads=2, mmap_kib=64)
    mixed = "400,1450"
    runs = [(mixed, 60, alloc, False) for alloc in (None, "trim", "mmap")]
    rows = memory.measured_rows(args, runs, compare=False)
    assert [row[1] for row in rows] == [
        "400 / 1,450, 60 steps",
        "400 / 1,450, 60 steps, malloc_trim",
        "400 / 1,450, 60 steps, mmap threshold 64 KiB",
    ]
    assert rows[0][3:6] == ["3.0", "2.0", "1.50x"]
    (plain, plain_env), (trim, trim_env), (mmap, mmap_env) = calls
    # only the trimmed row trims, only the last row's process starts with the threshold fixed
    assert "--trim" in trim and "--trim" not in plain and "--trim" not in mmap
    assert mmap_env["MALLOC_MMAP_THRESHOLD_"] == str(64 * 1024)
    assert "MALLOC_MMAP_THRESHOLD_" not in plain_env and "MALLOC_MMAP_THRESHOLD_" not in trim_env
