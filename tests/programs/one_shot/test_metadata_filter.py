from netcast.corpus import Chunk
from netcast.programs.one_shot.metadata_filter import (
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
    text_year_conflict,
)


def chunk(text, title="", **meta):
    return Chunk("c#0", "c", title, text, len(text.split()), meta)


def test_years_dates_and_numbers():
    text = "On 3 March 1999 the 1,200 fans and 42 players met; again in May 2004 (score 2.5)."
    assert extract_years(text) == {1999, 2004}
    assert extract_dates(text) == {(1999, 3), (2004, 5)}
    assert extract_numbers(text) == {"3", "1200", "42", "2.5"}


def test_entities_skip_question_words_and_keep_quoted_titles():
    q = 'Which band released "Dark Side of the Moon" while Pink Floyd toured the United States?'
    entities = extract_entities(q)
    assert "pink floyd" in entities and "united states" in entities
    assert "dark side of the moon" in entities
    assert not any(e.startswith("which") for e in entities)


def test_locations_come_from_the_gazetteer():
    meta = extract("Where is the headquarters of the company in Midland, Michigan, Germany?")
    assert {"michigan", "germany"} <= meta.locations
    assert "midland" not in meta.locations


def test_declared_year_and_region_conflicts():
    query = extract("What did the council of Texas decide in 2011?")
    assert declared_year_conflict(query, chunk_meta(chunk("text", year=2009)))
    assert declared_year_conflict(query, chunk_meta(chunk("text", year=[2010, 2011]))) is None
    assert declared_year_conflict(query, chunk_meta(chunk("text"))) is None
    assert declared_region_conflict(query, chunk_meta(chunk("text", region="Ohio")))
    assert declared_region_conflict(query, chunk_meta(chunk("text", region="Texas"))) is None
    no_place = extract("What did the council decide?")
    assert declared_region_conflict(no_place, chunk_meta(chunk("text", region="Ohio"))) is None


def test_text_years_and_entity_alignment():
    query = extract("Who won the Tour de France in 1998?")
    assert text_year_conflict(query, chunk_meta(chunk("The 2003 race was won by Armstrong.")))
    assert text_year_conflict(query, chunk_meta(chunk("In 1998 Pantani won."))) is None
    assert entity_alignment(query, chunk_meta(chunk("A cooking recipe for bread.")))
    assert entity_alignment(query, chunk_meta(chunk("Pantani won in France."))) is None
    assert entity_alignment(extract("who won?"), chunk_meta(chunk("anything"))) is None


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
