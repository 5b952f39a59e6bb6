"""Build retrievers, and save/load them as self-contained index directories.

An index directory holds ``index.json`` (kind, corpus content hash, token counter, ...),
``chunks.jsonl`` or ``chunks.arrow`` (the corpus itself: ``netcast.stored``) and the kind's
own files (``bm25/``, ``dense.faiss``).
Nothing in it is pickled.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from netcast.corpus import Corpus
from netcast.errors import InputError
from netcast.files import atomic_directory
from netcast.formats import IndexInfo, read_json
from netcast.retrievers.base import Retriever
from netcast.retrievers.bm25 import DEFAULT_LANGUAGE, LANGUAGES, BM25Retriever, check_language
from netcast.retrievers.dense import (
    EMBEDDING_MODEL,
    DenseRetriever,
    encoder_dtype,
    import_embeddings,
)
from netcast.retrievers.hybrid import HybridRetriever
from netcast.stored import CHUNKS_FILE, StoredCorpus, phase

KINDS = ("bm25", "dense", "hybrid")
FORMAT_VERSION = 1


def build_retriever(
    corpus: Corpus,
    kind: str = "bm25",
    progress: Callable[[str, int, int], None] | None = None,
    *,
    dense_index: str = "auto",
    embeddings: str | Path | None = None,
    language: str = "auto",
) -> Retriever:
    """A ``kind`` retriever over ``corpus``. ``progress(phase, done, total)`` hears of BM25's
    chunks tokenized (``"index"``) and the dense encoder's chunks embedded (``"embed"``);
    ``dense_index`` is the faiss index type (``netcast.retrievers.dense.index_kind``),
    ``embeddings`` a ``.npy`` of precomputed ones and ``language`` how BM25 splits words
    (``netcast.retrievers.bm25.LANGUAGES``)."""

    def dense() -> DenseRetriever:
        vectors = import_embeddings(embeddings, len(corpus)) if embeddings else None
        work = (
            embeddings_dir(corpus) if vectors is None and isinstance(corpus, StoredCorpus) else None
        )
        return DenseRetriever(
            corpus,
            vectors=vectors,
            index_type=dense_index,
            work=work,
            progress=phase(progress, "embed"),
        )

    if embeddings and kind == "bm25":
        raise InputError("--embeddings needs --retriever dense or hybrid")
    check_bm25_language(kind, language)

    def bm25() -> BM25Retriever:
        return BM25Retriever(corpus, progress=phase(progress, "index"), language=language)

    if kind == "bm25":
        return bm25()
    if kind == "dense":
        return dense()
    if kind == "hybrid":
        return HybridRetriever(corpus, [bm25(), dense()])
    raise InputError(f"unknown retriever {kind!r}; choose one of {', '.join(KINDS)}")


def check_bm25_language(kind: str, language: str) -> None:
    """A BM25 ``language`` (``LANGUAGES``) for a ``kind`` that has a BM25 part, else one line."""
    check_language(language)
    if language != "auto" and kind == "dense":
        raise InputError("--bm25-language needs --retriever bm25 or hybrid")


def embeddings_dir(corpus: Corpus) -> Path:
    """Where a stored corpus's embeddings are written as they are computed, outside the index
    being built (keyed by the corpus hash and the encoder's dtype), so that a killed build
    resumes encoding where it stopped; removed once the index is written."""
    from netcast import settings

    return settings.indexes_dir() / "embeddings" / f"{corpus.content_hash()[:16]}-{encoder_dtype()}"


def _parts(retriever: Retriever) -> list[Any]:
    return retriever.retrievers if isinstance(retriever, HybridRetriever) else [retriever]


def _bm25_language(retriever: Retriever) -> dict[str, str]:
    """What ``index.json`` records of how the BM25 part splits words (``bm25_language``)."""
    parts = [p for p in _parts(retriever) if isinstance(p, BM25Retriever)]
    return {"bm25_language": parts[0].language} if parts else {}


def save_index(
    retriever: Retriever, directory: str | Path, shared: bool = False, **info: Any
) -> Path:
    """Write the index directory atomically (a temporary sibling, then a rename). ``shared``:
    a cache directory named by its content, which other processes may build too: the write
    holds the key's file lock (``atomic_directory``)."""
    directory = Path(directory)
    with atomic_directory(directory, "index.json", "index", shared=shared) as tmp:
        write_index_files(retriever, tmp, **info)
    retriever.location = str(directory.resolve())
    return directory


def write_index_files(retriever: Retriever, directory: Path, **info: Any) -> None:
    """The index files into ``directory``: the corpus (``chunks.jsonl``, or a stored corpus's
    ``chunks.arrow`` unless it is already there), each retriever part's files, ``index.json``."""
    corpus = retriever.corpus
    if isinstance(corpus, StoredCorpus):
        if corpus.path.resolve() != (directory / CHUNKS_FILE).resolve():
            shutil.copyfile(corpus.path, directory / CHUNKS_FILE)
    else:
        corpus.save(directory / "chunks.jsonl")
    for part in _parts(retriever):
        part.save(directory)
    meta = {
        "format": FORMAT_VERSION,
        "kind": retriever.kind,
        "corpus_hash": corpus.content_hash(),
        "n_chunks": len(corpus),
        "token_counter": corpus.token_counter,
        "embedding_model": EMBEDDING_MODEL if retriever.kind != "bm25" else None,
        **({"embedding_dtype": encoder_dtype()} if retriever.kind != "bm25" else {}),
        **_bm25_language(retriever),
        **info,
    }
    (directory / "index.json").write_text(json.dumps(meta, indent=2))


def kind_for_index(kind: str | None, index: str | Path | None) -> str:
    """The retriever kind a command runs: ``kind`` (``--retriever``), else the saved
    ``index``'s own kind, else ``bm25``. A ``kind`` the index contradicts (``--retriever dense``
    with a BM25 index) is one line, before anything runs."""
    if index is None:
        return kind or "bm25"
    saved = read_index_info(index)["kind"]
    if kind is not None and kind != saved:
        raise InputError(
            f"--retriever {kind}, but {index} is a {saved} index (its index.json: field "
            f"'kind'); drop --retriever, or give a {kind} index (netcast index --retriever {kind})"
        )
    return saved


def read_index_info(directory: str | Path) -> dict[str, Any]:
    """``index.json``, checked for its shape (``netcast.formats.IndexInfo``)."""
    path = Path(directory) / "index.json"
    if Path(directory).is_dir() and not path.exists():
        raise InputError(f"{directory}: not an index directory (no index.json)")
    if not Path(directory).is_dir():
        raise InputError(f"{directory}: no such index directory")
    return read_json(path, IndexInfo, "index's metadata")


def load_index(directory: str | Path, expected_hash: str | None = None) -> Retriever:
    """Re-open a saved index, every file checked (``netcast.formats``): the corpus content hash
    must match ``index.json`` (and ``expected_hash`` when given), its chunk count the
    retrievers' own files."""
    directory = Path(directory)
    info = read_index_info(directory)
    counter = info.get("token_counter", "")
    if (directory / CHUNKS_FILE).exists():  # a stored corpus: its hash was taken as written
        corpus: Corpus = StoredCorpus(directory / CHUNKS_FILE, counter, info.get("corpus_hash", ""))
    elif (directory / "chunks.jsonl").exists():
        corpus = Corpus.load(directory / "chunks.jsonl", token_counter=counter)
    else:
        raise InputError(
            f"{directory}: the index's chunks are gone (no {CHUNKS_FILE} or chunks.jsonl)"
        )
    actual = corpus.content_hash()
    for wanted in (info.get("corpus_hash"), expected_hash):
        if wanted and wanted != actual:
            raise InputError(
                f"{directory}: corpus content hash {actual[:12]} does not match {wanted[:12]}"
            )
    if info.get("n_chunks") not in (None, len(corpus)):
        raise InputError(
            f"{directory}/index.json: field 'n_chunks' is {info['n_chunks']}, the index holds "
            f"{len(corpus)} chunks"
        )
    kind = info.get("kind")
    language = info.get("bm25_language", DEFAULT_LANGUAGE)  # older indexes: English
    if not isinstance(language, str) or language not in LANGUAGES or language == "auto":
        raise InputError(
            f"{directory}/index.json: field 'bm25_language' is {language!r}, not a language "
            f"BM25 knows ({', '.join(LANGUAGES[1:])})"
        )
    if kind == "bm25":
        retriever = BM25Retriever.load(corpus, directory, language)
    elif kind == "dense":
        retriever = DenseRetriever.load(corpus, directory)
    else:  # hybrid (IndexInfo allows no other kind)
        parts = [
            BM25Retriever.load(corpus, directory, language),
            DenseRetriever.load(corpus, directory),
        ]
        retriever = HybridRetriever(corpus, parts)
    retriever.location = str(directory.resolve())
    return retriever
