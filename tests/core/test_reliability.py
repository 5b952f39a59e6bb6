"""What a user gets for each kind of bad input and fault (docs/reliability.md names these
tests row by row): one line on stderr naming the file, line or field (exit 2 for bad input,
1 for a failed model call, 130 for an interrupt), never a traceback; a corpus never loses a
document without saying so; a model call never waits without end."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from helpers_server import free_port
from typer.testing import CliRunner

from helpers import capitals_file, distracted
from netcast.cli.app import app
from netcast.errors import InputError

runner = CliRunner()


def cli(*args, env=None):
    return runner.invoke(app, [str(a) for a in args], env=env)


def one_line(result, code: int, *parts: str) -> str:
    """The command printed one ``error:`` line holding ``parts`` on stderr and nothing on
    stdout (but DSPy's progress bar), and exited with ``code``."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: "), result.output
    shown = [line for line in result.stdout.splitlines() if line.strip() and not progress(line)]
    assert shown == [], result.output
    for part in parts:
        assert part in lines[0], result.output
    return lines[0]


def progress(line: str) -> bool:
    """A fragment of DSPy's progress bar (tqdm), which runs on stderr while questions do."""
    return "it/s]" in line or "s/it]" in line


def write_docs(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def scripted(monkeypatch, scripted_lm, script=distracted):
    """The command line's model: a scripted one (no model runs)."""
    lm, engine = scripted_lm(script)
    monkeypatch.setattr(sys.modules["netcast.cli.options"], "command_lm", lambda *a, **k: lm)
    return lm, engine


# --- index directories: every file inside ---------------------------------------------------


def cut(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: max(1, len(data) // 2)])


def other_array(path: Path) -> None:
    np.save(path, np.arange(3, dtype=np.int64)[::-1].copy())  # parses: the wrong array


def written(text: str):
    return lambda path: path.write_text(text)


def replaced(old: str, new: str):
    def damage(path: Path) -> None:
        assert old in path.read_text()
        path.write_text(path.read_text().replace(old, new))

    return damage


DAMAGE = {"cut": cut, "deleted": Path.unlink}


@pytest.fixture(scope="module")
def stored_index(tmp_path_factory):
    """A disk-backed BM25 index (netcast index --corpus) of 12 documents."""
    from netcast.indexing import build_stored_index
    from netcast.models.tokens import ApproxTokenCounter

    root = tmp_path_factory.mktemp("stored")
    docs = write_docs(
        root / "docs.jsonl",
        [{"title": f"T{i}", "text": f"passage {i} about topic {i % 3}"} for i in range(12)],
    )
    build_stored_index(docs, root / "idx", ApproxTokenCounter())
    return root / "idx"


@pytest.fixture(scope="module")
def dense_index(tmp_path_factory):
    """A dense index of the tiny corpus over fixed vectors (no encoder needed to build it)."""
    from helpers import DOCS, WordCounter
    from netcast.corpus import Corpus
    from netcast.retrievers.dense import DIM, DenseRetriever
    from netcast.retrievers.store import save_index

    corpus = Corpus.from_documents(DOCS, WordCounter())
    vectors = np.random.default_rng(0).normal(size=(len(corpus), DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    root = tmp_path_factory.mktemp("dense")
    save_index(DenseRetriever(corpus, vectors=vectors), root / "idx")
    return root / "idx"


def damaged_copy(source: Path, tmp_path: Path, name: str, damage) -> Path:
    import shutil

    target = tmp_path / "idx"
    shutil.copytree(source, target)
    damage(target / name)
    return target


def evaluate_on(index: Path):
    return cli("evaluate", "--index", index, "--model", "openai/x", "--limit", 1)


BM25_FILES = [
    "bm25/data.csc.index.npy",
    "bm25/indices.csc.index.npy",
    "bm25/indptr.csc.index.npy",
    "bm25/vocab.index.json",
    "bm25/params.index.json",
]


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("name", [*BM25_FILES, "chunks.arrow", "index.json"])
def test_a_damaged_file_of_an_index_directory_is_one_line_naming_it(
    stored_index, tmp_path, name, damage
):
    index = damaged_copy(stored_index, tmp_path, name, DAMAGE[damage])
    shown = "chunks" if name == "chunks.arrow" and damage == "deleted" else Path(name).name
    one_line(evaluate_on(index), 2, shown)


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("bm25/data.csc.index.npy", other_array),
        ("bm25/indices.csc.index.npy", other_array),
        ("bm25/indptr.csc.index.npy", other_array),
        ("bm25/vocab.index.json", written("[1, 2]")),
        ("bm25/vocab.index.json", written('{"a": "zero"}')),
        ("bm25/params.index.json", written('{"k1": "high"}')),
        ("bm25/params.index.json", replaced('"num_docs": 12', '"num_docs": 99')),
        ("index.json", written("[]")),
        ("index.json", replaced('"bm25"', "5")),
        ("index.json", replaced('"n_chunks": 12', '"n_chunks": 13')),
        ("chunks.arrow", lambda p: _arrow(p, {"x": ["a"]})),
    ],
)  # fmt: skip
def test_an_index_file_that_parses_but_has_the_wrong_shape_is_one_line_naming_it(
    stored_index, tmp_path, name, damage
):
    index = damaged_copy(stored_index, tmp_path, name, damage)
    one_line(evaluate_on(index), 2, Path(name).name)


def _arrow(path: Path, columns: dict) -> None:
    import pyarrow as pa

    table = pa.table(columns)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


@pytest.mark.parametrize(
    "damage",
    [cut, Path.unlink, written('{"id": "x#0", "text": 5}\n'), written("[]\n")],
)  # fmt: skip
def test_a_damaged_chunks_file_of_an_in_memory_index_is_one_line(tmp_path, tiny_corpus, damage):
    from netcast.retrievers.store import build_retriever, save_index

    index = save_index(build_retriever(tiny_corpus, "bm25"), tmp_path / "idx")
    damage(index / "chunks.jsonl")
    one_line(evaluate_on(index), 2, "chunks")


@pytest.mark.parametrize(
    "damage",
    [cut, Path.unlink, lambda p: p.write_bytes(b"not a faiss index at all")],
)
def test_a_damaged_dense_index_file_is_one_line_naming_it(dense_index, tmp_path, damage):
    index = damaged_copy(dense_index, tmp_path, "dense.faiss", damage)
    one_line(evaluate_on(index), 2, "dense.faiss")


def test_a_dense_index_of_another_corpus_is_one_line(dense_index, stored_index, tmp_path):
    import shutil

    index = damaged_copy(stored_index, tmp_path, "index.json", lambda p: None)
    shutil.copyfile(dense_index / "dense.faiss", index / "dense.faiss")
    info = json.loads((index / "index.json").read_text())
    (index / "index.json").write_text(json.dumps({**info, "kind": "dense"}))
    one_line(evaluate_on(index), 2, "dense.faiss", "6 vectors", "12 chunks")


# --- corpus files: no document lost without a word ------------------------------------------


def test_corpus_ids_that_repeat_for_different_documents_are_refused_naming_the_lines(tmp_path):
    from netcast.corpus import load_documents

    docs = [{"id": f"d{i % 5}", "title": f"Title {i}", "text": f"text {i}"} for i in range(30)]
    path = write_docs(tmp_path / "docs.jsonl", docs)
    message = "docs.jsonl:6: field 'id' 'd0' repeats line 1 with another document"
    with pytest.raises(InputError, match=message):
        load_documents(path)
    one_line(cli("index", "--corpus", path, "--out", tmp_path / "idx"), 2, message)
    assert not (tmp_path / "idx").exists()


def test_a_document_repeated_exactly_is_indexed_once_and_the_user_is_told(tmp_path):
    from netcast.corpus import load_documents

    docs = [{"title": f"Title {i % 4}", "text": f"text {i % 4}"} for i in range(10)]
    path = write_docs(tmp_path / "docs.jsonl", docs)
    with pytest.warns(UserWarning, match="docs.jsonl: 6 repeated document"):
        assert len(load_documents(path)) == 4
    result = cli("index", "--corpus", path, "--out", tmp_path / "idx", "--model", "openai/x")
    assert result.exit_code == 0, result.output
    assert "warning: " in result.output and "6 repeated document(s)" in result.output
    assert "(4 documents" in result.output


# --- output paths ---------------------------------------------------------------------------


def test_index_out_naming_an_existing_file_or_a_foreign_folder_is_one_line(tmp_path):
    docs = write_docs(tmp_path / "docs.jsonl", [{"title": "A", "text": "alpha beta"}])
    afile = tmp_path / "notes.txt"
    afile.write_text("keep me")
    one_line(cli("index", "--corpus", docs, "--out", afile), 2, "notes.txt", "not a directory")
    assert afile.read_text() == "keep me"
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "draft.md").write_text("keep me too")
    one_line(cli("index", "--corpus", docs, "--out", folder), 2, "papers", "not a netcast index")
    assert (folder / "draft.md").read_text() == "keep me too"
    inside = afile / "idx"
    one_line(cli("index", "--corpus", docs, "--out", inside), 2, "notes.txt")
    dataset_built = cli("index", "--dataset", "hotpotqa-sample", "--out", afile)
    one_line(dataset_built, 2, "notes.txt", "not a directory")


def test_an_artifact_out_naming_an_existing_file_is_refused(tmp_path, bm25):
    from netcast.artifacts import save_artifact
    from netcast.optimize.workflow import make_recipe
    from netcast.programs import BasicRAG

    afile = tmp_path / "artifact"
    afile.write_text("keep me")
    recipe = make_recipe(program="basic", knobs={}, dataset="hotpotqa-sample")
    with pytest.raises(InputError, match="artifact: exists and is not a directory"):
        save_artifact(afile, BasicRAG(bm25), recipe, {})
    assert afile.read_text() == "keep me"


# --- option values --------------------------------------------------------------------------

MODEL_COMMANDS = {
    "evaluate": ["evaluate"],
    "ask": ["ask", "a question"],
    "compile": ["compile", "--out", "art"],
    "tune": ["tune"],
    "bench": ["bench"],
    "rerank-check": ["rerank-check", "--dataset", "hotpotqa-sample"],
}


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--retries", "-1", "--retries"),
        ("--timeout", "0", "--timeout"),
        ("--timeout", "soon", "--timeout"),
    ],
)
@pytest.mark.parametrize("command", list(MODEL_COMMANDS))
def test_an_out_of_range_option_is_one_line_before_anything_runs(
    monkeypatch, tmp_path, command, option, value, message
):
    monkeypatch.chdir(tmp_path)
    result = cli(*MODEL_COMMANDS[command], "--model", "openai/x", option, value)
    one_line(result, 2, message, f"netcast {command} --help")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "parts"),
    [
        (["--model", "embeded"], ["unknown model 'embeded'", "did you mean 'embedded'?"]),
        (["--model", "embedded-1.5"], ["unknown model 'embedded-1.5'", "'embedded-1.5b'"]),
        (["--model", "foo/bar"], ["unknown model 'foo/bar'", "provider"]),
        (["--model", "openai/x", "--api-base", "localhost:8000"], ["'localhost:8000'", "http"]),
        (["--model", "openai/x", "--api-base", "http://"], ["'http://'", "http"]),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", ["evaluate", "ask", "compile", "bench"])
def test_a_model_name_or_endpoint_that_cannot_work_is_one_line_before_any_question(
    monkeypatch, tmp_path, command, args, parts
):
    monkeypatch.chdir(tmp_path)
    result = cli(*MODEL_COMMANDS[command], *args, env={"OPENAI_API_KEY": "none"})
    line = one_line(result, 2, *parts)
    assert "resume" not in line
    assert list(tmp_path.iterdir()) == []


def test_make_lm_checks_the_name_endpoint_retries_and_timeout():
    from netcast.models import make_lm
    from netcast.models.factory import DEFAULT_TIMEOUT

    assert make_lm("openai/x").kwargs["timeout"] == DEFAULT_TIMEOUT
    assert make_lm("openai/x", timeout=5).kwargs["timeout"] == 5
    for bad, message in [
        ({"model": "qwen"}, "unknown model 'qwen'"),
        ({"model": "openai/x", "api_base": "ftp://host/v1"}, "'ftp://host/v1'"),
        ({"model": "openai/x", "api_base": ["http://a:1/v1", "b:2"]}, "'b:2'"),
        ({"model": "openai/x", "num_retries": -1}, "retries"),
        ({"model": "openai/x", "timeout": 0}, "timeout"),
    ]:
        with pytest.raises(InputError, match=message):
            make_lm(**bad)


# --- endpoints ------------------------------------------------------------------------------


def test_ask_against_an_unreachable_endpoint_is_one_line(tmp_path):
    base = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    result = cli(
        "ask", "Where is the Louvre?", "--model", "openai/x", "--api-base", base, "--retries", 0,
        env={"OPENAI_API_KEY": "none"},
    )  # fmt: skip
    one_line(result, 1, "openai/x", "127.0.0.1")


def test_evaluate_against_an_unreachable_endpoint_prints_only_its_own_line(tmp_path):
    """As a user runs it (a process of its own): no library log line, no empty table, no path
    to a predictions file that was never written."""
    base = f"http://127.0.0.1:{free_port()}/v1"
    args = ["evaluate", "--model", "openai/x", "--api-base", base, "--retries", "0"]
    args += ["--limit", "2", "--max-errors", "0", "--run-dir", str(tmp_path / "r")]
    env = {**os.environ, "OPENAI_API_KEY": "none", "OPENAI_API_BASE": ""}
    done = subprocess.run(
        [sys.executable, "-m", "netcast", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    output = done.stdout + done.stderr
    lines = [line for line in output.splitlines() if line.strip() and not progress(line)]
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    assert "failed calling" in lines[0] and "run the same command again to resume" in lines[0]


class SilentServer:
    """Accepts connections and never answers (a hung model server)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self):
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent_server():
    server = SilentServer()
    yield server
    server.close()


def test_a_server_that_never_answers_fails_the_question_after_the_timeout(silent_server, tmp_path):
    base = f"http://127.0.0.1:{silent_server.port}/v1"
    start = time.monotonic()
    result = cli(
        "evaluate", "--model", "openai/x", "--api-base", base, "--retries", 0, "--timeout", 1,
        "--limit", 2, "--max-errors", 0, "--run-dir", tmp_path / "r",
        env={"OPENAI_API_KEY": "none"},
    )  # fmt: skip
    assert time.monotonic() - start < 60
    line = one_line(result, 1, "failed calling", "run the same command again to resume")
    assert "timed out" in line or "timeout" in line
    assert (tmp_path / "r" / "run.json").exists()


# --- Optuna storages ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("storage", "parts"),
    [
        ("foo://somewhere/db", ["foo://somewhere/db"]),
        ("not a url", ["not a url"]),
        (
            "postgresql+psycopg://me:secret@127.0.0.1:{port}/netcast",
            ["postgresql+psycopg://me:***@127.0.0.1:{port}/netcast", "cannot connect"],
        ),
        ("sqlite:///{tmp}/README.md", ["README.md"]),
    ],
)
def test_a_storage_that_cannot_be_opened_is_one_line_before_any_question(
    monkeypatch, scripted_lm, tmp_path, storage, parts
):
    _, engine = scripted(monkeypatch, scripted_lm)
    port = free_port()
    (tmp_path / "README.md").write_text("# not a database\n" * 200)
    storage = storage.format(port=port, tmp=tmp_path)
    dataset = capitals_file(tmp_path / "capitals.jsonl", 6)
    result = cli(
        "tune", "--dataset", dataset, "--trials", 1, "--train-limit", 2, "--dev-limit", 2,
        "--storage", storage, "--model", "scripted/fake",
    )  # fmt: skip
    line = one_line(result, 2, *[p.format(port=port) for p in parts])
    assert "secret" not in line
    assert engine.prompts == []


# --- artifacts ------------------------------------------------------------------------------


@pytest.fixture
def artifact(tmp_path, bm25):
    from netcast.artifacts import save_artifact
    from netcast.optimize.workflow import make_recipe
    from netcast.programs import BasicRAG

    recipe = make_recipe(program="basic", knobs={"top_k": 2}, dataset="hotpotqa-sample")
    return save_artifact(tmp_path / "art", BasicRAG(bm25), recipe, {"before": None, "after": None})


def edit_json(path: Path, change) -> None:
    value = json.loads(path.read_text())
    path.write_text(json.dumps(change(value)))


ARTIFACT_DAMAGE = {
    "program.json is {'answer': 5}": ("program.json", lambda v: {"answer": 5}, "'answer'"),
    "a predictor's demos not a list": (
        "program.json",
        lambda v: {**v, "answer": {**v["answer"], "demos": 5}},
        "demos",
    ),
    "knobs a string": ("recipe.json", lambda v: {**v, "knobs": "top_k=3"}, "'knobs'"),
    "model a string": ("recipe.json", lambda v: {**v, "model": "embedded"}, "'model'"),
    "retriever kind unknown": (
        "recipe.json",
        lambda v: {**v, "retriever": {"kind": "splade"}},
        "'retriever.kind'",
    ),
    "scores a list": ("scores.json", lambda v: [1, 2], "should be an object"),
    "lineage a string": ("meta.json", lambda v: {**v, "lineage": "mine"}, "'lineage'"),
}


@pytest.mark.parametrize("case", list(ARTIFACT_DAMAGE))
def test_an_artifact_file_with_the_wrong_shape_is_refused_by_netcast_load(
    artifact, bm25, scripted_lm, case
):
    from netcast.session import load

    name, change, field = ARTIFACT_DAMAGE[case]
    edit_json(artifact / name, change)
    lm, _ = scripted_lm(distracted)
    with pytest.raises(InputError, match=f"{name}: .*{field}".replace("(", r"\(")):
        load(artifact, model=lm, retriever=bm25)


@pytest.mark.parametrize(
    ("command", "case"),
    [
        (command, case)
        for command in ("show", "bench", "compile")
        for case, (name, _, _) in ARTIFACT_DAMAGE.items()
        if command == "bench" or name != "program.json"  # show and compile --from do not read it
    ],
)
def test_an_artifact_file_with_the_wrong_shape_is_one_line_in_every_command(
    monkeypatch, scripted_lm, artifact, tmp_path, case, command
):
    name, change, field = ARTIFACT_DAMAGE[case]
    edit_json(artifact / name, change)
    _, engine = scripted(monkeypatch, scripted_lm)
    dataset = capitals_file(tmp_path / "capitals.jsonl", 6)
    args = {
        "show": ["show", artifact],
        "bench": ["bench", "--programs", "basic", "--compiled", artifact, "--datasets", dataset,
                  "--split", "all", "--limit", 1, "--run-dir", tmp_path / "b"],
        "compile": ["compile", "--from", artifact, "--out", tmp_path / "new"],
    }[command]  # fmt: skip
    one_line(cli(*args), 2, name, field)
    assert not (tmp_path / "new").exists()


# --- run directories ------------------------------------------------------------------------

RUN_DAMAGE = {
    "run.json cut": ("run.json", cut),
    "run.json a list": ("run.json", written("[1, 2]")),
    "run.json binary": ("run.json", lambda p: p.write_bytes(b"\x80\x04\x95 a pickle")),
    "a row cut before the last": ("predictions.jsonl", lambda p: prepend(p, '{"id": "q9", "sc')),
    "a row without an id": ("predictions.jsonl", lambda p: prepend(p, '{"scores": {}}')),
    "rows that are lists": ("predictions.jsonl", written("[1]\n[2]\n")),
}


def prepend(path: Path, line: str) -> None:
    path.write_text(line + "\n" + path.read_text())


@pytest.mark.parametrize("case", list(RUN_DAMAGE))
@pytest.mark.parametrize("command", ["evaluate", "report"])
def test_a_damaged_run_directory_is_one_line_naming_the_file(
    monkeypatch, scripted_lm, tmp_path, command, case
):
    scripted(monkeypatch, scripted_lm)
    dataset = capitals_file(tmp_path / "capitals.jsonl", 3)
    first = {
        "evaluate": ["evaluate", "--dataset", dataset, "--split", "all"],
        "report": ["bench", "--programs", "basic", "--datasets", dataset, "--split", "all"],
    }[command] + ["--run-dir", tmp_path / "r", "--model", "scripted/fake"]
    assert cli(*first).exit_code == 0
    name, damage = RUN_DAMAGE[case]
    (found,) = (tmp_path / "r").rglob(name)
    damage(found)
    again = first if command == "evaluate" else ["report", tmp_path / "r"]
    one_line(cli(*again), 2, name)


# --- interrupts -----------------------------------------------------------------------------


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


def test_an_interrupted_joint_compile_is_one_line_exit_130_and_no_optuna_traceback(
    monkeypatch, scripted_lm, tmp_path
):
    calls = {"n": 0}

    def interrupted(prompt):  # Ctrl-C during the search's second trial
        calls["n"] += 1
        if calls["n"] > 3 + 3 * 2 + 2:
            raise KeyboardInterrupt
        return distracted(prompt)

    import optuna

    scripted(monkeypatch, scripted_lm, interrupted)
    seen = Records()
    logging.getLogger("optuna").addHandler(seen)
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # as the netcast command sets it
    try:
        result = cli(
            "compile", "--program", "basic", "--dataset", capitals_file(tmp_path / "c.jsonl", 32),
            "--optimizer", "joint", "--teacher", "annotations", "--model", "scripted/fake",
            "--train-limit", 32, "--dev-limit", 3, "--set", "chain_of_thought=false",
            "--set", "links=0", "--out", tmp_path / "art",
        )  # fmt: skip
    finally:
        optuna.logging.set_verbosity(level)
        logging.getLogger("optuna").removeHandler(seen)
    assert result.exit_code == 130, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted"), result.output
    assert "run the same command again" in lines[-1]
    assert "Traceback" not in result.output
    assert not [r for r in seen.records if r.exc_info or "KeyboardInterrupt" in r.getMessage()]
    assert not (tmp_path / "art").exists()
