"""``--optimizer finetune`` and ``--optimizer better-together`` (optimize.finetune): DSPy's
BootstrapFinetune and BetterTogether through netcast's CPU provider, with a scripted embedded
model and a tiny random model trained in place of the 0.5B (``helpers.tiny_base``): which
examples reach the trainer, what the artifact holds, how it loads and is refused, and bad input
refused before any model call."""

import json
import re
from typing import ClassVar

import dspy
import pytest
from typer.testing import CliRunner

from helpers import GGUFEngine, ScriptedEngine, tiny_base
from netcast.artifacts import read_artifact
from netcast.cli.app import app
from netcast.errors import InputError, ModelFileError
from netcast.models import embedded, lora, lora_provider, training
from netcast.models.factory import EmbeddedLM
from netcast.optimize.annotation_finetune import (
    AnnotationBetterTogetherSettings,
    AnnotationFinetuneSettings,
)
from netcast.optimize.finetune import FinetuneSettings
from netcast.optimize.registry import compile_optimizer
from netcast.optimize.workflow import compile_recipe, make_recipe, recompile
from netcast.session import load
from netcast.testing import SchemaEngine

SPEC = embedded.spec()
WRONG = {3, 7}  # the model answers these questions wrong: their traces do not train it


def word(prompt: str) -> str:
    found = re.findall(r"Word(\d+) what is item", prompt)
    return found[-1] if found else ""


def right_except(wrong):
    def reply(prompt):
        n = word(prompt)
        answer = "nope" if n and int(n) in wrong else f"Word{n}"
        return {"reasoning": "It says so.", "query": f"item {n}", "answer": answer}

    return reply


class RecordingEngine(SchemaEngine):
    """A scripted engine keeping each request as the chat it is (system, then messages)."""

    def __init__(self, script):
        super().__init__(script)
        self.chats = []

    def complete(self, request):
        self.chats.append(
            [{"role": "system", "content": request.system}]
            + [{"role": m.role, "content": m.text} for m in request.messages]
        )
        return super().complete(request)


@pytest.fixture
def qa_file(tmp_path):
    rows = [
        {
            "id": f"q{i}",
            "question": f"Word{i} what is item {i}?",
            "answers": [f"Word{i}"],
            "paragraphs": [
                {"title": f"Item {i}", "text": f"Item {i} is Word{i}.", "is_supporting": True}
            ],
        }
        for i in range(24)
    ]
    path = tmp_path / "qa.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return str(path)


@pytest.fixture
def trainer(monkeypatch):
    """The tiny model trains in place of the embedded one; each finetune's examples (the chats
    that reached the trainer) and base model are recorded."""
    calls = []
    original = lora_provider.finetune

    def recorded(model, train_data, train_kwargs=None, **kwargs):
        calls.append({"model": model, "chats": [item["messages"] for item in train_data]})
        return original(model, train_data, train_kwargs, **kwargs)

    monkeypatch.setattr(training, "load_base", tiny_base)
    monkeypatch.setattr(lora_provider, "finetune", recorded)
    monkeypatch.setattr(lora_provider, "available_memory", lambda: 1 << 40)  # the 1.5B's estimate
    return calls


def recipe_for(
    qa_file,
    program="basic",
    optimizer="finetune",
    *,
    limit=8,
    knobs=None,
    teacher="model",
    select_on="dev",
    **settings,
):
    train = {"min_examples": 4, **settings.pop("train", {})}
    return make_recipe(
        program=program,
        knobs=knobs or {},
        dataset=qa_file,
        train_limit=limit,
        dev_limit=4,
        optimizer=optimizer,
        optimizer_settings=compile_optimizer(program, optimizer, teacher).settings_type.read(
            {"train": train, **settings}
        ),
        model="embedded",
        teacher=teacher,
        select_on=select_on,
    )


def embedded_lm(script, name="embedded", engine=None):
    return EmbeddedLM(name, engine or RecordingEngine(script), cache=False, num_retries=0)


def train_questions(qa_file, limit=8):
    from netcast.data import load_dataset

    return [ex.question for ex in load_dataset(qa_file, "train", limit).examples]


def reply_of(chat) -> dict:
    assert chat[-1]["role"] == "assistant"
    return json.loads(chat[-1]["content"])


# -- which examples reach the trainer --------------------------------------------------------


def test_every_step_trains_on_its_own_passing_calls_as_the_chat_it_was_shown(
    qa_file, tmp_path, trainer
):
    lm = embedded_lm(right_except(WRONG))
    result = compile_recipe(recipe_for(qa_file, "multihop"), tmp_path / "art", lm=lm)
    questions = train_questions(qa_file)
    passing = [q for q in questions if int(word(q)) not in WRONG]
    assert 0 < len(passing) < len(questions)  # some traces fail the metric

    (call,) = trainer
    chats = call["chats"]
    assert call["model"] == lm.model
    # the chat each step was sent at inference, then its reply as the adapter asks for it
    for chat in chats:
        assert chat[:-1] in lm.engine.chats
    queries = [c for c in chats if "query" in reply_of(c)]
    answers = [c for c in chats if "answer" in reply_of(c)]
    assert len(queries) == 2 * len(passing) and len(answers) == len(passing)
    assert len(chats) == len(queries) + len(answers)
    asked = sorted(word(c[-2]["content"]) for c in answers)
    assert asked == sorted(word(q) for q in passing)  # failing ones left out
    assert all(reply_of(c)["answer"] == f"Word{word(c[-2]['content'])}" for c in answers)
    # the second hop's query writer is shown the first hop's passages, the first none
    first, second = (
        [c for c in queries if ("Item " in c[-2]["content"]) is has] for has in (False, True)
    )
    assert len(first) == len(second) == len(passing)

    recipe, _, _ = read_artifact(result.artifact)
    examples = recipe["finetune"]["examples"]
    n = len(passing)
    assert examples["per_step"] == {
        "generate_query[0]": n,
        "generate_query[1]": n,
        "generate_answer": n,
    }
    assert (examples["count"], examples["passing"], examples["questions"]) == (
        len(chats),
        n,
        len(questions),
    )
    assert (examples["teacher"], examples["split"], examples["limit"]) == (None, "train", 8)


def test_the_agents_traced_delete_calls_train_on_the_chat_with_its_labels(
    qa_file, tmp_path, trainer
):
    # chunk_delete runs under a signature naming this retrieval's labels (N1, N2), which a
    # trace does not hold; its training chats are still the ones it was sent
    def script(prompt):
        reply = right_except(set())(prompt)
        if "[[ ## retrieved ## ]]" in prompt:
            return {"delete_ids": ["N2"]}
        return {**reply, "action": "answer", "query": ""}

    lm = embedded_lm(script)
    recipe = recipe_for(qa_file, "iterative", knobs={"k": 2, "reasoning": False})
    compile_recipe(recipe, tmp_path / "art", lm=lm)
    (call,) = trainer
    deletes = [c for c in call["chats"] if "delete_ids" in reply_of(c)]
    assert len(deletes) == 8 and all(reply_of(c) == {"delete_ids": ["N2"]} for c in deletes)
    for chat in deletes:
        assert chat[:-1] in lm.engine.chats  # the chat the step was sent
        assert "list[Literal['N1', 'N2', '[N1]', '[N2]']]" in chat[0]["content"]


def test_a_teacher_models_passing_traces_train_the_student(qa_file, tmp_path, trainer):
    student = embedded_lm(right_except(set(range(24))))  # it answers everything wrong
    teacher = dspy.LM("scripted/teacher", engine=RecordingEngine(right_except(set())), cache=False)
    recipe = recipe_for(qa_file)
    result = compile_recipe(recipe, tmp_path / "art", lm=student, teacher_lm=teacher)

    questions = train_questions(qa_file)
    (call,) = trainer
    assert call["model"] == student.model  # the student's weights are tuned
    assert len(call["chats"]) == len(questions)
    for chat in call["chats"]:
        assert chat[:-1] in teacher.engine.chats
        assert reply_of(chat)["answer"] == f"Word{word(chat[-2]['content'])}"
    # the student was never asked a training question (it was scored on dev only)
    shown = [c[-1]["content"] for c in student.engine.chats]
    assert not any(q in text for q in questions for text in shown)
    examples = read_artifact(result.artifact)[0]["finetune"]["examples"]
    assert examples["teacher"] == "scripted/teacher" and examples["count"] == len(questions)


@pytest.mark.parametrize(("end", "seconds"), [(160.25, 60.2), (100.0, 0.0)])
def test_a_teacher_models_tracing_time_is_recorded_from_the_compile_to_its_examples(
    qa_file, tmp_path, trainer, monkeypatch, end, seconds
):
    from netcast.optimize import finetune as finetune_mod

    ticks = iter([100.0, end])  # the tracing starts, then its examples are prepared
    monkeypatch.setattr(finetune_mod, "monotonic", lambda: next(ticks))
    student = embedded_lm(right_except(set(range(24))))
    teacher = dspy.LM("scripted/teacher", engine=RecordingEngine(right_except(set())), cache=False)
    result = compile_recipe(recipe_for(qa_file), tmp_path / "art", lm=student, teacher_lm=teacher)

    examples = read_artifact(result.artifact)[0]["finetune"]["examples"]
    assert examples["trace_seconds"] == seconds  # both clock reads, in that order; 0.0 is kept
    assert next(ticks, None) is None


# -- the artifact ----------------------------------------------------------------------------


def test_the_artifact_holds_the_adapter_its_hashes_provenance_and_loss_and_load_serves_it(
    qa_file, tmp_path, trainer
):
    import gguf

    lm = embedded_lm(right_except(WRONG))
    result = compile_recipe(recipe_for(qa_file, train={"epochs": 2}), tmp_path / "art", lm=lm)
    recipe, _, _ = read_artifact(result.artifact)
    entry = recipe["finetune"]
    path = result.artifact / "lora.gguf"
    sha = embedded.sha256_of(path)
    assert entry["adapter"] == {"file": "lora.gguf", "sha256": sha, "size": path.stat().st_size}
    assert entry["base"] == {"name": "embedded", "sha256": SPEC.sha256, "file": SPEC.file_name}
    header = gguf.GGUFReader(str(path)).fields["netcast.base_sha256"].contents()
    assert header == SPEC.sha256
    n = len(trainer[0]["chats"])
    assert entry["examples"]["count"] == n
    assert len(entry["loss_curve"]) == 2 * n  # one step per example, two epochs
    assert entry["settings"]["epochs"] == 2 and entry["settings"]["rank"] == 16
    assert recipe["optimizer"]["settings"]["train"]["min_examples"] == 4
    # the program was scored with the adapter, and loaded back it serves it
    tuned = lora.tuned_model_id(SPEC, sha)
    assert result.reloaded is None
    program = load(result.artifact, model=lm)
    assert {p.lm.model for p in program.predictors()} == {tuned}

    # on another machine (an empty adapter store) the artifact's own file serves it
    for stored in lora.adapters_dir().iterdir():
        stored.unlink()
    program = load(result.artifact, model=lm)
    assert {p.lm.model for p in program.predictors()} == {tuned}
    assert embedded.sha256_of(lora.adapter_path(sha)) == sha
    assert lora.read_record(sha).loss_curve == pytest.approx(entry["loss_curve"])


def test_load_runs_the_adapter_on_the_engine_the_tuned_id_names(qa_file, tmp_path, trainer):
    class Engine(GGUFEngine):
        def base_answer(self, prompt):
            return f"Word{word(prompt)}"

    lm = embedded_lm(None, engine=Engine(str(embedded.model_path())))
    result = compile_recipe(recipe_for(qa_file), tmp_path / "art", lm=lm, reload=True)
    sha = read_artifact(result.artifact)[0]["finetune"]["adapter"]["sha256"]
    program = load(result.artifact, model=lm)
    engine = program.predictors()[0].lm.engine
    assert engine.lora_path == str(lora.adapter_path(sha)) and lm.engine.lora_path is None
    assert program(question="Word1 what is item 1?").answer == "tuned"
    assert result.before["f1"] == 1.0 and result.after["f1"] == result.reloaded["f1"] == 0.0


@pytest.fixture
def tuned_artifact(qa_file, tmp_path, trainer):
    lm = embedded_lm(right_except(WRONG))
    return compile_recipe(recipe_for(qa_file), tmp_path / "art", lm=lm).artifact, lm


# -- a tuned artifact served merged (netcast.models.merge) -----------------------------------

MERGED = "/merged/base-adapter.gguf"


@pytest.fixture
def llama_loads(monkeypatch):
    """What llama.cpp is asked to load (model file, adapter file): no model is read; a merge
    is recorded, not built (tests/core/models/test_merge.py builds real ones)."""
    import llama_cpp

    from netcast.models import merge

    loads, merges = [], []

    class FakeLlama:
        def __init__(self, **kwargs):
            loads.append((kwargs["model_path"], kwargs["lora_path"]))

        def close(self):
            pass

    def merged_model_of(base, adapter):
        merges.append((str(base), str(adapter)))
        return MERGED

    monkeypatch.setattr(llama_cpp, "Llama", FakeLlama)
    monkeypatch.setattr(merge, "merged_model_of", merged_model_of)
    return loads, merges


def served(program) -> None:
    """Load the model the program's steps run (as their first call would)."""
    (engine,) = {id(p.lm.engine): p.lm.engine for p in program.predictors()}.values()
    engine._model()


def test_load_with_merge_adapter_serves_the_merged_file_by_default_the_runtime_adapter(
    tuned_artifact, llama_loads
):
    from netcast.models import make_lm

    artifact, _ = tuned_artifact
    loads, merges = llama_loads
    sha = read_artifact(artifact)[0]["finetune"]["adapter"]["sha256"]
    base, adapter = str(embedded.model_path()), str(lora.adapter_path(sha))
    tuned = lora.tuned_model_id(SPEC, sha)

    served(load(artifact))  # the default: llama.cpp applies the adapter at run time
    assert loads == [(base, adapter)] and not merges

    program = load(artifact, merge_adapter=True)
    assert {p.lm.model for p in program.predictors()} == {tuned}  # the same model id
    served(program)
    assert loads[1:] == [(MERGED, None)] and merges == [(base, adapter)]

    given = make_lm("embedded")  # an LM given: its copy merges, the LM itself is unchanged
    served(load(artifact, model=given, merge_adapter=True))
    assert loads[2:] == [(MERGED, None)] and given.engine.merge_lora is False
    # an LM made to merge keeps merging
    served(load(artifact, model=make_lm("embedded", merge_adapter=True)))
    assert loads[3:] == [(MERGED, None)] and len(merges) == 3


def test_bench_merge_adapter_serves_a_compiled_tuned_artifact_merged(
    tuned_artifact, qa_file, llama_loads, monkeypatch, tmp_path
):
    import netcast.specs.bench as bench
    from netcast.errors import InputError

    artifact, _ = tuned_artifact
    loads, merges = llama_loads
    sha = read_artifact(artifact)[0]["finetune"]["adapter"]["sha256"]
    entries = bench._entries

    def served_then_stop(*args):
        for _, program, _ in entries(*args):
            served(program)
        raise InputError("stop here")

    monkeypatch.setattr(bench, "_entries", served_then_stop)
    args = ["bench", "--programs", "", "--compiled", str(artifact), "--datasets", qa_file]
    base, adapter = str(embedded.model_path()), str(lora.adapter_path(sha))
    for flag, load_, merge_, recorded in [
        ([], (base, adapter), [], None),
        (["--merge-adapter"], (MERGED, None), [(base, adapter)], "merged"),
    ]:
        loads.clear()
        merges.clear()
        run_dir = tmp_path / f"b{len(flag)}"
        result = CliRunner().invoke(app, [*args, "--limit", "2", "--run-dir", str(run_dir), *flag])
        assert result.exit_code == 2 and "error: stop here" in result.output, result.output
        assert loads == [load_] and merges == merge_
        # the run records it: a merged run never resumes a runtime-adapter one
        assert json.loads((run_dir / "bench.json").read_text()).get("adapter") == recorded


def test_merge_adapter_does_not_go_with_a_spec(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('title = "t"\ndataset = "hotpotqa-sample"\nprograms = ["basic"]\n')
    result = CliRunner().invoke(app, ["bench", "--spec", str(spec), "--merge-adapter"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: --merge-adapter does not go with --spec: drop it"


def test_an_adapter_of_another_base_model_is_refused_in_one_line(tuned_artifact):
    artifact, lm = tuned_artifact
    other = embedded_lm(right_except(WRONG), name="embedded-1.5b")
    with pytest.raises(ModelFileError, match="adapter trained on base model embedded") as err:
        load(artifact, model=other)
    assert "not on embedded-1.5b" in str(err.value) and "\n" not in str(err.value)
    assert "--model embedded-1.5b" in str(err.value)
    # a recipe naming another base hash than the model's is refused the same way
    recipe = json.loads((artifact / "recipe.json").read_text())
    recipe["finetune"]["base"]["sha256"] = "0" * 64
    (artifact / "recipe.json").write_text(json.dumps(recipe))
    with pytest.raises(ModelFileError, match="base model embedded .sha256 000000000000"):
        load(artifact, model=lm)


def test_a_corrupt_adapter_file_is_refused_in_one_line(tuned_artifact):
    artifact, lm = tuned_artifact
    path = artifact / "lora.gguf"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="lora.gguf: adapter file damaged") as err:
        load(artifact, model=lm)
    assert "\n" not in str(err.value)
    path.unlink()
    with pytest.raises(InputError, match="lora.gguf: missing"):
        load(artifact, model=lm)


def test_a_model_with_no_weights_cannot_serve_a_tuned_artifact(tuned_artifact):
    artifact, _ = tuned_artifact
    api = dspy.LM("scripted/api", engine=ScriptedEngine(lambda p: {"answer": "x"}))
    with pytest.raises(InputError, match="runs a LoRA adapter of the embedded model embedded"):
        load(artifact, model=api)


def test_compile_from_an_artifact_with_another_model_trains_a_new_adapter(
    tuned_artifact, tmp_path, trainer
):
    artifact, _ = tuned_artifact
    old = read_artifact(artifact)[0]["finetune"]
    other = embedded_lm(right_except(WRONG), name="embedded-1.5b")
    result, _ = recompile(artifact, "embedded-1.5b", tmp_path / "v2", lm=other)

    assert [call["model"] for call in trainer] == [
        lora.base_model_id(SPEC),
        lora.base_model_id(embedded.spec("embedded-1.5b")),
    ]
    new = read_artifact(result.artifact)[0]["finetune"]
    big = embedded.spec("embedded-1.5b")
    assert new["base"] == {"name": big.name, "sha256": big.sha256, "file": big.file_name}
    assert new["adapter"]["sha256"] != old["adapter"]["sha256"]
    assert embedded.sha256_of(result.artifact / "lora.gguf") == new["adapter"]["sha256"]
    program = load(result.artifact, model=other)
    assert {p.lm.model for p in program.predictors()} == {
        lora.tuned_model_id(big, new["adapter"]["sha256"])
    }


def test_show_names_the_adapter(tuned_artifact):
    artifact, _ = tuned_artifact
    sha = read_artifact(artifact)[0]["finetune"]["adapter"]["sha256"]
    shown = CliRunner().invoke(app, ["show", str(artifact)], catch_exceptions=False)
    assert shown.exit_code == 0
    line = next(x for x in shown.output.splitlines() if x.startswith("adapter: "))
    assert f"lora.gguf (sha256 {sha[:12]}...)" in line
    assert f"LoRA of embedded (sha256 {SPEC.sha256[:12]}...)" in line


# -- bad input --------------------------------------------------------------------------------


def never(*args, **kwargs):
    raise AssertionError("training started")


def test_a_model_served_by_an_api_is_refused_before_any_call(qa_file, tmp_path, monkeypatch):
    monkeypatch.setattr(training, "load_base", never)
    engine = ScriptedEngine(lambda p: {"answer": "x"})
    api = dspy.LM("scripted/api", engine=engine, cache=False)
    for optimizer in ("finetune", "better-together"):
        with pytest.raises(InputError, match="scripted/api: not an embedded model") as err:
            compile_recipe(recipe_for(qa_file, optimizer=optimizer), tmp_path / "art", lm=api)
        assert "\n" not in str(err.value)
    assert engine.prompts == [] and not (tmp_path / "art").exists()


def test_the_command_line_refuses_an_api_model_in_one_line_exit_2(qa_file, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a call would fail on the key first
    result = CliRunner().invoke(
        app,
        [
            *("compile", "--out", str(tmp_path / "art"), "--dataset", qa_file),
            *("--optimizer", "finetune", "--model", "openai/gpt-4o-mini"),
        ],
    )
    assert result.exit_code == 2
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "openai/gpt-4o-mini: not an embedded model" in lines[0]


@pytest.mark.parametrize("optimizer", ["finetune", "better-together"])
def test_too_few_passing_examples_are_refused_before_training(
    qa_file, tmp_path, monkeypatch, optimizer
):
    monkeypatch.setattr(training, "load_base", never)
    lm = embedded_lm(right_except(set(range(1, 24))))  # only question 0 passes, if in train
    settings = {"strategy": "p -> w"} if optimizer == "better-together" else {}
    recipe = recipe_for(qa_file, optimizer=optimizer, **settings)
    # better-together: DSPy's BetterTogether would log the failed step and save the program
    with pytest.raises(InputError, match=r"only [01] finetune example.s. after filtering"):
        compile_recipe(recipe, tmp_path / "art", lm=lm)
    assert not (tmp_path / "art").exists()


def test_too_few_training_questions_are_refused_in_one_line_before_any_call(
    qa_file, tmp_path, monkeypatch
):
    import sys

    from netcast.models.llama import load_cpu_backends

    # llama.cpp's first load in a process logs a line through Python's stderr, which the
    # command line holds back (on its file descriptor) but CliRunner would capture
    load_cpu_backends()
    monkeypatch.setattr(training, "load_base", never)
    lm = embedded_lm(right_except(set()))
    monkeypatch.setattr(sys.modules["netcast.cli.options"], "command_lm", lambda *a, **k: lm)
    out = tmp_path / "art"
    result = CliRunner().invoke(
        app,
        [
            *("compile", "--out", str(out), "--dataset", qa_file, "--optimizer", "finetune"),
            *("--train-limit", "5"),
        ],
    )
    assert result.exit_code == 2
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1, result.output
    assert (
        "5 training question(s) give basic at most 5 example(s), fewer than min_examples=8"
        in (lines[0])
    )
    assert "--train-limit" in lines[0] and "--finetune-set min_examples=N" in lines[0]
    assert lm.engine.chats == [] and not out.exists()


MIN_8 = {"train": {"min_examples": 8}}


@pytest.mark.parametrize(
    ("program", "optimizer", "teacher", "limit", "match"),
    [
        # multihop (2 hops): 3 examples a question at most
        ("multihop", "finetune", "model", 2, r"2 training question\(s\) give multihop at most 6"),
        ("basic", "finetune", "annotations", 7, r"7 training question\(s\) give basic at most 7"),
        # better-together selecting on training questions trains on the others
        ("basic", "better-together", "model", 8, r"2 training question\(s\) \(of 8; the others"),
    ],
)
def test_too_few_training_questions_for_min_examples_are_refused_before_any_call(
    qa_file, tmp_path, monkeypatch, program, optimizer, teacher, limit, match
):
    monkeypatch.setattr(training, "load_base", never)
    lm = embedded_lm(right_except(set()))
    select_on = "train" if optimizer == "better-together" else "dev"
    recipe = recipe_for(
        qa_file, program, optimizer, limit=limit, teacher=teacher, select_on=select_on, **MIN_8
    )
    with pytest.raises(InputError, match=match):
        compile_recipe(recipe, tmp_path / "art", lm=lm)
    assert lm.engine.chats == []


def test_enough_questions_for_min_examples_go_on_to_collect_the_examples(
    qa_file, tmp_path, monkeypatch
):
    monkeypatch.setattr(training, "load_base", never)
    lm = embedded_lm(right_except(set(range(24))))  # every answer wrong: no example passes
    # multihop: 3 questions, 3 calls each: 9 examples could reach min_examples
    recipe = recipe_for(qa_file, "multihop", limit=3, **MIN_8)
    with pytest.raises(InputError, match=r"only 0 finetune example.s. after filtering"):
        compile_recipe(recipe, tmp_path / "art", lm=lm)
    assert lm.engine.chats  # the traces were collected, then refused


@pytest.mark.parametrize("short", ["memory", "disk"])
def test_a_machine_without_the_memory_or_disk_to_train_is_refused_before_any_call(
    qa_file, tmp_path, monkeypatch, short
):
    monkeypatch.setattr(training, "load_base", never)
    memory, disk = (1 << 30, 1 << 40) if short == "memory" else (1 << 40, 1 << 20)
    monkeypatch.setattr(lora_provider, "available_memory", lambda: memory)
    monkeypatch.setattr(lora_provider, "free_disk", lambda path: disk)
    lm = embedded_lm(right_except(set()))
    with pytest.raises(InputError, match=f"not enough {short} .*to finetune embedded") as err:
        compile_recipe(recipe_for(qa_file), tmp_path / "art", lm=lm)
    assert "\n" not in str(err.value)
    assert lm.engine.chats == [] and not (tmp_path / "art").exists()


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"train": {"lr": 1}}, "unknown lr"),
        ({"train": {"rank": 0}}, "rank=0"),
        ({"metric_threshold": 2.0}, "metric_threshold=2.0"),
        ({"strategy": "p -> p"}, "at least one w"),
        ({"prompt": "nope"}, "prompt optimizer 'nope'"),
    ],
)
def test_bad_settings_are_refused_when_the_recipe_is_made(qa_file, settings, match):
    with pytest.raises(InputError, match=match):
        recipe_for(qa_file, optimizer="better-together", **settings)


# -- better-together ----------------------------------------------------------------------------


class LoraEngine(GGUFEngine):
    """Right on even questions with the base model, on every one with an adapter."""

    def reply(self, prompt):
        n = word(prompt)
        right = self.lora_path or (n and int(n) % 2 == 0)
        return {"answer": f"Word{n}" if right else "nope"}


def test_better_together_keeps_the_tuned_step_that_scores_best_and_saves_its_adapter(
    qa_file, tmp_path, trainer
):
    lm = embedded_lm(None, engine=LoraEngine(str(embedded.model_path())))
    train = {"min_examples": 2}  # two of the first 8 training questions are even
    recipe = recipe_for(qa_file, optimizer="better-together", strategy="p -> w", train=train)
    result = compile_recipe(recipe, tmp_path / "art", lm=lm, reload=True)
    recipe, _, _ = read_artifact(result.artifact)
    candidates = recipe["better_together"]["candidates"]
    chosen = [c["strategy"] for c in candidates if c["chosen"]]
    assert chosen == ["p -> w"] and {c["strategy"] for c in candidates} == {"none", "p", "p -> w"}
    assert (result.artifact / "lora.gguf").exists()
    assert result.after["f1"] == result.reloaded["f1"] == 1.0 > result.before["f1"]
    shown = CliRunner().invoke(app, ["show", str(result.artifact)], catch_exceptions=False)
    assert "p -> w 100.0 (kept)" in shown.output and "adapter: lora.gguf" in shown.output
    (call,) = trainer
    assert all(int(word(c[-2]["content"])) % 2 == 0 for c in call["chats"])  # passing only


# -- the command line ---------------------------------------------------------------------------


def test_netcast_compile_tunes_with_the_settings_given_and_prints_the_adapter(
    qa_file, tmp_path, trainer, monkeypatch
):
    lm = embedded_lm(right_except(WRONG))
    import sys

    monkeypatch.setattr(sys.modules["netcast.cli.options"], "command_lm", lambda *a, **k: lm)
    out = tmp_path / "art"
    result = CliRunner().invoke(
        app,
        [
            *("compile", "--out", str(out), "--dataset", qa_file, "--program", "basic"),
            *("--train-limit", "8", "--dev-limit", "4", "--optimizer", "finetune"),
            *("--finetune-set", "epochs=2", "--finetune-set", "min_examples=4"),
            *("--finetune-set", "metric_threshold=1.0"),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    recipe = read_artifact(out)[0]
    settings = recipe["optimizer"]["settings"]
    assert settings["train"]["epochs"] == 2 and settings["metric_threshold"] == 1.0
    assert recipe["finetune"]["settings"]["epochs"] == 2
    assert len(recipe["finetune"]["loss_curve"]) == 2 * len(trainer[0]["chats"])
    line = next(
        x for x in result.output.splitlines() if x.startswith("adapter: lora.gguf (sha256 ")
    )
    assert line.endswith(" s of training")


@pytest.fixture
def threads_seen(monkeypatch):
    """Torch's CPU threads at each training step (in the training's own thread)."""
    import torch

    seen, original = [], training.train

    def watched(*args, on_step=None, **kwargs):
        def step(*report):
            seen.append(torch.get_num_threads())
            if on_step is not None:
                on_step(*report)

        return original(*args, on_step=step, **kwargs)

    monkeypatch.setattr(training, "train", watched)
    return seen


@pytest.mark.parametrize(
    ("args", "threads"),
    [
        ([], 3),  # every core (3 here)
        (["--threads", "1"], 1),
        (["--threads", "1", "--finetune-set", "threads=2"], 2),  # the finetune's own setting
    ],
)
def test_compile_threads_reach_the_training(
    qa_file, tmp_path, trainer, threads_seen, monkeypatch, args, threads
):
    import os
    import sys

    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    lm = embedded_lm(right_except(WRONG))
    monkeypatch.setattr(sys.modules["netcast.cli.options"], "command_lm", lambda *a, **k: lm)
    result = CliRunner().invoke(
        app,
        [
            *("compile", "--out", str(tmp_path / "art"), "--dataset", qa_file),
            *("--train-limit", "8", "--dev-limit", "4", "--optimizer", "finetune"),
            *("--finetune-set", "min_examples=4", *args),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert threads_seen and set(threads_seen) == {threads}


def test_annotation_finetune_trains_on_the_threads_the_compile_gives(
    hidden_gold_file, tmp_path, trainer, threads_seen, monkeypatch
):
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    recipe = recipe_for(hidden_gold_file, knobs={"k": 1}, teacher="annotations")
    lm = embedded_lm(right_except(set()))
    compile_recipe(recipe, tmp_path / "art", lm=lm, train_threads=1)
    assert threads_seen and set(threads_seen) == {1}


@pytest.mark.parametrize(
    ("teacher", "progress"), [("model", True), ("model", False), ("annotations", False)]
)
def test_the_training_progress_bar_shows_only_where_the_compile_shows_progress(
    hidden_gold_file, tmp_path, trainer, capsys, teacher, progress
):
    recipe = recipe_for(hidden_gold_file, knobs={"k": 1}, teacher=teacher)
    lm = embedded_lm(lambda prompt: {"answer": f"Secret{word(prompt)}"})
    compile_recipe(recipe, tmp_path / "art", lm=lm, progress=progress)
    assert trainer  # it trained
    assert ("finetune embedded" in capsys.readouterr().err) is progress


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--optimizer", "finetune", "--finetune-set", "rank=0"], "rank=0; give a whole"),
        (
            ["--optimizer", "finetune", "--finetune-set", "lr=1"],
            "unknown setting .lr.; .*learning_rate",
        ),
        (["--optimizer", "bootstrap", "--finetune-set", "epochs=2"], "configures --optimizer"),
    ],
)
def test_bad_finetune_settings_on_the_command_line_are_one_line(qa_file, tmp_path, args, match):
    result = CliRunner().invoke(
        app, ["compile", "--out", str(tmp_path / "art"), "--dataset", qa_file, *args]
    )
    assert result.exit_code == 2
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and re.search(match, lines[0]), result.output


# -- --teacher annotations: RAFT-style examples for basic's answer step ------------------------


@pytest.fixture
def hidden_gold_file(tmp_path):
    """Questions whose gold passage retrieval never finds at k=1: the top passage is a
    distractor sharing the question's words."""
    rows = [
        {
            "id": f"q{i}",
            "question": f"Word{i} what is item {i}?",
            "answers": [f"Secret{i}"],
            "paragraphs": [
                {"title": f"Vault {i}", "text": f"Its code is Secret{i}.", "is_supporting": True},
                {
                    "title": f"Item {i}",
                    "text": f"Item {i} is Word{i} what.",
                    "is_supporting": False,
                },
            ],
        }
        for i in range(40)
    ]
    path = tmp_path / "hidden.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return str(path)


def annotation_recipe(qa_file, program, knobs, *, limit, share, multitask=True):
    """A ``--teacher annotations --optimizer finetune`` recipe with RAFT's ``share`` (and one
    adapter per step where ``multitask`` is off)."""
    return make_recipe(
        program=program,
        knobs=knobs,
        dataset=qa_file,
        train_limit=limit,
        dev_limit=2,
        optimizer="finetune",
        optimizer_settings=AnnotationFinetuneSettings.of_flat(
            {"retrieved_share": share, "min_examples": 4, "multitask": multitask}
        ),
        model="embedded",
        teacher="annotations",
    )


def test_annotations_train_basics_answer_step_raft_style(hidden_gold_file, tmp_path, trainer):
    from netcast.models.factory import default_adapter
    from netcast.programs import BasicRAG
    from netcast.signatures import AnswerQuestion

    lm = embedded_lm(right_except(set()))
    recipe = annotation_recipe(hidden_gold_file, "basic", {"k": 1}, limit=16, share=0.5)
    result = compile_recipe(recipe, tmp_path / "art", lm=lm)
    questions = train_questions(hidden_gold_file, 16)
    assert not any(q in c[-1]["content"] for q in questions for c in lm.engine.chats)  # no call

    (call,) = trainer
    chats = call["chats"]
    assert len(chats) == len(questions)
    adapter = default_adapter(lm)
    swapped, kept = [], []
    for chat in chats:
        n = word(chat[-2]["content"])
        assert reply_of(chat) == {"answer": f"Secret{n}"}  # the gold answer
        gold = f"Vault {n}: Its code is Secret{n}."
        context = (
            [gold] if gold in chat[-2]["content"] else [f"Item {n}: Item {n} is Word{n} what."]
        )
        (swapped if context == [gold] else kept).append(n)
        question = f"Word{n} what is item {n}?"
        expected = adapter.format(AnswerQuestion, [], {"context": context, "question": question})
        assert chat[:-1] == expected  # the chat the answer step is shown for that context
    assert swapped and kept  # gold swapped in for some, retrieval's context kept for others

    # a kept context is exactly what the program is shown at inference
    n = kept[0]
    program = BasicRAG(None, lm=lm, k=1)
    program.retriever = load(result.artifact, model=lm).retriever
    before = len(lm.engine.chats)
    program(question=f"Word{n} what is item {n}?")
    inference = lm.engine.chats[before]
    assert next(c[:-1] for c in chats if word(c[-2]["content"]) == n) == inference

    examples = read_artifact(result.artifact)[0]["finetune"]["examples"]
    assert examples["teacher"] == "annotations" and examples["retrieved"] == len(kept)
    assert examples["per_step"] == {"answer": len(questions)}
    assert read_artifact(result.artifact)[0]["optimizer"]["settings"]["retrieved_share"] == 0.5


def test_the_agents_share_without_gold_trains_it_to_search_again_over_what_it_kept(
    hidden_gold_file, tmp_path, trainer
):
    # the agent's first search (k 1) finds only a distractor; with retrieved_share 1 every
    # question trains on that trajectory: search the question, the distractor stays (deleting
    # it all is refused), the decision searches the gold title, its passage is kept, answer
    lm = embedded_lm(right_except(set()))
    knobs = {"k": 1, "reasoning": False}
    recipe = annotation_recipe(hidden_gold_file, "iterative", knobs, limit=8, share=1.0)
    result = compile_recipe(recipe, tmp_path / "art", lm=lm)
    (call,) = trainer
    decisions = [c for c in call["chats"] if "action" in reply_of(c)]
    assert len(decisions) == 24  # the question's search, the gold title's, the answer
    again = [c for c in decisions if "[C1]" in c[-2]["content"] and "search" in str(reply_of(c))]
    assert len(again) == 8
    for chat in again:
        n = word(chat[-2]["content"])
        assert reply_of(chat) == {"action": "search", "query": f"Vault {n}"}
        assert f"[C1] Item {n}: Item {n} is Word{n} what." in chat[-2]["content"]
        assert f"Its code is Secret{n}" not in chat[-2]["content"]
    deletes = [c for c in call["chats"] if "delete_ids" in reply_of(c)]
    assert [reply_of(c)["delete_ids"] for c in deletes] == [[]] * 8  # the gold passage kept
    examples = read_artifact(result.artifact)[0]["finetune"]["examples"]
    assert examples["retrieved"] == 8
    assert examples["per_step"] == {"decide": 24, "delete_chunks": 8, "answer": 8}


def test_the_agents_delete_examples_carry_the_schema_its_delete_step_is_shown(
    hidden_gold_file, tmp_path, trainer
):
    # under the embedded model's JSON schema chunk_delete may name only the labels of the
    # chunks just retrieved (N1, N2); the examples it trains on are shown that same schema
    from netcast.programs import get_program

    lm = embedded_lm(right_except(set()))
    knobs = {"k": 2, "reasoning": False}
    recipe = annotation_recipe(hidden_gold_file, "iterative", knobs, limit=8, share=0.0)
    result = compile_recipe(recipe, tmp_path / "art", lm=lm)
    (call,) = trainer
    deletes = [c for c in call["chats"] if "delete_ids" in reply_of(c)]
    assert deletes

    program = get_program("iterative")(None, lm=lm, **knobs)
    program.retriever = load(result.artifact, model=lm).retriever
    before = len(lm.engine.chats)
    program(question="Word3 what is item 3?")
    shown = [c for c in lm.engine.chats[before:] if "[[ ## retrieved ## ]]" in c[-1]["content"]]
    (system, *_, user) = shown[0]
    assert "list[Literal['N1', 'N2', '[N1]', '[N2]']]" in system["content"]  # the labels
    assert {c[0]["content"] for c in deletes} == {system["content"]}
    instruction = user["content"].rsplit("\n\n", 1)[-1]  # the reply's format, asked last
    assert "Literal['N1', 'N2'" in instruction
    assert all(c[-2]["content"].endswith(instruction) for c in deletes)


def test_iterkeys_next_token_validator_trains_on_the_chat_adapters_prompt(
    hidden_gold_file, tmp_path, trainer
):
    # validate_next_token is read as the token after "[[ ## is_correct ## ]]", in DSPy's
    # ChatAdapter's prompt: its examples are that prompt and that reply, not the JSON schema's
    def script(prompt):
        return {**right_except(set())(prompt), "keywords": ["item"], "is_correct": True}

    lm = embedded_lm(script)
    recipe = annotation_recipe(
        hidden_gold_file, "iterkey", {"k": 1, "validation": "text"}, limit=8, share=0.0
    )
    compile_recipe(recipe, tmp_path / "art", lm=lm)
    (call,) = trainer
    verdicts = [c for c in call["chats"] if c[-1]["content"].startswith("[[ ## is_correct ## ]]")]
    assert verdicts and all(c[-1]["content"].split("\n")[1] in ("True", "False") for c in verdicts)
    json_verdicts = [c for c in call["chats"] if '"is_correct"' in c[-1]["content"]]
    assert len(json_verdicts) == len(verdicts)  # the text-mode validator keeps the JSON schema
    for chat in verdicts:
        assert "[[ ## is_correct ## ]]" in chat[0]["content"] and "JSON" not in chat[0]["content"]


def test_annotation_finetune_settings_are_checked(qa_file):
    with pytest.raises(InputError, match="retrieved_share=2"):
        AnnotationFinetuneSettings.of_flat({"retrieved_share": 2})
    with pytest.raises(InputError, match="its settings are AnnotationFinetuneSettings, not Fine"):
        make_recipe(
            program="basic",
            knobs={},
            dataset=qa_file,
            optimizer="finetune",
            optimizer_settings=FinetuneSettings(),
            teacher="annotations",
        )
    with pytest.raises(InputError, match="--teacher annotations works with"):
        make_recipe(
            program="basic", knobs={}, dataset=qa_file, optimizer="mipro", teacher="annotations"
        )
    for bad, match in [
        ({"strategy": "p -> p"}, "better-together strategy 'p -> p'"),
        ({"held_out": 1.0}, "held_out=1.0; give per_step >= 1 and 0 < held_out < 1"),
        ({"per_step": 0}, "per_step=0"),
    ]:
        with pytest.raises(InputError, match=re.escape(match)):
            AnnotationBetterTogetherSettings.of_flat(bad)


def test_one_adapter_per_step_trains_each_on_its_own_examples_and_load_runs_each(
    hidden_gold_file, tmp_path, trainer
):
    # multitask off: the query step and the answer step train apart, one after the other, each
    # on its own examples; the artifact holds both files, and loaded, each step runs its own
    lm = embedded_lm(right_except(set()))
    knobs = {"k": 1, "second_hop": 1}
    recipe = annotation_recipe(
        hidden_gold_file, "basic", knobs, limit=8, share=0.0, multitask=False
    )
    result = compile_recipe(recipe, tmp_path / "art", lm=lm)
    assert len(trainer) == 2
    by_step = {tuple(sorted(reply_of(c))): call for call in trainer for c in call["chats"]}
    query, answer = by_step[("query",)], by_step[("answer",)]
    assert query is not answer
    assert all(set(reply_of(c)) == {"query"} for c in query["chats"]) and len(query["chats"]) == 8
    assert all(set(reply_of(c)) == {"answer"} for c in answer["chats"])
    assert len(answer["chats"]) == 8

    entry = read_artifact(result.artifact)[0]["finetune"]
    steps = entry["steps"]
    assert set(steps) == {"write_query", "answer"}
    shas = {}
    for step, own in steps.items():
        path = result.artifact / f"lora-{step}.gguf"
        assert own["adapter"]["file"] == path.name
        assert own["adapter"]["sha256"] == embedded.sha256_of(path)
        assert own["examples"]["per_step"] == {step: 8}
        shas[step] = own["adapter"]["sha256"]
    assert len(set(shas.values())) == 2 and not (result.artifact / "lora.gguf").exists()

    program = load(result.artifact, model=lm)
    models = {n.removesuffix(".predict"): p.lm.model for n, p in program.named_predictors()}
    assert models == {step: lora.tuned_model_id(SPEC, sha) for step, sha in shas.items()}

    shown = CliRunner().invoke(app, ["show", str(result.artifact)])
    assert "write_query's adapter: lora-write_query.gguf" in shown.output
    assert "answer's adapter: lora-answer.gguf" in shown.output
    out = CliRunner().invoke(app, ["export-adapter", str(result.artifact), str(tmp_path / "p")])
    assert out.exit_code == 2 and "one adapter per step (lora-answer.gguf" in out.output

    # a recipe naming a step the program has not, or a file outside the artifact: one line
    path = result.artifact / "recipe.json"
    recipe_json = json.loads(path.read_text())
    renamed = {"steps": {"nowhere" if k == "answer" else k: v for k, v in steps.items()}}
    path.write_text(json.dumps({**recipe_json, "finetune": renamed}))
    with pytest.raises(InputError, match="an adapter for step 'nowhere', which basic has not"):
        load(result.artifact, model=lm)
    outside = {**steps["answer"], "adapter": {**steps["answer"]["adapter"], "file": "../x.gguf"}}
    path.write_text(json.dumps({**recipe_json, "finetune": {"steps": {"answer": outside}}}))
    with pytest.raises(InputError, match="adapter.file '../x.gguf' is no adapter file name"):
        load(result.artifact, model=lm)


def test_a_server_cannot_serve_an_adapter_per_step(hidden_gold_file, tmp_path, trainer):
    lm = embedded_lm(right_except(set()))
    recipe = annotation_recipe(
        hidden_gold_file, "basic", {"k": 1, "second_hop": 1}, limit=8, share=0.2, multitask=False
    )
    result = compile_recipe(recipe, tmp_path / "art", lm=lm)
    server = dspy.LM("openai/tuned", api_base="http://127.0.0.1:9/v1", api_key="x")
    with pytest.raises(InputError, match="adapters of their own .*a server serves one"):
        load(result.artifact, model=server)


def test_one_adapter_per_step_with_no_examples_at_all_is_refused_before_training(
    hidden_gold_file, tmp_path, trainer
):
    # a chain-of-thought answer step gets no examples from the annotations (they give no
    # reasoning): with an adapter per step as with one, nothing trains and the compile says so
    recipe = annotation_recipe(
        hidden_gold_file,
        "basic",
        {"k": 1, "chain_of_thought": True},
        limit=8,
        share=0.2,
        multitask=False,
    )
    with pytest.raises(InputError, match="only 0 finetune example"):
        compile_recipe(recipe, tmp_path / "art", lm=embedded_lm(right_except(set())))
    assert trainer == []


class SecretEngine(GGUFEngine):
    """Right (the hidden gold answer) only with an adapter; every question asked is kept, by
    every copy of the engine (a tuned model runs a copy)."""

    asked: ClassVar[list[str]] = []

    def reply(self, prompt):
        n = word(prompt)
        SecretEngine.asked.append(n)
        return {"answer": f"Secret{n}" if self.lora_path else "nope"}


def test_annotation_better_together_trains_on_the_taught_prompts_and_selects_held_out(
    hidden_gold_file, tmp_path, trainer, monkeypatch
):
    # p -> w -> p from the annotations alone: the training chats hold the prompt step's two
    # demonstrations; the candidates are scored on the last quarter of the 16 training
    # questions, which never train; the adapter's candidate is kept (the earlier one of a tie)
    monkeypatch.setattr(SecretEngine, "asked", [])
    lm = embedded_lm(None, engine=SecretEngine(str(embedded.model_path())))
    recipe = recipe_for(
        hidden_gold_file,
        optimizer="better-together",
        teacher="annotations",
        knobs={"k": 1},
        limit=16,
        select_on="train",
        held_out=0.25,
        train={"min_examples": 2},
    )
    result = compile_recipe(recipe, tmp_path / "art", lm=lm)
    saved = read_artifact(result.artifact)[0]
    candidates = saved["better_together"]["candidates"]
    scores = {c["strategy"]: c["score"] for c in candidates}
    assert scores == {"none": 0.0, "p": 0.0, "p -> w": 100.0, "p -> w -> p": 100.0}
    assert [c["strategy"] for c in candidates if c["chosen"]] == ["p -> w"]
    (call,) = trainer
    questions = [int(word(q)) for q in train_questions(hidden_gold_file, 16)]
    taught, held = questions[:12], questions[12:]
    trained = [int(word(chat[-2]["content"])) for chat in call["chats"]]
    assert sorted(trained) == sorted(taught)
    # system, two demonstrations (question and answer each), the question, the answer
    assert {len(chat) for chat in call["chats"]} == {7}
    assert all(
        reply_of(chat) == {"answer": f"Secret{word(chat[-2]['content'])}"} for chat in call["chats"]
    )
    asked = {int(n) for n in SecretEngine.asked}
    assert set(held) <= asked and not asked & set(taught)  # no call made an example
    assert saved["finetune"]["examples"]["teacher"] == "annotations"
    assert (result.artifact / "lora.gguf").exists()
    assert result.after["f1"] == 1.0 > result.before["f1"]
