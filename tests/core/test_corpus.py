import json
from itertools import pairwise

import pytest

from netcast.corpus import (
    Corpus,
    Document,
    chunk_documents,
    doc_id_for,
    doc_id_of_chunk,
    documents_from_dataset,
    load_documents,
    split_windows,
)
from netcast.errors import InputError, NetcastWarning


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


def test_load_documents_keeps_meta_and_derives_stable_ids(tmp_path):
    path = write_lines(
        tmp_path / "docs.jsonl",
        [
            json.dumps({"title": "A", "text": "alpha text", "meta": {"year": 1999}}),
            "",
            json.dumps({"id": "own-id", "title": "B", "text": "beta text"}),
        ],
    )
    docs = load_documents(path)
    assert [d.id for d in docs] == [doc_id_for("A", "alpha text"), "own-id"]
    assert docs[0].meta == {"year": 1999}
    assert doc_id_for("A", "alpha text") == doc_id_for("A", "alpha text")
    assert doc_id_for("A", "alpha text") != doc_id_for("A", "alpha text!")


def test_load_documents_keeps_a_repeated_document_once_and_says_so(tmp_path):
    line = json.dumps({"title": "A", "text": "same"})
    with pytest.warns(NetcastWarning, match=r"d.jsonl: 1 repeated document\(s\)"):
        assert len(load_documents(write_lines(tmp_path / "d.jsonl", [line, line]))) == 1


def test_a_repeated_own_id_keeps_the_document_only_when_it_is_the_same(tmp_path):
    same = json.dumps({"id": "x", "title": "A", "text": "t", "meta": {"k": 1}})
    other_meta = json.dumps({"id": "x", "title": "A", "text": "t", "meta": {"k": 2}})
    with pytest.warns(NetcastWarning):
        assert len(load_documents(write_lines(tmp_path / "d.jsonl", [same, same]))) == 1
    with pytest.raises(InputError, match="d.jsonl:2: field 'id' 'x' repeats line 1 with another"):
        load_documents(write_lines(tmp_path / "d.jsonl", [same, other_meta]))
    # without ids, a document is its title and text: the same twice is one document
    plain = [json.dumps({"title": "A", "text": "t", "meta": {"k": k}}) for k in (1, 2)]
    with pytest.warns(NetcastWarning):
        assert len(load_documents(write_lines(tmp_path / "d.jsonl", plain))) == 1


def test_documents_from_a_dataset_are_checked_the_same_way():
    rows = [{"id": "1", "title": "A", "text": "a"}, {"id": "1", "title": "B", "text": "b"}]
    with pytest.raises(InputError, match="the dataset row 1: field 'id' '1' repeats row 0"):
        documents_from_dataset(rows)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"title": "A", "text": ', "d.jsonl:2: invalid JSON"),
        ('{"title": "A"}', "d.jsonl:2: field 'text' is missing"),
        ('{"title": "A", "text": "x", "meta": [1]}', "d.jsonl:2: field 'meta' must be an object"),
        ('{"title": 3, "text": "x"}', "d.jsonl:2: field 'title' must be a string"),
        ("[1, 2]", "d.jsonl:2: expected a JSON object"),
    ],
)
def test_bad_document_lines_name_file_line_and_field(tmp_path, line, message):
    path = write_lines(tmp_path / "d.jsonl", [json.dumps({"text": "fine"}), line])
    with pytest.raises(InputError, match=message):
        load_documents(path)


def test_empty_and_missing_files_are_clear_errors(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(InputError, match="empty.jsonl: no documents"):
        load_documents(empty)
    with pytest.raises(InputError, match="file not found"):
        load_documents(tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match="empty corpus"):
        Corpus([])


def test_paragraph_chunks_have_stable_ids_counts_and_meta(word_counter):
    doc = Document("doc1", "T", "first para here\n\nsecond one\n  \nthird", {"region": "EU"})
    chunks = chunk_documents([doc], word_counter)
    assert [c.id for c in chunks] == ["doc1#0", "doc1#1", "doc1#2"]
    assert [c.text for c in chunks] == ["first para here", "second one", "third"]
    assert [c.n_tokens for c in chunks] == [4, 3, 2]  # "T: " prefix counts one word
    assert all(c.meta == {"region": "EU"} and c.doc_id == "doc1" for c in chunks)
    assert doc_id_of_chunk("doc#with#hash#3") == "doc#with#hash"


def test_windows_respect_size_and_overlap_and_cover_the_text(word_counter):
    words = [f"w{i}" for i in range(23)]
    windows = split_windows(" ".join(words), word_counter, size=8, overlap=3)
    assert all(len(w.split()) <= 8 for w in windows)
    for a, b in pairwise(windows):
        assert a.split()[-3:] == b.split()[:3]
    covered = [w for window in windows for w in window.split()]
    assert set(covered) == set(words) and covered[-1] == "w22"
    with pytest.raises(ValueError):
        split_windows("a b", word_counter, size=4, overlap=4)


def test_window_chunking_mode_and_unknown_mode(word_counter):
    doc = Document("d", "", " ".join(["x"] * 30))
    chunks = chunk_documents([doc], word_counter, mode="window", window=10, overlap=2)
    assert len(chunks) == 4 and chunks[-1].id == "d#3"
    with pytest.raises(InputError, match="unknown chunking mode"):
        chunk_documents([doc], word_counter, mode="sentences")


def test_corpus_round_trip_and_content_hash(tmp_path, tiny_corpus):
    tiny_corpus.save(tmp_path / "chunks.jsonl")
    loaded = Corpus.load(tmp_path / "chunks.jsonl")
    assert loaded.content_hash() == tiny_corpus.content_hash()
    assert loaded["paris#0"].text == tiny_corpus["paris#0"].text
    changed = Corpus([*tiny_corpus.chunks[:-1]])
    assert changed.content_hash() != tiny_corpus.content_hash()
    with pytest.raises(InputError, match="repeated chunk ids"):
        Corpus([tiny_corpus.chunks[0], tiny_corpus.chunks[0]])


def test_documents_from_a_datasets_dataset():
    import datasets

    rows = datasets.Dataset.from_list(
        [
            {"name": "A", "body": "alpha text", "meta": {"year": 2001}},
            {"name": "B", "body": "beta text", "meta": {"year": 2002}},
        ]
    )
    docs = documents_from_dataset(rows, title_field="name", text_field="body")
    assert [(d.title, d.text, d.meta["year"]) for d in docs] == [
        ("A", "alpha text", 2001),
        ("B", "beta text", 2002),
    ]
    with pytest.raises(InputError, match="row 0: field 'text'"):
        documents_from_dataset([{"title": "x"}])


def test_a_non_utf8_line_is_named_with_its_byte(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"text": "fine"}\n{"text": "caf\xe9"}\n')  # Latin-1, not UTF-8
    with pytest.raises(InputError, match=r"d.jsonl:2: not UTF-8 text \(byte 0xe9 at column 14\)"):
        load_documents(path)
