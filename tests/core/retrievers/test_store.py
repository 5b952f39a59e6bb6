import json

import pytest

from netcast.errors import InputError
from netcast.retrievers import build_retriever, load_index, save_index


def test_bm25_index_round_trip(tmp_path, tiny_corpus):
    retriever = build_retriever(tiny_corpus, "bm25")
    save_index(retriever, tmp_path / "idx", source="test")
    info = json.loads((tmp_path / "idx" / "index.json").read_text())
    assert info["kind"] == "bm25" and info["corpus_hash"] == tiny_corpus.content_hash()
    loaded = load_index(tmp_path / "idx")
    q = "capital of France"
    assert [h.chunk.id for h in loaded.search(q, 3)] == [h.chunk.id for h in retriever.search(q, 3)]
    assert not list(tmp_path.glob(".idx.*"))  # the temporary directory is gone


def test_hybrid_index_round_trip(tmp_path, tiny_corpus):
    retriever = build_retriever(tiny_corpus, "hybrid")
    save_index(retriever, tmp_path / "h")
    loaded = load_index(tmp_path / "h")
    assert loaded.kind == "hybrid"
    q = "river in Paris"
    assert [h.chunk.id for h in loaded.search(q, 3)] == [h.chunk.id for h in retriever.search(q, 3)]


def test_tampered_chunks_fail_the_content_hash(tmp_path, tiny_corpus):
    save_index(build_retriever(tiny_corpus, "bm25"), tmp_path / "idx")
    chunks = tmp_path / "idx" / "chunks.jsonl"
    chunks.write_text(chunks.read_text().replace("Paris is the capital", "Lyon is the capital"))
    with pytest.raises(InputError, match="content hash"):
        load_index(tmp_path / "idx")


def test_expected_hash_mismatch_and_bad_directories(tmp_path, tiny_corpus):
    save_index(build_retriever(tiny_corpus, "bm25"), tmp_path / "idx")
    with pytest.raises(InputError, match="does not match"):
        load_index(tmp_path / "idx", expected_hash="0" * 64)
    with pytest.raises(InputError, match="not an index directory"):
        load_index(tmp_path)
    (tmp_path / "idx" / "index.json").write_text("{broken")
    with pytest.raises(InputError, match=r"index.json: corrupted JSON \(line 1"):
        load_index(tmp_path / "idx")


def test_unknown_retriever_kind(tiny_corpus):
    with pytest.raises(InputError, match="unknown retriever 'splade'"):
        build_retriever(tiny_corpus, "splade")
