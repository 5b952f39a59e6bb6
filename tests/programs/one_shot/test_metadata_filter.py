import pytest

from netcast.corpus import Chunk
from netcast.programs.one_shot.metadata_filter import (
    DEFAULT_RULES,
    DROP_RULES,
    chunk_meta,
    covers,
    declared_region_conflict,
    declared_year_conflict,
    drop_reason,
    entity_alignment,
    extract,
    extract_dates,
    extract_entities,
    extract_numbers,
    extract_years,
    missing_entities,
    places_overlap,
    text_date_conflict,
    text_year_conflict,
)


def chunk(text, title="", **meta):
    return Chunk("c#0", "c", title, text, len(text.split()), meta)


def test_years_dates_and_numbers():
    text = "On 3 March 1999 the 1,200 fans and 42 players met; again in May 2004 (score 2.5)."
    assert extract_years(text) == {1999, 2004}
    assert extract_dates(text) == {(1999, 3), (2004, 5)}
    assert extract_numbers(text) == {"1200", "42", "2.5"}  # the day belongs to the date
    assert extract_dates("released 1999-03-04") == {(1999, 3)}


@pytest.mark.parametrize(
    ("text", "years"),
    [
        ("The firm had 1500 employees in 1998.", {1998}),  # a count is not a year
        ("It is 2000 km long and cost $1500.", set()),
        ("A 1200-seat arena opened in the 1990s.", set()),  # nor a decade
        ("In 1998 people voted.", {1998}),  # a year cue wins over a count noun
        ("1998's best film; the 2003 season; founded c. 1850", {1998, 2003, 1850}),
        ("from 1939 to 1945, mid-1960", {1939, 1945, 1960}),
        ("It rose 12.5% to 1500.5 points; 1999% growth", set()),
    ],
)
def test_a_year_needs_year_context(text, years):
    assert extract_years(text) == years


def test_counts_are_numbers_not_years():
    assert extract_numbers("The firm had 1500 employees in 1998.") == {"1500"}


def test_entities_skip_question_words_and_keep_quoted_titles():
    q = 'Which band released "Dark Side of the Moon" while Pink Floyd toured the United States?'
    entities = extract_entities(q)
    assert "pink floyd" in entities and "united states" in entities
    assert "dark side of the moon" in entities
    assert not any(e.startswith("which") for e in entities)


def test_locations_come_from_the_gazetteer_cities_included():
    meta = extract("Where is the headquarters of the company in Midland, Michigan, Germany?")
    assert {"midland", "michigan", "germany"} <= meta.locations  # Midland is a city
    assert "kansas city" in extract("Was Walt Disney born in Kansas City?").locations
    assert extract("Who ruled Wales, Russia and London?").locations == {"wales", "russia", "london"}


def test_cities_match_whole_entities_and_common_words_are_not_places():
    assert extract("What did Abraham Lincoln sign?").locations == set()
    assert extract("Most people visited in March 2001.").locations == set()
    # an area (a US state) still matches inside a longer name
    assert extract("Who coached the Kansas City Chiefs?").locations == {"kansas"}


def test_places_overlap_through_the_areas_they_lie_in():
    assert places_overlap({"texas"}, {"dallas"}) and places_overlap({"dallas"}, {"texas"})
    assert places_overlap({"united states"}, {"kansas city"})
    assert not places_overlap({"houston"}, {"dallas"})  # same state is not the same place
    assert not places_overlap({"ohio"}, {"dallas"})


def test_declared_year_and_region_conflicts():
    query = extract("What did the council of Texas decide in 2011?")
    assert declared_year_conflict(query, chunk_meta(chunk("text", year=2009)))
    assert declared_year_conflict(query, chunk_meta(chunk("text", year=[2010, 2011]))) is None
    assert declared_year_conflict(query, chunk_meta(chunk("text"))) is None
    assert declared_region_conflict(query, chunk_meta(chunk("text", region="Ohio")))
    assert declared_region_conflict(query, chunk_meta(chunk("text", region="Texas"))) is None
    # a city in the query: a chunk declaring its state or country is no conflict
    city = extract("What did the council of Dallas decide in 2011?")
    assert declared_region_conflict(city, chunk_meta(chunk("text", region="Texas"))) is None
    assert (
        declared_region_conflict(city, chunk_meta(chunk("text", country="United States"))) is None
    )
    assert declared_region_conflict(city, chunk_meta(chunk("text", region="Ohio")))
    no_place = extract("What did the council decide?")
    assert declared_region_conflict(no_place, chunk_meta(chunk("text", region="Ohio"))) is None


def test_text_years_and_entity_alignment():
    query = extract("Who won the Tour de France in 1998?")
    assert text_year_conflict(query, chunk_meta(chunk("The 2003 race was won by Armstrong.")))
    assert text_year_conflict(query, chunk_meta(chunk("In 1998 Pantani won."))) is None
    assert entity_alignment(query, chunk_meta(chunk("A cooking recipe for bread.")))
    assert entity_alignment(query, chunk_meta(chunk("Pantani won in France."))) is None
    assert entity_alignment(extract("who won?"), chunk_meta(chunk("anything"))) is None


def test_text_years_ignore_counts():
    query = extract("How many employees did Acme have in 1998?")
    assert extract_years("Acme had 1500 employees.") == set()
    assert text_year_conflict(query, chunk_meta(chunk("Acme had 1500 employees."))) is None
    assert text_year_conflict(query, chunk_meta(chunk("Acme was founded in 1985.")))


def test_text_dates_drop_chunks_whose_dates_all_name_other_months():
    query = extract("What did the Senate pass in March 1999?")
    assert query.dates == {(1999, 3)}
    assert text_date_conflict(query, chunk_meta(chunk("On 2 May 1999 and in June 2000 it met.")))
    agree = chunk_meta(chunk("On 5 March 1999 the Senate passed it; again in May 2004."))
    assert text_date_conflict(query, agree) is None
    assert text_date_conflict(query, chunk_meta(chunk("It met in 1999."))) is None  # no date
    no_date = extract("What did the Senate pass in 1999?")  # a year alone is not a month
    assert text_date_conflict(no_date, chunk_meta(chunk("On 2 May 1999 it met."))) is None
    assert DROP_RULES["text_date"] is text_date_conflict
    assert "text_date" not in DEFAULT_RULES and "text_year" not in DEFAULT_RULES
    c = chunk_meta(chunk("The Senate met on 2 May 1999."))
    assert drop_reason(query, c, rules=("text_date",)).startswith("text_date")
    assert drop_reason(query, c) is None  # opt-in


def test_rules_are_configurable_and_named_in_the_reason():
    query = extract("What happened in Texas in 2011?")
    c = chunk_meta(chunk("Texas news from 2009.", year=2009))
    assert drop_reason(query, c).startswith("declared_year")
    assert drop_reason(query, c, rules=("entity_alignment",)) is None
    assert drop_reason(query, c, rules=("text_year",)).startswith("text_year")


def test_missing_entities_and_coverage():
    query = extract("Was Ub Iwerks or Walt Disney born in Kansas City?")
    selected = [chunk_meta(chunk("Walt Disney was born in Chicago.", title="Walt Disney"))]
    missing = missing_entities(query, selected)
    assert "walt disney" not in missing and "kansas city" in missing
    assert covers("kansas city", chunk_meta(chunk("He grew up in Kansas City, Missouri.")))
