"""The README's Python example runs as written, so it cannot go stale: the block is read from
README.md and executed with a scripted model in place of the embedded one, on the bundled
HotpotQA sample, after the quick start's commands (read from README.md's first bash block and
run as written with the same scripted model) have saved the artifact the example loads."""

import re
import shlex
from pathlib import Path

import dspy
import pytest
from typer.testing import CliRunner

from helpers import ScriptedEngine, last_question
from netcast.cli.app import app
from netcast.data import load_dataset
from netcast.evaluation.evaluate import EvalResult
from netcast.models.factory import use_netcast_cache
from netcast.programs import NetcastProgram

README = Path(__file__).resolve().parents[2] / "README.md"


def python_example() -> str:
    """The README's one Python block, preceded by blank lines so that a traceback's line
    numbers are the README's own."""
    text = README.read_text()
    blocks = list(re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M))
    assert len(blocks) == 1, f"README.md should hold one Python example, found {len(blocks)}"
    return "\n" * text.count("\n", 0, blocks[0].start(1)) + blocks[0].group(1)


def test_the_readme_example_is_short_and_imports_only_netcast():
    lines = python_example().strip("\n").splitlines()
    imports = [line for line in lines if re.match(r"\s*(import|from)\s", line)]
    assert len(lines) <= 15, len(lines)
    assert imports == ["import netcast"], imports


@pytest.fixture
def gold_answering_model(monkeypatch):
    """One scripted model for everything the example and the quick start make: it answers each
    bundled HotpotQA question with its first gold answer (so scores are known), and fills any
    other output field a prompt asks for."""
    gold = {
        ex.question.strip(): ex.answers[0] for ex in load_dataset("hotpotqa-sample", "all").examples
    }

    def reply(prompt: str) -> dict[str, str]:
        section = prompt.split("Your output fields are:", 1)[-1].split("All interactions", 1)[0]
        fields = re.findall(r"^\d+\. `(\w+)`", section, re.M) or ["answer"]
        answer = gold.get(last_question(prompt), "unknown")
        return {f: answer if f == "answer" else "The context names it." for f in fields}

    use_netcast_cache()
    engine = ScriptedEngine(reply)
    lm = dspy.LM("scripted/fake", engine=engine, cache=False, num_retries=0)
    for where in ("netcast", "netcast.models", "netcast.session", "netcast.optimize.workflow"):
        monkeypatch.setattr(f"{where}.make_lm", lambda *args, **kwargs: lm)
    yield engine, lm, set(gold.values())
    dspy.configure(lm=None, adapter=None)


def quick_start_commands() -> list[list[str]]:
    """The ``netcast`` commands of the README's quick start (its first bash block), as the
    argument lists a shell would pass."""
    text = README.read_text()
    block = re.search(r"^```bash\n(.*?)^```", text, re.S | re.M).group(1)
    joined = block.replace("\\\n", " ")
    parts = [shlex.split(part) for part in joined.split("&&")]
    return [words[1:] for words in parts if words and words[0].endswith("bin/netcast")]


def test_the_quick_start_answers_a_question_before_it_compiles():
    names = [command[0] for command in quick_start_commands()]
    assert names == ["ask", "compile"], names


def test_the_readme_example_runs_as_written(gold_answering_model, tmp_path, monkeypatch, capsys):
    code = python_example()
    monkeypatch.chdir(tmp_path)
    loads = re.findall(r"netcast\.load\(\"([^\"]+)\"\)", code)
    outputs = []
    for command in quick_start_commands():  # the quick start as written, on the scripted model
        result = CliRunner().invoke(app, command, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    assert "answer:" in outputs[0]  # ask
    assert "What this run shows:" in outputs[-1] and "smoke run" in outputs[-1]
    for artifact in loads:  # what the example loads is what the quick start saved
        assert (tmp_path / artifact / "recipe.json").exists()
    engine, lm, gold_answers = gold_answering_model
    capsys.readouterr()
    calls_before = len(engine.prompts)

    namespace: dict = {"__name__": "readme_example"}
    exec(compile(code, str(README), "exec"), namespace)

    printed = capsys.readouterr().out
    assert printed.strip(), "the example prints what it computed"
    assert len(engine.prompts) > calls_before  # the example called the model
    results = [v for v in namespace.values() if isinstance(v, EvalResult)]
    assert results, "the example evaluates a program"
    for result in results:  # the scripted model gives every gold answer: F1 1.0 on each
        assert result.aggregate["n"] == len(result.rows) > 0
        assert result.aggregate["f1"] == pytest.approx(1.0)
        assert result.run_dir is not None and (result.run_dir / "predictions.jsonl").exists()
        assert str(result.aggregate["f1"]) in printed
    predictions = [v for v in namespace.values() if isinstance(v, dspy.Prediction)]
    for prediction in predictions:  # the question reached the model: its gold answer came back
        assert prediction.answer in gold_answers and prediction.answer in printed
        assert prediction.trace["lm_calls"] >= 1 and prediction.evidence
    programs = [v for v in namespace.values() if isinstance(v, NetcastProgram)]
    assert programs and all(p.lm is lm for prog in programs for _, p in prog.named_predictors())
