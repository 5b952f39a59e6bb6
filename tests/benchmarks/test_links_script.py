import json


def write_rows(folder, scores):
    """``scores``: id -> (recall, f1)."""
    folder.mkdir(parents=True)
    rows = [{"id": i, "scores": {"recall": r, "f1": f1}} for i, (r, f1) in scores.items()]
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_gap_table_splits_every_row_by_basics_gold_recall(script, tmp_path, monkeypatch, capsys):
    data = tmp_path / "run" / "toy"
    write_rows(data / "basic", {"q1": (1.0, 1.0), "q2": (0.5, 0.0), "q3": (0.5, 0.5)})
    write_rows(data / "reference-gold", {"q1": (1.0, 1.0), "q2": (1.0, 1.0), "q3": (1.0, 0.0)})
    write_rows(data / "basic-links-2", {"q1": (1.0, 0.0), "q2": (1.0, 1.0)})  # q3 missing
    script("links").gap_table(tmp_path / "run", "toy")
    lines = [line for line in capsys.readouterr().out.splitlines() if line[:4] in ("| 0.", "| 1.")]
    assert lines == [
        "| 0.50 | 2 | 0.250 | - | 0.500 |",  # basic-links-2 lacks q3: no mean over part
        "| 1.00 | 1 | 1.000 | 0.000 | 1.000 |",
    ]


def test_retrieval_table_counts_gold_in_the_context_with_and_without_links(script, capsys):
    script("links").retrieval_table("hotpotqa-sample", "train", 4, [2], [0, 3])
    out = capsys.readouterr().out
    rows = {
        line.split(" | ")[0].strip("| "): line.split(" | ")
        for line in out.splitlines()
        if line.startswith("| top")
    }
    assert set(rows) == {"top 2 + links 0", "top 2 + links 3"}
    plain, linked = rows["top 2 + links 0"], rows["top 2 + links 3"]
    assert plain[3] == "2.00" and 2.0 <= float(linked[3]) <= 5.0  # passages a question
    assert float(linked[2]) >= float(plain[2])  # links only add passages


def test_against_table_splits_by_both_rows_gold_recall(script, tmp_path, capsys):
    data = tmp_path / "run" / "toy"
    write_rows(data / "basic", {"q1": (1.0, 1.0), "q2": (0.5, 0.0), "q3": (0.5, 0.5)})
    write_rows(data / "links", {"q1": (0.5, 0.0), "q2": (1.0, 1.0), "q3": (1.0, 0.0)})
    write_rows(data / "reference-gold", {"q1": (1.0, 1.0), "q2": (1.0, 1.0), "q3": (1.0, 0.5)})
    script("links").against_table(tmp_path / "run", "toy", "links")
    lines = [
        line
        for line in capsys.readouterr().out.splitlines()
        if line[:4] == "| 0." or line[:4] == "| 1."
    ]
    assert lines == [
        "| 0.50 | 1.00 | 2 | 0.250 | 0.500 | 0.750 |",  # completed by links: q2, q3
        "| 1.00 | 0.50 | 1 | 1.000 | 0.000 | 1.000 |",  # broken by links: q1
    ]
