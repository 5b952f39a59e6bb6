import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import dspy
import pytest

from helpers import ScriptedEngine, last_question
from netcast.artifacts import read_artifact, save_artifact
from netcast.errors import InputError
from netcast.optimize.compile import compile_program, make_optimizer
from netcast.optimize.settings import TuneSettings
from netcast.optimize.tune import retune_knobs, run_tuning, tuning_recipe
from netcast.optimize.workflow import compile_recipe, make_recipe, recompile
from netcast.programs import BasicRAG
from netcast.session import load

SCRIPT = r"""
def answer(prompt):
    # answers are the question's first word, marked when few-shot demos are in the prompt
    demos = prompt.count("[[ ## answer ## ]]\nWord")
    word = last_question(prompt).split()[0]
    reply = {"answer": f"{word} ({demos} demos)"}
    if "`reasoning`" in prompt:  # a chain-of-thought step (a tuning trial may switch it on)
        reply["reasoning"] = "The question names it."
    return reply
"""
namespace = {"last_question": last_question}
exec(SCRIPT, namespace)
answer = namespace["answer"]


def recipe_for(dataset, **overrides):
    return make_recipe(
        program="basic",
        knobs={"top_k": 2},
        dataset=dataset,
        train_split="train",
        dev_split="dev",
        train_limit=6,
        dev_limit=4,
        optimizer="bootstrap",
        model="scripted/fake",
        **overrides,
    )


@pytest.fixture
def qa_file(tmp_path):
    """A local dataset in the samples' schema, 12 questions over 12 passages."""
    path = tmp_path / "qa.jsonl"
    rows = []
    for i in range(12):
        rows.append(
            {
                "id": f"q{i}",
                "question": f"Word{i} what is item {i}?",
                "answers": [f"Word{i}"],
                "paragraphs": [
                    {"title": f"Item {i}", "text": f"Item {i} is Word{i}.", "is_supporting": True}
                ],
            }
        )
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return str(path)


def test_compile_save_load_in_a_fresh_process_gives_identical_predictions(
    scripted_lm, qa_file, tmp_path
):
    lm, _ = scripted_lm(answer)
    result = compile_recipe(recipe_for(qa_file), tmp_path / "art", lm=lm, progress=False)
    recipe, scores, meta = read_artifact(result.artifact)
    assert recipe["knobs"] == {
        "k": 2,
        "chain_of_thought": False,
        "rerank_pool": 0,
        "rerank_signal": "retriever",
        "links": 0,
        "second_hop": 0,
    }
    assert recipe["optimizer"]["name"] == "bootstrap" and recipe["metric"] == "f1"
    assert recipe["retriever"]["kind"] == "bm25" and len(recipe["retriever"]["corpus_hash"]) == 64
    assert scores["before"]["n"] == scores["after"]["n"] == 4
    assert meta["versions"]["dspy"] and meta["lineage"] is None
    # the compile report: how many demonstrations the step got, and from where
    assert scores["demos"] == result.demos
    assert sum(result.demos["answer"].values()) == 2

    program = load(result.artifact, model=lm)
    questions = [f"Word{i} what is item {i}?" for i in (0, 5, 9)]
    here = [program(question=q).answer for q in questions]
    assert all("(2 demos)" in a for a in here), here  # the compiled demos are in the prompt

    code = textwrap.dedent(f"""
        import json, dspy
        from helpers import last_question, ScriptedEngine
        import netcast
        {textwrap.indent(SCRIPT, "        ").strip()}
        lm = dspy.LM("scripted/fake", engine=ScriptedEngine(answer), cache=False)
        program = netcast.load({str(result.artifact)!r}, model=lm)
        print(json.dumps([program(question=q).answer for q in {questions!r}]))
    """)
    tests_dir = str(Path(__file__).resolve().parents[1])
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": tests_dir},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == here


def test_the_compiled_window_is_recorded_and_a_loaded_artifact_runs_with_it(
    scripted_lm, qa_file, tmp_path, monkeypatch
):
    lm, engine = scripted_lm(answer)
    engine.n_ctx = 16384  # an engine that states its context window, as the embedded one does
    result = compile_recipe(recipe_for(qa_file), tmp_path / "art", lm=lm, progress=False)
    recipe, _, _ = read_artifact(result.artifact)
    assert recipe["model"]["lm_kwargs"] == {"n_ctx": 16384}

    made = []

    def make_lm(name, **kwargs):
        made.append((name, kwargs))
        return lm

    monkeypatch.setattr("netcast.session.make_lm", make_lm)
    load(result.artifact)  # the recipe's model, in the window it was compiled in
    load(result.artifact, model="scripted/other")  # another model: not the recipe's settings
    assert made == [("scripted/fake", {"n_ctx": 16384}), ("scripted/other", {})]


def test_a_tuned_artifact_records_the_window_too(scripted_lm, qa_file, tmp_path):
    lm, engine = scripted_lm(answer)
    engine.n_ctx = 16384
    settings = TuneSettings(trials=1, objectives="f1", storage=f"sqlite:///{tmp_path / 'tune.db'}")
    recipe = tuning_recipe("basic", qa_file, lm, settings, train_limit=6, dev_limit=4)
    run_tuning(recipe, lm, out=tmp_path / "tuned")
    assert read_artifact(tmp_path / "tuned")[0]["model"]["lm_kwargs"] == {"n_ctx": 16384}


def test_an_engine_that_states_no_window_records_no_lm_settings(scripted_lm, qa_file, tmp_path):
    lm, _ = scripted_lm(answer)
    result = compile_recipe(recipe_for(qa_file), tmp_path / "art", lm=lm, progress=False)
    assert read_artifact(result.artifact)[0]["model"]["lm_kwargs"] == {}


def test_a_study_resumed_under_other_settings_is_refused(scripted_lm, qa_file, tmp_path):
    lm, engine = scripted_lm(answer)
    storage = f"sqlite:///{tmp_path / 'tune.db'}"

    def tune(dev_limit, trials):
        settings = TuneSettings(trials=trials, objectives="f1", storage=storage)
        return run_tuning(tuning_recipe("basic", qa_file, lm, settings, dev_limit=dev_limit), lm)

    first = tune(4, 1)
    asked = len(engine.prompts)
    with pytest.raises(
        InputError, match="holds trials scored with dev_questions 4, not 6: give another"
    ):
        tune(6, 2)
    assert len(engine.prompts) == asked  # no trial ran under the other settings
    again = tune(4, 2)  # the same settings resume it
    assert again.name == first.name and len(again.study.trials) == 2


def test_uncompiled_program_has_no_demos(scripted_lm, bm25):
    scripted_lm(answer)
    assert "(0 demos)" in BasicRAG(bm25)(question="Paris capital?").answer


def test_recompile_with_another_model_records_lineage(scripted_lm, qa_file, tmp_path):
    lm, _ = scripted_lm(answer)
    first = compile_recipe(recipe_for(qa_file), tmp_path / "v1", lm=lm, progress=False)
    other, engine = scripted_lm(lambda p: {"answer": "no idea"})
    result, old = recompile(
        first.artifact, "scripted/other", tmp_path / "v2", lm=other, progress=False
    )
    recipe, scores, meta = read_artifact(result.artifact)
    assert recipe["model"]["name"] == "scripted/other"
    assert meta["lineage"]["parent"] == str(first.artifact.resolve())
    assert old == read_artifact(first.artifact)[1]
    assert scores["after"]["f1"] == 0.0 and engine.prompts


def test_retune_searches_the_recipes_knobs_and_refuses_a_judge_metric(
    scripted_lm, qa_file, tmp_path
):
    lm, engine = scripted_lm(answer)
    first = compile_recipe(recipe_for(qa_file), tmp_path / "v1", lm=lm, progress=False)
    asked = len(engine.prompts)
    knobs = retune_knobs(first.artifact, lm, trials=2)
    assert set(knobs) >= {"k", "links"} and len(engine.prompts) > asked
    judged = compile_recipe(
        recipe_for(qa_file, metric="judge"), tmp_path / "v2", lm=lm, progress=False
    )
    asked = len(engine.prompts)
    with pytest.raises(InputError, match="metric is judge; --retune scores questions without"):
        retune_knobs(judged.artifact, lm, trials=2)
    assert len(engine.prompts) == asked  # refused before any model call


def test_recompile_builds_the_recipes_teacher_as_the_caller_builds_models(
    scripted_lm, qa_file, tmp_path
):
    lm, _ = scripted_lm(answer)
    teachers = [ScriptedEngine(answer) for _ in range(2)]
    teacher_lms = [
        dspy.LM("scripted/teacher", engine=e, cache=False, num_retries=0) for e in teachers
    ]
    recipe = recipe_for(qa_file, teacher_model="scripted/teacher")
    first = compile_recipe(
        recipe, tmp_path / "v1", lm=lm, teacher_lm=teacher_lms[0], progress=False
    )
    made = []

    def make(name):  # as the command line builds them: its endpoints, retries, timeout
        made.append(name)
        return teacher_lms[1]

    recompile(first.artifact, "scripted/fake", tmp_path / "v2", lm=lm, make=make, progress=False)
    assert made == ["scripted/teacher"] and teachers[1].prompts


def test_a_failed_save_leaves_no_artifact(tmp_path, bm25):
    program = BasicRAG(bm25)

    def broken(path):
        raise OSError("disk full")

    program.save = broken
    with pytest.raises(OSError):
        save_artifact(tmp_path / "art", program, recipe_for("x"), {})
    assert list(tmp_path.iterdir()) == []


def make_artifact(tmp_path, bm25):
    recipe = recipe_for("x").to_dict()
    recipe["retriever"] = {
        "kind": "bm25",
        "index": None,
        "dataset": None,
        "corpus_hash": bm25.corpus.content_hash(),
    }
    return save_artifact(tmp_path / "art", BasicRAG(bm25), recipe, {"after": None})


def test_bad_artifacts_get_clear_errors(tmp_path, bm25, scripted_lm):
    lm, _ = scripted_lm(answer)
    art = make_artifact(tmp_path, bm25)
    assert load(art, model=lm, retriever=bm25).knobs.k == 2
    with pytest.raises(InputError, match="no such artifact"):
        read_artifact(tmp_path / "nope")
    (art / "recipe.json").write_text((art / "recipe.json").read_text()[:-20])
    with pytest.raises(InputError, match=r"recipe.json: corrupted JSON"):
        read_artifact(art)
    art = make_artifact(tmp_path, bm25)
    (art / "program.json").unlink()
    with pytest.raises(InputError, match="missing program.json"):
        read_artifact(art)


def test_load_binds_each_program_to_its_own_lm_and_leaves_dspy_settings_alone(
    tmp_path, bm25, scripted_lm
):
    scripted_lm(answer)  # this test's own DSPy cache
    dspy.configure(lm=None)
    art = make_artifact(tmp_path, bm25)
    engines = [ScriptedEngine(lambda p, n=n: {"answer": n}) for n in ("first", "second")]
    lms = [
        dspy.LM(f"scripted/{n}", engine=e, cache=False, num_retries=0)
        for n, e in zip(("first", "second"), engines, strict=True)
    ]
    one = load(art, model=lms[0], retriever=bm25)
    two = load(art, model=lms[1], retriever=bm25)
    assert dspy.settings.lm is None  # nothing was configured globally
    assert all(p.lm is lms[0] for p in one.predictors())
    assert all(p.lm is lms[1] for p in two.predictors())
    first, second = one(question="Paris?"), two(question="Paris?")
    assert (first.answer, second.answer) == ("first", "second")
    assert [len(e.prompts) for e in engines] == [1, 1]
    assert first.trace["lm_calls"] == second.trace["lm_calls"] == 1  # counted for a plain LM
    with dspy.context(lm=lms[1]):  # a loaded program keeps its model inside another context
        assert one(question="Paris?").answer == "first"


def test_index_hash_mismatch_is_refused(tmp_path, bm25, scripted_lm):
    from netcast.retrievers import save_index

    lm, _ = scripted_lm(answer)
    save_index(bm25, tmp_path / "idx")
    recipe = recipe_for("x").to_dict()
    recipe["retriever"] = {
        "kind": "bm25",
        "index": str(tmp_path / "idx"),
        "dataset": None,
        "corpus_hash": "f" * 64,
    }
    art = save_artifact(tmp_path / "art", BasicRAG(bm25), recipe, {})
    with pytest.raises(InputError, match="does not match"):
        load(art, model=lm)


def test_pickled_state_needs_allow_pickle(tmp_path, bm25, scripted_lm):
    lm, _ = scripted_lm(answer)
    art = make_artifact(tmp_path, bm25)
    BasicRAG(bm25).save(str(art / "program.pkl"))
    (art / "program.json").unlink()
    with pytest.raises(InputError, match="pickle.*refusing"):
        load(art, model=lm, retriever=bm25)
    assert load(art, model=lm, retriever=bm25, allow_pickle=True).knobs.k == 2


def test_state_of_another_program_does_not_load(tmp_path, bm25, scripted_lm):
    lm, _ = scripted_lm(answer)
    art = make_artifact(tmp_path, bm25)
    (art / "program.json").write_text(json.dumps({"other": {}}))
    with pytest.raises(InputError, match="does not fit"):
        load(art, model=lm, retriever=bm25)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[1, 2, 3]", "expected a JSON object, found a JSON list"),
        (b"\x80\x04\x95pickle bytes", "not a JSON text file"),
    ],
)
def test_a_program_json_that_is_no_program_state_is_refused_in_one_line(
    tmp_path, bm25, scripted_lm, content, message
):
    lm, _ = scripted_lm(answer)
    art = make_artifact(tmp_path, bm25)
    (art / "program.json").write_bytes(content)
    with pytest.raises(InputError, match=message) as err:
        load(art, model=lm, retriever=bm25)
    assert "\n" not in str(err.value) and "program.json" in str(err.value)


def test_unknown_optimizer_and_metric(scripted_lm, bm25):
    with pytest.raises(InputError, match="unknown optimizer 'adam'"):
        make_optimizer("adam", metric=lambda *a: 1.0)
    with pytest.raises(InputError, match="unknown metric 'bleu'"):
        compile_program(BasicRAG(bm25), [], metric="bleu")


def test_the_teacher_model_writes_the_bootstrapped_demonstrations(scripted_lm, qa_file):
    """The teacher answers the training questions (its traces become demos); the student is
    asked nothing while bootstrapping, then answers with the teacher's demos in its prompt."""
    from netcast.data import load_dataset
    from netcast.session import open_retriever

    _, student = scripted_lm(lambda prompt: {"answer": "student guess"})
    teacher = ScriptedEngine(lambda prompt: {"answer": last_question(prompt).split()[0]})
    teacher_lm = dspy.LM("scripted/teacher", engine=teacher, cache=False, num_retries=0)
    train = load_dataset(qa_file, "all", limit=4)
    program = BasicRAG(open_retriever(train), top_k=1)
    compiled = compile_program(
        program,
        train.examples,
        teacher_lm=teacher_lm,
        settings={"max_bootstrapped_demos": 2, "max_labeled_demos": 0},
    )
    assert student.prompts == [] and len(teacher.prompts) == 2  # two traces were enough
    demos = compiled.answer.demos
    assert [d["answer"] for d in demos] == ["Word0", "Word1"]  # the teacher's answers
    compiled(question="Word7 what is item 7?")
    assert len(student.prompts) == 1 and "Word0" in student.prompts[0]


@pytest.mark.parametrize(("verdict", "bootstrapped"), [(True, 2), (False, 0)])
def test_judge_model_decides_which_traces_pass_under_the_judge_metric(
    scripted_lm, qa_file, verdict, bootstrapped
):
    """With --metric judge and a judge model, that model (not the one compiled) judges each
    trace: it lets wrong answers through or holds right ones back."""
    from netcast.data import load_dataset
    from netcast.optimize.compile import demo_report
    from netcast.session import open_retriever

    _, student = scripted_lm(lambda prompt: {"answer": "wrong" if verdict else "Word"})
    judge = ScriptedEngine(lambda prompt: {"match": verdict})
    judge_lm = dspy.LM("scripted/judge", engine=judge, cache=False, num_retries=0)
    data = load_dataset(qa_file, "all", limit=6)
    compiled = compile_program(
        BasicRAG(open_retriever(data)), data.examples, metric="judge", judge_lm=judge_lm
    )
    assert demo_report(compiled)["answer"]["bootstrapped"] == bootstrapped
    assert judge.prompts and all("predicted_answer" in p for p in judge.prompts)
    assert not any("predicted_answer" in p for p in student.prompts)  # it judged nothing


def test_a_compile_records_its_judge_model(scripted_lm, qa_file, tmp_path):
    lm, engine = scripted_lm(answer)
    judge = ScriptedEngine(lambda prompt: {"match": True})
    judge_lm = dspy.LM("scripted/judge", engine=judge, cache=False, num_retries=0)
    recipe = recipe_for(qa_file, metric="judge", judge_model="scripted/judge")
    result = compile_recipe(recipe, tmp_path / "art", lm=lm, judge_lm=judge_lm, progress=False)
    saved = read_artifact(result.artifact)[0]
    assert saved["judge_model"] == "scripted/judge" and judge.prompts
    assert not any("predicted_answer" in p for p in engine.prompts)
    assert "judge_model" not in recipe_for(qa_file).to_dict()  # absent unless given
    with pytest.raises(InputError, match="--judge-model judges --metric judge only"):
        recipe_for(qa_file, judge_model="scripted/judge")


def test_without_a_judge_model_the_compiled_model_judges_even_beside_a_teacher(
    scripted_lm, qa_file, tmp_path
):
    """DSPy bootstraps inside the teacher's context; the judge stays the compiled model."""
    lm, student = scripted_lm(lambda p: {"match": True} if "predicted_answer" in p else answer(p))
    teacher = ScriptedEngine(answer)
    teacher_lm = dspy.LM("scripted/teacher", engine=teacher, cache=False, num_retries=0)
    recipe = recipe_for(qa_file, metric="judge", teacher_model="scripted/teacher")
    compile_recipe(recipe, tmp_path / "a", lm=lm, teacher_lm=teacher_lm, progress=False)
    assert teacher.prompts and not any("predicted_answer" in p for p in teacher.prompts)
    assert any("predicted_answer" in p for p in student.prompts)


def test_a_judge_is_refused_where_none_runs_even_in_a_recipe_read_back(
    scripted_lm, qa_file, tmp_path
):
    lm, engine = scripted_lm(answer)
    joint = make_recipe(program="basic", knobs={}, dataset=qa_file, optimizer="joint")
    with pytest.raises(InputError, match="metric judge: --optimizer joint scores"):
        compile_recipe(joint.updated(metric="judge"), tmp_path / "a", lm=lm, progress=False)
    with pytest.raises(InputError, match="metric judge: the strategy race scores"):
        make_recipe(program="auto", knobs={}, dataset="x", metric="judge")
    with pytest.raises(InputError, match="--judge-model: --teacher annotations"):
        recipe_for(qa_file, metric="judge", judge_model="scripted/j", teacher="annotations")
    assert engine.prompts == []


PROPOSAL = "Answer with the exact span from the passages."


def outputs_asked(prompt: str) -> list[str]:
    """The output field names a ChatAdapter prompt asks for."""
    import re

    block = prompt.split("Your output fields are:")[1].split("All interactions")[0]
    return re.findall(r"\d+\. `(\w+)`", block)


def proposing_teacher():
    """A teacher LM that proposes PROPOSAL as the instruction and says "ok" to the rest."""

    def teacher(prompt):
        asked = outputs_asked(prompt)
        return {name: PROPOSAL if name == "proposed_instruction" else "ok" for name in asked}

    engine = ScriptedEngine(teacher)
    return dspy.LM("scripted/teacher", engine=engine, cache=False, num_retries=0), engine


def test_mipro_proposes_instructions_with_the_prompt_model_and_keeps_the_one_that_scores(
    scripted_lm, qa_file
):
    """MIPROv2 (auto="light") through compile_program: the teacher proposes instructions; the
    student answers right only under the proposed one, so MIPRO must select it. The number of
    model calls it takes is its budget here (deterministic for these settings)."""
    from netcast.data import load_dataset
    from netcast.session import open_retriever

    def student(prompt):
        ok = "exact span" in prompt
        return {"answer": last_question(prompt).split()[0] if ok else "wrong"}

    _, student_engine = scripted_lm(student)
    teacher_lm, teacher_engine = proposing_teacher()
    data = load_dataset(qa_file, "all", limit=8)
    program = BasicRAG(open_retriever(data), top_k=1)
    compiled = compile_program(
        program,
        data.examples[:4],
        optimizer="mipro",
        valset=data.examples[4:8],
        teacher_lm=teacher_lm,
    )
    assert compiled.answer.signature.instructions == PROPOSAL
    assert program.answer.signature.instructions != PROPOSAL  # the original is kept
    assert (
        teacher_engine.prompts and len(student_engine.prompts) + len(teacher_engine.prompts) < 150
    )


def test_hold_out_keeps_the_last_80_percent_of_the_train_questions_for_selection():
    from netcast.optimize.compile import hold_out

    assert hold_out(range(10)) == ([0, 1], [2, 3, 4, 5, 6, 7, 8, 9])
    assert hold_out(range(2)) == ([0], [1])
    with pytest.raises(InputError, match="at least 2 training questions"):
        hold_out([1])


@pytest.mark.parametrize("select_on", ["dev", "train"])
def test_mipro_selecting_on_train_never_shows_a_dev_question_to_a_model(
    scripted_lm, qa_file, select_on
):
    """With select_on="train", MIPROv2 scores its candidates on held-out train questions: no
    prompt of the student or the teacher holds a dev question (with "dev", they do)."""
    from netcast.data import load_dataset
    from netcast.session import open_retriever

    def student(prompt):
        return {"answer": last_question(prompt).split()[0]}

    _, student_engine = scripted_lm(student)
    teacher_lm, teacher_engine = proposing_teacher()
    data = load_dataset(qa_file, "all", limit=10)
    program = BasicRAG(open_retriever(data), top_k=1)
    train, dev = data.examples[:5], data.examples[5:10]
    compile_program(
        program, train, optimizer="mipro", valset=dev, teacher_lm=teacher_lm, select_on=select_on
    )
    prompts = student_engine.prompts + teacher_engine.prompts
    seen = {ex.question for ex in dev if any(ex.question in p for p in prompts)}
    if select_on == "train":
        assert not seen
        assert any(train[-1].question in p for p in student_engine.prompts)  # held out, scored
    else:
        assert seen == {ex.question for ex in dev}


def test_compile_program_rejects_an_unknown_select_on(qa_file):
    from netcast.data import load_dataset
    from netcast.session import open_retriever

    data = load_dataset(qa_file, "all", limit=4)
    with pytest.raises(InputError, match="unknown select_on 'test'"):
        compile_program(BasicRAG(open_retriever(data)), data.examples, select_on="test")


@pytest.mark.parametrize("optimizer", ["bootstrap-rs", "gepa"])
def test_selecting_optimizers_get_held_out_train_questions_as_valset(
    monkeypatch, qa_file, optimizer
):
    """bootstrap-rs and GEPA would score candidates on their own trainset when given no
    valset: with select_on="train" they get the held-out part, and never the dev questions."""
    from netcast.data import load_dataset
    from netcast.optimize import compile as compile_module
    from netcast.session import open_retriever

    given = {}

    class Recorder:
        def compile(self, student, trainset, valset=None, **kwargs):
            given.update(trainset=trainset, valset=valset)
            return student

    monkeypatch.setattr(compile_module, "make_optimizer", lambda *a, **k: Recorder())
    data = load_dataset(qa_file, "all", limit=10)
    train, dev = data.examples[:5], data.examples[5:]
    program = BasicRAG(open_retriever(data))
    compile_program(program, train, optimizer=optimizer, valset=dev, select_on="train")
    assert (given["trainset"], given["valset"]) == (train[:1], train[1:])
    compile_program(program, train, optimizer=optimizer, valset=dev)
    assert (given["trainset"], given["valset"]) == (train, dev)


def test_a_recipe_that_cannot_select_on_train_is_refused_before_any_model_call(
    scripted_lm, qa_file, tmp_path
):
    _, engine = scripted_lm(answer)
    recipe = recipe_for(qa_file, select_on="train").to_dict()
    recipe["optimizer"]["name"] = "mipro"
    recipe["dataset"]["train_limit"] = 1
    with pytest.raises(InputError, match="at least 2 training questions"):
        compile_recipe(recipe, tmp_path / "art", lm=dspy.settings.lm, progress=False)
    assert engine.prompts == [] and not (tmp_path / "art").exists()


def test_recompile_can_change_where_candidates_are_selected(scripted_lm, qa_file, tmp_path):
    lm, _ = scripted_lm(answer)
    first = compile_recipe(recipe_for(qa_file), tmp_path / "v1", lm=lm, progress=False)
    assert read_artifact(first.artifact)[0]["dataset"]["select_on"] == "dev"
    result, _ = recompile(
        first.artifact, "scripted/fake", tmp_path / "v2", lm=lm, progress=False, select_on="train"
    )
    assert read_artifact(result.artifact)[0]["dataset"]["select_on"] == "train"


@pytest.mark.parametrize(("reply", "bootstrapped"), [("{word}", 2), ("{word} one two three", 0)])
def test_only_traces_whose_answer_passes_become_bootstrapped_demos(
    scripted_lm, qa_file, reply, bootstrapped
):
    """A partly right answer (F1 0.4 against its gold) is not a successful trace: with the
    default threshold it is not bootstrapped (labeled examples fill the slots instead)."""
    from netcast.data import load_dataset
    from netcast.optimize.compile import demo_report
    from netcast.session import open_retriever

    scripted_lm(lambda prompt: {"answer": reply.format(word=last_question(prompt).split()[0])})
    data = load_dataset(qa_file, "all", limit=6)
    compiled = compile_program(BasicRAG(open_retriever(data)), data.examples)
    assert demo_report(compiled)["answer"] == {
        "bootstrapped": bootstrapped,
        "labeled": 2 - bootstrapped,  # labeled examples fill the slots left
    }
