import re

import pytest
from typer.testing import CliRunner

from netcast.cli.app import app
from netcast.data import load_dataset
from netcast.evaluation.metrics import retrieval_prf
from netcast.session import open_retriever

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def rows(output: str, keeps: int = 1) -> dict[str, list[str]]:
    """The table's rows by signal: recall and interval per keep, seconds."""
    found = {}
    for line in output.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line) if c.strip()]
        if len(cells) == 2 + 2 * keeps and re.fullmatch(r"\d\.\d{3}", cells[1]):
            found[cells[0]] = cells[1:]
    return found


def test_rerank_check_prints_recall_at_keep_per_signal_with_intervals():
    signals = "retriever,dense,rrf:retriever+dense"
    result = run(
        "rerank-check",
        "--dataset",
        "hotpotqa-sample",
        "--limit",
        4,
        "--pool",
        8,
        "--keep",
        2,
        "--signals",
        signals,
    )
    assert result.exit_code == 0, result.output
    assert "n = 4" in result.output and "recall@2" in result.output
    table = rows(result.output)
    assert list(table) == signals.split(",")
    for recall, interval, seconds in table.values():
        low, high = (float(x) for x in interval.strip("[]").split(","))
        assert low <= float(recall) <= high and float(seconds) >= 0

    # the retriever row is the recall of the retriever's own top 2, by gold documents
    data = load_dataset("hotpotqa-sample", "dev", 4)
    index = open_retriever(data)
    recalls = [
        retrieval_prf([h.chunk.id for h in index.search(e.question, 2)], e.gold_ids)["recall"]
        for e in data.examples
    ]
    assert table["retriever"][0] == f"{sum(recalls) / len(recalls):.3f}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--signals", "retriever,bm25"), "unknown rerank signal 'bm25'"),
        (("--keep", 9, "--pool", 3), "--keep 9 must be between 1 and --pool 3"),
        (
            ("--signals", "likelihood", "--model", "openai/gpt-4o-mini"),
            "openai/gpt-4o-mini gives no prompt log-probabilities",
        ),
    ],
)
def test_rerank_check_refuses_bad_input_with_one_line(args, message):
    result = run("rerank-check", "--dataset", "hotpotqa-sample", "--limit", 2, *args)
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_several_keeps_in_one_run_and_each_signal_scored_once_per_question(monkeypatch):
    import netcast.retrievers.dense as dense

    calls = []
    real = dense.embed

    def counted(texts):
        calls.append(len(texts))
        return real(texts)

    monkeypatch.setattr(dense, "embed", counted)
    result = run(
        "rerank-check",
        "--dataset",
        "hotpotqa-sample",
        "--limit",
        3,
        "--pool",
        6,
        "--keep",
        "1,4",
        "--signals",
        "retriever,dense,rrf:retriever+dense",
    )
    assert result.exit_code == 0, result.output
    assert "recall@1" in result.output and "recall@4" in result.output
    assert len(calls) == 1 + 3  # the untimed warm-up, then once per question: rrf reuses it
    table = rows(result.output, keeps=2)
    assert list(table) == ["retriever", "dense", "rrf:retriever+dense"]
    data = load_dataset("hotpotqa-sample", "dev", 3)
    index = open_retriever(data)
    for keep, column in ((1, 0), (4, 2)):
        recalls = [
            retrieval_prf([h.chunk.id for h in index.search(e.question, keep)], e.gold_ids)[
                "recall"
            ]
            for e in data.examples
        ]
        assert table["retriever"][column] == f"{sum(recalls) / len(recalls):.3f}"
    # a fusion is charged the seconds of the signals it reuses
    assert float(table["rrf:retriever+dense"][4]) >= float(table["dense"][4])


def test_rerank_check_refuses_a_keep_that_is_not_a_number():
    result = run("rerank-check", "--dataset", "hotpotqa-sample", "--limit", 2, "--keep", "3,x")
    assert result.exit_code == 2
    assert "--keep expects numbers separated by commas, got '3,x'" in result.output
