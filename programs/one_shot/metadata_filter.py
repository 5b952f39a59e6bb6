"""Rule-based metadata chunk filter (One-SHOT §3.1.2): extract years, dates, numbers, locations,
titles and other named entities from the query and from each chunk (regular expressions and
pycountry's gazetteer of countries and their subdivisions; no model), then *drop* chunks that
conflict with or do not align to the query's entities and *add* chunks from a wider pool that
cover query entities the selection lacks. Every rule is a small pure function."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from netcast.corpus import Chunk

MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_DATE = re.compile(
    r"\b(?:(\d{1,2})\s+)?("
    + "|".join(m.capitalize() for m in MONTHS)
    + r")\s*(?:(\d{1,2}),?\s*)?(1[0-9]{3}|20[0-9]{2})\b"
)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])")
_QUOTED = re.compile(r"[\"“]([^\"”]{2,80})[\"”]")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")
_CAPITALIZED = re.compile(
    r"\b([A-Z][\w'\-]*(?:\s+(?:of|the|de|la|von|van|and|du|del|'s)?\s*[A-Z][\w'\-]*)*)"
)
# Capitalized words that start questions or sentences without naming anything.
_NOT_ENTITIES = set(
    [
        "what",
        "who",
        "whom",
        "whose",
        "which",
        "when",
        "where",
        "why",
        "how",
        "is",
        "are",
        "was",
        "were",
        "did",
        "do",
        "does",
        "the",
        "a",
        "an",
        "in",
        "on",
        "at",
        "of",
        "for",
        "by",
        "to",
        "and",
        "or",
        "if",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "he",
        "she",
        "they",
        "there",
        "his",
        "her",
        "their",
        "as",
        "from",
        "with",
        "after",
        "before",
        "during",
        "between",
        "while",
        "since",
    ]
)
_STOP = _NOT_ENTITIES | set(
    ["also", "than", "then", "into", "over", "under", "about", "most", "more"]
)


@dataclass(frozen=True)
class Meta:
    """What one text says about itself, normalized to lowercase strings and ints."""

    years: frozenset[int] = frozenset()
    dates: frozenset[tuple[int, int]] = frozenset()  # (year, month)
    numbers: frozenset[str] = frozenset()
    entities: frozenset[str] = frozenset()
    locations: frozenset[str] = frozenset()
    tokens: frozenset[str] = frozenset()
    declared: dict[str, Any] = field(default_factory=dict)


def extract_years(text: str) -> frozenset[int]:
    return frozenset(int(y) for y in _YEAR.findall(text))


def extract_dates(text: str) -> frozenset[tuple[int, int]]:
    return frozenset(
        (int(year), MONTHS.index(month.lower()) + 1) for _, month, _, year in _DATE.findall(text)
    )


def extract_numbers(text: str) -> frozenset[str]:
    """Numbers that are not years, without thousands separators."""
    return frozenset(n.replace(",", "") for n in _NUMBER.findall(text) if not _YEAR.fullmatch(n))


def extract_entities(text: str) -> frozenset[str]:
    """Capitalized phrases and quoted titles, lowercased; question words and sentence-initial
    function words are not entities."""
    found = set()
    for phrase in _CAPITALIZED.findall(text):
        words = phrase.split()
        while words and words[0].lower() in _NOT_ENTITIES:
            words = words[1:]
        if words and not (len(words) == 1 and len(words[0]) < 2):
            found.add(" ".join(words).lower())
    found.update(q.strip().lower() for q in _QUOTED.findall(text))
    return frozenset(found)


@lru_cache(maxsize=1)
def gazetteer() -> frozenset[str]:
    """Lowercased names of countries and their subdivisions (states, provinces, regions)."""
    import pycountry

    names = set()
    for country in pycountry.countries:
        names.update(n.lower() for n in (country.name, getattr(country, "common_name", None)) if n)
    for sub in pycountry.subdivisions:
        names.add(sub.name.lower())
    return frozenset(names)


def extract_locations(entities: Iterable[str]) -> frozenset[str]:
    places = gazetteer()
    found = set()
    for entity in entities:
        words = entity.split()
        for size in range(len(words), 0, -1):  # also places inside longer phrases
            for start in range(len(words) - size + 1):
                piece = " ".join(words[start : start + size])
                if piece in places:
                    found.add(piece)
    return frozenset(found)


def tokens_of(text: str) -> frozenset[str]:
    return frozenset(w.lower() for w in _WORD.findall(text))


def extract(text: str, declared: dict[str, Any] | None = None) -> Meta:
    entities = extract_entities(text)
    return Meta(
        years=extract_years(text),
        dates=extract_dates(text),
        numbers=extract_numbers(text),
        entities=entities,
        locations=extract_locations(entities),
        tokens=tokens_of(text),
        declared=dict(declared or {}),
    )


def chunk_meta(chunk: Chunk, text: str | None = None) -> Meta:
    body = text if text is not None else chunk.text
    return extract(f"{chunk.title}. {body}", chunk.meta)


# --- drop rules: (query meta, chunk meta) -> reason to drop, or None -------------------------


def _as_set(value: Any) -> set[str]:
    values = value if isinstance(value, (list, tuple, set, frozenset)) else [value]
    return {str(v).lower() for v in values if v is not None}


def declared_year_conflict(query: Meta, chunk: Meta) -> str | None:
    """The chunk declares a year (meta ``year``) and the query names other years."""
    if not query.years or "year" not in chunk.declared:
        return None
    declared = {int(y) for y in _as_set(chunk.declared["year"]) if y.isdigit()}
    return None if declared & query.years else f"meta.year {sorted(declared)} not in query"


def declared_region_conflict(query: Meta, chunk: Meta) -> str | None:
    """The chunk declares a region (meta ``region`` / ``location`` / ``country``) and the
    query names other places."""
    if not query.locations:
        return None
    for key in ("region", "location", "country"):
        if key in chunk.declared:
            declared = _as_set(chunk.declared[key])
            if not declared & query.locations:
                return f"meta.{key} {sorted(declared)} not in query"
    return None


def text_year_conflict(query: Meta, chunk: Meta) -> str | None:
    """The query names years, the chunk's text names years, and none of them agree."""
    if query.years and chunk.years and not query.years & chunk.years:
        return f"years {sorted(chunk.years)[:3]} not in query"
    return None


def _content_words(entity: str) -> set[str]:
    return {w for w in entity.split() if len(w) >= 3 and w not in _STOP}


def entity_alignment(query: Meta, chunk: Meta) -> str | None:
    """The query names entities and the chunk shares no content word with any of them."""
    if not query.entities:
        return None
    for entity in query.entities:
        if _content_words(entity) & chunk.tokens:
            return None
    return "no query entity"


DROP_RULES: dict[str, Callable[[Meta, Meta], str | None]] = {
    "declared_year": declared_year_conflict,
    "declared_region": declared_region_conflict,
    "text_year": text_year_conflict,
    "entity_alignment": entity_alignment,
}
DEFAULT_RULES = ("declared_year", "declared_region", "entity_alignment")


def drop_reason(query: Meta, chunk: Meta, rules: Sequence[str] = DEFAULT_RULES) -> str | None:
    for name in rules:
        reason = DROP_RULES[name](query, chunk)
        if reason:
            return f"{name}: {reason}"
    return None


# --- add rule -----------------------------------------------------------------------------


def covers(entity: str, chunk: Meta) -> bool:
    """All content words of the entity occur in the chunk."""
    words = _content_words(entity)
    return bool(words) and words <= chunk.tokens


def missing_entities(query: Meta, selected: Iterable[Meta]) -> list[str]:
    """Query entities that no selected chunk covers, in a stable order."""
    chosen = list(selected)
    return sorted(e for e in query.entities if not any(covers(e, c) for c in chosen))
