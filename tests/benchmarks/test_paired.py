import json

import pytest


def write(path, scores):
    """``scores``: id -> (f1, answer_in_context)."""
    rows = [
        {"id": i, "scores": {"f1": f1, "answer_in_context": aic, "seconds": 1.0}}
        for i, (f1, aic) in scores.items()
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_by_context_compares_within_the_groups_of_where_the_answer_was(
    script, tmp_path, monkeypatch, capsys
):
    a = write(tmp_path / "a.jsonl", {"q1": (1.0, 1), "q2": (1.0, 1), "q3": (0.0, 0), "q4": (0, 0)})
    b = write(tmp_path / "b.jsonl", {"q1": (0.0, 1), "q2": (0.5, 1), "q3": (1.0, 1), "q5": (1, 1)})
    monkeypatch.setattr("sys.argv", ["paired.py", str(a), str(b), "--by-context"])
    script("paired").main()
    out = capsys.readouterr().out
    assert "n = 3 shared questions" in out  # q4 and q5 are not shared
    lines = {line.split(" | ")[0].strip("| "): line for line in out.splitlines() if "|" in line}
    assert lines["both"].startswith("| both | 2 | 1.000 | 0.250 | -0.750")
    assert lines["only B"].startswith("| only B | 1 | 0.000 | 1.000 | +1.000")
    assert lines["only A"] == "| only A | 0 | - | - | - | - |"
    assert lines["neither"] == "| neither | 0 | - | - | - | - |"


def test_without_by_context_there_is_no_group_table(script, tmp_path, monkeypatch, capsys):
    a = write(tmp_path / "a.jsonl", {"q1": (1.0, 1)})
    b = write(tmp_path / "b.jsonl", {"q1": (0.0, 0)})
    monkeypatch.setattr("sys.argv", ["paired.py", str(a), str(b)])
    script("paired").main()
    out = capsys.readouterr().out
    assert "B - A: -1.000" in out and "answer in context" not in out
    with pytest.raises(SystemExit, match="share no question ids"):
        monkeypatch.setattr("sys.argv", ["paired.py", str(a), str(write(tmp_path / "c", {}))])
        script("paired").main()


def test_by_answer_splits_yes_no_questions_off_and_counts_what_each_run_said(
    script, tmp_path, monkeypatch, capsys
):
    def run(path, answers):
        rows = [
            {"id": i, "answers": [gold], "answer": said, "scores": {"f1": f1, "seconds": 1.0}}
            for i, (gold, said, f1) in answers.items()
        ]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    a = run(
        tmp_path / "a.jsonl",
        {"q1": ("yes", "Yes.", 1.0), "q2": ("No", "no", 1.0), "q3": ("Paris", "Paris", 1.0)},
    )
    b = run(
        tmp_path / "b.jsonl",
        {"q1": ("yes", "no", 0.0), "q2": ("No", "No, it is not", 1.0), "q3": ("Paris", "x", 0.0)},
    )
    monkeypatch.setattr("sys.argv", ["paired.py", str(a), str(b), "--by-answer"])
    script("paired").main()
    out = capsys.readouterr().out
    lines = {line.split(" | ")[0].strip("| "): line for line in out.splitlines() if "|" in line}
    assert lines["yes/no"].startswith("| yes/no | 2 | 1.000 | 0.500 | -0.500")
    assert lines["other"].startswith("| other | 1 | 1.000 | 0.000 | -1.000")
    assert "gold yes 1, no 1, other 0" in out
    assert "A answered yes 1, no 1, other 0" in out
    assert "B answered yes 0, no 2, other 0" in out
    assert "answer in context" not in out
