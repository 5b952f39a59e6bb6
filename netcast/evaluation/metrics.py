"""Answer and retrieval metrics, and the one table of every per-question measure netcast
reports (quality and cost): its name, label, kind, direction and format, used by evaluation,
tuning, reports and the command line. Answer metrics follow the SQuAD evaluation script
(normalization: lowercase, strip punctuation and articles, collapse whitespace), taking the best
score over the gold answers. Retrieval metrics compare document ids.

Scripts written without spaces: a gold answer whose letters are mostly CJK (Chinese characters,
Japanese kana) is compared as the MLQA and CMRC 2018 evaluation scripts compare Chinese, by
mixed segmentation: lowercase, every punctuation character removed (Unicode's as well as
ASCII's), each CJK character a token and the rest split at whitespace (``mixed_tokens``). Any
other gold answer is compared exactly as SQuAD's script does, so English scores do not move."""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from netcast.corpus import CJK, doc_id_of_chunk, mostly_cjk


@dataclass(frozen=True)
class Measure:
    """One per-question measure. ``scope``: ``answer`` (a DSPy metric can optimize it),
    ``retrieval`` (quality of the evidence), ``cost``, or ``protocol`` (how often a step's
    reply could not be read, or the program went on without it)."""

    name: str
    label: str
    scope: Literal["answer", "retrieval", "cost", "protocol"]
    digits: int = 3

    @property
    def higher_is_better(self) -> bool:
        return self.scope in ("answer", "retrieval")

    def format(self, value: float | None) -> str:
        return "-" if value is None else f"{value:.{self.digits}f}"


MEASURES: tuple[Measure, ...] = (
    Measure("em", "EM", "answer"),
    Measure("f1", "F1", "answer"),
    Measure("judge", "judge match", "answer"),
    Measure("recall", "retrieval recall", "retrieval"),
    Measure("precision", "retrieval precision", "retrieval"),
    Measure("retrieval_f1", "retrieval F1", "retrieval"),
    Measure("answer_in_context", "answer in context", "retrieval"),
    Measure("lm_calls", "LM calls", "cost", 2),
    Measure("cached_calls", "cached calls", "cost", 2),
    Measure("tokens_in", "tokens in", "cost", 1),
    Measure("tokens_out", "tokens out", "cost", 1),
    Measure("searches", "searches", "cost", 2),
    Measure("turns", "turns", "cost", 2),
    Measure("seconds", "seconds", "cost", 2),
    Measure("parse_failures", "parse failures", "protocol", 2),
    Measure("fallbacks", "fallbacks", "protocol", 2),
)
BY_NAME = {m.name: m for m in MEASURES}
QUALITY = tuple(m.name for m in MEASURES if m.scope in ("answer", "retrieval"))
PROTOCOL = tuple(m.name for m in MEASURES if m.scope == "protocol")
COST = tuple(m.name for m in MEASURES if m.scope == "cost")
ANSWER = tuple(m.name for m in MEASURES if m.scope == "answer")

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


_MIXED_TOKEN = re.compile(f"[{CJK}]|[^\\s{CJK}]+")


def normalize_answer(text: str) -> str:
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _punctuation(ch: str) -> bool:
    return ch in _PUNCT or unicodedata.category(ch).startswith("P")


def mixed_tokens(text: str) -> list[str]:
    """MLQA's (and CMRC 2018's) normalization for Chinese: lowercase, punctuation removed (every
    Unicode punctuation character and ASCII's), English articles removed, then mixed
    segmentation: each CJK character one token, the rest split at whitespace."""
    text = "".join(ch for ch in text.lower() if not _punctuation(ch))
    return _MIXED_TOKEN.findall(_ARTICLES.sub(" ", text))


def answer_tokens(text: str, gold: str) -> list[str]:
    """``text``'s tokens as compared with ``gold``: mixed segmentation (``mixed_tokens``) when
    ``gold`` is mostly CJK text, else SQuAD's normalized words."""
    return mixed_tokens(text) if mostly_cjk(gold) else normalize_answer(text).split()


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    pred = normalize_answer(prediction)
    return float(
        any(
            answer_tokens(prediction, g) == answer_tokens(g, g)
            if mostly_cjk(g)
            else pred == normalize_answer(g)
            for g in golds
        )
    )


def _f1(prediction: str, gold: str) -> float:
    pred_tokens = answer_tokens(prediction, gold)
    gold_tokens = answer_tokens(gold, gold)
    # SQuAD v2 convention: yes/no/noanswer style answers must match exactly.
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(pred_tokens)
    recall = common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golds: Sequence[str]) -> float:
    return max((_f1(prediction, g) for g in golds), default=0.0)


def retrieval_prf(evidence_chunk_ids: Iterable[str], gold_doc_ids: Iterable[str]) -> dict:
    """Precision, recall and F1 of the retrieved documents (chunk ids mapped to their
    document) against the gold documents. With no gold evidence all three are ``None``."""
    retrieved = {doc_id_of_chunk(c) for c in evidence_chunk_ids}
    gold = set(gold_doc_ids)
    if not gold:
        return {"precision": None, "recall": None, "f1": None}
    hit = len(retrieved & gold)
    precision = hit / len(retrieved) if retrieved else 0.0
    recall = hit / len(gold)
    f1 = 2 * precision * recall / (precision + recall) if hit else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def answer_in_context(passages: Iterable[str], golds: Sequence[str]) -> float:
    """1.0 if any normalized gold answer occurs (as whole words) in the normalized context (a
    mostly CJK gold answer: as whole tokens of the mixed segmentation, ``mixed_tokens``)."""
    joined = " ".join(passages)
    context = f" {normalize_answer(joined)} "
    mixed = None
    for g in golds:
        if mostly_cjk(g):
            mixed = f" {' '.join(mixed_tokens(joined))} " if mixed is None else mixed
            tokens = mixed_tokens(g)
            if tokens and f" {' '.join(tokens)} " in mixed:
                return 1.0
        elif normalize_answer(g) and f" {normalize_answer(g)} " in context:
            return 1.0
    return 0.0


def em_metric(example, prediction, trace=None) -> float:
    """DSPy metric: exact match of ``prediction.answer`` against ``example.answers``."""
    return exact_match(prediction.answer, example.answers)


def f1_metric(example, prediction, trace=None) -> float:
    """DSPy metric: token F1 of ``prediction.answer`` against ``example.answers``."""
    return f1_score(prediction.answer, example.answers)


def text_tokens(text: str, mixed: bool = False) -> list[str]:
    """SQuAD-normalized tokens of ``text`` that hold a letter or digit (separators such as
    "…" or "—", which the normalization keeps, are not tokens); with ``mixed``, the tokens of
    the mixed segmentation (``mixed_tokens``: each CJK character one)."""
    tokens = mixed_tokens(text) if mixed else normalize_answer(text).split()
    return [t for t in tokens if any(ch.isalnum() for ch in t)]


def token_prf(retrieved: Iterable[str], gold: Iterable[str]) -> dict:
    """Token-level precision, recall and F1 between the retrieved text and the gold supporting
    text: the retrieval F1 of Knowledge-Aware Iterative Retrieval (§4.1.4: "Token-level overlap
    (F1 score) between retrieved and ground-truth supporting documents"). Each side's passages
    are joined and compared as bags of SQuAD-normalized tokens (``text_tokens``), the way the
    SQuAD script compares an answer with its gold; a token counts as often as it occurs on both
    sides. With no gold text all three are ``None``; nothing retrieved scores 0. Gold text
    that is mostly CJK is compared by mixed segmentation (module docstring), both sides."""
    gold = list(gold)
    mixed = mostly_cjk(" ".join(gold))
    gold_tokens = Counter(t for passage in gold for t in text_tokens(passage, mixed))
    if not gold_tokens:
        return {"precision": None, "recall": None, "f1": None}
    got = Counter(t for passage in retrieved for t in text_tokens(passage, mixed))
    common = sum((got & gold_tokens).values())
    if common == 0:
        return {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    precision = common / sum(got.values())
    recall = common / sum(gold_tokens.values())
    return {
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall),
    }


def documents_with_answer(passages: Sequence[str], golds: Sequence[str]) -> list[bool]:
    """For each passage, whether it contains a gold answer (normalized like SQuAD, as whole
    words: ``answer_in_context`` on that passage alone)."""
    return [bool(answer_in_context([p], golds)) for p in passages]


def top_k_answer_recall(passages: Sequence[str], golds: Sequence[str], k: int) -> float:
    """IterKey's retrieval recall at Top-K (§3, Fig. 2, Table 11: "the percentage of retrieved
    documents that contain at least one reference answer", as Top-1..Top-5 curves): 1.0 if any
    of the first ``k`` passages (ranked as retrieved) contains a gold answer, else 0.0."""
    return float(any(documents_with_answer(list(passages)[:k], golds)))
