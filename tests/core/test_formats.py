"""The declared shapes (netcast.formats) fit every file netcast has written, and name what is
wrong in one line."""

import json
from pathlib import Path

import pytest

from netcast.artifacts import read_artifact
from netcast.errors import InputError
from netcast.evaluation.runlog import read_rows, read_run_info
from netcast.formats import PROGRAM_STATE, Recipe, check_shape, read_json

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
ARTIFACTS = sorted(p.parent for p in RESULTS.glob("artifacts/*/recipe.json"))
RUNS = sorted(p.parent for p in RESULTS.glob("**/predictions.jsonl"))


def test_every_committed_artifact_fits_its_shapes():
    assert ARTIFACTS
    for artifact in ARTIFACTS:
        read_artifact(artifact)
        state = read_json(artifact / "program.json")
        state.pop("metadata", None)
        check_shape(state, PROGRAM_STATE, str(artifact / "program.json"))


def test_every_committed_run_fits_its_shapes():
    assert RUNS
    for run in RUNS:
        rows, _ = read_rows(run / "predictions.jsonl")
        assert rows and read_run_info(run)


def test_a_misshapen_value_is_one_line_naming_the_field_and_what_it_should_be(tmp_path):
    recipe = json.loads((ARTIFACTS[0] / "recipe.json").read_text())
    with pytest.raises(InputError) as err:
        check_shape({**recipe, "knobs": "top_k=3"}, Recipe, "recipe.json")
    assert str(err.value) == (
        "recipe.json: field 'knobs': should be an object, found a string \"top_k=3\""
    )
    with pytest.raises(InputError) as err:
        check_shape({**recipe, "seed": "0", "metric": None}, Recipe, "recipe.json")
    assert str(err.value) == (
        "recipe.json: field 'metric': should be a string, found null (and 1 more problem(s))"
    )
    missing = {k: v for k, v in recipe.items() if k != "model"}
    with pytest.raises(InputError, match="^recipe.json: field 'model': missing$"):
        check_shape(missing, Recipe, "recipe.json")
    (tmp_path / "r.json").write_text('"just a string"')
    with pytest.raises(InputError, match="expected a JSON object, found a JSON string$"):
        read_json(tmp_path / "r.json")
