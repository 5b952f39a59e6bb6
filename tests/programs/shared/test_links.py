from helpers import WordCounter
from netcast import trace
from netcast.corpus import Corpus, Document
from netcast.programs.shared.links import follow, mentions, title_key, title_keys
from netcast.retrievers.base import Hit
from netcast.retrievers.bm25 import BM25Retriever

DOCS = [
    Document("agro", "Dow AgroSciences", "Dow AgroSciences is part of Dow Chemical Company."),
    Document("dow", "Dow Chemical Company", "Dow Chemical Company is based in Midland, Michigan."),
    Document("midland", "Midland, Michigan", "Midland is a city in Michigan."),
    Document("kaye", "Tony Kaye (director)", "Tony Kaye directed American History X."),
    Document("ahx", "American History X", "American History X is a film by Tony Kaye."),
    Document("new", "New York", "New York is a state."),
    Document("nyc", "New York City", "New York City is in New York, not dow chemical company."),
    Document("abc", "ABC", "ABC is a broadcaster; Dow AgroSciences advertises on ABC."),
]


def corpus() -> Corpus:
    return Corpus.from_documents(DOCS, WordCounter())


def hit(c: Corpus, doc: str, score: float = 1.0) -> Hit:
    return Hit(c[f"{doc}#0"], score)


def test_title_keys_drop_the_disambiguation_and_short_titles():
    assert title_key("Tony Kaye (director)") == ("Tony", "Kaye")
    assert title_key("Midland, Michigan") == ("Midland", "Michigan")
    assert title_key("ABC") == ()  # three characters: too many accidental matches
    titles = title_keys(corpus())
    assert titles.keys[("Tony", "Kaye")] == ["kaye#0"] and ("ABC",) not in titles.keys
    assert titles.longest == 3  # "Dow Chemical Company", "American History X", "New York City"


def test_mentions_in_text_order_the_longest_title_winning_case_sensitive():
    keys = title_keys(corpus())
    text = "Born in New York City, he joined Dow Chemical Company; then New York."
    assert mentions(text, keys) == ["nyc#0", "dow#0", "new#0"]
    assert mentions("the dow chemical company and new york city", keys) == []


def test_follow_skips_seeds_own_and_present_documents_and_stops_at_the_limit():
    c = corpus()
    hits = [hit(c, "agro", 3.0), hit(c, "dow", 2.0)]
    with trace.recording() as recorded:
        # agro names itself and Dow (already a hit); Dow names Midland, Michigan
        linked = follow(hits, c, seeds=2, limit=5)
    assert [h.chunk.id for h in linked] == ["midland#0"]
    assert linked[0].score == 2.0  # its seed's score
    stage = recorded.to_dict()["stages"][0]
    assert stage["stage"] == "links" and stage["seeds"] == ["agro#0", "dow#0"]
    assert stage["linked"] == ["midland#0"]
    assert [h.chunk.id for h in follow([hit(c, "agro")], c, seeds=1, limit=1)] == ["dow#0"]
    assert follow([hit(c, "agro")], c, seeds=1, limit=0) == []
    # only the first `seeds` hits are followed
    assert follow([hit(c, "abc"), hit(c, "kaye")], c, seeds=1, limit=5)[0].chunk.id == "agro#0"


def test_links_reach_what_bm25_ranks_low():
    c = corpus()
    bm25 = BM25Retriever(c)
    question = "Which subsidiary is AgroSciences part of?"
    plain = [h.chunk.id for h in bm25.search(question, 2)]
    assert plain[0] == "agro#0" and "dow#0" not in plain
    linked = follow(bm25.search(question, 2), c, seeds=2, limit=1)
    assert [h.chunk.id for h in linked] == ["dow#0"]
