"""``cached_index``: an index built once per content key, also by processes that want it at
once (workers sharing one netcast home)."""

import multiprocessing
import time
from pathlib import Path

from helpers import WordCounter
from netcast import indexing, settings
from netcast.corpus import Document

DOCUMENTS = [
    Document(f"d{i}", f"Title {i}", f"Passage {i} names the river {i} and the town {i}.")
    for i in range(20)
]


def want_index(log: Path) -> None:
    """A worker that needs the cached index; its build (if it builds) takes a while."""
    build = indexing.build_retriever

    def slow_build(*args, **kwargs):
        with log.open("a") as out:
            out.write("built\n")
        time.sleep(1.0)
        return build(*args, **kwargs)

    indexing.build_retriever = slow_build
    retriever = indexing.cached_index("tiny", DOCUMENTS, WordCounter())
    assert len(retriever.corpus) == len(DOCUMENTS)


def test_two_processes_wanting_one_cached_index_build_it_once(tmp_path):
    log = tmp_path / "builds"
    fork = multiprocessing.get_context("fork")
    workers = [fork.Process(target=want_index, args=(log,)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0, 0]
    assert log.read_text().splitlines() == ["built"]  # one built it, the other reused it
    built = [p for p in settings.indexes_dir().iterdir() if not p.name.startswith(".")]
    assert len(built) == 1 and (built[0] / "index.json").exists()
    assert not [p for p in settings.indexes_dir().iterdir() if p.name.startswith(".tiny")]
