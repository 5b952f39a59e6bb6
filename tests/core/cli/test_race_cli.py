"""`netcast compile --program a,b` (a strategy race) from the command line, scripted model."""

import json
import sys

from typer.testing import CliRunner

from helpers import capitals_file
from netcast.cli.app import app


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_a_race_prints_its_table_and_winner_and_show_reads_it_back(
    monkeypatch, scripted_lm, tmp_path
):
    def respond(prompt):  # multihop (its steps think first) answers wrong, basic right
        if "[[ ## reasoning ## ]]" in prompt:
            return {"reasoning": "so", "query": "capital", "answer": "Berlin"}
        return {"answer": "Paris"}

    lm, engine = scripted_lm(respond)
    monkeypatch.setattr(
        sys.modules["netcast.cli.options"], "command_lm", lambda *args, **kwargs: lm
    )
    dataset = capitals_file(tmp_path / "capitals.jsonl", 48)
    out = tmp_path / "art"
    result = run(
        "compile", "--program", "basic,multihop", "--dataset", dataset, "--model",
        "scripted/fake", "--train-limit", "24", "--dev-limit", "3", "--budget", "60",
        "--set", "chain_of_thought=false", "--set", "links=0", "--set", "max_hops=2",
        "--grid", "demos=none", "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    # which strategies each --set knob reaches, said before the race starts
    for line in (
        "race: --set chain_of_thought=false applies to basic; not to multihop (no such knob)",
        "race: --set links=0 applies to basic; not to multihop (no such knob)",
        "race: --set max_hops=2 applies to multihop (as max_steps); not to basic (no such knob)",
    ):
        assert line in result.output
    assert "strategy race: " in result.output and " of 60" in result.output
    assert "race winner: basic" in result.output
    # live progress: each wave's arms entering, each chunk of an arm, each rung
    assert "race [wave] 0 calls of 60; 2 arms entered, 0 in the race, 0 out; wave 0: 2" in (
        result.output
    )
    assert "; scoring multihop at its defaults (k 3, demos none): " in result.output
    # multihop's first rung held to its share of the budget (60 / (3 x 2) calls: 3 questions,
    # raised to the 6 the paired test needs to drop it): basic's 10 calls and its 18
    assert "race [rung] 28 calls of 60; 2 arms entered, 1 in the race, 1 out" in result.output
    # the next wave's arm enters before the arm the first rung kept climbs to 20 questions
    entered = result.output.index("; scoring basic k=3 (k 3, demos none): ")
    assert entered < result.output.index(
        "; scoring basic at its defaults (k 5, demos none): 1.000 on 15 q"
    )
    assert "basic at its defaults" in result.output  # the score table's first column
    assert len(engine.prompts) <= 60 + 3 * 3  # the race's budget, then dev: before, after, reload
    recipe = json.loads((out / "recipe.json").read_text())
    assert recipe["program"] == "basic" and recipe["race"]["budget"] == 60
    states = {r["program"]: r["state"] for r in recipe["race"]["table"] if r["stage"] == "wave 0"}
    assert states["multihop"] == "dropped"
    multihop_reason = next(
        r["reason"] for r in recipe["race"]["table"] if r["program"] == "multihop"
    )
    assert len(multihop_reason) > 20
    shown = run("show", out)
    assert shown.exit_code == 0 and "race winner: basic" in shown.output
    # piped, not a terminal: no cell cut (rich fits a table to 80 columns, "defaul…"); the
    # race's rows (narrower than 200 columns) one a line
    table = [line for line in shown.output.splitlines() if line.startswith(("│", "┃"))]
    assert table and not any("…" in line for line in table)
    dropped = next(line for line in table if line.startswith("│ multihop "))
    assert "│ defaults " in dropped and "dropped: " + multihop_reason in dropped
    assert any(line.startswith("│ basic <- winner ") and "│ chosen" in line for line in table)
    # every arm scored, with the questions it was scored on (k 3: its first rung, 10)
    assert any(
        line.startswith("│ basic ") and "│ k=3 " in line and "│ 10 " in line for line in table
    )
    # the race run again for another model (--from) shows the same live progress
    again = run("compile", "--from", out, "--model", "scripted/other", "--out", tmp_path / "b")
    assert again.exit_code == 0, again.output
    assert "race [rung] 28 calls of 60" in again.output and "race winner: basic" in again.output


def test_race_arguments_are_refused_in_one_line_before_any_call(monkeypatch, scripted_lm, tmp_path):
    lm, engine = scripted_lm(lambda prompt: {"answer": "Paris"})
    monkeypatch.setattr(
        sys.modules["netcast.cli.options"], "command_lm", lambda *args, **kwargs: lm
    )
    dataset = capitals_file(tmp_path / "capitals.jsonl", 48)
    base = ["compile", "--dataset", dataset, "--train-limit", "24", "--out", tmp_path / "a"]
    for extra, message in [
        (["--program", "basic,basik"], "unknown program 'basik'"),
        (["--program", "basic,multihop", "--budget", "5"], "too small for the race's first rung"),
        (["--program", "auto", "--set", "nothing=1"], "--set nothing: no strategy in the race"),
        (["--program", "basic,multihop", "--set", "top_k=abc"], "basic: knob 'top_k'"),
        (["--program", "basic,multihop", "--set", "k=abc"], "basic: knob 'k'"),
        (["--program", "basic,one_shot", "--set", "max_steps=2"], "--set max_steps: no strategy"),
    ]:
        result = CliRunner().invoke(app, [str(a) for a in [*base, *extra]])
        assert result.exit_code == 2, result.output
        assert message in result.output and "Traceback" not in result.output
    assert engine.prompts == []
