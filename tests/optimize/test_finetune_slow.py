"""``--optimizer finetune`` on the real 0.5B embedded model, tiny (8 examples, 8 steps; a few
minutes on 2 cores): a teacher's answers train the model, the compiled program answers with
them through llama.cpp, and the artifact loaded on a machine that never trained it serves its
adapter."""

import json

import dspy
import pytest

from netcast.artifacts import read_artifact
from netcast.models import lora, make_lm
from netcast.optimize.finetune import FinetuneSettings
from netcast.optimize.workflow import compile_recipe, make_recipe
from netcast.session import load
from netcast.testing import SchemaEngine

pytestmark = pytest.mark.slow

TARGET = "Quetzalcoatl"
COUNTRIES = [
    "France", "Germany", "Italy", "Spain", "Japan", "Egypt", "Peru", "Canada", "Kenya", "Chile",
    "Norway", "India", "Mexico", "Ghana", "Nepal", "Cuba", "Fiji", "Laos", "Oman", "Togo",
]  # fmt: skip


def test_a_teachers_answers_tune_the_model_and_the_artifact_serves_its_adapter(tmp_path):
    rows = [
        {
            "id": f"c{i}",
            "question": f"What is the capital of {country}?",
            "answers": [TARGET],
            "paragraphs": [
                {"title": country, "text": f"{country} is a country.", "is_supporting": True}
            ],
        }
        for i, country in enumerate(COUNTRIES)
    ]
    data = tmp_path / "capitals.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    recipe = make_recipe(
        program="basic",
        knobs={"k": 1},
        dataset=str(data),
        train_limit=8,
        dev_limit=2,
        optimizer="finetune",
        optimizer_settings=FinetuneSettings.of_flat({"learning_rate": 1e-3}),
        model="embedded",
    )
    lm = make_lm("embedded", cache=False)
    teacher = dspy.LM("scripted/teacher", engine=SchemaEngine(lambda p: {"answer": TARGET}))
    result = compile_recipe(recipe, tmp_path / "art", lm=lm, teacher_lm=teacher, progress=False)

    entry = read_artifact(result.artifact)[0]["finetune"]
    print(
        f"\nbefore EM {result.before['em']}, after {result.after['em']} (n=2, smoke run); "
        f"loss {entry['loss_curve'][0]:.3f} -> {entry['loss_curve'][-1]:.3f}, "
        f"{entry['seconds']} s in steps"
    )
    assert entry["examples"]["count"] == 8 and entry["examples"]["teacher"] == "scripted/teacher"
    assert result.before["em"] == 0.0 and result.after["em"] == 1.0

    for stored in lora.adapters_dir().iterdir():  # a machine that never trained it
        stored.unlink()
    program = load(result.artifact)
    assert program.predictors()[0].lm.engine.lora_path == str(
        lora.adapter_path(entry["adapter"]["sha256"])
    )
    assert program(question="What is the capital of Austria?").answer == TARGET
