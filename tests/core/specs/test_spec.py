"""Benchmark specs: a bad spec is one line naming the file and the field; a spec run compiles
what is missing (each artifact's row before the next compile) and resumes its rows without
scoring a finished question again; its tables are rebuilt from saved rows alone."""

import json

import pytest

from helpers import capitals_file, distracted
from netcast.errors import InputError
from netcast.specs.spec import read_spec, run_spec
from netcast.specs.tables import spec_report

GOOD = """
title = "A small spec"
dataset = "hotpotqa-sample"
limit = 2
programs = ["basic"]
"""


def write(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("extra", "where", "message"),
    [
        ('limit = "many"\n', "field 'limit'", "valid integer"),
        ('programs = ["basic", "fancy"]\n', "field 'programs' #2", "unknown program 'fancy'"),
        ('variants = ["basic:top_k=zero"]\n', "field 'variants' #1", "knob 'top_k' = 'zero'"),
        ('references = ["silver"]\n', "field 'references' #1", "unknown reference 'silver'"),
        ("speed = 3\n", "field 'speed'", "unknown field; fields are about, across"),
        ('dataset = "nowhere"\n', "field 'dataset'", "unknown dataset 'nowhere'"),
        ('pairs = [["basic", "one_shot"]]\n', "field 'pairs' #1", "'one_shot' is not one"),
        ('table = "one-shot"\n', "field 'table'", "not a field of bench specs"),
        (
            '[[compiled]]\nartifact = "a"\nprogram = "basic"\n'
            '[[compiled]]\nartifact = "b"\nprogram = "basic"\noptimizer = "jiont"\n',
            "[[compiled]] #2: field 'optimizer'",
            "unknown optimizer 'jiont'; choose one of bootstrap",
        ),
        (
            '[[compiled]]\nartifact = "a"\nprogram = "basic"\nset = { top_k = "x" }\n',
            "[[compiled]] #1: field 'set'",
            "knob 'top_k' = 'x'",
        ),
        (
            '[[compiled]]\nartifact = "a"\nprogram = "basic"\ngrid = { top_k = [1, 3] }\n',
            "[[compiled]] #1: field 'grid'",
            "optimizer = 'joint' only",
        ),
        (
            '[[compiled]]\nartifact = "a"\nprogram = "basic"\nfinetune_set = { epochs = 2 }\n',
            "[[compiled]] #1: field 'finetune_set'",
            "optimizer = 'finetune' or 'better-together' only",
        ),
        ('[[compiled]]\nartifact = "a"\n', "[[compiled]] #1", "exactly one of 'program'"),
        ('model = "openai/m"\nn_ctx = 8192\n', "field 'n_ctx'", "an embedded model's window"),
        ('model = "openai/m"\ndecoding = "free"\n', "field 'decoding'", "the model openai/m"),
        (
            '[[compiled]]\nartifact = "a"\nprogram = "basic"\nmodel = "openai/m"\nn_ctx = 4096\n',
            "[[compiled]] #1: field 'n_ctx'",
            "openai/m has its server's",
        ),
        (
            'decoding = "free"\n[[compiled]]\nartifact = "a"\nprogram = "basic"\n'
            'model = "openai/m"\n',
            "field 'decoding'",
            "[[compiled]] #1's model openai/m decodes as its server does",
        ),
    ],
)
def test_a_bad_spec_is_one_line_naming_the_file_and_the_field(tmp_path, extra, where, message):
    text = GOOD.replace("limit = 2\n", "") if extra.startswith("limit") else GOOD
    if extra.startswith(("programs", "dataset")):  # replaces the good spec's own line
        key = extra.split(" ")[0]
        text = "\n".join(line for line in text.splitlines() if not line.startswith(key))
    path = write(tmp_path / "bad.toml", text + "\n" + extra)
    with pytest.raises(InputError) as err:
        read_spec(path)
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(f"{path}: {where}: "), line
    assert message in line


def test_the_spec_window_is_its_embedded_models_not_a_served_entrys(tmp_path):
    """A spec's n_ctx is the window of its embedded model: an embedded compiled entry takes it
    (or its own), an entry whose model is on a server does not (make_lm refuses a window for a
    served model; the spec used to hand it on)."""
    from netcast.specs.model import lm_kwargs

    text = GOOD + 'n_ctx = 4096\n[[compiled]]\nartifact = "a"\nprogram = "basic"\n'
    spec = read_spec(write(tmp_path / "s.toml", text + 'model = "openai/m"\n'))
    assert lm_kwargs(spec) == {"n_ctx": 4096}
    served = spec.file.compiled[0]
    assert lm_kwargs(spec, served.n_ctx, served.model) == {}
    assert lm_kwargs(spec, 2048, "embedded-1.5b") == {"n_ctx": 2048}
    assert lm_kwargs(spec, None, "embedded-1.5b") == {"n_ctx": 4096}


def test_an_ablation_spec_is_checked_too(tmp_path):
    head = 'title = "t"\nkind = "ablation"\ndataset = "hotpotqa-sample"\n'
    config = '[[config]]\nlabel = "a"\nprogram = "basic"\n'
    cases = [
        ('table = "tables"\n' + config, "field 'table': unknown table 'tables'"),
        ('table = "one-shot"\nprograms = ["basic"]\n' + config, "field 'programs': not a field"),
        (
            'table = "one-shot"\n' + config + "knobs = { nope = 1 }\n",
            "[[config]] #1: field 'knobs'",
        ),
        (
            'table = "knowledge"\noptions = { price_ratio = "ten" }\n' + config,
            "options.price_ratio",
        ),
        ('table = "knowledge"\noptions = { speed = 1 }\n' + config, "options.speed"),
        ('table = "knowledge"\njudge = "embedded-1.5b"\n' + config, "no judge column"),
        (
            'table = "one-shot"\n' + config + config,
            "[[config]] #2: label 'a' names the same folder",
        ),
    ]
    for text, expected in cases:
        path = write(tmp_path / "bad.toml", head + text)
        with pytest.raises(InputError, match="^" + str(path).replace(".", r"\.")) as err:
            read_spec(path)
        assert expected in str(err.value) and "\n" not in str(err.value)


def test_not_toml_and_no_file_are_one_line(tmp_path):
    path = write(tmp_path / "broken.toml", 'title = "x\n')
    with pytest.raises(InputError, match=r"broken\.toml: not valid TOML: .*line 1"):
        read_spec(path)
    with pytest.raises(InputError, match=r"gone\.toml: no such spec file"):
        read_spec(tmp_path / "gone.toml")


def bench_spec(tmp_path, dataset, extra="", model="scripted/fake"):
    return read_spec(
        write(
            tmp_path / "capitals.toml",
            f'title = "Capitals"\ndataset = "{dataset}"\nsplit = "all"\nlimit = 4\n'
            f'model = "{model}"\nrun_dir = "{tmp_path / "rows"}"\n'
            'programs = ["basic"]\nvariants = ["basic:top_k=1"]\n' + extra,
        )
    )


def test_a_spec_run_resumes_without_scoring_a_finished_question_again(scripted_lm, tmp_path):
    lm, engine = scripted_lm(distracted)
    dataset = capitals_file(tmp_path / "capitals.jsonl", 4)
    spec = bench_spec(tmp_path, dataset)
    made = []

    def make(model, **kwargs):
        made.append((model, kwargs))
        return lm

    first = run_spec(spec, make, progress=False)
    assert made[0] == ("scripted/fake", {})
    assert sorted(name for name, _, _ in first.results) == ["basic", "basic-top_k-1"]
    calls = len(engine.prompts)
    assert calls == 8  # 4 questions, 2 rows, one answer call each
    rows = tmp_path / "rows" / "capitals"
    assert len((rows / "basic" / "predictions.jsonl").read_text().splitlines()) == 4
    bench = json.loads((tmp_path / "rows" / "bench.json").read_text())
    assert bench["commands"] == [f"netcast bench --spec {spec.path}"]

    # top_k 1 keeps other capitals out of the context: the distracted reader is right
    assert first.results[1][1].aggregate["f1"] == 1.0
    second = run_spec(spec, make, progress=False)  # everything saved: no model, no call
    assert len(engine.prompts) == calls and len(made) == 1 and second.results == []

    with_more = bench_spec(tmp_path, dataset, 'references = ["gold"]\n')
    third = run_spec(with_more, make, progress=False)  # only the new row runs
    assert len(engine.prompts) == calls + 4
    assert [r.aggregate["n"] for _, r, _ in third.results] == [4, 4, 4]


def test_a_missing_artifact_is_compiled_and_a_present_one_reused(scripted_lm, tmp_path):
    lm, engine = scripted_lm(distracted)
    dataset = capitals_file(tmp_path / "capitals.jsonl", 6)
    artifact = tmp_path / "art"
    spec = bench_spec(
        tmp_path,
        dataset,
        f'[[compiled]]\nartifact = "{artifact}"\nprogram = "basic"\noptimizer = "bootstrap"\n'
        f'dataset = "{dataset}"\ntrain_limit = 6\ndev_limit = 2\nset = {{ top_k = 1 }}\n',
    )
    done = run_spec(spec, lambda model, **kwargs: lm, progress=False)
    assert done.compiled == [artifact]
    recipe = json.loads((artifact / "recipe.json").read_text())
    assert recipe["knobs"]["k"] == 1 and recipe["dataset"]["train_limit"] == 6
    assert "art" in [name for name, _, _ in done.results]
    calls = len(engine.prompts)
    again = run_spec(spec, lambda model, **kwargs: lm, progress=False)
    assert again.compiled == [] and len(engine.prompts) == calls


def test_each_artifact_s_row_runs_before_the_next_compile(scripted_lm, tmp_path, monkeypatch):
    import netcast.specs.spec as spec_module

    lm, _ = scripted_lm(distracted)
    dataset = capitals_file(tmp_path / "capitals.jsonl", 6)
    entry = (
        '[[compiled]]\nartifact = "{}"\nprogram = "basic"\noptimizer = "bootstrap"\n'
        f'dataset = "{dataset}"\ntrain_limit = 6\ndev_limit = 2\n'
    )
    first, second = tmp_path / "first", tmp_path / "second"
    spec = bench_spec(tmp_path, dataset, entry.format(first) + entry.format(second))
    rows = tmp_path / "rows" / "capitals"
    seen, compile_entry = [], spec_module.compile_entry

    def recording(spec, entry, *args, **kwargs):  # the rows saved when each compile starts
        seen.append((entry.name, sorted(p.parent.name for p in rows.glob("*/predictions.jsonl"))))
        return compile_entry(spec, entry, *args, **kwargs)

    monkeypatch.setattr(spec_module, "compile_entry", recording)
    done = run_spec(spec, lambda model, **kwargs: lm, progress=False)
    assert seen == [("first", []), ("second", ["basic", "basic-top_k-1", "first"])]
    assert done.compiled == [first, second]
    # every row once, with all of its questions
    names = [name for name, _, _ in done.results]
    assert sorted(names) == ["basic", "basic-top_k-1", "first", "second"]
    assert all(result.aggregate["n"] == 4 for _, result, _ in done.results)
    bench = json.loads((tmp_path / "rows" / "bench.json").read_text())
    assert bench["compiled"] == [str(first), str(second)]


def write_rows(folder, program, f1, em=None, context=None, extra=None):
    """Saved rows of one bench row: question i scores ``f1[i]``."""
    folder.mkdir(parents=True)
    rows = []
    for i, value in enumerate(f1):
        scores = {
            "em": (em or f1)[i],
            "f1": value,
            "judge": None,
            "recall": 0.5,
            "precision": 0.5,
            "answer_in_context": (context or [1.0] * len(f1))[i],
            "lm_calls": 1,
            "cached_calls": 0,
            "tokens_in": 100,
            "tokens_out": 10,
            "searches": 1,
            "turns": 0,
            "seconds": 2.0,
            **(extra or {}),
        }
        trace = {"turns": [], "searches": [], "steps": {}}
        rows.append(
            {"id": f"q{i}", "answers": ["a"], "answer": "a", "trace": trace, "scores": scores}
        )
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "run.json").write_text(json.dumps({"program": program, "model": "m"}))


def test_the_tables_are_rebuilt_from_saved_rows_with_exact_cells(tmp_path, monkeypatch):
    import netcast.models

    def no_model(*args, **kwargs):
        raise AssertionError("a report must not make a model")

    monkeypatch.setattr(netcast.models, "make_lm", no_model)
    rows = tmp_path / "rows" / "hotpotqa-sample"
    write_rows(rows / "basic", "basic", [0.25] * 4, em=[0.0] * 4, context=[1.0, 0, 0, 0])
    write_rows(rows / "basic-top_k-3", "basic", [0.75] * 4, em=[1.0, 1.0, 0.0, 0.0])
    write_rows(rows / "reference-gold", "reference-gold", [1.0] * 4)
    write_rows(rows / "old", "basic", [0.5] * 4)
    path = write(
        tmp_path / "small.toml",
        GOOD + f'run_dir = "{tmp_path / "rows"}"\nvariants = ["basic:top_k=3"]\n'
        'references = ["gold", "closed"]\nkept = ["old"]\npairs = [["basic-top_k-3", "old"]]\n',
    )
    text = spec_report(read_spec(path))
    lines = text.splitlines()
    assert lines[0] == "# A small spec"
    main, pairs = text.split("## Pairs")
    table = {line.split(" | ")[0].strip("| "): line for line in main.splitlines() if "| " in line}
    # every question +0.5 over basic: a zero-width interval, and the exact sign-flip p of
    # 4 equal differences (2 of the 16 sign patterns are as extreme)
    assert table["basic-top_k-3"] == (
        "| basic-top_k-3 | 4 | 0.750 [0.750, 0.750] | 0.500 | +0.500 [+0.500, +0.500] | 0.125 "
        "| +0.500 [+0.500, +0.500] | 0.125 | 67% | 0.500 | 1.00 | 100 | 110 | 2.0 |"
    )
    assert table["basic"] == (
        "| basic | 4 | 0.250 [0.250, 0.250] | 0.000 | - | - | - | - | 0% | 0.500 | 0.25 "
        "| 100 | 110 | 2.0 |"
    )
    assert table["reference-gold (reference)"].startswith(
        "| reference-gold (reference) | 4 | 1.000 [1.000, 1.000] | 1.000 | +0.750 [+0.750, +0.750]"
    )
    assert table["old (earlier code, kept)"].startswith("| old (earlier code, kept) | 4 |")
    assert "| basic-top_k-3 | old | 4 | +0.250 [+0.250, +0.250] | 0.125 |" in pairs
    assert "Not run yet: reference-closed" in text
    assert f"`netcast report --spec {path}`" in text


def test_a_spec_never_run_reports_what_is_missing(tmp_path):
    path = write(tmp_path / "fresh.toml", GOOD + f'run_dir = "{tmp_path / "none"}"\n')
    text = spec_report(read_spec(path))
    assert "Not run yet: basic (`netcast bench --spec" in text


def test_the_command_line_runs_a_spec_and_prints_its_tables(scripted_lm, tmp_path, monkeypatch):
    import sys

    from typer.testing import CliRunner

    from netcast.cli.app import app

    lm, engine = scripted_lm(distracted)
    made = []

    def fake_lm(model, api_base=None, retries=None, constrained=True, **rest):
        made.append((model, retries, constrained))
        return lm

    monkeypatch.setattr(sys.modules["netcast.cli.options"], "command_lm", fake_lm)
    dataset = capitals_file(tmp_path / "capitals.jsonl", 4)
    spec = bench_spec(tmp_path, dataset, 'decoding = "free"\n', model="embedded")
    runner = CliRunner()

    def run(*args):
        return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)

    result = run("bench", "--spec", spec.path, "--retries", "2")
    assert result.exit_code == 0, result.output
    assert made[0] == ("embedded", 2, False)  # the spec's free decoding
    assert "| basic-top_k-1 | 4 | 1.000 [1.000, 1.000] |" in result.output
    calls = len(engine.prompts)
    shown = run("report", "--spec", spec.path)
    assert shown.exit_code == 0 and len(engine.prompts) == calls
    assert "| basic-top_k-1 | 4 | 1.000 [1.000, 1.000] |" in shown.output

    refused = run("bench", "--spec", spec.path, "--limit", "3")
    assert refused.exit_code == 2
    assert "error: --limit is the spec's to declare" in refused.output
    both = run("report", "--spec", spec.path, tmp_path / "rows")
    assert both.exit_code == 2 and "give no directories" in both.output
    bad = run("report", "--spec", write(tmp_path / "bad.toml", 'title = "x"\n'))
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert "bad.toml: field 'dataset': missing (required)" in bad.output
    assert len(bad.output.strip().splitlines()) == 1


def test_a_joint_compile_is_reported_with_its_trials_from_the_recipe(tmp_path):
    artifact = tmp_path / "art"
    artifact.mkdir()

    def trial(number, links, score, tokens, **rest):
        done = {"demos": "none", "n": 60, "calls": 60, "state": "complete", **rest}
        knobs = {"top_k": 5, "links": links}
        return {**done, "trial": number, "knobs": knobs, "score": score, "tokens": tokens}

    versus = {"best_trial": 1, "default_trial": 0, "n": 60, "diff": 0.15, "p": 0.004}
    recipe = {
        "optimizer": {"name": "joint"},
        "knobs": {"top_k": 5, "links": 1},
        "joint": {
            "chosen_demos": "none",
            "trials": [
                trial(0, 0, 0.25, 800.0),
                trial(1, 1, 0.4, 910.4),
                trial(2, 2, None, None, n=None, calls=None, state="fail"),
            ],
            "versus_defaults": {**versus, "alpha": 0.1, "kept_defaults": False},
        },
    }
    (artifact / "recipe.json").write_text(json.dumps(recipe))
    path = write(
        tmp_path / "joint.toml",
        GOOD + f'run_dir = "{tmp_path / "rows"}"\n[[compiled]]\nartifact = "{artifact}"\n'
        'program = "basic"\noptimizer = "joint"\n',
    )
    text = spec_report(read_spec(path))
    part = text.split("## Compile: art")[1]
    assert 'Optimizer joint; chose {"links": 1} with demonstrations none.' in part
    assert "| 0 | links 0 | none | 0.250 | 60 | 800 | 60 | complete |" in part
    assert "| 1 | links 1 | none | 0.400 | 60 | 910 | 60 | complete |" in part
    assert "| 2 | links 2 | none | - | - | - | 0 | interrupted |" in part  # a killed trial
    assert "trial 1 vs the defaults' trial 0 on 60 validation questions: +0.150" in part


def test_a_compiled_entrys_finetune_set_reaches_the_recipe_as_compile_finetune_set_does(
    tmp_path, monkeypatch
):
    """finetune_set in a spec is --finetune-set: a training setting under ``train``, the
    others at the top of the recipe's optimizer settings."""
    from netcast.optimize import workflow
    from netcast.specs.spec import compile_entry

    text = GOOD + (
        '[[compiled]]\nartifact = "OUT"\nprogram = "basic"\noptimizer = "finetune"\n'
        'teacher = "annotations"\ntrain_split = "train[100:300]"\n'
        "finetune_set = { gradient_checkpointing = true, retrieved_share = 0.5 }\n"
    ).replace("OUT", str(tmp_path / "art"))
    spec = read_spec(write(tmp_path / "s.toml", text))
    made = []
    monkeypatch.setattr(workflow, "compile_recipe", lambda recipe, out, **kw: made.append(recipe))
    compile_entry(spec, spec.file.compiled[0], lambda model, **kw: None)
    settings = made[0].optimizer.settings
    assert settings["train"]["gradient_checkpointing"] is True
    assert settings["retrieved_share"] == 0.5
    assert made[0].dataset.train_split == "train[100:300]"  # a stage: a part of the split
