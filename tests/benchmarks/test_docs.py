"""The result tables of the docs are generated from the committed specs: every table between
``<!-- netcast report ... -->`` markers is what that command prints now, from the committed
rows, without a model."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from netcast.cli.app import app
from netcast.specs.docs import blocks

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", "docs/results.md", "docs/strategies.md", "docs/compiling.md"]
PAGES += ["benchmarks/README.md"]


@pytest.fixture
def at_root(monkeypatch):
    """The repository root as the working directory (the markers' spec paths are read from
    it), and no way to make a model."""
    import netcast
    import netcast.models

    def no_model(*args, **kwargs):
        raise AssertionError("a docs table must rebuild without a model")

    monkeypatch.chdir(ROOT)
    for where in (netcast, netcast.models):
        monkeypatch.setattr(where, "make_lm", no_model)


def marked() -> list[tuple[str, str, str]]:
    return [
        (page, line, text) for page in PAGES for line, text in blocks((ROOT / page).read_text())
    ]


def test_the_result_pages_hold_generated_tables():
    pages = {page for page, _, _ in marked()}
    assert {"README.md", "docs/results.md"} <= pages
    assert len(marked()) >= 8


@pytest.mark.parametrize(("page", "line", "text"), marked(), ids=lambda v: str(v)[:60])
def test_each_generated_table_is_what_its_command_prints(at_root, page, line, text):
    words = shlex.split(line)
    assert words[:3] == ["netcast", "report", "--markdown"]
    result = CliRunner().invoke(app, words[1:], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert text == result.output, f"{page}: run `{line} --write {page}`"


def test_the_readme_stays_within_12_kb():
    assert len((ROOT / "README.md").read_bytes()) <= 12_000
