import json

import pytest

from helpers import last_question
from netcast.evaluation.stats import bootstrap_ci, paired_p_value
from netcast.pareto import pareto_indices
from netcast.specs.bench import run_bench
from netcast.specs.report import (
    NEAR_BEST,
    cheapest_near_best,
    read_results,
    summary_rows,
    write_report,
)


def write_run(run_dir, data, model=None):
    """``data``: program -> rows, saved as a bench run directory (with run.json's model)."""
    for program, rows in data.items():
        path = run_dir / "hotpotqa-sample" / program
        path.mkdir(parents=True)
        (path / "predictions.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        if model:
            strategy = program.split("-compiled")[0]  # a compiled artifact runs its program
            (path / "run.json").write_text(json.dumps({"model": model, "program": strategy}))
    return run_dir


def row(qid, em, f1, tokens_in, lm_calls=1):
    return {
        "id": qid,
        "question": f"question {qid}?",
        "answers": ["gold"],
        "answer": "x",
        "evidence": [],
        "gold_ids": [],
        "trace": {"turns": [], "searches": []},
        "scores": {
            "em": em,
            "f1": f1,
            "judge": None,
            "recall": 1.0,
            "precision": 0.5,
            "searches": 1,
            "turns": 0,
            "lm_calls": lm_calls,
            "tokens_in": tokens_in,
            "tokens_out": 10,
            "seconds": 1.0,
        },
    }


@pytest.fixture
def results_dir(tmp_path):
    """A fixed results file per program: basic gets 2 of 4 right, fancy 3 of 4."""
    data = {
        "basic": [
            row("q1", 1, 1.0, 100),
            row("q2", 0, 0.0, 100),
            row("q3", 1, 1.0, 100),
            row("q4", 0, 0.5, 100),
        ],
        "fancy": [
            row("q1", 1, 1.0, 300, 3),
            row("q2", 1, 1.0, 300, 3),
            row("q3", 1, 1.0, 300, 3),
            row("q4", 0, 0.5, 300, 3),
        ],
    }
    return write_run(tmp_path, data)


def test_table_values_come_from_the_saved_rows(results_dir):
    rows = {r["program"]: r for r in summary_rows(read_results(results_dir))}
    assert rows["basic"]["em"][0] == 0.5 and rows["fancy"]["em"][0] == 0.75
    assert rows["basic"]["f1"][0] == pytest.approx(0.625)
    assert rows["fancy"]["lm_calls"] == 3 and rows["fancy"]["tokens"] == 310
    assert rows["basic"]["p_vs_basic"] is None
    assert 0 < rows["fancy"]["p_vs_basic"] <= 1
    low, high = rows["fancy"]["em"][1:]
    assert 0 <= low <= 0.75 <= high <= 1


def test_bootstrap_is_reproducible_with_a_seed_and_brackets_the_mean():
    values = [0, 1, 1, 0, 1, 1, 1, 0, 0, 1]
    assert bootstrap_ci(values, seed=7) == bootstrap_ci(values, seed=7)
    mean, low, high = bootstrap_ci(values, seed=7)
    assert mean == 0.6 and low < mean < high
    assert bootstrap_ci([]) == (None, None, None)


def test_paired_test_finds_a_consistent_difference():
    better = [1.0] * 30
    worse = [0.0] * 30
    assert paired_p_value(better, worse) < 0.01
    assert paired_p_value(better, better) == 1.0


def test_pareto_front_on_crafted_points():
    points = [(0.5, 100), (0.6, 300), (0.4, 200), (0.7, 300), (0.7, 900), (0.2, 50)]
    assert pareto_indices(points) == [5, 0, 3]


def test_report_files_are_written(results_dir):
    write_report(results_dir)
    png = results_dir / "quality_vs_cost.png"
    assert png.stat().st_size > 5000 and png.read_bytes()[:4] == b"\x89PNG"
    md = (results_dir / "report.md").read_text()
    assert "| hotpotqa-sample | - | fancy | 4 | 0.750 [" in md
    assert "**fancy** right on q2" in md  # the per-question diff view
    page = (results_dir / "report.html").read_text()
    assert "data:image/png;base64," in page and "<details>" in page


def test_bench_resumes_without_repeating_finished_questions(scripted_lm, tmp_path):
    from netcast.data import load_dataset

    calls = {"n": 0}

    def flaky(prompt):
        calls["n"] += 1
        # basic: 3 calls; iterative: 4 a question (a forced first search, its chunk_delete,
        # a decision to answer, the answer): the endpoint fails once, in its 2nd question
        if calls["n"] == 9:
            raise ConnectionError("endpoint went away")
        if "[[ ## retrieved ## ]]" in prompt:
            return {"delete_ids": []}
        if "[[ ## history ## ]]" in prompt:
            return {"reasoning": "r", "action": "answer", "query": ""}
        return {"answer": "x"}

    lm, engine = scripted_lm(flaky)
    kwargs = {"lm": lm, "split": "dev", "limit": 3, "progress": False, "max_errors": 0}
    run_dir, _ = run_bench(tmp_path, ["basic", "iterative"], ["musique-sample"], **kwargs)
    assert run_dir == tmp_path

    def finished(program):
        path = tmp_path / "musique-sample" / program / "predictions.jsonl"
        return {json.loads(line)["question"] for line in path.open()}

    assert len(finished("basic")) == 3 and len(finished("iterative")) < 3
    iterative_before = finished("iterative")
    prompts_before = len(engine.prompts)

    _, results = run_bench(tmp_path, ["basic", "iterative"], ["musique-sample"], **kwargs)
    assert set(results) == {("musique-sample", "basic"), ("musique-sample", "iterative")}
    assert all(r.aggregate["n"] == 3 for r in results.values())
    questions = {ex.question for ex in load_dataset("musique-sample", "dev", 3).examples}
    asked_again = {last_question(p) for p in engine.prompts[prompts_before:]}
    # only the iterative program's unfinished questions ran; basic's three did not
    assert asked_again == questions - iterative_before
    assert (tmp_path / "report.md").exists() and (tmp_path / "quality_vs_cost.png").exists()


def test_a_run_directory_filled_by_two_benches_names_both_commands(scripted_lm, tmp_path):
    lm, _ = scripted_lm(lambda prompt: {"answer": "x"})
    kwargs = {"lm": lm, "split": "dev", "limit": 1, "progress": False}
    first, second = "netcast bench --programs basic", "netcast bench --programs basic --x"
    run_bench(tmp_path, ["basic"], ["musique-sample"], info={"command": first}, **kwargs)
    run_bench(tmp_path, ["basic"], ["musique-sample"], info={"command": second}, **kwargs)
    run_bench(tmp_path, ["basic"], ["musique-sample"], info={"command": first}, **kwargs)
    assert json.loads((tmp_path / "bench.json").read_text())["commands"] == [first, second]
    md = (tmp_path / "report.md").read_text()
    assert f"- `{first}`" in md and f"- `{second}`" in md
    assert first in (tmp_path / "report.html").read_text()


def test_an_artifact_compiled_again_into_its_folder_is_not_resumed_as_the_old_one(
    scripted_lm, bm25, tmp_path
):
    from netcast.artifacts import save_artifact
    from netcast.errors import InputError
    from netcast.optimize.workflow import make_recipe
    from netcast.programs import BasicRAG

    recipe = make_recipe(program="basic", knobs={"k": 3}, dataset="musique-sample")

    def compile_into(folder, instructions):
        program = BasicRAG(bm25)
        for _, predictor in program.named_predictors():
            predictor.signature = predictor.signature.with_instructions(instructions)
        return save_artifact(folder, program, recipe, {"after": None})

    lm, engine = scripted_lm(lambda prompt: {"answer": "x"})
    artifact = compile_into(tmp_path / "art", "Answer briefly.")
    kwargs = {"lm": lm, "split": "dev", "limit": 2, "progress": False, "compiled": [artifact]}
    run_dir, _ = run_bench(tmp_path / "run", [], ["musique-sample"], **kwargs)
    row_dir = run_dir / "musique-sample" / "art"
    asked = len(engine.prompts)
    assert asked == 2 and "artifact" in json.loads((row_dir / "run.json").read_text())

    run_bench(run_dir, [], ["musique-sample"], **kwargs)  # the same artifact resumes
    assert len(engine.prompts) == asked

    compile_into(artifact, "Answer in one word.")  # same program and knobs, new prompt
    with pytest.raises(InputError, match="different run.*artifact"):
        run_bench(run_dir, [], ["musique-sample"], **kwargs)
    assert len(engine.prompts) == asked

    # a row saved before runs recorded their artifact still resumes under the same settings
    info = json.loads((row_dir / "run.json").read_text())
    del info["artifact"]
    (row_dir / "run.json").write_text(json.dumps(info))
    run_bench(run_dir, [], ["musique-sample"], **kwargs)
    assert len(engine.prompts) == asked and "artifact" not in json.loads(
        (row_dir / "run.json").read_text()
    )


def test_bench_takes_a_dataset_given_as_an_absolute_path(scripted_lm, tmp_path):
    rows = [
        {
            "id": f"q{i}",
            "question": f"Who is person {i}?",
            "answers": [f"P{i}"],
            "paragraphs": [
                {"title": f"T{i}", "text": f"Person {i} is P{i}.", "is_supporting": True}
            ],
        }
        for i in range(2)
    ]
    data = tmp_path / "my data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lm, _ = scripted_lm(lambda prompt: {"answer": "P0"})
    run_dir, results = run_bench(
        tmp_path / "run", ["basic"], [str(data.resolve())], lm=lm, split="all", progress=False
    )
    assert (run_dir / "my-data" / "basic" / "predictions.jsonl").exists()
    assert results[(str(data.resolve()), "basic")].aggregate["n"] == 2


def test_runs_of_two_models_combine_and_each_compares_with_its_own_basic(tmp_path):
    ids = [f"q{i}" for i in range(8)]
    small = write_run(
        tmp_path / "small",
        {
            "basic": [row(q, 0, 0.0, 100) for q in ids],
            "fancy": [row(q, 1, 1.0, 400) for q in ids[:4]]
            + [row(q, 0, 0.0, 400) for q in ids[4:]],
        },
        model="netcast/small-model",
    )
    large = write_run(
        tmp_path / "large", {"basic": [row(q, 1, 1.0, 100) for q in ids[:6]]}, model="big"
    )
    results = read_results(small, large)
    rows = {(r["model"], r["program"]): r for r in summary_rows(results)}
    # fancy is compared with the small model's basic, not the large one's
    assert rows[("netcast/small-model", "fancy")]["diff_vs_basic"][0] == pytest.approx(0.5)
    assert rows[("big", "basic")]["p_vs_basic"] is None
    out = tmp_path / "combined"
    md = write_report(out, sources=[small, large]).read_text()
    # basic on both models, paired on the 6 shared questions: +1.0 each
    assert "| hotpotqa-sample | basic | small-model (small) | big (large) | 6 | +1.000 [" in md
    assert "| small/hotpotqa-sample | small-model | fancy | 8 |" in md
    assert (out / "quality_vs_cost.png").exists() and not (small / "report.md").exists()


def test_two_runs_of_one_model_do_not_mix_their_baselines(tmp_path):
    first = write_run(tmp_path / "a", {"basic": [row("q1", 0, 0.0, 100)]}, model="m")
    second = write_run(
        tmp_path / "b",
        {"basic": [row("q1", 1, 1.0, 100)], "fancy": [row("q1", 1, 1.0, 100)]},
        model="m",
    )
    rows = {(r["dataset"], r["program"]): r for r in summary_rows(read_results(first, second))}
    assert rows[("b/hotpotqa-sample", "fancy")]["diff_vs_basic"][0] == 0.0
    assert rows[("a/hotpotqa-sample", "basic")]["diff_vs_basic"][0] is None


def test_two_runs_with_the_same_folder_name_are_labelled_by_path(tmp_path):
    first = write_run(tmp_path / "a" / "run", {"basic": [row("q1", 0, 0.0, 100)]}, model="m")
    second = write_run(
        tmp_path / "b" / "run",
        {"basic": [row("q1", 1, 1.0, 100)], "fancy": [row("q1", 1, 1.0, 100)]},
        model="m",
    )
    rows = {(r["dataset"], r["program"]): r for r in summary_rows(read_results(first, second))}
    fancy = rows[(f"{second}/hotpotqa-sample", "fancy")]
    assert fancy["diff_vs_basic"][0] == 0.0  # its own run's basic (1.0), not the other's (0.0)
    assert rows[(f"{first}/hotpotqa-sample", "basic")]["diff_vs_basic"][0] is None


def test_the_cheapest_strategy_within_two_f1_of_the_best():
    def summary(program, f1, tokens, model="m"):
        return {
            "dataset": "d",
            "model": model,
            "program": program,
            "f1": (f1, 0, 1),
            "tokens": tokens,
        }

    rows = [
        summary("best", 0.40, 5000),
        summary("close", 0.40 - NEAR_BEST + 0.001, 900),
        summary("cheap_but_far", 0.30, 100),
        summary("other_model", 0.9, 10, model="n"),
    ]
    found = {f["model"]: f for f in cheapest_near_best(rows)}
    assert found["m"]["best"]["program"] == "best"
    assert found["m"]["cheapest"]["program"] == "close"
    assert found["n"]["cheapest"]["program"] == "other_model"


def test_a_compiled_artifact_is_compared_with_its_program_uncompiled(tmp_path):
    ids = [f"q{i}" for i in range(6)]
    run = write_run(
        tmp_path,
        {
            "basic": [row(q, 0, 0.0, 100) for q in ids],
            "iterative": [row(q, 0, 0.25, 300) for q in ids],
            "iterative-compiled-x": [row(q, 1, 1.0, 500) for q in ids],
        },
        model="m",
    )
    rows = {r["program"]: r for r in summary_rows(read_results(run))}
    assert rows["iterative-compiled-x"]["diff_vs_uncompiled"][0] == pytest.approx(0.75)
    assert rows["iterative-compiled-x"]["diff_vs_basic"][0] == pytest.approx(1.0)
    assert rows["iterative"]["diff_vs_uncompiled"][0] is None  # it is the uncompiled one
    assert rows["iterative-compiled-x"]["p_vs_uncompiled"] < 0.05


def test_a_knob_variant_runs_beside_its_program_and_is_compared_with_it(scripted_lm, tmp_path):
    def reply(prompt):
        if "[[ ## retrieved ## ]]" in prompt:
            return {"delete_ids": []}
        if "[[ ## history ## ]]" in prompt:
            return {"reasoning": "NOTE-XYZ", "action": "answer", "query": ""}
        return {"answer": "x"}

    lm, engine = scripted_lm(reply)
    run_dir, results = run_bench(
        tmp_path,
        ["iterative"],
        ["musique-sample"],
        lm=lm,
        limit=2,
        progress=False,
        variants=["iterative:notes=false"],
    )
    assert set(results) == {
        ("musique-sample", "iterative"),
        ("musique-sample", "iterative-notes-false"),
    }
    folder = run_dir / "musique-sample" / "iterative-notes-false"
    info = json.loads((folder / "run.json").read_text())
    assert info["program"] == "iterative" and info["knobs"]["notes"] is False
    answers = [p for p in engine.prompts if "[[ ## notes ## ]]" in p]
    # the program as shipped ran first: its two answers saw the agent's notes, the variant's not
    assert len(answers) == 4
    assert ["NOTE-XYZ" in p.split("[[ ## notes ## ]]")[-1] for p in answers] == [1, 1, 0, 0]
    assert json.loads((run_dir / "bench.json").read_text())["variants"] == ["iterative:notes=false"]
    rows = {r["program"]: r for r in summary_rows(read_results(run_dir))}
    assert rows["iterative-notes-false"]["diff_vs_uncompiled"][0] == pytest.approx(0.0)
    assert rows["iterative"]["diff_vs_uncompiled"][0] is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("iterative", "--variant expects program:knob=value"),
        ("iterative:nope=1", "iterative: unknown knob 'nope'"),
        ("fancy:k=1", "unknown program 'fancy'"),
    ],
)
def test_a_bad_variant_is_refused_before_any_question(scripted_lm, tmp_path, spec, message):
    from netcast.errors import InputError

    lm, engine = scripted_lm(lambda prompt: {"answer": "x"})
    with pytest.raises(InputError, match=message):
        run_bench(tmp_path, ["basic"], ["musique-sample"], lm=lm, limit=1, variants=[spec])
    assert engine.prompts == [] and not (tmp_path / "musique-sample").exists()


def test_a_variant_runs_an_artifacts_steps_with_another_strategy_and_compares_with_it(
    scripted_lm, bm25, tmp_path
):
    """``combined:from=ARTIFACT``: an iterative compile's prompts run by combined (its budgeted
    first round), compared with combined as shipped; a strategy with other steps is refused."""
    from netcast.artifacts import save_artifact
    from netcast.errors import InputError
    from netcast.optimize.workflow import make_recipe
    from netcast.programs import get_program

    program = get_program("iterative")(bm25, k=2, max_turns=4)  # an alias, as older recipes
    knobs = {**program.knobs.model_dump(), "max_turns": 4}  # every knob, as a compile records
    del knobs["max_steps"]
    recipe = make_recipe(program="iterative", knobs=knobs, dataset="musique-sample")
    for _, predictor in program.named_predictors():
        predictor.signature = predictor.signature.with_instructions("TUNED-STEP.")
    artifact = save_artifact(tmp_path / "iterative-x", program, recipe, {"after": None})

    def reply(prompt):
        if "[[ ## retrieved ## ]]" in prompt:
            return {"delete_ids": []}
        if "[[ ## history ## ]]" in prompt:
            return {"reasoning": "", "action": "answer", "query": ""}
        return {"answer": "x"}

    lm, engine = scripted_lm(reply)
    variant = f"combined:from={artifact},max_steps=3"
    run_dir, results = run_bench(
        tmp_path / "run", ["combined"], ["musique-sample"], lm=lm, limit=1, progress=False,
        variants=[variant],
    )  # fmt: skip
    label = "combined-from-iterative-x-max_steps-3"
    assert set(results) == {("musique-sample", "combined"), ("musique-sample", label)}
    info = json.loads((run_dir / "musique-sample" / label / "run.json").read_text())
    assert info["program"] == "combined" and "artifact" in info
    assert info["knobs"]["k"] == 2 and info["knobs"]["max_steps"] == 3  # its knobs, then ours
    assert info["knobs"]["initial"] == "budget"  # combined's own first round, not iterative's
    shipped, tuned = results[("musique-sample", "combined")], results[("musique-sample", label)]
    assert shipped.rows and tuned.rows
    n_shipped = shipped.rows[0]["scores"]["lm_calls"]
    assert not any("TUNED-STEP." in p for p in engine.prompts[:n_shipped])
    assert len(engine.prompts) > n_shipped
    assert all("TUNED-STEP." in p for p in engine.prompts[n_shipped:])
    rows = {r["program"]: r for r in summary_rows(read_results(run_dir))}
    assert rows[label]["diff_vs_uncompiled"][0] == pytest.approx(0.0)  # against combined

    with pytest.raises(InputError, match="basic cannot run iterative's compiled steps"):
        run_bench(tmp_path / "run2", [], ["musique-sample"], lm=lm, limit=1,
                  variants=[f"basic:from={artifact}"])  # fmt: skip
    with pytest.raises(InputError, match="nowhere: no such artifact directory"):
        run_bench(tmp_path / "run3", [], ["musique-sample"], lm=lm, limit=1,
                  variants=["combined:from=nowhere"])  # fmt: skip
    with pytest.raises(InputError, match="two rows of this bench would fill one folder"):
        run_bench(tmp_path / "run4", ["combined"], ["musique-sample"], lm=lm, limit=1,
                  variants=["combined:from=a/x", "combined:from=b/x"])  # fmt: skip


def test_a_variant_runs_an_artifacts_reader_with_a_strategy_of_more_steps(
    scripted_lm, bm25, tmp_path
):
    """``one_shot:from=ARTIFACT`` of a ``basic`` compile: one_shot's answer step takes the
    artifact's prompt, its crop step keeps its own and runs on the untuned model, and of the
    artifact's knobs only those one_shot has are taken (``links`` is basic's retrieval)."""
    import dspy

    from netcast.artifacts import save_artifact
    from netcast.optimize.workflow import make_recipe
    from netcast.programs import get_program
    from netcast.session import load

    program = get_program("basic")(bm25, k=3, links=1)
    recipe = make_recipe(
        program="basic", knobs=program.knobs.model_dump(), dataset="musique-sample"
    )
    program.answer.signature = program.answer.signature.with_instructions("TUNED-ANSWER.")
    artifact = save_artifact(tmp_path / "basic-x", program, recipe, {"after": None})

    def reply(prompt):
        if "[[ ## relevant_sentences ## ]]" in prompt:
            return {"relevant_sentences": "none"}
        return {"answer": "x"}

    lm, engine = scripted_lm(reply)
    other = dspy.LM("scripted/other", engine=engine, cache=False, num_retries=0)
    loaded = load(artifact, model=other, retriever=bm25, program="one_shot")
    assert loaded.knobs.crop is False and not hasattr(loaded.knobs, "links")
    assert "TUNED-ANSWER." in loaded.answer.signature.instructions
    assert "TUNED-ANSWER." not in loaded.crop_chunk.signature.instructions
    assert loaded.crop_chunk.lm is other and loaded.answer.lm is other  # nothing tuned here

    _, results = run_bench(
        tmp_path / "run", [], ["musique-sample"], lm=lm, limit=1, progress=False,
        variants=[f"one_shot:from={artifact},crop=true"],
    )  # fmt: skip
    assert results[("musique-sample", "one_shot-from-basic-x-crop-true")].rows
    crops = [p for p in engine.prompts if "[[ ## relevant_sentences ## ]]" in p]
    answers = [p for p in engine.prompts if p not in crops]
    assert crops and answers
    assert not any("TUNED-ANSWER." in p for p in crops)
    assert all("TUNED-ANSWER." in p for p in answers)
