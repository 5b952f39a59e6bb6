"""Build retrievers, and save/load them as self-contained index directories.

An index directory holds ``index.json`` (kind, corpus content hash, token counter, ...),
``chunks.jsonl`` (the corpus itself) and the kind's own files (``bm25/``, ``dense.faiss``).
Nothing in it is pickled.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from netcast.corpus import Corpus
from netcast.errors import InputError
from netcast.files import atomic_directory
from netcast.retrievers.base import Retriever
from netcast.retrievers.bm25 import BM25Retriever
from netcast.retrievers.dense import EMBEDDING_MODEL, DenseRetriever
from netcast.retrievers.hybrid import HybridRetriever

KINDS = ("bm25", "dense", "hybrid")
FORMAT_VERSION = 1


def build_retriever(corpus: Corpus, kind: str = "bm25") -> Retriever:
    if kind == "bm25":
        return BM25Retriever(corpus)
    if kind == "dense":
        return DenseRetriever(corpus)
    if kind == "hybrid":
        return HybridRetriever(corpus, [BM25Retriever(corpus), DenseRetriever(corpus)])
    raise InputError(f"unknown retriever {kind!r}; choose one of {', '.join(KINDS)}")


def _parts(retriever: Retriever) -> list[Any]:
    return retriever.retrievers if isinstance(retriever, HybridRetriever) else [retriever]


def save_index(retriever: Retriever, directory: str | Path, **info: Any) -> Path:
    """Write the index directory atomically (a temporary sibling, then a rename)."""
    directory = Path(directory)
    with atomic_directory(directory) as tmp:
        retriever.corpus.save(tmp / "chunks.jsonl")
        for part in _parts(retriever):
            part.save(tmp)
        meta = {
            "format": FORMAT_VERSION,
            "kind": retriever.kind,
            "corpus_hash": retriever.corpus.content_hash(),
            "n_chunks": len(retriever.corpus),
            "token_counter": retriever.corpus.token_counter,
            "embedding_model": EMBEDDING_MODEL if retriever.kind != "bm25" else None,
            **info,
        }
        (tmp / "index.json").write_text(json.dumps(meta, indent=2))
    retriever.location = str(directory.resolve())
    return directory


def read_index_info(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / "index.json"
    if not path.exists():
        raise InputError(f"{directory}: not an index directory (no index.json)")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: corrupted index metadata ({err.msg})") from None


def load_index(directory: str | Path, expected_hash: str | None = None) -> Retriever:
    """Re-open a saved index; the corpus content hash must match ``index.json`` (and
    ``expected_hash`` when given)."""
    directory = Path(directory)
    info = read_index_info(directory)
    corpus = Corpus.load(directory / "chunks.jsonl", token_counter=info.get("token_counter", ""))
    actual = corpus.content_hash()
    for wanted in (info.get("corpus_hash"), expected_hash):
        if wanted and wanted != actual:
            raise InputError(
                f"{directory}: corpus content hash {actual[:12]} does not match {wanted[:12]}"
            )
    kind = info.get("kind")
    if kind == "bm25":
        retriever = BM25Retriever.load(corpus, directory)
    elif kind == "dense":
        retriever = DenseRetriever.load(corpus, directory)
    elif kind == "hybrid":
        parts = [BM25Retriever.load(corpus, directory), DenseRetriever.load(corpus, directory)]
        retriever = HybridRetriever(corpus, parts)
    else:
        raise InputError(f"{directory}/index.json: unknown retriever kind {kind!r}")
    retriever.location = str(directory.resolve())
    return retriever
