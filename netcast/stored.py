"""A corpus larger than memory: documents streamed from disk, chunks kept in an Arrow file.

``netcast index --corpus PATH`` reads a JSONL file (optionally gzipped) or a folder of .txt /
.md files one document at a time, chunks each, and writes the chunks in batches to
``chunks.arrow`` (Arrow IPC, the format ``datasets`` keeps its tables in). Opening the index
memory-maps that file, so a chunk's text is read from the page cache only when a retriever
returns its position: memory stays bounded whatever the corpus size, and every process that
opens the same read-only index directory shares one copy of its pages.

Why Arrow rather than SQLite: retrievers address chunks by position (a BM25 column, a faiss
row), which a memory-mapped Arrow table serves with no lookup and no copy; an index is built
once and then only read, so SQLite's B-tree and transactions (updates, keyed lookups) would
cost at build time and buy nothing after.

Token counts: the embedded model's tokenizer counts about 2k passages a second on 2 cores,
several times slower than bm25s indexes them, so a stored corpus counts a chunk's tokens when a
program first reads the chunk (``Chunk.n_tokens`` of a retrieved chunk), with the counter the
index records; the mean chunk length a token budget sizes its pool with is estimated from an
evenly spaced sample (``SAMPLE``).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from netcast.corpus import (
    Chunk,
    Corpus,
    Document,
    UniqueDocuments,
    chunk_texts,
    document_from_record,
    format_passage,
    hash_entry,
    read_jsonl,
)
from netcast.errors import InputError
from netcast.models.tokens import TokenCounter

CHUNKS_FILE = "chunks.arrow"
TEXT_SUFFIXES = (".txt", ".md")
BATCH = 10_000  # chunks per Arrow record batch
SAMPLE = 1_000  # chunks counted to estimate the mean chunk length
CACHE = 100_000  # chunks kept built in memory (a retrieved chunk is built once)
SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("doc_id", pa.string()),
        ("title", pa.string()),
        ("text", pa.string()),
        ("meta", pa.string()),  # JSON
    ]
)

Progress = Callable[[int, int], None]  # (bytes read, bytes in all)


def phase(
    progress: Callable[[str, int, int], None] | None, name: str
) -> Callable[[int, int], None] | None:
    """``progress(phase, done, total)`` bound to one phase (no progress, none)."""
    return (lambda done, total: progress(name, done, total)) if progress else None


# --- reading documents, one at a time -------------------------------------------------------


def corpus_files(path: Path) -> list[Path]:
    """The files a corpus path stands for: itself, or a folder's .txt and .md files (sorted,
    recursively)."""
    if not path.exists():
        raise InputError(f"{path}: file or folder not found")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in TEXT_SUFFIXES and p.is_file())
        if not files:
            raise InputError(f"{path}: folder holds no .txt or .md file")
        return files
    if not (path.name.endswith(".jsonl") or path.name.endswith(".jsonl.gz")):
        raise InputError(f"{path}: give a .jsonl or .jsonl.gz file, or a folder of .txt/.md files")
    return [path]


def iter_documents(path: str | Path, progress: Progress | None = None) -> Iterator[Document]:
    """The documents of a corpus path, streamed: one ``{"title", "text", "meta"?, "id"?}``
    object a line of a .jsonl / .jsonl.gz file, or one document a .txt / .md file of a folder
    (title: the file name without its suffix; id: its path under the folder). A repeated
    document is kept once, with a warning saying how many; an id repeated for another document
    is refused (``netcast.corpus.UniqueDocuments``). Bad input is one ``InputError`` naming the
    file and line; ``progress`` is called with the bytes read so far and in all."""
    path = Path(path)
    files = corpus_files(path)
    total = sum(f.stat().st_size for f in files)
    unique = UniqueDocuments(path)
    done = 0
    for file in files:
        if path.is_dir():  # ids are paths: never repeated
            docs: Iterator[tuple[Document, int, Any]] = (
                (doc, 0, None) for doc in _text_document(file, path)
            )
        else:
            read = read_jsonl(file, progress and (lambda n, d=done: progress(d + n, total)))
            docs = ((document_from_record(rec, f"{file}:{n}"), n, rec) for n, rec in read)
        for doc, where, record in docs:
            if unique.first(doc, where, record):
                yield doc
        done += file.stat().st_size
        if progress:
            progress(done, total)
    unique.report()


def _text_document(file: Path, root: Path) -> Iterator[Document]:
    try:
        text = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(
            f"{file}: not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start})"
        ) from None
    except OSError as err:
        raise InputError(f"{file}: cannot read ({err.strerror})") from None
    if text.strip():  # an empty file is no document
        rel = file.relative_to(root).as_posix()
        yield Document(id=rel, title=file.stem, text=text, meta={"path": rel})


# --- writing chunks ---------------------------------------------------------------------------


def write_chunks(
    documents: Iterator[Document],
    directory: Path,
    chunking: dict[str, Any],
    counter: TokenCounter | None = None,
) -> tuple[int, int, str]:
    """Chunk ``documents`` into ``directory/chunks.arrow`` in record batches; returns (documents,
    chunks, content hash). The hash is ``Corpus.content_hash``'s, computed as chunks are
    written, so a stored corpus and the same chunks in memory hash alike."""
    digest = hashlib.sha256()
    n_docs = n_chunks = 0
    columns: dict[str, list[str]] = {name: [] for name in SCHEMA.names}
    with (
        pa.OSFile(str(directory / CHUNKS_FILE), "wb") as sink,
        pa.ipc.new_file(sink, SCHEMA) as writer,
    ):
        for doc in documents:
            n_docs += 1
            meta = json.dumps(doc.meta, sort_keys=True, ensure_ascii=False)
            for n, piece in enumerate(chunk_texts(doc.text, counter, **chunking)):
                chunk_id = f"{doc.id}#{n}"
                digest.update(hash_entry(chunk_id, doc.title, piece, doc.meta))
                for name, value in zip(
                    SCHEMA.names, (chunk_id, doc.id, doc.title, piece, meta), strict=True
                ):
                    columns[name].append(value)
                n_chunks += 1
            if len(columns["id"]) >= BATCH:
                _flush(writer, columns)
        if columns["id"]:
            _flush(writer, columns)
    if n_chunks == 0:
        raise InputError("the corpus has no documents with text (empty corpus)")
    return n_docs, n_chunks, digest.hexdigest()


def _flush(writer: pa.ipc.RecordBatchFileWriter, columns: dict[str, list[str]]) -> None:
    writer.write_batch(pa.record_batch(columns, schema=SCHEMA))
    for values in columns.values():
        values.clear()


# --- reading chunks back ----------------------------------------------------------------------


def _columns(schema: pa.Schema) -> str:
    return ", ".join(f"{field.name}: {field.type}" for field in schema)


class _Rows(Sequence):
    """``corpus.chunks`` of a stored corpus: chunks by position, built when first read."""

    def __init__(self, corpus: StoredCorpus):
        self._corpus = corpus

    def __len__(self) -> int:
        return len(self._corpus)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._corpus.chunk_at(int(i))


class StoredCorpus(Corpus):
    """A corpus whose chunks stay on disk (a memory-mapped ``chunks.arrow``), with the same
    interface as ``Corpus``: ``corpus[chunk_id]``, ``corpus.chunks[position]``,
    ``corpus.position[chunk_id]``, iteration, ``len``. Read-only."""

    def __init__(self, path: str | Path, token_counter: str = "", content_hash: str = ""):
        self.path = Path(path)
        try:
            reader = pa.ipc.open_file(pa.memory_map(str(self.path), "r"))
            self._table = reader.read_all()
        except (OSError, pa.ArrowInvalid) as err:
            raise InputError(f"{self.path}: not a readable chunk file ({err})") from None
        if not SCHEMA.equals(self._table.schema.remove_metadata()):
            raise InputError(
                f"{self.path}: not a netcast chunk file (columns {_columns(self._table.schema)}; "
                f"expected {_columns(SCHEMA)})"
            )
        if self._table.num_rows == 0:
            raise InputError(f"{self.path}: no chunks (empty corpus)")
        self.token_counter = token_counter
        self._counter: TokenCounter | None = None
        self._hash = content_hash
        self._position: dict[str, int] | None = None
        self._built: OrderedDict[int, Chunk] = OrderedDict()
        self.chunks = _Rows(self)  # type: ignore[assignment]

    @property
    def position(self) -> dict[str, int]:  # type: ignore[override]
        if self._position is None:
            ids = self._table.column("id").to_pylist()
            self._position = {chunk_id: i for i, chunk_id in enumerate(ids)}
        return self._position

    @property
    def by_id(self) -> dict[str, Chunk]:  # type: ignore[override]
        raise TypeError("a stored corpus has no in-memory id map: use corpus[chunk_id]")

    def chunk_at(self, i: int) -> Chunk:
        if not 0 <= i < len(self):
            raise IndexError(i)
        chunk = self._built.get(i)
        if chunk is None:
            row = {name: self._table.column(name)[i].as_py() for name in SCHEMA.names}
            chunk = Chunk(
                id=row["id"],
                doc_id=row["doc_id"],
                title=row["title"],
                text=row["text"],
                n_tokens=self.count_tokens(format_passage(row["title"], row["text"])),
                meta=json.loads(row["meta"]),
            )
            self._built[i] = chunk
            if len(self._built) > CACHE:
                self._built.popitem(last=False)
        return chunk

    def __getitem__(self, chunk_id: str) -> Chunk:
        return self.chunk_at(self.position[chunk_id])

    def __len__(self) -> int:
        return self._table.num_rows

    def __iter__(self) -> Iterator[Chunk]:
        return (self.chunk_at(i) for i in range(len(self)))

    def passages(self, batch: int = BATCH) -> Iterator[list[str]]:
        """Every chunk as the model sees it (``format_passage``), in batches, in order: what an
        index is built from, read without building chunks or counting tokens."""
        for records in self._table.to_batches(max_chunksize=batch):
            titles = records.column("title").to_pylist()
            texts = records.column("text").to_pylist()
            yield [format_passage(t, x) for t, x in zip(titles, texts, strict=True)]

    def titles(self) -> Iterator[tuple[str, str]]:
        """(chunk id, title) of every chunk, in order."""
        for records in self._table.to_batches(max_chunksize=BATCH):
            yield from zip(
                records.column("id").to_pylist(), records.column("title").to_pylist(), strict=True
            )

    def mean_tokens(self) -> float:
        """Estimated from ``SAMPLE`` evenly spaced chunks (counting all would take minutes)."""
        picks = np.unique(np.linspace(0, len(self) - 1, num=min(SAMPLE, len(self)), dtype=int))
        return float(np.mean([self.chunk_at(int(i)).n_tokens for i in picks]))

    def content_hash(self) -> str:
        """The hash recorded when the chunks were written (``write_chunks``); recomputing it
        would read the whole file."""
        return self._hash

    def save(self, path: str | Path) -> None:
        raise TypeError("a stored corpus is saved with its index directory (netcast index)")
