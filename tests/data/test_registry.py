import json

import pytest

from netcast.data import load_dataset
from netcast.data.registry import in_dev
from netcast.errors import InputError


def test_hotpotqa_sample_splits_and_gold_ids_in_corpus():
    dev = load_dataset("hotpotqa-sample", "dev")
    train = load_dataset("hotpotqa-sample", "train")
    assert len(dev.examples) == 300 and len(train.examples) == 100
    corpus_ids = {d.id for d in dev.documents}
    assert 3000 < len(corpus_ids) < 5000
    assert all(ex.gold_ids and set(ex.gold_ids) <= corpus_ids for ex in dev.examples)
    assert {d.id for d in train.documents} == corpus_ids  # one pooled corpus for both splits
    ex = dev.examples[0]
    assert set(ex.inputs().keys()) == {"question"} and ex.answers and ex.id


def test_musique_sample_split_is_deterministic_and_disjoint():
    dev = load_dataset("musique-sample", "dev")
    train = load_dataset("musique-sample", "train")
    dev_ids = {e.id for e in dev.examples}
    assert not dev_ids & {e.id for e in train.examples}
    assert len(dev.examples) + len(train.examples) == 100
    assert dev_ids == {e.id for e in load_dataset("musique-sample", "dev").examples}
    assert all(in_dev(i) for i in dev_ids)


def test_the_training_sample_holds_no_dev_question_and_retrieves_over_its_own_pool():
    """hotpotqa-train (the 1,003 bundled HotpotQA training questions) shares no id and no
    question with the dev questions of hotpotqa-sample / hotpotqa-wide; its pool is its own
    questions' paragraphs (not the dev pool); hotpotqa-wide's dev pool did not grow."""
    import json

    from netcast.data.registry import load_corpus, sample_path

    train = load_dataset("hotpotqa-train", "all")
    dev = load_dataset("hotpotqa-wide", "dev")
    assert len(train.examples) == 1003
    assert not {e.id for e in train.examples} & {e.id for e in dev.examples}
    assert not {e.question for e in train.examples} & {e.question for e in dev.examples}
    own = set()
    for name in ("hotpotqa_train100.jsonl", "hotpotqa_train903.jsonl"):
        for line in sample_path(name).read_text().splitlines():
            own |= {(p["title"], p["text"]) for p in json.loads(line)["paragraphs"]}
    pool = {(d.title, d.text) for d in train.documents}
    assert pool == own and train.corpus_name != dev.corpus_name
    assert all(
        ex.gold_ids and set(ex.gold_ids) <= {d.id for d in train.documents} for ex in train.examples
    )
    assert len(load_corpus("hotpotqa-wide")[1]) == 5855  # the dev pool every dev row ran on


@pytest.mark.parametrize("name, dev_size", [("hotpotqa-train", 98), ("2wiki-sample", 96)])
def test_hash_split_samples_split_by_their_own_share_disjointly(name, dev_size):
    """A validation fold of hotpotqa-train (10%) and 2wiki-sample's dev split (20%, a transfer
    check): by a hash of the id, the same every time, disjoint, together the whole sample."""
    from netcast.data.registry import SAMPLE_DEV_PERCENT

    train, dev = load_dataset(name, "train"), load_dataset(name, "dev")
    everything = load_dataset(name, "all")
    dev_ids = {e.id for e in dev.examples}
    assert len(dev_ids) == dev_size and not dev_ids & {e.id for e in train.examples}
    assert len(train.examples) + len(dev_ids) == len(everything.examples)
    assert all(in_dev(i, SAMPLE_DEV_PERCENT[name]) for i in dev_ids)


def test_limit_keeps_the_first_questions():
    limited = load_dataset("hotpotqa-sample", "dev", limit=5)
    full = load_dataset("hotpotqa-sample", "dev")
    assert [e.id for e in limited.examples] == [e.id for e in full.examples[:5]]


def test_a_part_of_a_split_is_its_questions_in_order_then_the_limit():
    """``train[100:300]`` as Hugging Face datasets slices a split: a training run in stages
    takes the questions an earlier stage did not."""
    full = [e.id for e in load_dataset("hotpotqa-sample", "train").examples]
    part = load_dataset("hotpotqa-sample", "train[10:30]")
    assert [e.id for e in part.examples] == full[10:30] and part.split == "train[10:30]"
    tail = load_dataset("hotpotqa-sample", "train[90:]", limit=5)
    assert [e.id for e in tail.examples] == full[90:95]
    head = load_dataset("hotpotqa-sample", "train[:3]")
    assert [e.id for e in head.examples] == full[:3]
    with pytest.raises(InputError, match=r"split 'train\[5:5\]': its part is empty"):
        load_dataset("hotpotqa-sample", "train[5:5]")
    with pytest.raises(InputError, match=r"unknown split 'train\[a:\]'"):
        load_dataset("hotpotqa-sample", "train[a:]")


def test_unknown_dataset_and_split_are_clear_errors():
    with pytest.raises(InputError, match="unknown dataset 'hotpot'.*hotpotqa-sample"):
        load_dataset("hotpot")
    with pytest.raises(InputError, match="unknown split 'test'"):
        load_dataset("hotpotqa-sample", "test")


def record(**overrides):
    base = {
        "id": "q1",
        "question": "Who?",
        "answers": ["Ann"],
        "paragraphs": [{"title": "T", "text": "Ann did.", "is_supporting": True}],
    }
    return json.dumps({**base, **overrides})


def test_local_jsonl_dataset(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(record(id=f"q{i}") for i in range(10)) + "\n")
    ds = load_dataset(str(path), "all")
    assert len(ds.examples) == 10 and len(ds.documents) == 1
    assert ds.examples[0].gold_ids == [ds.documents[0].id]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "q2", "question": ', "bad.jsonl:2: invalid JSON"),
        (record(answers="Ann"), "bad.jsonl:2: field 'answers' must be a list of strings"),
        (json.dumps({"id": "q2", "answers": []}), "bad.jsonl:2: missing field 'question'"),
        (record(paragraphs=[{"title": "T"}]), r"bad.jsonl:2: paragraphs\[0\] needs"),
        (record(answers=[]), r"bad.jsonl:2: field 'answers' is empty"),
        (record(answers=["  "]), r"bad.jsonl:2: field 'answers' is empty"),
        (record(), r"bad.jsonl:2: field 'id' 'q1' repeats line 1"),
    ],
)
def test_bad_dataset_lines_name_file_line_and_field(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(record() + "\n" + line + "\n")
    with pytest.raises(InputError, match=message):
        load_dataset(str(path), "all")


def test_dataset_without_passages_needs_a_corpus(tmp_path):
    path = tmp_path / "open.jsonl"
    path.write_text(record(paragraphs=[]) + "\n")
    with pytest.raises(InputError, match="--corpus"):
        load_dataset(str(path), "all")
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"title": "Ann", "text": "Ann did it."}) + "\n")
    assert len(load_dataset(str(path), "all", corpus=docs).documents) == 1


def test_a_dataset_whose_paragraphs_are_all_blank_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "blank.jsonl"
    blank = [{"title": "Ann", "text": "   "}, {"title": "Bob", "text": "\n"}]
    path.write_text(record(paragraphs=blank) + "\n")
    with pytest.raises(InputError) as refused:
        load_dataset(str(path), "all")
    assert str(refused.value).startswith(f"dataset '{path}' has no passages of its own")


def hub_record(rid, question, supporting, other):
    return {
        "id": rid,
        "question": question,
        "answers": ["x"],
        "paragraphs": [
            {"title": supporting[0], "text": supporting[1], "is_supporting": True},
            {"title": other[0], "text": other[1], "is_supporting": False},
        ],
    }


HUB_SPLITS = {
    "train": [
        hub_record("t1", "Where is Alpha?", ("Alpha", "Alpha lies north."), ("Beta", "Beta is a.")),
        hub_record("t2", "Where is Gamma?", ("Gamma", "Gamma lies east."), ("Beta", "Beta is a.")),
    ],
    "dev": [
        hub_record("d1", "Where is Delta?", ("Delta", "Delta lies south."), ("Alpha", "Alpha.")),
    ],
}


@pytest.fixture
def fake_hub(monkeypatch):
    """A hub benchmark whose splits hold different records (no network)."""
    calls = []

    def load_hub_records(name, split, limit=None):
        calls.append((name, split, limit))
        return HUB_SPLITS[split][:limit] if limit else list(HUB_SPLITS[split])

    monkeypatch.setattr("netcast.data.registry.load_hub_records", load_hub_records)
    return calls


def test_every_split_of_a_hub_dataset_searches_one_corpus(fake_hub, word_counter):
    from netcast.session import open_retriever

    train = load_dataset("hotpotqa", "train", limit=1)
    dev = load_dataset("hotpotqa", "dev", limit=1)
    assert [e.id for e in train.examples] == ["t1"] and [e.id for e in dev.examples] == ["d1"]
    titles = {d.title for d in train.documents}
    assert titles == {"Alpha", "Beta", "Gamma", "Delta"}  # train and dev pooled, in full
    assert [d.id for d in train.documents] == [d.id for d in dev.documents]
    assert train.corpus_name == dev.corpus_name == "hotpotqa"
    index = open_retriever(train, counter=word_counter)
    indexed = {chunk.doc_id for chunk in index.corpus}
    assert dev.examples[0].gold_ids and set(dev.examples[0].gold_ids) <= indexed
    assert open_retriever(dev, counter=word_counter).corpus.content_hash() == (
        index.corpus.content_hash()
    )


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_below_one_is_refused(limit):
    message = f"limit must be a positive number of questions, got {limit}"
    with pytest.raises(InputError, match=message):
        load_dataset("hotpotqa-sample", "dev", limit=limit)


def test_a_directory_is_refused_as_a_dataset(tmp_path):
    with pytest.raises(InputError) as err:
        load_dataset(str(tmp_path), "all")
    assert "is a directory" in str(err.value) and "\n" not in str(err.value)


def test_hotpotqa_wide_asks_the_sample_questions_over_every_bundled_paragraph():
    wide = load_dataset("hotpotqa-wide", "dev", limit=5)
    sample = load_dataset("hotpotqa-sample", "dev", limit=5)
    musique = load_dataset("musique-sample", "all")
    assert [e.id for e in wide.examples] == [e.id for e in sample.examples]
    ids = {d.id for d in wide.documents}
    assert {d.id for d in sample.documents} <= ids and {d.id for d in musique.documents} <= ids
    assert len(ids) == len(wide.documents) > 5000


def test_examples_carry_their_annotations():
    hotpot = load_dataset("hotpotqa-sample", "train", limit=1).examples[0]
    assert hotpot.question == "If Gallu is a demon Lilu is what?"
    assert [p["title"] for p in hotpot.gold_passages] == ["Lilu (mythology)", "Alû"]
    assert hotpot.gold_ids == [p["id"] for p in hotpot.gold_passages]
    facts = {p["title"]: p["facts"] for p in hotpot.gold_passages}
    assert facts == {"Alû": [3], "Lilu (mythology)": [0]}  # supporting_facts sentence indices
    hops = load_dataset("musique-sample", "all", limit=1).examples[0].hops
    assert hops[0] == {
        "question": "What company published Journal of Psychotherapy Integration?",
        "answer": "American Psychological Association",
    }
