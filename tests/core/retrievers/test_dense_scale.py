"""Dense retrieval at scale (netcast.retrievers.dense): the encoding written batch by batch
resumes after a kill, the faiss index type follows the corpus size, and embeddings computed
elsewhere are imported with one-line errors for the wrong shape."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from netcast.cli.app import app
from netcast.errors import InputError
from netcast.indexing import build_stored_index
from netcast.models.tokens import ApproxTokenCounter
from netcast.retrievers import dense as dense_module
from netcast.retrievers.dense import (
    DIM,
    DenseRetriever,
    embed,
    embed_corpus,
    encoder_dtype,
    import_embeddings,
    index_kind,
    make_index,
)
from netcast.retrievers.store import embeddings_dir
from netcast.stored import StoredCorpus

COUNTER = ApproxTokenCounter()
TOPICS = ["rivers", "mountains", "violins", "comets", "bread", "chess", "glaciers", "owls"]


def corpus_file(tmp_path, n=24):
    path = tmp_path / "docs.jsonl"
    with path.open("w") as handle:
        for i in range(n):
            topic = TOPICS[i % len(TOPICS)]
            text = f"Passage {i} is about {topic}: facts on {topic} number {i}."
            handle.write(json.dumps({"title": f"{topic} {i}", "text": text}) + "\n")
    return path


def unit_vectors(n, seed=0, clusters=0):
    """Random unit vectors; with ``clusters``, gathered around that many centres (as
    sentence embeddings are: topics)."""
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    if clusters:
        centres = rng.normal(size=(clusters, DIM)).astype(np.float32)
        v = centres[rng.integers(0, clusters, size=n)] + 0.5 * v
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_a_killed_encoding_resumes_after_its_last_finished_batch(tmp_path, monkeypatch):
    retriever, _ = build_stored_index(corpus_file(tmp_path), tmp_path / "idx", COUNTER)
    corpus = retriever.corpus
    assert isinstance(corpus, StoredCorpus)
    monkeypatch.setattr(dense_module, "BATCH", 5)
    encoded = []
    real_embed = dense_module.embed
    monkeypatch.setattr(dense_module, "embed", lambda t: encoded.append(len(t)) or real_embed(t))

    def killed(done, total):
        if done >= 10:
            raise KeyboardInterrupt

    path = tmp_path / "work" / "embeddings.npy"
    with pytest.raises(KeyboardInterrupt):
        embed_corpus(corpus, path, killed)
    assert encoded == [5, 5]
    vectors = embed_corpus(corpus, path)
    assert encoded == [5, 5, 5, 5, 4]  # only the three batches not finished
    fresh = np.concatenate([real_embed(batch) for batch in corpus.passages(batch=5)])
    np.testing.assert_allclose(vectors, fresh, atol=1e-6)  # the same batches: the same vectors


def test_the_index_type_follows_the_corpus_size():
    assert index_kind(49_999) == "flat" and index_kind(50_000) == "ivfpq"
    assert index_kind(10, "hnsw") == "hnsw"
    with pytest.raises(InputError, match="unknown dense index 'annoy'"):
        index_kind(10, "annoy")


@pytest.mark.parametrize("kind", ["ivfpq", "hnsw"])
def test_approximate_indexes_find_most_true_neighbours(kind):
    vectors = unit_vectors(12_000, clusters=100)
    queries = vectors[:50] + 0.05 * unit_vectors(50, seed=1)
    exact = make_index(vectors, "flat").search(queries, 10)[1]
    found = make_index(vectors, kind).search(queries, 10)[1]
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(exact, found, strict=True)])
    assert recall >= 0.4, recall  # PQ codes blur near-equidistant neighbours
    assert np.mean([i in row for i, row in enumerate(found)]) >= 0.9  # its own vector found


def test_imported_embeddings_are_checked_and_normalized(tmp_path):
    path = tmp_path / "e.npy"
    np.save(path, unit_vectors(3)[:, :100])
    with pytest.raises(InputError, match=r"e.npy: shape \(3, 100\), expected \(3, 384\)"):
        import_embeddings(path, 3)
    np.save(path, unit_vectors(4))
    with pytest.raises(InputError, match="e.npy: 4 rows for the index's 3 chunks"):
        import_embeddings(path, 3)
    np.save(path, 3 * unit_vectors(3))
    assert np.allclose(np.linalg.norm(import_embeddings(path, 3), axis=1), 1.0)
    (tmp_path / "bad.npy").write_text("not an array")
    with pytest.raises(InputError, match="bad.npy: not a readable .npy array"):
        import_embeddings(tmp_path / "bad.npy", 3)


def test_index_command_builds_dense_over_a_stored_corpus_and_imports_embeddings(tmp_path):
    docs = corpus_file(tmp_path)
    run = CliRunner().invoke
    args = ["index", "--corpus", str(docs), "--retriever", "dense", "--model", "openai/x"]
    result = run(app, [*args, "--out", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    assert "encoding chunks" in result.output
    from netcast.retrievers import load_index

    built = load_index(tmp_path / "d")
    assert isinstance(built, DenseRetriever) and built.index_type == "IndexFlatIP"
    assert "owls" in built.search("owl facts", 1)[0].chunk.text
    assert not embeddings_dir(built.corpus).exists()  # the resumable encoding's file is gone
    info = json.loads((tmp_path / "d" / "index.json").read_text())
    assert info["embedding_dtype"] == encoder_dtype()

    vectors = embed([t for batch in built.corpus.passages() for t in batch])
    np.save(tmp_path / "mine.npy", vectors)
    result = run(
        app, [*args, "--out", str(tmp_path / "i"), "--embeddings", str(tmp_path / "mine.npy")]
    )
    assert result.exit_code == 0, result.output
    assert "encoding chunks" not in result.output  # nothing encoded: imported
    imported = load_index(tmp_path / "i")
    # the ranking the imported vectors give (row i is chunk i); not the built index's, whose
    # bf16 vectors were encoded in other batches and can differ in the last bits
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    order = np.argsort(-(unit @ embed(["comets"])[0]))[:3]
    assert [h.chunk.id for h in imported.search("comets", 3)] == [
        imported.corpus.chunks[int(i)].id for i in order
    ]
    assert "comet" in imported.search("comets", 1)[0].chunk.text.lower()
    np.save(tmp_path / "short.npy", vectors[:5])
    result = run(
        app, [*args, "--out", str(tmp_path / "s"), "--embeddings", str(tmp_path / "short.npy")]
    )
    assert result.exit_code == 2 and "short.npy: 5 rows for the index's 24 chunks" in result.output
    bm25 = [
        "index",
        "--corpus",
        str(docs),
        "--out",
        str(tmp_path / "b"),
        "--embeddings",
        str(tmp_path / "mine.npy"),
    ]
    result = run(app, bm25)
    assert (
        result.exit_code == 2 and "--embeddings needs --retriever dense or hybrid" in result.output
    )


def test_the_encoder_dtype_can_be_forced(monkeypatch):
    encoder_dtype.cache_clear()
    monkeypatch.setenv("NETCAST_EMBED_DTYPE", "float32")
    try:
        assert encoder_dtype() == "float32"
    finally:
        encoder_dtype.cache_clear()
