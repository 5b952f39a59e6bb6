"""Writing a generated table into a page: only between the markers that name the command, the
rest of the page as it was; a page without such markers is one line naming it."""

import pytest

from netcast.errors import InputError
from netcast.specs.docs import best_compiled, blocks, command, write_blocks

PAGE = """# Results

<!-- netcast report --markdown --spec a.toml -->
| old |
<!-- /netcast report -->

Text between.

<!-- netcast report --markdown --view race --spec a.toml -->
| race |
<!-- /netcast report -->
"""


def test_a_table_is_written_between_the_markers_of_its_own_command(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    line = command(["a.toml"])
    assert line == "netcast report --markdown --spec a.toml"
    assert write_blocks(page, line, "| new |\n|---|") == 1
    text = page.read_text()
    assert blocks(text) == [
        (line, "| new |\n|---|\n"),
        ("netcast report --markdown --view race --spec a.toml", "| race |\n"),
    ]
    assert text.replace("| new |\n|---|", "| old |") == PAGE
    assert command(["a.toml"], "race") == blocks(text)[1][0]


def test_a_page_without_the_commands_markers_is_one_line_naming_it(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    with pytest.raises(InputError, match=r"page\.md: no block marked .*--spec b\.toml"):
        write_blocks(page, command(["b.toml"]), "| new |")
    assert page.read_text() == PAGE


def test_the_docs_options_without_markdown_or_specs_are_one_line(tmp_path):
    from typer.testing import CliRunner

    from netcast.cli.app import app

    runner = CliRunner()
    for args, said in [
        (["report", "--view", "race", "--spec", "a.toml"], "--view and --write go with --markdown"),
        (["report", "--markdown"], "--markdown reads specs"),
        (["report", "--spec", "a.toml", "--spec", "b.toml"], "one --spec at a time"),
    ]:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert said in result.output and "Traceback" not in result.output


def test_the_headline_best_skips_a_row_scored_on_part_of_the_questions():
    """A row a bench is still filling (54 of 150) leads on its part: it is not the best."""

    def r(name, n, f1):
        return {"program": name, "n": n, "f1": (f1, f1 - 0.1, f1 + 0.1)}

    rows = {"basic": r("basic", 150, 0.307), "a": r("a", 150, 0.369), "b": r("b", 54, 0.419)}
    rows["c"] = r("c", 150, 0.369)
    assert best_compiled(rows, ["b", "a", "c"])["program"] == "a"
    assert best_compiled(rows, ["b", "missing"]) is None
