"""``atomic_directory``: a directory written whole or not at all, and a shared (content-named)
one that concurrent writers do not pull from under each other."""

from pathlib import Path

import pytest

from netcast.files import atomic_directory


def written_by(directory: Path) -> str:
    return (directory / "who").read_text()


def write(directory: Path, who: str) -> None:
    directory.mkdir(exist_ok=True)
    (directory / "index.json").write_text("{}")
    (directory / "who").write_text(who)


def leftovers(target: Path) -> list[str]:
    return [p.name for p in target.parent.iterdir() if p.name.startswith(f".{target.name}.")]


def test_a_shared_directory_another_process_wrote_meanwhile_is_kept(tmp_path):
    target = tmp_path / "index"
    with atomic_directory(target, "index.json", "index", shared=True) as tmp:
        write(tmp, "me")
        write(target, "another worker")  # it finished its build first, and may be reading it
    assert written_by(target) == "another worker" and not leftovers(target)


def test_a_shared_directory_renamed_into_place_under_us_is_kept(tmp_path, monkeypatch):
    # the other worker's rename lands between the check and ours: ours fails (not empty)
    target = tmp_path / "index"
    rename = Path.rename

    def late(self, to):
        write(target, "another worker")
        return rename(self, to)

    with atomic_directory(target, "index.json", "index", shared=True) as tmp:
        write(tmp, "me")
        monkeypatch.setattr(Path, "rename", late)
    assert written_by(target) == "another worker" and not leftovers(target)


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
