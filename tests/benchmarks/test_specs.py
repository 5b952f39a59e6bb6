"""The committed specs (benchmarks/specs): each reads, names the results directory it fills,
declares the compile options its committed artifacts were made with, and its tables rebuild
from the committed rows without any model call, with the figures the docs quote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from netcast.cli.app import app
from netcast.programs.registry import stored_knobs as named
from netcast.specs.spec import read_spec, run_spec, spec_paths

ROOT = Path(__file__).resolve().parents[2]
SPECS = spec_paths(ROOT / "benchmarks" / "specs")


@pytest.fixture
def at_root(monkeypatch):
    """The repository root as the working directory (spec paths are read from it), and no way
    to make a model."""
    import netcast
    import netcast.models

    def no_model(*args, **kwargs):
        raise AssertionError("a spec's tables must rebuild without a model")

    monkeypatch.chdir(ROOT)
    for where in (netcast, netcast.models):
        monkeypatch.setattr(where, "make_lm", no_model)


def test_there_are_specs_and_each_is_named_after_the_results_it_fills(at_root):
    assert len(SPECS) >= 14
    for path in SPECS:
        spec = read_spec(path.relative_to(ROOT))
        if spec.file.kind == "bench":
            assert spec.run_dir == Path("benchmarks/results") / spec.name, path
            assert spec.run_dir.is_dir(), path
        else:
            assert spec.name.startswith("paper-tables-"), path
            assert spec.run_dir.parent == Path("benchmarks/results/paper-tables"), path


def recipe_of(artifact: str) -> dict:
    return json.loads((ROOT / artifact / "recipe.json").read_text())


def compiled_entries():
    for path in SPECS:
        spec = read_spec(path)
        if spec.file.kind == "bench":
            for entry in spec.file.compiled:
                yield pytest.param(spec, entry, id=f"{spec.name}:{entry.name}")


@pytest.mark.parametrize(("spec", "entry"), list(compiled_entries()))
def test_each_artifact_was_made_with_the_options_its_spec_declares(spec, entry):
    recipe = recipe_of(entry.artifact)
    model = entry.model or spec.file.model
    assert recipe["model"]["name"] == model
    if entry.source is not None:  # recompiled: the source's recipe with another model
        source = recipe_of(entry.source)
        found = ("model", "joint", "knobs", "race", "program", "finetune")  # what each found
        mine = {k: v for k, v in recipe.items() if k not in found}
        theirs = {k: v for k, v in source.items() if k not in found}
        mine["retriever"] = theirs["retriever"] = None  # the index is the model's tokenizer's
        assert mine == theirs
        if source.get("race"):  # the same race (strategies, held knobs, budget), its own winner
            setup = ("programs", "fixed", "budget")
            assert {k: recipe["race"][k] for k in setup} == {k: source["race"][k] for k in setup}
        else:
            assert recipe["program"] == source["program"]
        if source.get("joint"):
            assert recipe["joint"]["fixed"] == source["joint"]["fixed"]
        if source.get("finetune"):  # the same training on the same examples, its own adapter
            setup = ("settings", "examples", "rank", "alpha")
            tuned, before = recipe["finetune"], source["finetune"]
            assert {k: tuned[k] for k in setup} == {k: before[k] for k in setup}
            assert tuned["base"]["name"] == model
        return
    data = recipe["dataset"]
    race = recipe.get("race")  # a race's recipe names its winner; the race, what was raced
    assert (race["programs"] if race else recipe["program"]) == entry.program
    assert data["name"] == (entry.dataset or spec.file.dataset)
    assert (data["train_limit"], data["dev_limit"]) == (entry.train_limit, entry.dev_limit)
    assert data["train_split"] == entry.train_split
    assert data.get("select_on", "dev") == (entry.select_on or "dev")
    assert recipe["optimizer"]["name"] == ("race" if race else entry.optimizer)
    assert recipe.get("teacher", "model") == entry.teacher
    assert recipe["teacher_model"] == entry.teacher_model
    assert recipe["metric"] == entry.metric and recipe["seed"] == entry.seed
    settings = recipe["optimizer"]["settings"]
    if race:
        assert race["fixed"] == entry.knobs and settings.get("budget") == entry.budget
        assert race["budget"] == entry.budget and race["spent"] <= entry.budget
    elif entry.optimizer == "joint":
        # what the search held and searched (a knob under its alias, as an artifact made
        # before a rename stores it, is the same knob)
        program = entry.program or ""
        assert named(program, recipe["joint"]["fixed"]) == named(program, entry.knobs)
        grid = dict(entry.grid)
        demos = grid.pop("demos", ["none", "annotations"])
        assert settings["demos"] == demos
        assert named(program, settings.get("grid", {})) == named(program, grid)
        assert settings.get("budget") == entry.budget
        assert settings.get("ties", "best") == entry.ties  # recipes before the rule: best
    else:
        held, program = named(recipe["program"], recipe["knobs"]), recipe["program"]
        assert {k: held[k] for k in named(program, entry.knobs)} == named(program, entry.knobs)


def report(spec: Path) -> str:
    result = CliRunner().invoke(app, ["report", "--spec", str(spec)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_every_committed_spec_reports_without_a_model(at_root, path):
    out = report(path.relative_to(ROOT))
    spec = read_spec(path.relative_to(ROOT))
    assert out.startswith(f"# {spec.file.title}")
    if spec.file.kind == "bench":
        assert "| row | n | F1 [95% CI] |" in out


def cells(out: str, row: str) -> list[str]:
    """The main table's cells of ``row`` (the first table line starting with it)."""
    line = next(line for line in out.splitlines() if line.startswith(f"| {row} |"))
    return [c.strip() for c in line.strip().strip("|").split("|")]


# figures README.md and docs/results.md quote: row -> (F1 [95% CI], vs basic [95% CI])
QUOTED = {
    "decisive-wide-0.5b": {
        "basic": ("0.307 [0.236, 0.380]", "-"),
        "basic-joint-links-wide-0.5b": ("0.369 [0.298, 0.445]", "+0.063 [+0.023, +0.106]"),
        "basic-links-2": ("0.350 [0.280, 0.423]", "+0.043 [-0.007, +0.094]"),
        "iterative": ("0.234 [0.173, 0.299]", "-0.073 [-0.135, -0.013]"),
        "reference-gold (reference)": ("0.500 [0.427, 0.570]", "+0.193 [+0.111, +0.272]"),
        "reference-closed (reference)": ("0.119 [0.074, 0.168]", "-0.188 [-0.257, -0.120]"),
    },
    "decisive-wide-1.5b": {
        "basic": ("0.458 [0.388, 0.535]", "-"),
        "basic-joint-links-wide-1.5b": ("0.537 [0.466, 0.611]", "+0.079 [+0.018, +0.139]"),
        "basic-joint-links-wide-0.5b": ("0.490 [0.415, 0.565]", "+0.031 [-0.015, +0.076]"),
        "reference-gold (reference)": ("0.674 [0.611, 0.739]", "+0.216 [+0.145, +0.286]"),
    },
    "indicative-hotpotqa-0.5b": {
        "one_shot": ("0.267 [0.152, 0.394]", "+0.061 [-0.016, +0.152]"),
        "iterkey": ("0.129 [0.045, 0.235]", "-0.077 [-0.183, +0.024]"),
    },
    "indicative-musique-links-0.5b": {
        "basic-links-2": ("0.120 [0.050, 0.202]", "+0.045 [-0.010, +0.115]"),
        "iterative-taught-musique-0.5b": ("0.108 [0.048, 0.176]", "+0.033 [-0.030, +0.101]"),
    },
    "decisive-hotpotqa-0.5b": {
        "knowledge-compiled-0.5b": ("0.310 [0.243, 0.380]", "+0.009 [-0.055, +0.073]"),
    },
}


@pytest.mark.parametrize("name", sorted(QUOTED))
def test_the_quoted_figures_are_what_the_spec_rebuilds(at_root, name):
    out = report(Path("benchmarks/specs") / f"{name}.toml")
    for row, (f1, vs_basic) in QUOTED[name].items():
        got = cells(out, row)
        assert (got[2], got[4]) == (f1, vs_basic), row


def test_the_model_comparison_pairs_the_same_program_across_specs(at_root):
    out = report(Path("benchmarks/specs/decisive-hotpotqa-1.5b.toml"))
    line = next(line for line in out.splitlines() if line.startswith("| hotpotqa-sample | basic"))
    assert "| 150 | +0.143 [+0.075, +0.216] | <0.001 |" in line  # 1.5B - 0.5B


def test_the_docs_cite_only_specs_that_exist_and_the_readme_lists_every_spec():
    import re

    names = {p.stem for p in SPECS}
    readme = (ROOT / "benchmarks" / "README.md").read_text()
    assert len(readme.encode()) <= 10_000
    listed = set(re.findall(r"^\| `([a-z0-9.-]+)` \|", readme, re.M))
    assert listed == names
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in docs:
        for cited in re.findall(r"benchmarks/specs/([a-z0-9._-]+)\.toml", page.read_text()):
            assert cited in names, f"{page.name} cites benchmarks/specs/{cited}.toml"


# committed results that are partial: a smoke run stopped early, ablations not (fully) run
PARTIAL = {"direction-dedup-train-0.5b", "free-decoding-hotpotqa-0.5b"}


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_a_complete_spec_runs_again_without_making_a_model(at_root, path):
    spec = read_spec(path.relative_to(ROOT))

    def refuse(model, **kwargs):
        raise LookupError(f"made {model}")

    if spec.name in PARTIAL or spec.file.kind == "ablation":
        with pytest.raises(LookupError):  # questions (or verdicts) missing: it would run them
            run_spec(spec, refuse, progress=False)
    else:
        assert run_spec(spec, refuse, progress=False).results == []


RECIPES = sorted((ROOT / "benchmarks" / "results").glob("**/recipe.json"))


@pytest.mark.parametrize("path", RECIPES, ids=[p.parent.name for p in RECIPES])
def test_every_committed_recipe_reads_and_writes_back_its_settings(path):
    """A recipe's optimizer settings read into the optimizer's typed settings and written back:
    every value it holds kept (a setting added since is written at its default; a race's
    record of the joint compile's settings, which it never read, is dropped)."""
    from netcast.formats import recipe_of as read_recipe
    from netcast.optimize.registry import compile_optimizer, get_optimizer
    from netcast.optimize.settings import RaceSettings

    saved = json.loads(path.read_text())
    recipe = read_recipe(saved)
    optimizer, teacher = recipe.optimizer.name, recipe.teacher
    entry = get_optimizer("race") if recipe.race else compile_optimizer("", optimizer, teacher)
    written = entry.read(recipe.optimizer.settings).to_dict()
    unread = RaceSettings.RECORDED_BEFORE if recipe.race else {}

    def kept(mine, theirs):
        if isinstance(theirs, dict):
            return isinstance(mine, dict) and all(kept(mine.get(k), v) for k, v in theirs.items())
        return mine == theirs

    for key, value in saved["optimizer"]["settings"].items():
        assert kept(written.get(key, unread.get(key)), value), key
