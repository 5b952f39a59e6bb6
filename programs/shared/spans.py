"""Checking that text a model says it copied is really in its source, and taking the source's
own text for it (used by One-SHOT's crops and knowledge-aware context filtering).

The papers' rules want verbatim copies; small models copy almost-verbatim (a changed quote, a
dropped comma, a lowercased word), so an exact check rejects nearly everything they write. The
``fuzzy`` mode keeps the rule's intent with a tolerance: the copy must align with a span of the
source at a similarity of at least ``threshold`` (rapidfuzz's best partial alignment), and what
is accepted is that span of the source, never the model's wording, so nothing invented enters
the context. ``exact`` is the papers' rule (whitespace and case aside).
"""

from __future__ import annotations

import re
from typing import Literal

from rapidfuzz import fuzz

Mode = Literal["exact", "fuzzy"]
MIN_FUZZY_CHARS = 12  # shorter copies must match exactly: a fuzzy match of a few letters is noise


def _words_pattern(copy: str) -> re.Pattern[str] | None:
    words = copy.split()
    if not words:
        return None
    return re.compile(r"\s+".join(re.escape(w) for w in words), re.IGNORECASE)


def _to_word_bounds(source: str, start: int, end: int) -> tuple[int, int]:
    while start > 0 and source[start - 1].isalnum():
        start -= 1
    while end < len(source) and source[end].isalnum():
        end += 1
    return start, end


def find_span(source: str, copy: str, mode: Mode = "fuzzy", threshold: float = 0.9) -> str | None:
    """The span of ``source`` that ``copy`` reproduces, or None."""
    copy = " ".join(str(copy).split()).strip().strip("\"'“”‘’")
    if len(copy) < 3:
        return None
    pattern = _words_pattern(copy)
    found = pattern.search(source) if pattern else None
    if found:
        return source[found.start() : found.end()]
    if mode == "exact" or len(copy) < MIN_FUZZY_CHARS:
        return None
    lowered = source.lower()
    if len(lowered) != len(source):  # case folding changed offsets: align on the source itself
        lowered = source
    aligned = fuzz.partial_ratio_alignment(copy.lower(), lowered, score_cutoff=threshold * 100)
    if aligned is None:
        return None
    start, end = _to_word_bounds(source, aligned.dest_start, aligned.dest_end)
    return source[start:end].strip() or None


def same_text(a: str, b: str, mode: Mode = "fuzzy", threshold: float = 0.9) -> bool:
    """Whether ``a`` and ``b`` are the same text: whitespace and case aside (``exact``), or
    similar at least ``threshold`` as wholes (``fuzzy``)."""
    na, nb = " ".join(a.split()).lower(), " ".join(b.split()).lower()
    if na == nb:
        return True
    return mode == "fuzzy" and fuzz.ratio(na, nb) >= threshold * 100
