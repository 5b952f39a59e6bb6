"""BM25 retrieval with bm25s (English stemming and stopwords)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

import bm25s
import numpy as np
import Stemmer
from bm25s.tokenization import Tokenized, Tokenizer

from netcast.corpus import Corpus
from netcast.errors import InputError
from netcast.formats import VOCAB, BM25Params, read_array, read_json
from netcast.retrievers.base import Hit, Shared, top_k_hits
from netcast.stored import StoredCorpus

STOPWORDS = "en"
# the files of a saved index's bm25/ folder (bm25s's names)
PARAMS, VOCAB_FILE = "params.index.json", "vocab.index.json"
ARRAYS = (
    ("data.csc.index.npy", "f"),
    ("indices.csc.index.npy", "iu"),
    ("indptr.csc.index.npy", "iu"),
)


def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def tokenize(texts: list[str], stemmer: Stemmer.Stemmer) -> list[list[str]]:
    return bm25s.tokenize(
        texts, stopwords=STOPWORDS, stemmer=stemmer, return_ids=False, show_progress=False
    )


def tokenize_stored(
    corpus: StoredCorpus, stemmer: Stemmer.Stemmer, progress: Callable[[int, int], None] | None
) -> Tokenized:
    """A stored corpus's token ids, read batch by batch (its texts never all in memory), with
    the same splitting, lower-casing, stopwords and stems as ``tokenize``; ``progress`` gets
    (chunks done, chunks in all)."""
    tokenizer = Tokenizer(stopwords=STOPWORDS, stemmer=stemmer)
    ids: list[list[int]] = []
    for texts in corpus.passages():
        ids.extend(tokenizer.tokenize(texts, update_vocab=True, show_progress=False))
        if progress:
            progress(len(ids), len(corpus))
    return Tokenized(ids=ids, vocab=tokenizer.get_vocab_dict())


class BM25Retriever(Shared):
    """Lexical retrieval. Scores are raw BM25 (Lucene variant, k1=1.5, b=0.75); only chunks
    sharing at least one query term are returned (score > 0)."""

    kind = "bm25"

    def __init__(
        self,
        corpus: Corpus,
        model: bm25s.BM25 | None = None,
        progress: Callable[[int, int], None] | None = None,
    ):
        self.corpus = corpus
        self._stemmer = _stemmer()
        if model is None:
            model = bm25s.BM25()
            if isinstance(corpus, StoredCorpus):
                tokens = tokenize_stored(corpus, self._stemmer, progress)
            else:
                tokens = tokenize(
                    [text for batch in corpus.passages() for text in batch], self._stemmer
                )
            words = set(tokens.vocab) - {""} if isinstance(tokens, Tokenized) else any(tokens)
            if not words:  # bm25s would fail on an empty vocabulary
                raise InputError(
                    f"the corpus's {len(corpus)} passage(s) hold no searchable word (only "
                    "stopwords or one-letter words): BM25 cannot index them"
                )
            model.index(tokens, show_progress=False)
        self._model = model
        self._vocab = model.vocab_dict

    def scores(self, query: str):
        terms = [t for t in tokenize([query], self._stemmer)[0] if t in self._vocab]
        if not terms:  # nothing in the query matches the vocabulary
            return np.zeros(len(self.corpus), dtype=np.float32)
        return self._model.get_scores(terms)

    def search(self, query: str, k: int, exclude: Collection[str] = ()) -> list[Hit]:
        return top_k_hits(self.corpus, self.scores(query), k, exclude, min_score=0.0)

    def save(self, directory: Path) -> None:
        self._model.save(str(directory / "bm25"))

    @classmethod
    def load(cls, corpus: Corpus, directory: Path) -> BM25Retriever:
        """Re-open a saved index; a stored corpus's is memory-mapped (read-only, shared by
        every process that opens it). Every file of the ``bm25/`` folder is checked, and the
        folder against the corpus: a missing, cut or misshapen file is one ``InputError``
        naming it."""
        folder = directory / "bm25"
        params = read_json(folder / PARAMS, BM25Params, "BM25 index's parameters")
        vocab = read_json(folder / VOCAB_FILE, VOCAB, "BM25 index's vocabulary")
        mmap = isinstance(corpus, StoredCorpus)
        data, indices, indptr = (read_array(folder / name, kind, mmap) for name, kind in ARRAYS)
        problem = None
        if params["num_docs"] != len(corpus):
            problem = f"{PARAMS}: field 'num_docs' is {params['num_docs']}"
        elif not len(vocab) <= len(indptr) <= len(vocab) + 1:  # bm25s writes one a word or
            # one more (as its tokenizer built the vocabulary: with or without an empty token)
            problem = f"{ARRAYS[2][0]}: {len(indptr)} entries for {len(vocab)} words"
        elif not len(data) == len(indices) == indptr[-1] or indptr[0] != 0:
            problem = f"{ARRAYS[0][0]} ({len(data)}), {ARRAYS[1][0]} ({len(indices)}) and "
            problem += f"{ARRAYS[2][0]} (ending at {indptr[-1]}) do not agree"
        if problem:
            raise InputError(
                f"{folder}/{problem}, for the index's {len(corpus)} chunks: the BM25 files are "
                "damaged or from another index; rebuild it (netcast index)"
            )
        try:
            model = bm25s.BM25.load(str(folder), mmap=mmap)
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:
            raise InputError(f"{folder}: not a readable BM25 index ({err})") from None
        return cls(corpus, model)
