"""The rerank measurement is a plain function (``netcast rerank-check`` only renders it)."""

import pytest

from netcast.data import load_dataset
from netcast.errors import InputError
from netcast.evaluation.metrics import retrieval_prf
from netcast.session import open_retriever
from netcast.specs.rerank import rerank_check


@pytest.fixture(scope="module")
def sample():
    data = load_dataset("hotpotqa-sample", "dev", 4)
    return data.examples, open_retriever(data)


def test_recall_at_each_keep_is_the_gold_documents_found_per_question(sample):
    examples, index = sample
    check = rerank_check(examples, index, ["retriever"], pool=8, keeps=[2, 8])
    gold = [e for e in examples if e.get("gold_ids")]
    found = [
        retrieval_prf([h.chunk.id for h in index.search(e.question, 2)], e.gold_ids)["recall"]
        for e in gold
    ]
    assert check.n == len(gold) and check.recall["retriever"][2] == found
    assert check.mean_recall("retriever", 2) == pytest.approx(sum(found) / len(found))
    # keeping the whole pool keeps what the pool found
    assert check.recall["retriever"][8] == pytest.approx(check.pool_recall)
    low, high = check.interval("retriever", 2)
    assert low <= check.mean_recall("retriever", 2) <= high
    assert check.seconds_per_question("retriever") >= 0


def test_bad_signals_keeps_and_data_are_refused_before_any_scoring(sample):
    examples, index = sample
    with pytest.raises(InputError, match="unknown rerank signal 'bm25'"):
        rerank_check(examples, index, ["retriever", "bm25"], pool=8, keeps=[2])
    with pytest.raises(InputError, match="--keep 9 must be between 1 and --pool 8"):
        rerank_check(examples, index, ["retriever"], pool=8, keeps=[9])
    with pytest.raises(InputError, match="no question has gold evidence"):
        no_gold = [e.copy(gold_ids=[]) for e in examples]
        rerank_check(no_gold, index, ["retriever"], pool=8, keeps=[2])
