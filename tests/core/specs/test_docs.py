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


def test_the_paper_view_sets_each_strategy_untuned_and_tuned_beside_the_papers_figure(
    monkeypatch,
):
    """Fishing for Answers' strategies: the untuned row, the best fine-tuned artifact of the
    same program scored on every question (not a joint compile, not a row half filled), the
    paper's judge score and its gain over top-5; a strategy with no row is left out."""
    from types import SimpleNamespace

    from netcast.specs import docs

    def r(name, f1, n=150):
        return {"program": name, "n": n, "f1": (f1, f1 - 0.1, f1 + 0.1),
                "diff_vs_basic": (f1 - 0.3, f1 - 0.35, f1 - 0.25), "p_vs_basic": 0.01,
                "diff_vs_uncompiled": (0.111, 0.05, 0.15), "p_vs_uncompiled": 0.02}  # fmt: skip

    rows = {n: r(n, f) for n, f in [("basic", 0.3), ("one_shot", 0.29), ("iterative", 0.23)]}
    rows |= {"os-a": r("os-a", 0.40), "os-b": r("os-b", 0.45), "os-joint": r("os-joint", 0.5)}
    rows["os-part"] = r("os-part", 0.6, n=20)
    made = [("os-a", "finetune"), ("os-b", "finetune"), ("os-joint", "joint")]
    made += [("os-part", "finetune")]
    compiled = [
        SimpleNamespace(name=n, program="one_shot", optimizer=o, artifact=f"not-made/{n}")
        for n, o in made
    ]
    monkeypatch.setattr(docs, "_rows", lambda spec: rows)
    spec = SimpleNamespace(file=SimpleNamespace(compiled=compiled))
    lines = docs.paper_table([spec])

    def line(label):
        return [c.strip() for c in next(x for x in lines if x.startswith(f"| {label}")).split("|")]

    one_shot = line("One-SHOT")
    assert one_shot[2:6] == ["87.5", "+6.5", "150", "0.290 [0.190, 0.390]"]
    assert one_shot[6:9] == ["-0.010 [-0.060, +0.040]", "os-b", "0.450 [0.350, 0.550]"]
    assert one_shot[11] == "+0.111 [+0.050, +0.150]"
    assert line("iterative")[7] == "not run"
    assert line("Basic RAG")[2:4] == ["81.0", "-"]
    assert not any(x.startswith("| combined") for x in lines)
