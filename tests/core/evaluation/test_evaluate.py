import importlib
import json

import dspy
import pytest

from helpers import ScriptedEngine
from helpers import last_question as find_last_question
from netcast.errors import InputError
from netcast.evaluation import evaluate
from netcast.programs import BasicRAG

ANSWERS = {
    "What is the capital of France?": "Paris",
    "What is the capital of Germany?": "Berlin",
    "Which river flows through Paris?": "the Rhine",
    "Where is the Louvre?": "Paris",
}
GOLD = {
    "What is the capital of France?": ["paris"],
    "What is the capital of Germany?": ["berlin"],
    "Which river flows through Paris?": ["seine"],
    "Where is the Louvre?": ["louvre"],
}
TRUTH = {
    "What is the capital of France?": ["Paris"],
    "What is the capital of Germany?": ["Berlin"],
    "Which river flows through Paris?": ["Seine"],
    "Where is the Louvre?": ["Paris, France"],
}


def examples():
    return [
        dspy.Example(id=f"q{i}", question=q, answers=TRUTH[q], gold_ids=GOLD[q]).with_inputs(
            "question"
        )
        for i, q in enumerate(ANSWERS)
    ]


def answer_by_question(last_question):
    def script(prompt):
        question = last_question(prompt)
        if question.startswith("FAIL"):
            raise ConnectionError("model endpoint unreachable")
        return {"answer": ANSWERS[question]}

    return script


@pytest.fixture
def last_question():
    return find_last_question


def test_evaluate_scores_quality_and_cost(scripted_lm, bm25, last_question, tmp_path):
    scripted_lm(answer_by_question(last_question))
    result = evaluate(
        BasicRAG(bm25, top_k=2),
        examples(),
        run_dir=tmp_path / "run",
        run_info={"p": "basic"},
        progress=False,
    )
    assert not result.errors
    by_id = {r["id"]: r for r in result.rows}
    assert by_id["q0"]["scores"]["em"] == 1.0
    assert by_id["q2"]["scores"]["em"] == 0.0  # "the Rhine" vs "Seine"
    assert by_id["q3"]["scores"]["f1"] == pytest.approx(2 / 3)
    agg = result.aggregate
    assert agg["n"] == 4 and agg["em"] == pytest.approx(2 / 4)
    assert agg["lm_calls"] == 1 and agg["searches"] == 1 and agg["tokens_in"] > 0
    assert agg["recall"] == pytest.approx(sum(r["scores"]["recall"] for r in result.rows) / 4)
    saved = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").open()]
    assert {r["id"] for r in saved} == {"q0", "q1", "q2", "q3"}
    assert json.loads((tmp_path / "run" / "aggregate.json").read_text())["em"] == agg["em"]


def test_an_interrupted_run_resumes_without_repeating_questions(
    scripted_lm, bm25, last_question, tmp_path
):
    lm, engine = scripted_lm(answer_by_question(last_question))
    run = tmp_path / "run"
    evaluate(BasicRAG(bm25), examples()[:2], run_dir=run, run_info={"p": 1}, progress=False)
    assert len(engine.prompts) == 2
    # a kill mid-write leaves a torn last line: it is dropped and that question is redone
    with (run / "predictions.jsonl").open("a") as handle:
        handle.write('{"id": "q2", "question": "Which riv')
    result = evaluate(BasicRAG(bm25), examples(), run_dir=run, run_info={"p": 1}, progress=False)
    assert len(engine.prompts) == 4  # only q2 and q3 ran
    assert [last_question(p) for p in engine.prompts[2:]] == [
        "Which river flows through Paris?",
        "Where is the Louvre?",
    ]
    assert result.aggregate["n"] == 4
    lines = (run / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line) for line in lines)


def test_a_run_directory_of_another_run_is_refused(scripted_lm, bm25, last_question, tmp_path):
    scripted_lm(answer_by_question(last_question))
    evaluate(
        BasicRAG(bm25), examples()[:1], run_dir=tmp_path, run_info={"top_k": 5}, progress=False
    )
    with pytest.raises(InputError, match="different run.*top_k"):
        evaluate(BasicRAG(bm25), examples()[:1], run_dir=tmp_path, run_info={"top_k": 3})


def test_a_run_directory_without_run_info_resumes_only_the_same_program(
    scripted_lm, bm25, last_question, tmp_path
):
    """``evaluate(program, examples, run_dir=...)`` as the README calls it: the directory
    records the program's name, knobs, model and prompts, and refuses another program."""
    lm, engine = scripted_lm(answer_by_question(last_question))
    one = examples()[:1]
    evaluate(BasicRAG(bm25, k=2), one, run_dir=tmp_path, progress=False)
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["program"] == "basic" and info["knobs"]["k"] == 2 and info["model"] == lm.model
    calls = len(engine.prompts)
    evaluate(BasicRAG(bm25, k=2), one, run_dir=tmp_path, progress=False)  # the same: resumed
    assert len(engine.prompts) == calls
    with pytest.raises(InputError, match="different run.*knobs"):
        evaluate(BasicRAG(bm25, k=3), one, run_dir=tmp_path, progress=False)
    taught = BasicRAG(bm25, k=2)
    taught.answer.demos = [dspy.Example(context=["c"], question="q", answer="a")]
    with pytest.raises(InputError, match="different run.*prompts"):
        evaluate(taught, one, run_dir=tmp_path, progress=False)
    assert len(engine.prompts) == calls

    # a directory saved before evaluate recorded anything by default resumes as before
    (tmp_path / "run.json").write_text("{}")
    evaluate(taught, one, run_dir=tmp_path, progress=False)
    assert len(engine.prompts) == calls


def test_a_run_saved_before_a_knob_was_added_resumes_only_at_its_default(
    scripted_lm, bm25, last_question, tmp_path
):
    lm, engine = scripted_lm(answer_by_question(last_question))
    # before rerank_pool existed (and before top_k was named k)
    older = {"program": "basic", "knobs": {"top_k": 5, "chain_of_thought": False}}
    (tmp_path / "run.json").write_text(json.dumps(older))
    program = BasicRAG(bm25, k=5, chain_of_thought=False)
    info = {"program": "basic", "knobs": program.knobs.model_dump()}
    assert "rerank_pool" in info["knobs"]
    result = evaluate(program, examples()[:1], run_dir=tmp_path, run_info=info, progress=False)
    assert result.aggregate["n"] == 1
    changed = BasicRAG(bm25, k=5, chain_of_thought=False, rerank_pool=10)
    with pytest.raises(InputError, match="different run.*knobs"):
        evaluate(
            changed,
            examples()[:1],
            run_dir=tmp_path,
            run_info={"program": "basic", "knobs": changed.knobs.model_dump()},
        )


def test_a_run_saved_under_a_knobs_old_name_resumes_under_its_new_one(
    scripted_lm, bm25, last_question, tmp_path
):
    """A run directory whose run.json holds a knob's alias (saved before the rename) is the
    same run: its questions are kept, not run again; another value is another run."""
    program, saved, knobs = BasicRAG, {"top_k": 3}, {"k": 3}
    lm, engine = scripted_lm(answer_by_question(last_question))
    old = program(bm25, **saved)
    info = {"program": old.name, "knobs": old.knobs.model_dump()}
    info["knobs"] = {**{k: v for k, v in info["knobs"].items() if k not in knobs}, **saved}
    evaluate(old, examples()[:1], run_dir=tmp_path, run_info=info, progress=False)
    calls = len(engine.prompts)
    assert json.loads((tmp_path / "run.json").read_text())["knobs"].keys() >= saved.keys()
    new = program(bm25, **knobs)
    run_info = {"program": new.name, "knobs": new.knobs.model_dump()}
    result = evaluate(new, examples()[:1], run_dir=tmp_path, run_info=run_info, progress=False)
    assert result.aggregate["n"] == 1 and len(engine.prompts) == calls  # kept, not rerun
    other = program(bm25, k=1)
    with pytest.raises(InputError, match="different run.*knobs"):
        run_info = {"program": other.name, "knobs": other.knobs.model_dump()}
        evaluate(other, [], run_dir=tmp_path, run_info=run_info, progress=False)


def test_failures_are_reported_kept_out_of_the_log_and_retried(
    scripted_lm, bm25, last_question, tmp_path
):
    lm, engine = scripted_lm(answer_by_question(last_question))
    data = examples()
    failing = dspy.Example(id="bad", question="FAIL here", answers=["x"], gold_ids=[])
    data.insert(1, failing.with_inputs("question"))
    result = evaluate(BasicRAG(bm25), data, run_dir=tmp_path, run_info={}, progress=False)
    assert set(result.errors) == {"bad"} and "unreachable" in result.errors["bad"]
    assert result.aggregate["n"] == 4 and result.aggregate["n_errors"] == 1
    assert "bad" not in (tmp_path / "predictions.jsonl").read_text()


def test_too_many_failures_stop_the_run_and_keep_what_finished(
    scripted_lm, bm25, last_question, tmp_path
):
    scripted_lm(answer_by_question(last_question))
    ok = examples()[:1]
    bad = [
        dspy.Example(id=f"bad{i}", question=f"FAIL {i}", answers=["x"], gold_ids=[]).with_inputs(
            "question"
        )
        for i in range(6)
    ]
    result = evaluate(
        BasicRAG(bm25),
        ok + bad + examples()[1:],
        run_dir=tmp_path,
        run_info={},
        max_errors=2,
        progress=False,
    )
    assert len(result.errors) == 3  # stopped at the third failure
    assert result.aggregate["n"] == 1  # q0 finished and is kept; q1.. never ran
    assert [json.loads(line)["id"] for line in (tmp_path / "predictions.jsonl").open()] == ["q0"]


def test_judge_scores_with_its_own_model_outside_the_program_cost(scripted_lm, bm25, last_question):
    scripted_lm(answer_by_question(last_question))
    judge_engine = ScriptedEngine(lambda prompt: {"match": "Paris" in prompt})
    judge = dspy.LM("scripted/judge", engine=judge_engine, cache=False, num_retries=0)
    result = evaluate(BasicRAG(bm25), examples()[:2], judge_lm=judge, progress=False)
    assert [r["scores"]["judge"] for r in result.rows] == [1.0, 0.0]
    assert len(judge_engine.prompts) == 2
    assert all(r["trace"]["lm_calls"] == 1 for r in result.rows)


def test_parallel_threads_give_the_same_rows(scripted_lm, bm25, last_question):
    scripted_lm(answer_by_question(last_question))
    one = evaluate(BasicRAG(bm25), examples(), threads=1, progress=False)
    two = evaluate(BasicRAG(bm25), examples(), threads=2, progress=False)
    strip = [{k: v for k, v in r["scores"].items() if k != "seconds"} for r in one.rows]
    assert strip == [{k: v for k, v in r["scores"].items() if k != "seconds"} for r in two.rows]


def test_run_evaluation_runs_with_the_lm_it_is_given_and_resumes(scripted_lm, tmp_path):
    from netcast.optimize.workflow import run_evaluation

    lm, engine = scripted_lm(lambda prompt: {"answer": "Paris"})
    dspy.configure(lm=None)  # the workflow needs no global LM
    path = tmp_path / "qa.jsonl"
    rows = [
        {
            "id": f"q{i}",
            "question": f"Where is monument {i}?",
            "answers": ["Paris"],
            "paragraphs": [{"title": f"M{i}", "text": f"Monument {i} is in Paris."}],
        }
        for i in range(3)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    args = {"split": "all", "knobs": {"top_k": 1}, "run_dir": tmp_path / "run", "progress": False}
    result = run_evaluation("basic", str(path), lm, **args)
    assert result.aggregate["n"] == 3 and result.aggregate["em"] == 1.0
    assert len(engine.prompts) == 3 and dspy.settings.lm is None
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["model"] == "scripted/fake" and info["knobs"]["k"] == 1
    again = run_evaluation("basic", str(path), lm, **args)
    assert again.aggregate["n"] == 3 and len(engine.prompts) == 3  # resumed: nothing re-run
    with pytest.raises(InputError, match="basic: knob 'top_k' = 'x'"):
        run_evaluation("basic", str(path), lm, **{**args, "knobs": {"top_k": "x"}})


def test_step_totals_drop_a_counter_that_some_rows_predate():
    """Rows written before a counter existed make its sum unknown, not a smaller number."""
    from netcast.evaluation.evaluate import step_totals

    def row(**counts):
        return {"trace": {"steps": {"plan": {"calls": 2, "reasons": {}, **counts}}}}

    both = step_totals([row(truncated=1), row(truncated=2)])["steps"]["plan"]
    mixed = step_totals([row(truncated=1), row()])["steps"]["plan"]
    assert (both["calls"], both["truncated"]) == (4, 3)
    assert mixed["calls"] == 4 and "truncated" not in mixed


def test_no_progress_bar_is_drawn_where_stdout_is_not_a_terminal(scripted_lm, bm25, capfd):
    scripted_lm(lambda prompt: {"answer": "Paris"})
    result = evaluate(BasicRAG(bm25, top_k=2), examples(), progress=True)
    assert result.aggregate["n"] == 4
    captured = capfd.readouterr()
    output = captured.out + captured.err
    assert "Average Metric" not in output and "it/s" not in output


def test_where_stdout_is_not_a_terminal_a_plain_line_tells_the_questions_done(
    scripted_lm, bm25, capsys, tmp_path, monkeypatch
):
    module = importlib.import_module("netcast.evaluation.evaluate")
    scripted_lm(lambda prompt: {"answer": "Paris"})
    evaluate(BasicRAG(bm25, top_k=2), examples()[:1], progress=True)  # quick: no line
    assert " questions, " not in capsys.readouterr().err
    monkeypatch.setattr(module, "PROGRESS_GAP", 0.0)
    evaluate(BasicRAG(bm25, top_k=2), examples()[:2], run_dir=tmp_path, progress=False)
    assert capsys.readouterr().err == ""  # no progress asked: no line
    evaluate(BasicRAG(bm25, top_k=2), examples(), run_dir=tmp_path, progress=True)
    lines = capsys.readouterr().err.splitlines()
    # resumed: two read back, so this run's two questions are the 3rd and 4th of 4
    assert [line.split(",")[0].strip() for line in lines] == ["3/4 questions", "4/4 questions"]
    assert all("elapsed, eta" in line for line in lines)


def test_a_failed_question_counts_in_the_progress_lines_without_a_line_of_its_own(
    scripted_lm, bm25, last_question, capsys, monkeypatch
):
    module = importlib.import_module("netcast.evaluation.evaluate")
    monkeypatch.setattr(module, "PROGRESS_GAP", 0.0)
    scripted_lm(answer_by_question(last_question))
    data = examples()
    data.insert(1, dspy.Example(id="bad", question="FAIL here").with_inputs("question"))
    result = evaluate(BasicRAG(bm25), data, progress=True)
    assert set(result.errors) == {"bad"}
    lines = [x for x in capsys.readouterr().err.splitlines() if " questions, " in x]
    # the failed 2nd is counted, and no line is printed for it
    assert [x.split(",")[0].strip() for x in lines] == [f"{n}/5 questions" for n in (1, 3, 4, 5)]


def test_progress_lines_come_every_twentieth_of_the_run_with_the_time_left_at_its_pace():
    from netcast.evaluation.evaluate import ProgressLines

    now, printed = [0.0], []
    lines = ProgressLines(100, 40, clock=lambda: now[0], out=printed.append, gap=0.0)
    for _ in range(3):
        now[0] += 10.0  # ten seconds a question
        lines()
    # every 2nd of the 40 to run: after the 2nd, 20 s spent, 38 left at 10 s each
    assert printed == ["  62/100 questions, 0:00:20 elapsed, eta 0:06:20"]
    for _ in range(37):
        now[0] += 10.0
        lines()
    assert printed[-1] == "  100/100 questions, 0:06:40 elapsed, eta 0:00:00"
    assert len(printed) == 20
