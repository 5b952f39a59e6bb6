"""From documents to a ready retriever, with built indexes cached under netcast's home."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from netcast import settings
from netcast.corpus import MAX_PARAGRAPH_TOKENS, Corpus, Document
from netcast.files import atomic_directory, check_output_directory, key_lock, short_hash, slug
from netcast.models.tokens import TokenCounter
from netcast.retrievers import Retriever, build_retriever, load_index, save_index
from netcast.retrievers.dense import encoder_dtype, read_embeddings
from netcast.retrievers.store import check_bm25_language, embeddings_dir, write_index_files
from netcast.stored import CHUNKS_FILE, StoredCorpus, iter_documents, phase, write_chunks


def build_index(
    documents: Sequence[Document],
    counter: TokenCounter,
    kind: str = "bm25",
    out: str | Path | None = None,
    chunking: dict[str, Any] | None = None,
    language: str = "auto",
    *,
    dense_index: str = "auto",
    embeddings: str | Path | None = None,
    **info: Any,
) -> Retriever:
    """Chunk ``documents``, build a ``kind`` retriever (BM25 splitting words by ``language``;
    dense: ``dense_index`` the faiss index type, ``embeddings`` a ``.npy`` computed elsewhere),
    and save it to ``out`` if given (checked first: ``netcast.files.check_output_directory``)."""
    if out is not None:
        check_output_directory(out, "index.json", "index")
    if embeddings is not None:  # its format and values, before anything is chunked
        read_embeddings(embeddings)
    corpus = Corpus.from_documents(documents, counter, **(chunking or {}))
    retriever = build_retriever(
        corpus, kind, language=language, dense_index=dense_index, embeddings=embeddings
    )
    if out is not None:
        save_index(retriever, out, chunking=chunking or {"mode": "paragraph"}, **info)
    return retriever


def build_stored_index(
    corpus: str | Path,
    out: str | Path,
    counter: TokenCounter,
    kind: str = "bm25",
    chunking: dict[str, Any] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    *,
    dense_index: str = "auto",
    embeddings: str | Path | None = None,
    language: str = "auto",
    **info: Any,
) -> tuple[Retriever, int]:
    """Stream a large corpus (``netcast.stored``: a .jsonl / .jsonl.gz file or a folder of .txt /
    .md files) into an index directory ``out`` whose chunks stay on disk; returns the re-opened
    retriever and the number of documents read. ``progress(phase, done, total)`` reports
    ``"read"`` in bytes, ``"index"`` and ``"embed"`` in chunks. Dense: ``dense_index`` is the
    faiss index type (by size unless given), ``embeddings`` a ``.npy`` computed elsewhere;
    BM25 splits words by ``language``.

    The directory is written atomically: a build stopped by an error leaves ``out`` as it was;
    one killed outright leaves only a hidden temporary sibling, which the next build into
    ``out`` removes before it starts (two builds into one directory at once are not supported).
    """
    out = Path(out)
    chunking = chunking or {"mode": "paragraph"}
    check_bm25_language(kind, language)  # before the corpus is read
    if embeddings is not None:  # its format and values, before the corpus is read
        read_embeddings(embeddings)
    for stale in out.parent.glob(f".{out.name}.*"):
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)

    with atomic_directory(out, "index.json", "index") as tmp:
        documents = iter_documents(corpus, phase(progress, "read"))
        windowed = counter if chunking.get("mode") == "window" else None
        n_docs, _, digest = write_chunks(documents, tmp, chunking, windowed)
        stored = StoredCorpus(tmp / CHUNKS_FILE, counter.name, digest)
        retriever = build_retriever(
            stored,
            kind,
            progress,
            dense_index=dense_index,
            embeddings=embeddings,
            language=language,
        )
        write_index_files(retriever, tmp, chunking=chunking, n_documents=n_docs, **info)
    if kind != "bm25":  # written into the index: the resumable encoding's file is done with
        shutil.rmtree(embeddings_dir(stored), ignore_errors=True)
    return load_index(out), n_docs


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
    language: str = "auto",
) -> Retriever:
    """The index for these documents from netcast's cache, built and saved on first use (BM25
    splitting words by ``language``: ``auto`` decides on the documents).

    The cache key hashes the documents, the chunking settings (and the longest paragraph kept
    whole), the token counter and a ``language`` other than ``auto``, so changed documents or
    another tokenizer never reuse a stale index; loading re-checks the chunks' content hash.
    Processes that want the same index at once (`netcast tune` workers on one netcast home)
    take the key's lock in turn: the first builds it, the others reuse it."""
    chunking = chunking or {"mode": "paragraph"}
    key = [documents_hash(documents), counter.name, chunking, MAX_PARAGRAPH_TOKENS]
    if kind != "bm25":  # embeddings differ by the encoder's dtype
        key.append(encoder_dtype())
    if language != "auto":
        key.append(language)
    fingerprint = short_hash(key, 16)
    directory = settings.indexes_dir() / f"{slug(name, empty='corpus')}-{kind}-{fingerprint}"
    if (directory / "index.json").exists():
        return load_index(directory)
    with key_lock(directory):  # another process may be building it: wait, then reuse it
        if (directory / "index.json").exists():
            return load_index(directory)
        corpus = Corpus.from_documents(documents, counter, **chunking)
        retriever = build_retriever(corpus, kind, language=language)
        save_index(retriever, directory, shared=True, source=name, chunking=chunking)
    return retriever
