"""BM25 retrieval with bm25s: words split, lower-cased, stopwords dropped and stemmed by the
index's language (``LANGUAGES``; English unless the corpus is mostly CJK text).

A language is a word splitter, stopwords and a Snowball stemmer (PyStemmer): ``english`` (the
default, and every index built before languages were recorded), any other language PyStemmer
stems (with bm25s's stopwords where it has a list), ``cjk`` (Chinese and Japanese: each CJK
character a term, other words as written, no stemming), or ``none`` (words as written).
``auto`` picks ``cjk`` for a corpus whose text is mostly CJK (``netcast.corpus.mostly_cjk``),
else ``english``. The language is recorded with the index (``index.json``: ``bm25_language``),
so queries are split as the passages were."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np
import Stemmer
from bm25s.tokenization import Tokenized, Tokenizer

from netcast.corpus import CJK, Corpus, mostly_cjk
from netcast.errors import InputError, NetcastWarning
from netcast.formats import VOCAB, BM25Params, read_array, read_json
from netcast.retrievers.base import Hit, Shared, top_k_hits
from netcast.stored import StoredCorpus

STOPWORDS = "en"
WORDS = r"(?u)\b\w\w+\b"  # bm25s's default: words of two or more letters or digits
CJK_WORDS = f"(?u)[{CJK}]|[^\\W{CJK}]{{2,}}"  # each CJK character, or a word of other letters
DEFAULT_LANGUAGE = "english"  # an index that records no language was built in English
AUTO_SAMPLE = 1_000  # passages ``auto`` looks at
# bm25s's stopword lists, by PyStemmer's language names
BM25S_STOPWORDS = {
    "english": "en",
    "german": "de",
    "dutch": "nl",
    "french": "fr",
    "spanish": "es",
    "portuguese": "pt",
    "italian": "it",
    "russian": "ru",
    "swedish": "sv",
    "norwegian": "no",
}
LANGUAGES = ("auto", "cjk", "none", *sorted(Stemmer.algorithms()))
# the files of a saved index's bm25/ folder (bm25s's names)
PARAMS, VOCAB_FILE = "params.index.json", "vocab.index.json"
ARRAYS = (
    ("data.csc.index.npy", "f"),
    ("indices.csc.index.npy", "iu"),
    ("indptr.csc.index.npy", "iu"),
)


def check_language(language: str, where: str = "--bm25-language") -> str:
    """``language`` if BM25 knows it (``LANGUAGES``), else one line naming ``where``."""
    if language not in LANGUAGES:
        raise InputError(
            f"{where}: unknown BM25 language {language!r}; choose one of {', '.join(LANGUAGES)}"
        )
    return language


@dataclass(frozen=True)
class Analyzer:
    """How a language turns text into BM25 terms: the word pattern, stopwords and stemmer."""

    language: str
    pattern: str
    stopwords: str | None
    stemmer: Stemmer.Stemmer | None


def analyzer(language: str) -> Analyzer:
    """The ``Analyzer`` of a resolved language (not ``auto``)."""
    check_language(language)
    if language == "cjk":
        return Analyzer(language, CJK_WORDS, None, None)
    if language == "none":
        return Analyzer(language, WORDS, None, None)
    return Analyzer(language, WORDS, BM25S_STOPWORDS.get(language), Stemmer.Stemmer(language))


def resolve_language(language: str, passages: Callable[[], Collection[str]]) -> str:
    """``language``, with ``auto`` resolved on the corpus's first ``AUTO_SAMPLE`` passages:
    ``cjk`` when their text is mostly CJK, else ``english``."""
    check_language(language)
    if language != "auto":
        return language
    return "cjk" if mostly_cjk(" ".join(passages())) else DEFAULT_LANGUAGE


def sample_passages(corpus: Corpus, n: int = AUTO_SAMPLE) -> list[str]:
    """The corpus's first ``n`` passages (as indexed)."""
    texts = (text for batch in corpus.passages(batch=n) for text in batch)
    return list(itertools.islice(texts, n))


def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def tokenize(
    texts: list[str], stemmer: Stemmer.Stemmer | None, how: Analyzer | None = None
) -> list[list[str]]:
    """``texts`` as lists of terms, split by ``how`` (default: English with ``stemmer``)."""
    pattern, stopwords = (how.pattern, how.stopwords) if how else (WORDS, STOPWORDS)
    return bm25s.tokenize(
        texts,
        token_pattern=pattern,
        stopwords=stopwords,
        stemmer=stemmer,
        return_ids=False,
        show_progress=False,
    )


def tokenize_stored(
    corpus: StoredCorpus,
    stemmer: Stemmer.Stemmer | None,
    progress: Callable[[int, int], None] | None,
    how: Analyzer | None = None,
) -> Tokenized:
    """A stored corpus's token ids, read batch by batch (its texts never all in memory), with
    the same splitting, lower-casing, stopwords and stems as ``tokenize``; ``progress`` gets
    (chunks done, chunks in all)."""
    pattern, stopwords = (how.pattern, how.stopwords) if how else (WORDS, STOPWORDS)
    tokenizer = Tokenizer(splitter=pattern, stopwords=stopwords, stemmer=stemmer)
    ids: list[list[int]] = []
    for texts in corpus.passages():
        ids.extend(tokenizer.tokenize(texts, update_vocab=True, show_progress=False))
        if progress:
            progress(len(ids), len(corpus))
    return Tokenized(ids=ids, vocab=tokenizer.get_vocab_dict())


class BM25Retriever(Shared):
    """Lexical retrieval. Scores are raw BM25 (Lucene variant, k1=1.5, b=0.75); only chunks
    sharing at least one query term are returned (score > 0). ``language``: how text becomes
    terms (module docstring; ``auto`` decides on the corpus). A query none of whose terms is in
    the index is warned of once (``NetcastWarning``): BM25 finds nothing for it."""

    kind = "bm25"

    def __init__(
        self,
        corpus: Corpus,
        model: bm25s.BM25 | None = None,
        progress: Callable[[int, int], None] | None = None,
        language: str = "auto",
    ):
        self.corpus = corpus
        self.language = resolve_language(language, lambda: sample_passages(corpus))
        self._how = analyzer(self.language)
        self._stemmer = self._how.stemmer
        self._warned = False
        if model is None:
            model = bm25s.BM25()
            if isinstance(corpus, StoredCorpus):
                tokens = tokenize_stored(corpus, self._stemmer, progress, self._how)
            else:
                tokens = tokenize(
                    [text for batch in corpus.passages() for text in batch],
                    self._stemmer,
                    self._how,
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
        tokens = tokenize([query], self._stemmer, self._how)[0]
        terms = [t for t in tokens if t in self._vocab]
        if not terms:  # nothing in the query matches the vocabulary
            self._no_terms(query, tokens)
            return np.zeros(len(self.corpus), dtype=np.float32)
        return self._model.get_scores(terms)

    def _no_terms(self, query: str, tokens: list[str]) -> None:
        """Warn, once, of a query BM25 finds nothing for, and why."""
        if self._warned:
            return
        self._warned = True
        shown = query if len(query) <= 60 else query[:57] + "..."
        why = (
            "none of its words is in the index"
            if tokens
            else "it holds no word BM25 indexes (only stopwords, one-letter words or signs)"
        )
        advice = ""
        if mostly_cjk(query) and self.language != "cjk":
            advice = (
                f"; it is CJK text, which the {self.language} tokenizer keeps as whole runs of "
                "characters: build the index with --bm25-language cjk"
            )
        warnings.warn(
            NetcastWarning(
                f"BM25 ({self.language}) finds no passage for the query {shown!r}: {why}"
                f"{advice} (said once per index)"
            ),
            stacklevel=3,
        )

    def search(self, query: str, k: int, exclude: Collection[str] = ()) -> list[Hit]:
        return top_k_hits(self.corpus, self.scores(query), k, exclude, min_score=0.0)

    def save(self, directory: Path) -> None:
        self._model.save(str(directory / "bm25"))

    @classmethod
    def load(
        cls, corpus: Corpus, directory: Path, language: str = DEFAULT_LANGUAGE
    ) -> BM25Retriever:
        """Re-open a saved index (its terms split by ``language``, as ``index.json`` records);
        a stored corpus's is memory-mapped (read-only, shared by every process that opens it).
        Every file of the ``bm25/`` folder is checked, and the folder against the corpus: a
        missing, cut or misshapen file is one ``InputError`` naming it."""
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
        return cls(corpus, model, language=language)
