"""Documents, chunks and the corpus: loading, chunking, stable ids and token counts."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from netcast.errors import InputError, NetcastWarning
from netcast.models.tokens import TokenCounter

BOM = "\ufeff"
# Scripts written without spaces between words, as a regex character class: CJK ideographs (the
# unified blocks, extension A, compatibility ideographs) and Japanese kana (not the middle dot)
CJK = "\u3040-\u30fa\u30fc-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_CHAR = re.compile(f"[{CJK}]")
_WORD_CHAR = re.compile(r"\w")


def mostly_cjk(text: str) -> bool:
    """Whether at least half of ``text``'s letters and digits are CJK characters (``CJK``):
    text whose words are not separated by spaces."""
    words = len(_WORD_CHAR.findall(text))
    return words > 0 and 2 * len(_CJK_CHAR.findall(text)) >= words


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Chunk:
    id: str
    doc_id: str
    title: str
    text: str
    n_tokens: int
    meta: dict[str, Any] = field(default_factory=dict)


def doc_id_for(title: str, text: str) -> str:
    """A stable id from a document's content (the same title and text give the same id)."""
    digest = hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()
    return f"d{digest[:12]}"


def doc_id_of_chunk(chunk_id: str) -> str:
    """The document id of a chunk id ``"<doc_id>#<n>"``."""
    return chunk_id.rsplit("#", 1)[0]


def document_from_record(record: Mapping[str, Any], where: str) -> Document:
    """Validate one record (``title``, ``text``, optional ``id`` and ``meta``) into a Document.

    ``where`` names the record's place (``file:line``) in error messages.
    """
    if not isinstance(record, Mapping):
        raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
    text = record.get("text")
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{where}: field 'text' is missing or empty")
    title = record.get("title", "")
    if not isinstance(title, str):
        raise InputError(f"{where}: field 'title' must be a string")
    meta = record.get("meta", {}) or {}
    if not isinstance(meta, Mapping):
        raise InputError(f"{where}: field 'meta' must be an object")
    doc_id = record.get("id")
    doc_id = str(doc_id) if doc_id not in (None, "") else doc_id_for(title, text)
    return Document(id=doc_id, title=title, text=text, meta=dict(meta))


def read_jsonl(
    path: str | Path, progress: Callable[[int], Any] | None = None
) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, parsed_object)`` for each non-blank line of a ``.jsonl`` file (or a
    gzipped ``.jsonl.gz``); a bad byte, bad JSON or a truncated gzip stream names the line. A
    UTF-8 byte-order mark at the start of the file (what many editors write) is skipped.
    ``progress`` is called now and then with the bytes of the file read so far."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: file not found")
    if path.is_dir():
        raise InputError(f"{path}: is a directory; give a .jsonl file")
    try:
        raw_file = path.open("rb")
    except OSError as err:
        raise InputError(f"{path}: cannot read ({err.strerror})") from None
    line_no = 0
    with raw_file:  # decoded line by line, so a bad byte names its line
        handle = gzip.GzipFile(fileobj=raw_file) if path.name.endswith(".gz") else raw_file
        try:
            for line_no, raw in enumerate(handle, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise InputError(
                        f"{path}:{line_no}: not UTF-8 text (byte {raw[err.start]:#04x} at column "
                        f"{err.start + 1}); give a UTF-8 .jsonl file"
                    ) from None
                if line_no == 1:  # a byte-order mark (editors, spreadsheet exports) is no text
                    line = line.removeprefix(BOM)
                if progress and line_no % 4096 == 0:
                    progress(raw_file.tell())
                if not line.strip():
                    continue
                try:
                    yield line_no, json.loads(line)
                except json.JSONDecodeError as err:
                    raise InputError(f"{path}:{line_no}: invalid JSON ({err.msg})") from None
        except (OSError, EOFError, zlib.error) as err:  # a truncated or non-gzip .gz file
            raise InputError(f"{path}:{line_no + 1}: cannot read ({err})") from None


def load_documents(path: str | Path) -> list[Document]:
    """Documents from a JSONL file, one ``{"title", "text", "meta"?, "id"?}`` object per line;
    repeated documents are kept once, and said so (``UniqueDocuments``)."""
    unique = UniqueDocuments(path)
    docs = []
    for n, record in read_jsonl(path):
        doc = document_from_record(record, f"{path}:{n}")
        if unique.first(doc, n, record):
            docs.append(doc)
    if not docs:
        raise InputError(f"{path}: no documents (empty corpus)")
    unique.report()
    return docs


def documents_from_dataset(
    dataset: Iterable[Mapping[str, Any]], title_field: str = "title", text_field: str = "text"
) -> list[Document]:
    """Documents from a ``datasets.Dataset`` (or any iterable of rows); repeated documents are
    kept once, and said so (``UniqueDocuments``)."""
    unique = UniqueDocuments("the dataset", unit="row")
    docs = []
    for i, row in enumerate(dataset):
        record = {**row, "title": row.get(title_field, ""), "text": row.get(text_field)}
        doc = document_from_record(record, f"row {i}")
        if unique.first(doc, i, record):
            docs.append(doc)
    if not docs:
        raise InputError("dataset has no rows (empty corpus)")
    unique.report()
    return docs


class UniqueDocuments:
    """A corpus's documents by id, as they are read: a document that repeats an earlier one
    (its own ``id``, title, text and meta; or, without an ``id``, its title and text) is kept
    once and counted, and ``report()`` warns how many; an ``id`` given again to another
    document is refused, naming both lines (one of them would be lost). Keeps a fingerprint,
    not the document, per id: corpora larger than memory are read through it."""

    def __init__(self, source: str | Path, unit: str = "line"):
        self.source, self.unit = str(source), unit
        self._seen: dict[str, tuple[int, bytes]] = {}
        self.repeated = 0

    def first(self, doc: Document, where: int, record: Mapping[str, Any] | None = None) -> bool:
        """True when ``doc`` (read from ``record`` at line or row ``where``) is new."""
        own_id = record is not None and record.get("id") not in (None, "")
        content = [doc.title, doc.text, doc.meta] if own_id else [doc.title, doc.text]
        digest = hashlib.blake2b(json.dumps(content, sort_keys=True).encode(), digest_size=8)
        fingerprint = digest.digest()
        seen = self._seen.get(doc.id)
        if seen is None:
            self._seen[doc.id] = (where, fingerprint)
            return True
        if seen[1] != fingerprint:
            at = f"{self.source}:{where}" if self.unit == "line" else f"{self.source} row {where}"
            raise InputError(
                f"{at}: field 'id' {doc.id!r} repeats {self.unit} {seen[0]} with another "
                "document (ids must be unique: one of them would be lost)"
            )
        self.repeated += 1
        return False

    def report(self) -> None:
        """Warn (``NetcastWarning``) how many repeated documents were kept once."""
        if self.repeated:
            warnings.warn(
                NetcastWarning(
                    f"{self.source}: {self.repeated} repeated document(s) (the same id, title and "
                    "text as an earlier one) indexed once"
                ),
                stacklevel=3,
            )


def dedupe_documents(docs: Iterable[Document]) -> list[Document]:
    """Drop repeated ids, keeping the first occurrence and the original order: for documents
    whose ids are their content's hash (``doc_id_for``: a dataset's pooled passages, which
    repeat across questions), so a repeated id is the same document. A user's corpus file goes
    through ``UniqueDocuments``."""
    seen: dict[str, Document] = {}
    for doc in docs:
        seen.setdefault(doc.id, doc)
    return list(seen.values())


# A paragraph longer than this is split into windows when chunked (``chunk_documents``): a
# quarter of the embedded model's default window, where passages share it with the question,
# the instructions and each other (the bundled samples' longest paragraph: 1,992 tokens)
MAX_PARAGRAPH_TOKENS = 2048
# DSPy's chat-format field header (dspy.adapters.chat_adapter.field_header_pattern)
FIELD_HEADER = re.compile(r"\[\[ ## (\w+) ## \]\]")
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def split_paragraphs(text: str) -> list[str]:
    return [p.strip() for p in _PARAGRAPH_BREAK.split(text) if p.strip()]


def split_windows(text: str, counter: TokenCounter, size: int, overlap: int) -> list[str]:
    """Windows of about ``size`` tokens over whole words, each overlapping the last by ``overlap``.

    Word token counts come from ``counter`` one word at a time, so a window's exact count can
    differ by a few tokens from counting the joined text; chunks store the exact count.
    """
    if size <= 0 or not 0 <= overlap < size:
        raise ValueError("window size must be > 0 and 0 <= overlap < size")
    words = text.split()
    costs = [max(1, counter.count(" " + w)) for w in words]
    windows, start = [], 0
    while start < len(words):
        end, total = start, 0
        while end < len(words) and (total + costs[end] <= size or end == start):
            total += costs[end]
            end += 1
        windows.append(" ".join(words[start:end]))
        if end >= len(words):
            break
        back, kept = end, 0
        while back > start + 1 and kept + costs[back - 1] <= overlap:
            back -= 1
            kept += costs[back]
        start = back
    return windows


def check_chunking(mode: str) -> None:
    if mode not in ("paragraph", "window"):
        raise InputError(f"unknown chunking mode {mode!r} (use 'paragraph' or 'window')")


def chunk_texts(
    text: str,
    counter: TokenCounter | None,
    mode: str = "paragraph",
    window: int = 200,
    overlap: int = 40,
) -> list[str]:
    """A document's chunk texts: its paragraphs, or token windows (``split_windows``; these
    need ``counter``)."""
    check_chunking(mode)
    if mode == "paragraph":
        return split_paragraphs(text)
    if counter is None:
        raise InputError("window chunking needs a token counter")
    return split_windows(text, counter, window, overlap)


def hash_entry(chunk_id: str, title: str, text: str, meta: Mapping[str, Any]) -> bytes:
    """What ``Corpus.content_hash`` hashes of one chunk (a stored corpus hashes the same)."""
    return json.dumps([chunk_id, title, text, meta], sort_keys=True).encode()


def chunk_documents(
    docs: Iterable[Document],
    counter: TokenCounter,
    mode: str = "paragraph",
    window: int = 200,
    overlap: int = 40,
) -> list[Chunk]:
    """Chunks with ids ``"<doc_id>#<n>"``, token counts from ``counter`` and the doc's meta.

    A paragraph longer than ``MAX_PARAGRAPH_TOKENS`` is split into windows of ``window`` tokens
    (overlapping by ``overlap``), as ``mode="window"`` splits a document, and a warning says
    how many were: no passage is too long for a model's window to read."""
    check_chunking(mode)
    chunks: list[Chunk] = []
    long: list[tuple[str, int]] = []  # (title, tokens) of the paragraphs split

    def add(doc: Document, n: int, text: str, n_tokens: int) -> None:
        chunks.append(Chunk(f"{doc.id}#{n}", doc.id, doc.title, text, n_tokens, doc.meta))

    for doc in docs:
        n = 0
        for piece in chunk_texts(doc.text, counter, mode, window, overlap):
            n_tokens = counter.count(format_passage(doc.title, piece))
            if mode == "window" or n_tokens <= MAX_PARAGRAPH_TOKENS:
                add(doc, n, piece, n_tokens)
                n += 1
                continue
            long.append((doc.title, n_tokens))
            for part in split_windows(piece, counter, window, overlap):
                add(doc, n, part, counter.count(format_passage(doc.title, part)))
                n += 1
    if long:
        title, most = max(long, key=lambda found: found[1])
        warnings.warn(
            NetcastWarning(
                f"{len(long)} paragraph(s) longer than {MAX_PARAGRAPH_TOKENS:,} tokens (the "
                f"longest: {title!r}, {most:,} tokens) split into passages of {window} tokens "
                f"({overlap} overlapping), as --chunking window splits a document"
            ),
            stacklevel=2,
        )
    return chunks


def format_passage(title: str, text: str) -> str:
    """How a chunk is shown to a model (and counted): ``"title: text"``, with DSPy's field
    headers in it (``[[ ## answer ## ]]``) shown as ``[ ## answer ## ]``: a passage cannot
    carry the reply format's own markers into a prompt (``netcast.models.adapter``)."""
    shown = f"{title}: {text}" if title else text
    return FIELD_HEADER.sub(r"[ ## \1 ## ]", shown)


class Corpus:
    """An ordered, id-addressable collection of chunks."""

    def __init__(
        self, chunks: Iterable[Chunk], token_counter: str = "", counter: TokenCounter | None = None
    ):
        self.chunks: list[Chunk] = list(chunks)
        if not self.chunks:
            raise InputError("empty corpus: no chunks")
        self.token_counter = token_counter or (counter.name if counter else "")
        self._counter = counter
        self.by_id: dict[str, Chunk] = {c.id: c for c in self.chunks}
        if len(self.by_id) != len(self.chunks):
            raise InputError("corpus has repeated chunk ids")
        self.position: dict[str, int] = {c.id: i for i, c in enumerate(self.chunks)}

    @classmethod
    def from_documents(
        cls, docs: Iterable[Document], counter: TokenCounter, **chunking: Any
    ) -> Corpus:
        return cls(chunk_documents(docs, counter, **chunking), counter=counter)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` with the counter the chunks were counted with (so cropped or
        rewritten chunks stay comparable with the rest)."""
        if self._counter is None:
            from netcast.models.tokens import counter_named

            self._counter = counter_named(self.token_counter)
        return self._counter.count(text)

    def __len__(self) -> int:
        return len(self.chunks)

    def __getitem__(self, chunk_id: str) -> Chunk:
        return self.by_id[chunk_id]

    def __iter__(self) -> Iterator[Chunk]:
        return iter(self.chunks)

    def passages(self, batch: int = 10_000) -> Iterator[list[str]]:
        """Every chunk as the model sees it (``format_passage``), in batches, in order: what
        an index is built from (a stored corpus reads them without building chunks)."""
        for start in range(0, len(self.chunks), batch):
            yield [format_passage(c.title, c.text) for c in self.chunks[start : start + batch]]

    def titles(self) -> Iterator[tuple[str, str]]:
        """(chunk id, title) of every chunk, in order."""
        return ((c.id, c.title) for c in self.chunks)

    def mean_tokens(self) -> float:
        """The mean chunk length in tokens."""
        return float(np.mean([c.n_tokens for c in self.chunks]))

    def content_hash(self) -> str:
        """sha256 over every chunk's id, title, text and meta, in order."""
        digest = hashlib.sha256()
        for c in self.chunks:
            digest.update(hash_entry(c.id, c.title, c.text, c.meta))
        return digest.hexdigest()

    def save(self, path: str | Path) -> None:
        with Path(path).open("w", encoding="utf-8") as handle:
            for c in self.chunks:
                handle.write(json.dumps(asdict(c), ensure_ascii=False) + "\n")

    @classmethod
    def load(cls, path: str | Path, token_counter: str = "") -> Corpus:
        from netcast.formats import ChunkRecord, check_shape

        chunks, lines = [], {}
        for n, rec in read_jsonl(path):
            chunk = Chunk(**check_shape(rec, ChunkRecord, f"{path}:{n}"))
            if chunk.id in lines:
                raise InputError(
                    f"{path}:{n}: field 'id' {chunk.id!r} repeats line {lines[chunk.id]}"
                )
            lines[chunk.id] = n
            chunks.append(chunk)
        if not chunks:
            raise InputError(f"{path}: no chunks (empty corpus)")
        return cls(chunks, token_counter=token_counter)
