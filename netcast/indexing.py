"""From documents to a ready retriever, with built indexes cached under netcast's home."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from netcast import settings
from netcast.corpus import Corpus, Document
from netcast.files import short_hash, slug
from netcast.models.tokens import TokenCounter
from netcast.retrievers import Retriever, build_retriever, load_index, save_index


def build_index(
    documents: Sequence[Document],
    counter: TokenCounter,
    kind: str = "bm25",
    out: str | Path | None = None,
    chunking: dict[str, Any] | None = None,
    **info: Any,
) -> Retriever:
    """Chunk ``documents``, build a ``kind`` retriever, and save it to ``out`` if given."""
    corpus = Corpus.from_documents(documents, counter, **(chunking or {}))
    retriever = build_retriever(corpus, kind)
    if out is not None:
        save_index(retriever, out, chunking=chunking or {"mode": "paragraph"}, **info)
    return retriever


def documents_hash(documents: Sequence[Document]) -> str:
    digest = hashlib.sha256()
    for d in documents:
        digest.update(json.dumps([d.id, d.title, d.text, d.meta], sort_keys=True).encode())
    return digest.hexdigest()


def cached_index(
    name: str,
    documents: Sequence[Document],
    counter: TokenCounter,
    kind: str = "bm25",
    chunking: dict[str, Any] | None = None,
) -> Retriever:
    """The index for these documents from netcast's cache, built and saved on first use.

    The cache key hashes the documents, the chunking settings and the token counter, so changed
    documents or another tokenizer never reuse a stale index; loading re-checks the chunks'
    content hash."""
    chunking = chunking or {"mode": "paragraph"}
    fingerprint = short_hash([documents_hash(documents), counter.name, chunking], 16)
    directory = settings.indexes_dir() / f"{slug(name, empty='corpus')}-{kind}-{fingerprint}"
    if (directory / "index.json").exists():
        return load_index(directory)
    corpus = Corpus.from_documents(documents, counter, **chunking)
    retriever = build_retriever(corpus, kind)
    save_index(retriever, directory, source=name, chunking=chunking)
    return retriever
