"""A corpus streamed from disk into an index whose chunks stay on disk (netcast.stored): it
searches like the in-memory corpus, reads JSONL, gzipped JSONL and folders, refuses bad input
in one line, and a failed or killed build never leaves a half-written index."""

import gzip
import json

import dspy
import pytest
from typer.testing import CliRunner

from data.registry import load_corpus, load_dataset
from helpers import ScriptedEngine
from netcast.cli.app import app
from netcast.errors import InputError
from netcast.indexing import build_index, build_stored_index
from netcast.models.factory import use_netcast_cache
from netcast.models.tokens import ApproxTokenCounter
from netcast.retrievers import load_index
from netcast.stored import StoredCorpus, iter_documents

COUNTER = ApproxTokenCounter()
QUESTIONS = [
    "Which magazine was started first, Arthur's Magazine or First for Women?",
    "The Oberoi family is part of a hotel company that has a head office in what city?",
    "Were Scott Derrickson and Ed Wood of the same nationality?",
    "What government position was held by the woman who portrayed Corliss Archer?",
]


def write_jsonl(path, records, opener=open):
    with opener(path, "wt") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    return path


@pytest.fixture(scope="module")
def sample_docs():
    _, docs = load_corpus("hotpotqa-sample")
    return [{"id": d.id, "title": d.title, "text": d.text} for d in docs]


def test_a_stored_index_searches_like_the_in_memory_one(tmp_path, sample_docs):
    path = write_jsonl(tmp_path / "docs.jsonl", sample_docs)
    stored, n_docs = build_stored_index(path, tmp_path / "idx", COUNTER)
    memory = build_index(list(iter_documents(path)), COUNTER)
    assert isinstance(stored.corpus, StoredCorpus) and n_docs == len(sample_docs)
    assert len(stored.corpus) == len(memory.corpus)
    assert stored.corpus.content_hash() == memory.corpus.content_hash()
    for question in QUESTIONS:
        mine, theirs = stored.search(question, 10), memory.search(question, 10)
        assert [h.chunk for h in mine] == [h.chunk for h in theirs]  # ids, texts, n_tokens
        assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], rel=1e-5)
    excluded = [h.chunk.id for h in memory.search(QUESTIONS[0], 3)]
    assert [h.chunk.id for h in stored.search(QUESTIONS[0], 5, exclude=excluded)] == [
        h.chunk.id for h in memory.search(QUESTIONS[0], 5, exclude=excluded)
    ]
    some = memory.corpus.chunks[123]
    assert stored.corpus[some.id] == some and stored.corpus.position[some.id] == 123
    assert stored.corpus.mean_tokens() == pytest.approx(memory.corpus.mean_tokens(), rel=0.05)
    reopened = load_index(tmp_path / "idx", expected_hash=memory.corpus.content_hash())
    assert reopened.search(QUESTIONS[1], 3)[0].chunk == memory.search(QUESTIONS[1], 3)[0].chunk


def test_gzipped_jsonl_and_folders_of_text_files(tmp_path):
    records = [{"title": "Ann", "text": "Ann plays the oboe."}, {"title": "Bo", "text": "Bo sang."}]
    plain = write_jsonl(tmp_path / "d.jsonl", records)
    zipped = write_jsonl(tmp_path / "d.jsonl.gz", records, gzip.open)
    assert [d.id for d in iter_documents(zipped)] == [d.id for d in iter_documents(plain)]
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "oboe.md").write_text("# Oboes\n\nThe oboe is a double-reed instrument.")
    (folder / "sub" / "flute.txt").write_text("The flute has no reed.")
    (folder / "empty.txt").write_text("  \n")  # no document
    (folder / "image.png").write_bytes(b"\x89PNG")  # not a text file: ignored
    docs = list(iter_documents(folder))
    assert [(d.id, d.title) for d in docs] == [("oboe.md", "oboe"), ("sub/flute.txt", "flute")]
    retriever, _ = build_stored_index(folder, tmp_path / "idx", COUNTER)
    assert [c.id for c in retriever.corpus] == ["oboe.md#0", "oboe.md#1", "sub/flute.txt#0"]
    assert retriever.search("reed flute", 1)[0].chunk.id == "sub/flute.txt#0"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("d.jsonl", b'{"title": "A", "text": "a b"}\n{"title": "B"\n', "d.jsonl:2: invalid JSON"),
        ("d.jsonl", b'{"text": "a b"}\n{"title": "B"}\n', "d.jsonl:2: field 'text' is missing"),
        ("d.jsonl", b'{"text": "a b"}\n\xff\xfe\n', "d.jsonl:2: not UTF-8 text (byte 0xff"),
        ("d.jsonl.gz", gzip.compress(b'{"text": "a b"}\n' * 50)[:40], "d.jsonl.gz:51: cannot read"),
        ("d.jsonl.gz", b'{"text": "a b"}\n', "d.jsonl.gz:1: cannot read (Not a gzipped file"),
        ("d.csv", b"title,text\n", "d.csv: give a .jsonl or .jsonl.gz file, or a folder"),
        ("d.jsonl", b"\n\n", "no documents"),
    ],
)
def test_bad_corpus_input_is_one_line_naming_file_and_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        build_stored_index(path, tmp_path / "idx", COUNTER)
    result = CliRunner().invoke(app, ["index", "--corpus", str(path), "--out", str(tmp_path / "i")])
    assert result.exit_code == 2 and message in result.output
    assert "Traceback" not in result.output


def test_a_binary_file_in_a_folder_corpus_is_named(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "bad.txt").write_bytes(b"caf\xe9 au lait")
    with pytest.raises(InputError, match=r"bad.txt: not UTF-8 text \(byte 0xe9 at offset 3\)"):
        list(iter_documents(tmp_path / "notes"))


def test_a_failed_build_leaves_the_previous_index_and_a_killed_one_is_cleaned(tmp_path):
    good = write_jsonl(tmp_path / "good.jsonl", [{"title": "A", "text": "alpha beta"}])
    out = tmp_path / "idx"
    build_stored_index(good, out, COUNTER)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"title": "B", "text": "gamma"}) + "\nnot json\n")
    with pytest.raises(InputError, match="bad.jsonl:2"):
        build_stored_index(bad, out, COUNTER)
    assert [c.text for c in load_index(out).corpus] == ["alpha beta"]  # the old index, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "good.jsonl", "idx"]
    killed = tmp_path / ".idx.k1ll3d"  # what a build killed outright leaves (atomic_directory)
    (killed / "bm25").mkdir(parents=True)
    build_stored_index(bad.parent / "good.jsonl", out, COUNTER)
    assert not killed.exists()


def test_the_index_command_shows_progress(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"title": "A", "text": "alpha beta"}] * 3)
    result = CliRunner().invoke(
        app, ["index", "--corpus", str(path), "--out", str(tmp_path / "idx"), "--model", "openai/x"]
    )
    assert result.exit_code == 0, result.output
    assert "reading documents" in result.output and "indexing chunks" in result.output
    assert "bm25 index of 1 chunks (1 documents" in result.output  # the repeats dropped


def test_a_qa_file_without_passages_is_answered_over_a_saved_index_gold_by_title(
    tmp_path, monkeypatch, sample_docs
):
    """evaluate --index: the QA file has no paragraphs; its gold evidence is named by title
    (supporting_titles) and measured against the index's documents with those titles."""
    build_stored_index(write_jsonl(tmp_path / "docs.jsonl", sample_docs), tmp_path / "idx", COUNTER)
    with open("data/samples/hotpotqa_dev300.jsonl") as handle:
        records = [json.loads(next(handle)) for _ in range(2)]
    for r in records:
        r.pop("paragraphs")
    qa = write_jsonl(tmp_path / "qa.jsonl", records)
    with pytest.raises(InputError, match="--index"):
        load_dataset(str(qa), "all")
    use_netcast_cache()
    engine = ScriptedEngine(lambda prompt: {"reasoning": "It says so.", "answer": "Paris"})
    lm = dspy.LM("scripted/fake", engine=engine, cache=False, num_retries=0)
    for where in ("netcast.models", "netcast.session", "netcast.optimize.workflow"):
        monkeypatch.setattr(f"{where}.make_lm", lambda *a, **k: lm)
    args = ["evaluate", "--dataset", str(qa), "--split", "all", "--index", str(tmp_path / "idx")]
    result = CliRunner().invoke(app, [*args, "--run-dir", str(tmp_path / "run")])
    dspy.configure(lm=None, adapter=None)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").open()]
    titles = {d["id"]: d["title"] for d in sample_docs}
    for row, record in zip(rows, records, strict=True):
        assert sorted(titles[g] for g in row["gold_ids"]) == sorted(record["supporting_titles"])
        assert row["scores"]["recall"] is not None
    assert len(engine.prompts) == 2


def test_compile_tune_bench_and_rerank_check_take_a_saved_index(tmp_path, monkeypatch, sample_docs):
    """Every command that retrieves takes --index: a QA file without passages is compiled,
    tuned, benched and rerank-checked against the saved index, gold evidence by title."""
    idx = tmp_path / "idx"
    build_stored_index(write_jsonl(tmp_path / "docs.jsonl", sample_docs), idx, COUNTER)
    with open("data/samples/hotpotqa_dev300.jsonl") as handle:
        records = [json.loads(next(handle)) for _ in range(12)]
    for r in records:
        r.pop("paragraphs")
    qa = str(write_jsonl(tmp_path / "qa.jsonl", records))
    use_netcast_cache()
    engine = ScriptedEngine(lambda prompt: {"reasoning": "It says so.", "answer": "Paris"})
    lm = dspy.LM("scripted/fake", engine=engine, cache=False, num_retries=0)
    for where in ("netcast.models", "netcast.session", "netcast.optimize.workflow"):
        monkeypatch.setattr(f"{where}.make_lm", lambda *a, **k: lm)

    def run(*args):
        result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result

    art = tmp_path / "art"
    run(
        "compile", "--program", "basic", "--dataset", qa, "--index", idx, "--train-limit", 3,
        "--dev-limit", 2, "--out", art,
    )  # fmt: skip
    recipe = json.loads((art / "recipe.json").read_text())
    assert recipe["retriever"]["saved_index"] == str(idx.resolve())
    run(
        "tune", "--program", "basic", "--dataset", qa, "--index", idx, "--trials", 1,
        "--train-limit", 2, "--dev-limit", 2, "--storage", f"sqlite:///{tmp_path / 't.db'}",
    )  # fmt: skip
    run(
        "bench", "--programs", "basic", "--compiled", art, "--datasets", qa, "--index", idx,
        "--split", "all", "--limit", 2, "--run-dir", tmp_path / "b",
    )  # fmt: skip
    benched = [
        json.loads(x) for x in (tmp_path / "b" / "qa" / "basic" / "predictions.jsonl").open()
    ]
    assert len(benched) == 2 and all(
        r["gold_ids"] and r["scores"]["recall"] is not None for r in benched
    )
    checked = run(
        "rerank-check", "--dataset", qa, "--index", idx, "--split", "all", "--limit", 3,
        "--signals", "retriever",
    )  # fmt: skip
    assert "retriever" in checked.output
    dspy.configure(lm=None, adapter=None)
