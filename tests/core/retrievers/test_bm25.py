from itertools import pairwise

import numpy as np

from netcast.retrievers.base import top_k_hits
from netcast.retrievers.bm25 import BM25Retriever


def ids(hits):
    return [h.chunk.id for h in hits]


def test_bm25_ranks_by_stemmed_terms_without_stopwords(bm25):
    hits = bm25.search("What is the capital of France?", 3)
    assert ids(hits)[0] == "paris#0"
    assert all(a.score >= b.score > 0 for a, b in pairwise(hits))
    assert set(ids(bm25.search("rivers flowing", 2))) == {"rhine#0", "seine#0"}


def test_exclude_returns_the_next_best_unseen_chunks(bm25):
    full = ids(bm25.search("Paris France capital river", 6))
    excluded = full[:2]
    rest = ids(bm25.search("Paris France capital river", 3, exclude=excluded))
    assert rest == full[2:5]
    assert not set(rest) & set(excluded)


def test_only_matching_chunks_are_returned(bm25):
    assert bm25.search("zeppelin", 5) == []
    assert bm25.search("the of and", 5) == []  # stopwords only
    assert len(bm25.search("Germany", 10)) == 2


def test_save_and_load_give_the_same_ranking(tmp_path, bm25, tiny_corpus):
    bm25.save(tmp_path)
    loaded = BM25Retriever.load(tiny_corpus, tmp_path)
    query = "museum in Paris"
    assert [(h.chunk.id, h.score) for h in loaded.search(query, 4)] == [
        (h.chunk.id, h.score) for h in bm25.search(query, 4)
    ]


def test_top_k_hits_handles_k_larger_than_corpus_and_ignores_unknown_excludes(tiny_corpus):
    scores = np.arange(len(tiny_corpus), dtype=np.float32)
    hits = top_k_hits(tiny_corpus, scores, 100, exclude=["nope#0"], min_score=-1)
    assert len(hits) == len(tiny_corpus) and hits[0].score == len(tiny_corpus) - 1
    assert top_k_hits(tiny_corpus, scores, 0, (), 0) == []
    ties = np.ones(len(tiny_corpus), dtype=np.float32)
    assert ids(top_k_hits(tiny_corpus, ties, 3, (), 0)) == [c.id for c in tiny_corpus.chunks[:3]]


def test_a_corpus_with_no_searchable_word_is_refused_in_one_line(word_counter):
    import pytest

    from netcast.corpus import Corpus, Document
    from netcast.errors import InputError
    from netcast.retrievers.bm25 import BM25Retriever

    corpus = Corpus.from_documents(
        [Document("a", "", "t"), Document("b", "", "the a")], word_counter
    )
    with pytest.raises(InputError, match="2 passage.s. hold no searchable word"):
        BM25Retriever(corpus)
