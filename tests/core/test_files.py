"""``atomic_directory``: a directory written whole or not at all, and a shared (content-named)
one whose concurrent writers take turns under its key's file lock."""

import multiprocessing
import time
from pathlib import Path

import pytest

from netcast.files import atomic_directory, key_lock


def written_by(directory: Path) -> str:
    return (directory / "who").read_text()


def write(directory: Path, who: str) -> None:
    directory.mkdir(exist_ok=True)
    (directory / "index.json").write_text("{}")
    (directory / "who").write_text(who)


def leftovers(target: Path) -> list[str]:
    return [p.name for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.")]


def build_slowly(target: Path, who: str, inside: Path) -> None:
    """Another process's build of the same shared directory: it says when it is inside,
    then takes its time."""
    with atomic_directory(target, "index.json", "index", shared=True) as tmp:
        inside.touch()
        write(tmp, who)
        time.sleep(1.0)


def test_two_processes_building_one_shared_directory_take_turns(tmp_path):
    target, inside = tmp_path / "index", tmp_path / "inside"
    other = multiprocessing.get_context("fork").Process(
        target=build_slowly, args=(target, "another worker", inside)
    )
    other.start()
    try:
        deadline = time.monotonic() + 30
        while not inside.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert inside.exists()
        with atomic_directory(target, "index.json", "index", shared=True) as tmp:
            # the lock held this build back until the other one was renamed into place whole
            assert written_by(target) == "another worker"
            write(tmp, "me")
    finally:
        other.join(30)
    assert other.exitcode == 0
    assert written_by(target) == "me" and not leftovers(target)


def test_the_shared_directory_lock_is_one_reentrant_lock_per_key(tmp_path):
    target = tmp_path / "index"
    lock = key_lock(target)
    assert key_lock(target) is lock and key_lock(tmp_path / "other") is not lock
    with lock, atomic_directory(target, "index.json", "index", shared=True) as tmp:
        write(tmp, "me")  # the caller's lock does not block its own build
    assert written_by(target) == "me" and not leftovers(target)
    assert not lock.is_locked


def test_a_stale_shared_directory_there_before_the_build_is_replaced(tmp_path):
    target = tmp_path / "index"
    write(target, "an older build")
    with atomic_directory(target, "index.json", "index", shared=True) as tmp:
        write(tmp, "me")
    assert written_by(target) == "me" and not leftovers(target)


def test_an_ordinary_directory_is_replaced_by_the_last_writer(tmp_path, monkeypatch):
    target = tmp_path / "artifact"
    with atomic_directory(target, "index.json", "index") as tmp:
        write(tmp, "me")
        write(target, "another")
    assert written_by(target) == "me"
    rename = Path.rename

    def late(self, to):
        write(target, "another")
        return rename(self, to)

    with pytest.raises(OSError), atomic_directory(target, "index.json", "index") as tmp:
        write(tmp, "again")
        monkeypatch.setattr(Path, "rename", late)
    assert not leftovers(target)
